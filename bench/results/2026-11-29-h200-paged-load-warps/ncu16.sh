for pg in 16 64; do
  np=$((2*2048/pg)); mp=$((2048/pg))
  E="attention(Q[2,32,2048,128]:bf16, Kc[$np,8,$pg,128]:bf16, Vc[$np,8,$pg,128]:bf16, block_table=BT[2,$mp]:i32, seqlens_k=L[2]:i32, causal=false)"
  ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats -k regex:k_attention --launch-skip 2 --launch-count 1 build-device/loom run -c "$E" --bench --reps 4 --no-db > $OUT/ncu-page$pg.txt 2>&1
  grep -E "Duration|Throughput|Busy|Stall|Warp Cycles|Issued" $OUT/ncu-page$pg.txt | head -30
  KREGEX=^k_attention OUT=$OUT bash scripts/probes/ncu-source.sh "$E@" page$pg 2>&1 | tail -28
done
