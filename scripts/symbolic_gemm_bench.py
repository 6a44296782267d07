#!/usr/bin/env python3
"""One compiled plan for every M (and N, K) against a kernel per size and cuBLAS, on the GPU.

For `matmul(A[M,K]:bf16, B[K,N]:bf16)` (default N = K = 4096) and each M of --m:
  symbolic  one loom.Kernel compiled once with M left to run time (runtime="M"), launched
            with sizes {"M": m}: the sm_90a defaults for a run-time M, a kernel per range
            of M (src/passes/defaults.cpp runtime_size_ranges: swapped decode, one row of
            128-row tiles, the medium and the large persistent schedules), the launch
            running the range's kernel (the "kernel" column: its range and tile)
  constant  loom.Kernel of the same expression with M = m written in, its own defaults
  cublas    torch.matmul on the same tensors
Then the rows of --nk (M,N,K triples): one kernel compiled with M, N and K all left to run
time (runtime="M,N,K": the large schedule, symbolic_wgmma_defaults) against the constant
kernel and cuBLAS at each triple.
Both Loom kernels skip the tuning database (use_db=False): defaults against defaults.
Each output is checked first against an f32 reference (torch, TF32 off) from the same
inputs: Loom's max error at most twice torch's own bf16 error (docs/verification.md),
and no NaN (outputs start poisoned). Timing: python/loom_torch.py's time_interleaved
(cold L2 before every launch, CUDA events, median of --reps).

Prints a row per size (µs of each, symbolic / constant and cublas / symbolic ratios), a
line "goal: max symbolic/constant over M = ..." (the brief's goal: within 1.10 at M = 1,
16, 128, 512, 4096), and a last line "PASS" or "FAIL <why>".

Usage (GPU machine, after `cmake --build build-device`):
  LOOM_PY_PATH=$PWD/build-device python3 scripts/symbolic_gemm_bench.py
      [--m 1,16,40,64,80,128,256,512,4096,16384] [--n 4096] [--k 4096]
      [--nk 4096x4096x4096,1000x4104x4104]
      [--reps 20]
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "python"))
import loom_torch as lt  # noqa: E402
from loom_torch import loom_py as loom, torch  # noqa: E402


def launcher(kernel, a, b, out, sizes):
    ptrs = {"A": a.data_ptr(), "B": b.data_ptr(), "out": out.data_ptr()}

    def run():
        kernel.launch(ptrs, torch.cuda.current_stream().cuda_stream, sizes)
        return out
    return run


def max_err(x, ref):
    return (x.float() - ref).abs().max().item()


def short_knobs(knobs):
    """The knobs that tell the schedules apart."""
    keep = ("BN", "SWAP_AB", "STAGES", "PERSISTENT", "CLUSTER_M", "EPILOGUE")
    kv = dict(x.split("=", 1) for x in knobs.split(",") if "=" in x)
    return ",".join("%s=%s" % (k, kv[k]) for k in keep if k in kv)


def run_row(label, sym, sym_sizes, const_expr, a, b, m, n, k, reps, flush, failures, dev):
    const = loom.Kernel(const_expr, "", dev, False)
    out_s = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    out_c = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    f_sym = launcher(sym, a, b, out_s, sym_sizes)
    f_const = launcher(const, a, b, out_c, {})
    f_cub = lambda: torch.matmul(a, b)  # noqa: E731
    ref = torch.matmul(a.float(), b.float())
    torch_err = max_err(f_cub(), ref)
    f_sym()
    f_const()
    torch.cuda.synchronize()
    for name, out in (("symbolic", out_s), ("constant", out_c)):
        err = max_err(out, ref)
        if not (err <= 2 * torch_err) or torch.isnan(out.float()).any().item():
            failures.append("%s M=%d N=%d K=%d %s: max error %.4g, torch's %.4g" % (
                label, m, n, k, name, err, torch_err))
    t_sym, t_const, t_cub = lt.time_interleaved([f_sym, f_const, f_cub], reps=reps, flush=flush)
    v = sym.variants[sym.variant_for(sym_sizes)]
    top = "" if v["hi"] >= 2**62 else v["hi"]
    rng = "%s=%d..%s" % (v["size"], v["lo"], top) if v["size"] else "one"
    print("%-4s %6d %6d %6d | %9.1f %9.1f %9.1f | %9.3f %9.3f | %-11s %s | const %s" % (
        label, m, n, k, t_sym, t_const, t_cub, t_sym / t_const, t_cub / t_sym, rng,
        short_knobs(v["knobs"]), short_knobs(const.program.knobs)))
    sys.stdout.flush()
    return t_sym / t_const


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", default="1,16,40,64,80,128,256,512,4096,16384")
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--nk", default="4096x4096x4096,1000x4104x4104",
                    help="MxNxK triples for the kernel with M, N and K all at run time")
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    ms = [int(x) for x in args.m.split(",") if x]
    n, k = args.n, args.k
    dev = torch.cuda.current_device()
    sym_expr = "matmul(A[M,%d]:bf16, B[%d,%d]:bf16)" % (k, k, n)
    t0 = time.time()
    sym = loom.Kernel(sym_expr, "", dev, False, "", "M")
    t_compile = time.time() - t0
    print("GPU: %s" % torch.cuda.get_device_name(dev))
    print("symbolic plan: %s | %d kernels, compiled and loaded in %.1f s" % (
        sym_expr, len(sym.variants), t_compile))
    for v in sym.variants:
        print("  %s=%d..%s: %s (%s)" % (v["size"] or "-", v["lo"],
                                        "" if v["hi"] >= 2**62 else v["hi"],
                                        short_knobs(v["knobs"]), v["knob_source"]))
    print("%-4s %6s %6s %6s | %9s %9s %9s | %9s %9s | %s" % (
        "", "M", "N", "K", "sym us", "const us", "cublas us", "sym/const", "cub/sym",
        "kernel (range, knobs) | const knobs"))
    # Clocks up before the first row: at the 2026-11-27 GPU checkpoint the first row (M = 1)
    # measured ~185 us for Loom and cuBLAS alike, against ~17 us at M = 16 right after.
    x = torch.randn(8192, 8192, device="cuda").to(torch.bfloat16)
    t_end = time.time() + 1.0
    while time.time() < t_end:
        for _ in range(10):
            x @ x
        torch.cuda.synchronize()
    del x
    torch.manual_seed(0)
    b = torch.randn(k, n, device="cuda").to(torch.bfloat16)
    failures = []
    flush = lt.L2Flush()
    goal = {}
    for m in ms:
        a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        goal[m] = run_row("M", sym, {"M": m}, "matmul(A[%d,%d]:bf16, B[%d,%d]:bf16)" % (m, k, k, n),
                          a, b, m, n, k, args.reps, flush, failures, dev)
    triples = [tuple(int(x) for x in t.split("x")) for t in args.nk.split(",") if t]
    if triples:
        mnk = loom.Kernel("matmul(A[M,K]:bf16, B[K,N]:bf16)", "", dev, False, "", "M,N,K")
        print("run-time M, N, K: %s" % short_knobs(mnk.program.knobs))
        for (m, nn, kk) in triples:
            a = torch.randn(m, kk, device="cuda").to(torch.bfloat16)
            bb = torch.randn(kk, nn, device="cuda").to(torch.bfloat16)
            run_row("MNK", mnk, {"M": m, "N": nn, "K": kk},
                    "matmul(A[%d,%d]:bf16, B[%d,%d]:bf16)" % (m, kk, kk, nn),
                    a, bb, m, nn, kk, args.reps, flush, failures, dev)
    in_goal = [m for m in (1, 16, 128, 512, 4096) if m in goal]
    if in_goal:
        worst = max(in_goal, key=lambda m: goal[m])
        print("goal: max symbolic/constant over M = %s: %.3f at M = %d (goal <= 1.10)" % (
            ",".join(str(m) for m in in_goal), goal[worst], worst))
    print("PASS" if not failures else "FAIL " + "; ".join(failures))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
