#!/usr/bin/env python3
"""Loom's attention against PyTorch's scaled_dot_product_attention — FlashAttention-2
(the flash backend) and cuDNN — in one process on the GPU machine.

Table mode (default): docs/benchmarking.md's attention table: bf16, 16384 tokens
(batch = 16384 / seqlen), 2048 / D heads, D 64 and 128, causal and not, seqlen 512..16k.
For each point Loom's kernel runs on the same torch tensors as PyTorch's, is verified first
(max error against an f32 reference within twice the error of PyTorch's bf16 flash output:
the issue's rule), then the three are timed interleaved with a cold L2 before every
launch (python/loom_torch.py says exactly how). FLOPs: 4·B·H·S²·D, halved for causal.

Ladder mode (--ladder flash): the steps of `loom ladder flash` (read from the C++
definition through loom_py, not copied), each verified and timed interleaved with FA2.

Build first (GPU machine):
  cmake -S . -B build -G Ninja -DLOOM_PYTHON=ON -DPython_EXECUTABLE=$(which python3) \
    -Dnanobind_DIR=$(python3 -m nanobind --cmake_dir)
  ninja -C build loom loom_py
Usage:
  python3 scripts/attention_bench.py [--dims 64 128] [--masks false true]
      [--seqlens 512 1024 ...] [--knobs K=V,..] [--reps 30] [--no-db]
  python3 scripts/attention_bench.py --ladder flash [--shape BxHxSxD] [--causal] [--dtype bf16]
"""
import argparse
import datetime
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "python"))
import loom_torch as lt  # noqa: E402
from loom_torch import loom_py, torch  # noqa: E402
from torch.nn.attention import SDPBackend  # noqa: E402

BACKENDS = [("fa2", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)]


def header(flush, args):
    dev = loom_py.device() or {}
    print("# %s  %s (%s)  torch %s  CUDA %s  cuDNN %s  driver %s" % (
        datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"), dev.get("name", "?"),
        dev.get("arch", "?"), torch.__version__, torch.version.cuda,
        torch.backends.cudnn.version(), dev.get("driver_version", "?")))
    print("# timing: interleaved, CUDA events, median of %d (warm-up %d); L2: %s"
          % (args.reps, args.warmup, flush.describe()))
    print("# command: %s" % " ".join(sys.argv))


def first_line(e):
    return str(e).splitlines()[0] if str(e) else type(e).__name__


def attention_inputs(b, h, s, d, dtype):
    g = torch.Generator(device="cuda").manual_seed(1)
    return [torch.randn(b, h, s, d, device="cuda", dtype=dtype, generator=g) for _ in range(3)]


def expression(b, h, s, d, dtype, causal):
    t = "[%d,%d,%d,%d]:%s" % (b, h, s, d, dtype)
    return "attention(Q%s, K%s, V%s, causal=%s)" % (t, t, t, "true" if causal else "false")


def verify(op, q, k, v, causal):
    """Loom's output on q, k, v against the f32 reference (the issue's rule)."""
    ref = lt.attention_reference_f32(q, k, v, causal)
    try:
        torch_out = lt.sdpa(q, k, v, causal, SDPBackend.FLASH_ATTENTION)
    except RuntimeError:
        torch_out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    out = op()
    torch.cuda.synchronize()
    ok, le, te = lt.check_attention(out, torch_out, ref)
    del ref
    return ok, "max err %.2e vs PyTorch bf16's %.2e (limit 2x)" % (le, te)


def sdpa_call(q, k, v, causal, backend):
    return lambda: lt.sdpa(q, k, v, causal, backend)


def fmt(x, spec="%.1f"):
    return "-" if x is None else spec % x


