# ncu of prefill attention at 1k and 4k (16k tokens, D 128, bf16): Loom's default kernel and cuDNN's.
sec="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy"
met="--metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_tensor_op_hmma.sum,smsp__inst_executed.sum,sm__cycles_active.avg"
for c in "loom 1024 false" "cudnn 1024 false" "loom 4096 false" "cudnn 4096 false" "loom 1024 true" "cudnn 1024 true"; do
  set -- $c
  echo "==== $1 S=$2 causal=$3"
  ncu --clock-control none $sec $met -k regex:'attention|sdpa|flash|fmha|cudnn' --launch-skip 3 --launch-count 1 python3 .carry/attn-probe.py $1 $2 128 $3 > "$OUT/ncu-$1-$2-$3.txt" 2>&1
  grep -E "max err|  [a-z_]+.*attention|Kernel Name|Duration|Registers Per|Grid Size|Block Size|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Stall|hmma|inst_executed|cycles_active|Compute \(SM\) Throughput|Memory Throughput" "$OUT/ncu-$1-$2-$3.txt" | head -30
done
