LOOM_PY_PATH=build-device python3 scripts/attention_walk_check.py --launches 4 2>&1 | grep -v Warn | tail -6
python3 scripts/attention_bench.py --varlen --no-db --reps 6 --ab ATTN_FETCH_AHEAD=0 --mixes 4096,2048,1024,512,256,128 1023,777,3001,129,2048,1500 8192,512,512,512,512,512,512,512,512 1024,1024,1024,1024,1024,1024,1024,1024 128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128,128 > $OUT/varlen-fetch-ahead.txt 2>&1
grep -E "^(true|false)|summary" $OUT/varlen-fetch-ahead.txt | cut -c1-175
python3 scripts/attention_bench.py --no-db --reps 10 --dims 128 256 --masks true --seqlens 1024 4096 16384 --variants ahead: late:ATTN_FETCH_AHEAD=0 > $OUT/dense-fetch-ahead.txt 2>&1
grep -v Warn $OUT/dense-fetch-ahead.txt | grep -v "return torch" | tail -8
