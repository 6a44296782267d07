build-device/loom compile -c "linear(X[16,8192]:bf16, W[10240,8192]:bf16)" --no-db -v -o /dev/null 2>&1 | grep -o "STAGES=[0-9]*" | head -1
python3 scripts/gemm_bench.py --suite bench/suites/models.txt --reps 10 --out $OUT/models.tsv > $OUT/models.txt 2>&1
grep -E "10240|summary" $OUT/models.txt | cut -c1-140
awk '$0 !~ /^#/ && NF>4 {r=$(NF-4)} END{}' $OUT/models.txt
