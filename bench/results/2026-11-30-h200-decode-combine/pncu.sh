PE="attention(Q[1,32,1,128]:bf16, Kc[128,8,64,128]:bf16, Vc[128,8,64,128]:bf16, block_table=BT[1,128]:i32, seqlens_k=L[1]:i32, causal=false)"
CE="attention(Q[1,32,1,128]:bf16, K[1,8,8192,128]:bf16, V[1,8,8192,128]:bf16, causal=false)"
for v in "paged@$PE" "contig@$CE"; do
  tag=${v%%@*}; e=${v#*@}
  ncu --clock-control none --section SpeedOfLight --section WarpStateStats -k regex:k_attention --launch-skip 6 --launch-count 1 build-device/loom run -c "$e" --bench --reps 8 --no-db > $OUT/ncu-$tag.txt 2>&1
  grep -E "Duration|DRAM Throughput|Warp Cycles Per Issued" $OUT/ncu-$tag.txt | head -5
  KREGEX=^k_attention OUT=$OUT bash scripts/probes/ncu-source.sh "$e@" $tag 2>&1 | tail -26
done
