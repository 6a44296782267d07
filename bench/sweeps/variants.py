"""Times hand-edited variants of a generated GEMM kernel against cuBLAS (torch.mm) on the
GPU machine: a quick way to test an idea about the generated CUDA before teaching a pass
to emit it. Each .cu file starts with `// launch: M N K grid block smem [mode] [dtype]`;
grid is `x` or `x,y,z`; mode `zero` clears C before the checked launch (split-K's atomic
combine), `timing-only` marks a diagnostic variant whose answer is wrong on purpose (its
error is printed, never claimed); dtype `f16` or `bf16` makes A, B and C that type (cuBLAS
then runs its HGEMM), `f32` is the default.
Usage: python3 bench/sweeps/variants.py FILE.cu...   (run from the repository root)"""
import sys, cupy as cp, torch

torch.backends.cuda.matmul.allow_tf32 = False
inc = "-I" + "src/codegen/device"

flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")  # > L2: cold caches, as docs/benchmarking.md

def timeit(fn, reps=30):
    s, e = torch.cuda.Event(True), torch.cuda.Event(True)
    fn(); torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        flush.zero_()
        s.record(); fn(); e.record(); e.synchronize(); ts.append(s.elapsed_time(e))
    ts.sort(); return ts[len(ts) // 2] * 1e3

for path in sys.argv[1:]:
    src = open(path).read()
    fields = src.split("// launch:")[1].split("\n")[0].split()
    M, N, K = map(int, fields[:3])
    grid = tuple(int(g) for g in fields[3].split(","))
    block, smem = int(fields[4]), int(fields[5])
    rest = fields[6:]
    dtypes = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
    dt = dtypes[next((f for f in rest if f in dtypes), "f32")]
    mode = next((f for f in rest if f not in dtypes), "")
    A = torch.randn(M, K, device="cuda").to(dt); B = torch.randn(K, N, device="cuda").to(dt)
    C = torch.zeros((M, N), device="cuda", dtype=dt) if mode in ("zero", "timing-only") else \
        torch.full((M, N), float("nan"), device="cuda", dtype=dt)
    mod = cp.RawModule(code=src, options=("-arch=sm_90a", "-std=c++17", inc), name_expressions=None)
    k = mod.get_function("k_matmul")
    if smem > 48 * 1024:
        k.max_dynamic_shared_size_bytes = smem
    args = (A.data_ptr(), B.data_ptr(), C.data_ptr())
    launch = lambda: k(grid, (block,), tuple(cp.uint64(a) for a in args), shared_mem=smem)
    ref = A.double() @ B.double()
    launch(); torch.cuda.synchronize()
    err = ((C.double() - ref).norm() / ref.norm()).item()
    t_l = []; t_c = []
    for _ in range(3):
        t_l.append(timeit(launch)); t_c.append(timeit(lambda: A @ B))
    tl, tc = min(t_l), min(t_c)
    print(f"{path:50s} {mode:11s} err={err:.1e} loom={tl:8.1f}us cublas={tc:8.1f}us ratio={tc/tl:.3f} "
          f"regs={k.num_regs} spill={k.local_size_bytes}")
