#!/usr/bin/env python3
"""One wgmma kernel for every M against a kernel per M and cuBLAS, on the GPU machine.

For `matmul(A[M,K]:bf16, B[K,N]:bf16)` (default N = K = 4096) and each M of --m:
  symbolic  one loom.Kernel compiled once with M left to run time (runtime="M"), launched
            with sizes {"M": m}: the sm_90a default for a run-time M (the large class's
            persistent schedule, src/passes/defaults.cpp symbolic_m_wgmma_defaults)
  constant  loom.Kernel of the same expression with M = m written in, its own defaults
  cublas    torch.matmul on the same tensors
Both Loom kernels skip the tuning database (use_db=False): defaults against defaults.
Each output is checked first against an f32 reference (torch, TF32 off) from the same
inputs: Loom's max error at most twice torch's own bf16 error (docs/verification.md),
and no NaN (outputs start poisoned). Timing: python/loom_torch.py's time_interleaved
(cold L2 before every launch, CUDA events, median of --reps).

Prints a row per M (µs of each, symbolic / constant and cublas / symbolic ratios) and a
last line "PASS" or "FAIL <why>".

Usage (GPU machine, after `cmake --build build-device`):
  LOOM_PY_PATH=$PWD/build-device python3 scripts/symbolic_gemm_bench.py [--m 128,512,4096,16384]
      [--n 4096] [--k 4096] [--reps 20]
"""
import argparse
import os
import sys

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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", default="128,512,4096,16384")
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    ms = [int(x) for x in args.m.split(",")]
    n, k = args.n, args.k
    dev = torch.cuda.current_device()
    sym_expr = "matmul(A[M,%d]:bf16, B[%d,%d]:bf16)" % (k, k, n)
    sym = loom.Kernel(sym_expr, "", dev, False, "", "M")
    print("GPU: %s" % torch.cuda.get_device_name(dev))
    print("symbolic kernel: %s | knobs %s | %s" % (sym_expr, sym.program.knobs,
                                                  sym.program.knob_source))
    print("%7s %6s %6s | %10s %10s %10s | %9s %9s | %s" % (
        "M", "N", "K", "sym us", "const us", "cublas us", "sym/const", "cub/sym", "constant knobs"))
    torch.manual_seed(0)
    b = torch.randn(k, n, device="cuda").to(torch.bfloat16)
    failures = []
    flush = lt.L2Flush()
    for m in ms:
        a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        const = loom.Kernel("matmul(A[%d,%d]:bf16, B[%d,%d]:bf16)" % (m, k, k, n), "", dev, False)
        out_s = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        out_c = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        f_sym = launcher(sym, a, b, out_s, {"M": m})
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
                failures.append("M=%d %s: max error %.4g, torch's %.4g" % (m, name, err, torch_err))
        t_sym, t_const, t_cub = lt.time_interleaved([f_sym, f_const, f_cub], reps=args.reps,
                                                    flush=flush)
        print("%7d %6d %6d | %10.1f %10.1f %10.1f | %9.3f %9.3f | %s" % (
            m, n, k, t_sym, t_const, t_cub, t_sym / t_const, t_cub / t_sym, const.program.knobs))
        sys.stdout.flush()
    print("PASS" if not failures else "FAIL " + "; ".join(failures))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
