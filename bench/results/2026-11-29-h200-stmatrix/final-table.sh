# 2026-11-29 (stmatrix) final: the prefill table (bf16 every D; f16 at 64/128), GQA/MQA, all defaults.
P="python3 scripts/attention_bench.py --reps 10 --warmup 2 --no-db --prewarm 16"
$P --dims 64 96 128 256 --masks false true --seqlens 512 1024 2048 4096 16384 --variants base:
$P --dtype f16 --dims 64 128 --masks false true --seqlens 1024 4096 16384 --variants base:
python3 scripts/attention_bench.py --reps 10 --warmup 2 --no-db --gqa 32:8 32:1 --masks false true --seqlens 2048 4096 8192
