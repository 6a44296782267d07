export LOOM_BIN=build-device/loom
python3 scripts/probes/gemm_sweep.py .carry/gemm_cases.txt > $OUT/gemm-sweep-1.txt 2>&1
python3 scripts/probes/gemm_sweep.py .carry/gemm_cases.txt > $OUT/gemm-sweep-2.txt 2>&1
paste <(awk '{print $2, $9, $NF}' $OUT/gemm-sweep-1.txt) <(awk '{print $9}' $OUT/gemm-sweep-2.txt) | column -t | cut -c1-150
