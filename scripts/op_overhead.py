#!/usr/bin/env python3
"""Host cost per call of Loom's torch ops against torch's own, on shapes small enough that
the CPU, not the GPU, sets the pace (a decode step of a small model).

For each op, N calls are issued back to back without synchronizing; the wall time per call
is the host cost when it exceeds the kernel's time (the GPU then waits on the CPU). Each
output is verified against torch first. `--profile` adds a cProfile of the Loom calls (top
functions by own time), to see where the host time goes.

  LOOM_PY_PATH=build python3 scripts/op_overhead.py [--calls 2000] [--profile]
"""
import argparse
import cProfile
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import loom  # noqa: E402


def per_call_us(fn, calls):
    fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    host = (time.perf_counter() - t) / calls * 1e6
    torch.cuda.synchronize()
    total = (time.perf_counter() - t) / calls * 1e6
    return host, total


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    dev = "cuda"
    bf = torch.bfloat16
    x = torch.randn(1, 2048, device=dev, dtype=bf)
    w = torch.randn(2048, 2048, device=dev, dtype=bf) / 45
    bias = torch.randn(2048, device=dev, dtype=bf)
    a = torch.randn(64, 64, device=dev, dtype=bf)
    q = torch.randn(1, 16, 1, 128, device=dev, dtype=bf)
    k = torch.randn(1, 4, 512, 128, device=dev, dtype=bf)
    v = torch.randn(1, 4, 512, 128, device=dev, dtype=bf)
    cases = [
        ("linear 1x2048x2048", lambda: loom.linear(x, w), lambda: F.linear(x, w)),
        ("linear+bias+silu", lambda: loom.linear(x, w, bias, "silu"), lambda: F.silu(F.linear(x, w, bias))),
        ("matmul 64^3", lambda: loom.matmul(a, a), lambda: torch.matmul(a, a)),
        ("attention decode 16/4 heads, 512 keys", lambda: loom.attention(q, k, v),
         lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)),
    ]
    print("%-40s %12s %12s %8s" % ("op", "loom us/call", "torch us/call", "ratio"))
    for name, lf, tf in cases:
        got, ref = lf().float(), tf().float()
        err = (got - ref).abs().max().item()
        scale = ref.abs().max().item() + 1e-6
        if err > 0.05 * scale:
            print("%-40s FAIL: max error %.4g (|ref| %.4g)" % (name, err, scale))
            continue
        lh, _ = per_call_us(lf, args.calls)
        th, _ = per_call_us(tf, args.calls)
        print("%-40s %12.2f %12.2f %8.2f" % (name, lh, th, lh / th))
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.calls):
            loom.linear(x, w)
        prof.disable()
        torch.cuda.synchronize()
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
