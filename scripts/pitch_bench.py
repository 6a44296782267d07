#!/usr/bin/env python3
"""Views into larger buffers (leading dimensions) and 3-D linear against cuBLAS, in one
process on the GPU machine (through the loom package's ops, as a PyTorch user calls them).

Rows (bf16; the compiled kernels launched directly, Loom's defaults both ways with the tuning
database off, so the pitch is all that differs; the ops' results are checked once too):
  pitched   loom.matmul(A[:, :K], B): A a column slice of a [M, K+64] buffer, read in place
            (`A[M,K|K+64]`, TMA strides = the pitch)
  dense     loom.matmul on A.contiguous(): the same product on a dense copy (the copy untimed)
  cuBLAS    torch.matmul on the same view (cuBLAS's lda), and on the dense copy
  linear    loom.linear(X[B,S,K], W[N,K]) (one [B*S, K] GEMM on the view) against F.linear,
            and the 3-D expression itself (a batch of GEMMs, W shared) for comparison
Every output is checked first against an f32 reference from the same inputs: Loom's max
error at most twice torch's own (docs/verification.md). Timing: python/loom_torch.py's
time_interleaved (cold L2 before every launch, CUDA events, median of --reps).
Last line: "PASS" or "FAIL <why>".

Usage (GPU machine, after `cmake --build build-device`):
  LOOM_PY_PATH=$PWD/build-device python3 scripts/pitch_bench.py [--reps 20] [--m 4096]
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(HERE, "python"))
import loom_torch as lt  # noqa: E402
from loom_torch import loom_py, torch  # noqa: E402
import loom  # noqa: E402

F = torch.nn.functional


def kernel(expr, inputs, out_shape):
    """The compiled kernel of `expr` launched on `inputs` ({name: tensor, views included})
    into a fresh output: the kernel alone, without the op's Python (defaults, use_db off)."""
    k = loom_py.Kernel(expr, "", torch.cuda.current_device(), False, "")
    out = torch.full(out_shape, float("nan"), dtype=torch.bfloat16, device="cuda")
    ptrs = {n: t.data_ptr() for n, t in inputs.items()}
    ptrs["out"] = out.data_ptr()
    for w in k.workspace:
        buf = (torch.zeros if w["zero_init"] else torch.empty)(max(w["bytes"], 16),
                                                               dtype=torch.uint8, device="cuda")
        inputs = dict(inputs, **{w["name"]: buf})
        ptrs[w["name"]] = buf.data_ptr()

    def run():
        k.launch(ptrs, torch.cuda.current_stream().cuda_stream)
        return out
    run.keep = inputs
    run.knobs = k.program.knobs
    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=4096)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--pad", type=int, default=64)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    m, n, k = args.m, args.n, args.k
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.cuda.current_device()
    print("GPU: %s" % torch.cuda.get_device_name(dev))
    torch.manual_seed(0)
    flush = lt.L2Flush()
    failures = []

    def check(name, out, ref, torch_out):
        te = (torch_out.float() - ref).abs().max().item()
        le = (out.float() - ref).abs().max().item()
        ok = le <= 2 * te + 1e-6 and not torch.isnan(out.float()).any().item()
        if not ok:
            failures.append("%s: max error %.4g, torch's %.4g" % (name, le, te))
        return ok

    # 1. A column slice of a [M, K + pad] buffer.
    buf = torch.randn(m, k + args.pad, device="cuda").to(torch.bfloat16)
    a = buf[:, :k]
    dense = a.contiguous()
    b = torch.randn(k, n, device="cuda").to(torch.bfloat16)
    ref = torch.matmul(a.float(), b.float())
    print("expression: %s" % loom.expression("matmul", a, b))
    f_pitched = kernel(loom.expression("matmul", a, b), {"A": a, "B": b}, (m, n))
    f_dense = kernel(loom.expression("matmul", dense, b), {"A": dense, "B": b}, (m, n))
    print("knobs (pitched): %s" % f_pitched.knobs)
    print("knobs (dense):   %s" % f_dense.knobs)
    # The op on the view, once: the user's path gives the same answer.
    check("loom.matmul(view)", loom.matmul(a, b, use_db=False), ref, torch.matmul(a, b))
    f_cub_view = lambda: torch.matmul(a, b)  # noqa: E731
    f_cub_dense = lambda: torch.matmul(dense, b)  # noqa: E731
    t_cub = f_cub_view()
    check("pitched", f_pitched(), ref, t_cub)
    check("dense", f_dense(), ref, t_cub)
    ts = lt.time_interleaved([f_pitched, f_dense, f_cub_view, f_cub_dense], reps=args.reps,
                             flush=flush)
    tf = 2.0 * m * n * k / 1e6
    print("%-34s %9s %8s" % ("bf16 %dx%dx%d, A = [%d,%d][:, :%d]" % (m, n, k, m, k + args.pad, k),
                             "us", "TFLOP/s"))
    for name, t in zip(("loom pitched (view)", "loom dense (copy)", "cuBLAS on the view",
                        "cuBLAS on the copy"), ts):
        print("  %-32s %9.1f %8.1f" % (name, t, tf / t))
    print("ratios: pitched/dense %.3f  cuBLAS(view)/loom(pitched) %.3f" % (ts[0] / ts[1], ts[2] / ts[0]))
    del buf, dense

    # 2. 3-D linear [8, 512, K] x [N, K]^T.
    x = torch.randn(8, 512, k, device="cuda").to(torch.bfloat16)
    w = (torch.randn(n, k, device="cuda") * 0.05).to(torch.bfloat16)
    ref = F.linear(x.float(), w.float())
    t_out = F.linear(x, w)
    expr3 = "linear(X[8,512,%d]:bf16, W[%d,%d]:bf16)" % (k, n, k)
    batched = kernel(expr3, {"X": x, "W": w}, (8, 512, n))
    f_flat = kernel(loom.expression("linear", x.view(-1, k), w), {"X": x.view(-1, k), "W": w},
                    (8 * 512, n))
    check("loom.linear(3-D)", loom.linear(x, w, use_db=False), ref, t_out)
    f_cub = lambda: F.linear(x, w)  # noqa: E731
    check("linear 3-D (rows)", f_flat().view(8, 512, n), ref, t_out)
    check("linear 3-D (expression)", batched(), ref, t_out)
    ts = lt.time_interleaved([f_flat, batched, f_cub], reps=args.reps, flush=flush)
    tf = 2.0 * 8 * 512 * n * k / 1e6
    print("%-34s %9s %8s" % ("linear [8,512,%d] x [%d,%d]^T" % (k, n, k), "us", "TFLOP/s"))
    for name, t in zip(("loom.linear (one [4096,K] GEMM)", "loom 3-D expression (batched)",
                        "F.linear"), ts):
        print("  %-32s %9.1f %8.1f" % (name, t, tf / t))
    print("ratios: F.linear/loom.linear %.3f  batched/rows %.3f  (batched knobs %s)" % (
        ts[2] / ts[0], ts[1] / ts[0], batched.knobs))
    print("PASS" if not failures else "FAIL " + "; ".join(failures))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
