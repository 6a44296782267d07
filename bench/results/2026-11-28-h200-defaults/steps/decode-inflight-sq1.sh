#!/usr/bin/env bash
# decode-inflight's GPU steps (bench/NOTES.md, "decode attention: bytes in flight, TMA K/V"):
# the decode grid with the defaults (cp.async rings) against KV_COPY=tma (TMA boxes into the
# same rings), TMA with 64-key blocks (W = 2 by the split rule: the same ring bytes in
# fewer, larger requests) and TMA with two groups of six-slot rings (10 blocks, 160 KB
# ahead per SM against the default's 8, 128 KB), every row in one interleaved timing with
# SDPA and the copy. Run from the tree's root (dev.sh's sh: step).
set -u
AB=(KV_COPY=tma KV_COPY=tma,BLOCK_N=64 KV_COPY=tma,SPLIT_WARPS=2,KV_STAGES=6)
python3 scripts/attention_bench.py --decode --batches 1 8 --kv-heads 8 32 --sq 1 \
  --sk 1024 8192 32768 --reps 10 --no-db --prewarm 8 --ab "${AB[@]}"
