for e in "linear(X[16,8192]:bf16, W[10240,8192]:bf16)" "linear(X[16,4096]:bf16, W[28672,4096]:bf16)"; do
  build-device/loom compile -c "$e" -v -o /dev/null 2>&1 | grep -o "STAGES=[0-9]*\|knobs from: .*" | head -2
  build-device/loom compile -c "$e" --target sm_80 -v -o /dev/null 2>&1 | grep -o "knobs from: .*" | head -1
done
