"""Launches one hand-edited variant kernel (see variants.py for the launch line) a few
times, for a profiler: `ncu -k k_matmul -c 1 --set full python3 bench/sweeps/ncu_variant.py F.cu`."""
import sys, cupy as cp, torch
src = open(sys.argv[1]).read()
f = src.split("// launch:")[1].split("\n")[0].split()
M, N, K = map(int, f[:3]); grid = tuple(int(g) for g in f[3].split(",")); block, smem = int(f[4]), int(f[5])
dt = {"f16": torch.float16, "bf16": torch.bfloat16}.get(next((x for x in f[6:] if x in ("f16", "bf16")), ""), torch.float32)
A = torch.randn(M, K, device="cuda").to(dt); B = torch.randn(K, N, device="cuda").to(dt); C = torch.zeros(M, N, device="cuda", dtype=dt)
k = cp.RawModule(code=src, options=("-arch=sm_90a", "-std=c++17", "-Isrc/codegen/device")).get_function("k_matmul")
if smem > 48 * 1024: k.max_dynamic_shared_size_bytes = smem
for _ in range(3):
    k(grid, (block,), (cp.uint64(A.data_ptr()), cp.uint64(B.data_ptr()), cp.uint64(C.data_ptr())), shared_mem=smem)
torch.cuda.synchronize()