def table(args, flush):
    print("%-4s %-6s %6s  %9s %9s %9s  %8s %10s  %s" % (
        "D", "causal", "seqlen", "loom", "fa2", "cudnn", "loom/fa2", "loom/cudnn", "loom knobs / notes"))
    dtype = lt.TORCH_DTYPES[args.dtype]
    for d in args.dims:
        for causal in args.masks:
            for s in args.seqlens:
                b, h = 16384 // s, 2048 // d
                flops = 4.0 * b * h * s * s * d / (2 if causal else 1)
                q, k, v = attention_inputs(b, h, s, d, dtype)
                fns, names, note, op = [], [], "", None
                try:
                    op = lt.LoomOp(expression(b, h, s, d, args.dtype, causal), args.knobs,
                                   {"Q": q, "K": k, "V": v}, use_db=not args.no_db)
                    ok, msg = verify(op, q, k, v, causal)
                    note = op.program.knobs if ok else "FAIL " + msg
                    if ok:
                        fns.append(op)
                        names.append("loom")
                except RuntimeError as e:
                    note = "not run: " + first_line(e)
                for name, be in BACKENDS:
                    try:
                        lt.sdpa(q, k, v, causal, be)
                        fns.append(sdpa_call(q, k, v, causal, be))
                        names.append(name)
                    except RuntimeError:
                        pass
                us = dict(zip(names, lt.time_interleaved(fns, args.reps, args.warmup, flush)))
                tf = {n: flops / (us[n] * 1e-6) / 1e12 for n in us}
                r = lambda a, c: tf[a] / tf[c] if a in tf and c in tf else None  # noqa: E731
                print("%-4d %-6s %6d  %9s %9s %9s  %8s %10s  %s" % (
                    d, "true" if causal else "false", s, fmt(tf.get("loom")), fmt(tf.get("fa2")),
                    fmt(tf.get("cudnn")), fmt(r("loom", "fa2"), "%.2f"),
                    fmt(r("loom", "cudnn"), "%.2f"), note), flush=True)
                fns = op = None
                torch.cuda.empty_cache()


def ladder(args, flush):
    l = loom_py.ladder(args.ladder, args.shape, args.dtype, args.causal)
    print("# ladder %s: %s" % (l["name"], l["expression"]))
    shape = [int(x) for x in l["expression"].split("Q[")[1].split("]")[0].split(",")]
    b, h, s, d = shape
    causal = "causal=true" in l["expression"]
    flops = 4.0 * b * h * s * s * d / (2 if causal else 1)
    q, k, v = attention_inputs(b, h, s, d, lt.TORCH_DTYPES[args.dtype or "bf16"])
    fa2 = sdpa_call(q, k, v, causal, SDPBackend.FLASH_ATTENTION)
    print("%-32s %9s %8s %8s %7s  %s" % ("step", "us", "TFLOP/s", "vs FA2", "gain", "what it bought"))
    prev, used = None, []
    for step in l["steps"]:
        try:
            # As `loom ladder` does: the rungs over the defaults, never a tuning record
            # (a record's tile would change every rung, not just the last).
            op = lt.LoomOp(l["expression"], step["knobs"], {"Q": q, "K": k, "V": v},
                           use_db=False)
            ok, msg = verify(op, q, k, v, causal)
            if not ok:
                raise RuntimeError("verification failed: " + msg)
        except RuntimeError as e:
            print("%-32s %9s %8s %8s %7s  not run: %s" % (step["name"], "-", "-", "-", "-",
                                                         first_line(e)), flush=True)
            used.append((step, "-"))
            continue
        us, fa2_us = lt.time_interleaved([op, fa2], args.reps, args.warmup, flush)
        gain = "%.2f" % (prev / us) if prev else ""
        print("%-32s %9.1f %8.1f %8.2f %7s  %s" % (step["name"], us, flops / (us * 1e-6) / 1e12,
                                                   fa2_us / us, gain, step["what"]), flush=True)
        prev = us
        used.append((step, op.program.knobs))
    print("knobs per step:")
    for step, knobs in used:
        print("  %s: %s\n      used: %s" % (step["name"], step["knobs"] or "(defaults)", knobs))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dims", type=int, nargs="+", default=[64, 128])
    p.add_argument("--masks", nargs="+", default=["false", "true"], choices=["false", "true"])
    p.add_argument("--seqlens", type=int, nargs="+", default=[512, 1024, 2048, 4096, 8192, 16384])
    p.add_argument("--dtype", default="", choices=["", "bf16", "f16"])
    p.add_argument("--knobs", default="", help="Loom knobs for every point (K=V,..)")
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--no-db", action="store_true", help="Loom's defaults, not the tuning database")
    p.add_argument("--ladder", default="", help="run a ladder (flash) with an FA2 column")
    p.add_argument("--shape", default="", help="ladder shape BxHxSxD (default 4x16x4096x128)")
    p.add_argument("--causal", action="store_true", help="ladder: causal mask")
    args = p.parse_args()
    args.masks = [m == "true" for m in args.masks]
    if not torch.cuda.is_available():
        sys.exit("attention_bench.py needs a CUDA GPU visible to torch")
    flush = lt.L2Flush()
    header(flush, args)
    if args.ladder:
        ladder(args, flush)
    else:
        args.dtype = args.dtype or "bf16"
        table(args, flush)


if __name__ == "__main__":
    main()
