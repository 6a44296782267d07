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
definition through the loom package, not copied), each verified and timed interleaved with FA2.

Decode mode (--decode): Sq new tokens against a KV cache of Sk keys (bf16, Hq = 32,
D = 128, no mask): B x Hkv x Sq x Sk over --batches, --kv-heads, --sq, --sk. Per point
Loom is verified first (the same rule), then Loom and SDPA's flash, efficient and cuDNN
backends (those that refuse the shape are skipped; GQA through enable_gqa) and a
device-to-device copy of K and V's byte count are timed interleaved with a cold L2.
Prints loom/best-SDPA and the bytes of K and V Loom reads per second against the copy's
bandwidth (bytes read + written per second), the bar of decode (>= 1.2x, >= 80%).
--ab KNOBS..: more Loom rows per point, one per knob set, in the same interleaved timing
(an A/B of knobs against the same SDPA and copy times).

Paged mode (--paged PAGE): the decode grid with K and V also stored as a page pool
[P, Hkv, PAGE, D] (FlashInfer's HND layout, docs/attention.md "Serving forms: paged KV"),
the pages in shuffled order behind a block table, every sequence full length. Loom paged
and Loom contiguous run the same shapes, each verified first (the same rule, against the
f32 reference on the contiguous K and V), then both and SDPA's backends on the contiguous
form are timed interleaved with a cold L2. Prints paged/contiguous time (the bar: <= 1.10);
--masks false true adds causal points (Sq = Sk only: SDPA's mask is top-left); --mma-column adds the paged form on the mma.sync kernel (prefill: --sq 2048 --sk 2048).

Varlen mode (--varlen): packed sequences of a few length mixes (bf16, D = 128, 16 heads,
causal and not; --mixes, --varlen-heads HQ HKV): Loom's varlen form (its default kernel and
the mma.sync kernel) against Loom on the padded batch [B, H, max, D] (its default kernel and
the mma.sync kernel) and SDPA's flash backend on the padded batch. Verified first per sequence (the same rule). Prints varlen time over the
padded time scaled by real/padded (query, key) pairs — the padding's work subtracted; the
bar is <= 1.10. --ab KNOBS..: more varlen kernels in the same interleaved timing, one row
each (the padded reference keeps --knobs alone).

Build first (GPU machine): `pip install --no-build-isolation .` (python/README.md), or
a CMake build folder found through LOOM_PY_PATH (default build/):
  cmake -S . -B build -G Ninja -DLOOM_PYTHON=ON -DPython_EXECUTABLE=$(which python3) \
    -Dnanobind_DIR=$(python3 -m nanobind --cmake_dir)
  ninja -C build loom loom_py
Usage:
  python3 scripts/attention_bench.py [--dims 64 128] [--masks false true]
      [--seqlens 512 1024 ...] [--knobs K=V,..] [--reps 30] [--no-db]
  python3 scripts/attention_bench.py --ladder flash [--shape BxHxSxD] [--causal] [--dtype bf16]
  python3 scripts/attention_bench.py --decode [--batches 1 8 64] [--kv-heads 32 8]
      [--sq 1 4] [--sk 1024 8192 32768 131072] [--knobs SPLIT_KV=8,..]
      [--ab KV_STAGES=4 SPLIT_KV=16,KV_STAGES=3 ..]
  python3 scripts/attention_bench.py --paged 16 [--batches 1 8] [--kv-heads 8] [--sk 8192]
  python3 scripts/attention_bench.py --gqa 32:8 32:1 --seqlens 2048 4096 8192 [--head-dim 128]
  python3 scripts/attention_bench.py --varlen [--masks false true]
  python3 scripts/attention_bench.py --variants base: pp:ATTN_PINGPONG=1 [--dims ..]
      [--masks ..] [--seqlens ..]

A/B mode (--variants NAME:KNOBS ...): the table's points, each Loom knob set verified
(the same rule) and timed interleaved with cuDNN and the other sets; prints TFLOP/s and
the ratio to cuDNN per set.
"""
import argparse
import datetime
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "python"))
import loom_torch as lt  # noqa: E402
from loom_torch import loom, torch  # noqa: E402
from torch.nn.attention import SDPBackend  # noqa: E402

BACKENDS = [("fa2", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)]


def header(flush, args):
    dev = loom.device() or {}
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


def references(q, k, v, causal):
    """The f32 reference and PyTorch's 16-bit output (the bar of verify())."""
    ref = lt.attention_reference_f32(q, k, v, causal)
    try:
        torch_out = lt.sdpa(q, k, v, causal, SDPBackend.FLASH_ATTENTION)
    except RuntimeError:
        torch_out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return ref, torch_out


def verify(op, q, k, v, causal, refs=None):
    """Loom's output on q, k, v against the f32 reference (the issue's rule)."""
    ref, torch_out = refs or references(q, k, v, causal)
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


def prewarm(programs, jobs):
    """Compiles (expression, knobs) pairs in `jobs` processes at a time, so that the cubin
    cache (LOOM_CACHE_DIR) has them when this process builds the same programs: NVRTC
    dominates an A/B run of many knob sets. Failures are left for the real build to report."""
    import subprocess
    code = ("import sys; sys.path.insert(0, %r); import loom_torch as lt; "
            "lt.loom.Kernel(sys.argv[1], sys.argv[2], 0, False)"
            % os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
    running = []
    for expr, knobs in programs:
        while len(running) >= jobs:
            running = [p for p in running if p.poll() is None]
            if len(running) >= jobs:
                running[0].wait()
        running.append(subprocess.Popen([sys.executable, "-c", code, expr, knobs],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    for p in running:
        p.wait()


def ab(args, flush):
    """--variants: several Loom knob sets per point of the table, each verified, timed
    interleaved with cuDNN (and each other) in one process with a cold L2; prints each
    variant's TFLOP/s and its ratio to cuDNN."""
    variants = []
    for v in args.variants:
        name, _, knobs = v.partition(":")
        # --knobs under every variant (the steps' comma-split arguments give a variant one
        # knob; the rest come from here).
        # ('+' separates knobs too, for the same reason.)
        variants.append((name, ",".join(x for x in (args.knobs, knobs) if x).replace("+", ",")))
    print("%-4s %-6s %6s %9s  %s" % ("D", "causal", "seqlen", "cudnn",
                                     "  ".join("%s(TF, /cudnn)" % n for n, _ in variants)))
    dtype = lt.TORCH_DTYPES[args.dtype]
    if args.prewarm > 0:
        prewarm([(expression(16384 // s, 2048 // d, s, d, args.dtype, c), knobs)
                 for d in args.dims for c in args.masks for s in args.seqlens
                 for _, knobs in variants], args.prewarm)
    for d in args.dims:
        for causal in args.masks:
            for s in args.seqlens:
                b, h = 16384 // s, 2048 // d
                flops = 4.0 * b * h * s * s * d / (2 if causal else 1)
                q, k, v = attention_inputs(b, h, s, d, dtype)
                refs = references(q, k, v, causal)
                fns, names, notes = [], [], []
                for name, knobs in variants:
                    try:
                        op = lt.LoomOp(expression(b, h, s, d, args.dtype, causal), knobs,
                                       {"Q": q, "K": k, "V": v}, use_db=False)
                        ok, msg = verify(op, q, k, v, causal, refs)
                        if ok:
                            fns.append(op)
                            names.append(name)
                        else:
                            notes.append("%s FAIL %s" % (name, msg))
                    except RuntimeError as e:
                        notes.append("%s not run: %s" % (name, first_line(e)))
                refs = None
                try:
                    lt.sdpa(q, k, v, causal, SDPBackend.CUDNN_ATTENTION)
                    fns.append(sdpa_call(q, k, v, causal, SDPBackend.CUDNN_ATTENTION))
                    names.append("cudnn")
                except RuntimeError:
                    pass
                us = dict(zip(names, lt.time_interleaved(fns, args.reps, args.warmup, flush)))
                tf = {n: flops / (us[n] * 1e-6) / 1e12 for n in us}
                cells = []
                for name, _ in variants:
                    if name in tf:
                        cells.append("%s %.0f %s" % (name, tf[name], fmt(
                            tf[name] / tf["cudnn"] if "cudnn" in tf else None, "%.3f")))
                    else:
                        cells.append("%s -" % name)
                print("%-4d %-6s %6d %9s  %s  %s" % (d, "true" if causal else "false", s,
                                                     fmt(tf.get("cudnn")), "  ".join(cells),
                                                     "; ".join(notes)), flush=True)
                fns = None
                torch.cuda.empty_cache()


def gqa_table(args, flush):
    """--gqa HQ:HKV ..: prefill with grouped K/V heads (GQA; HKV = 1 is MQA), D = --head-dim,
    16384 tokens (batch = 16384 / seqlen), causal and not. Loom against SDPA's backends
    with enable_gqa (K and V not expanded), each verified against the f32 reference."""
    print("%-7s %-4s %-6s %6s  %9s %9s %9s %9s  %9s  %s" % (
        "Hq:Hkv", "D", "causal", "seqlen", "loom", "fa2", "effic", "cudnn", "loom/best",
        "loom knobs / notes (TFLOP/s)"))
    dtype = lt.TORCH_DTYPES[args.dtype]
    d = args.head_dim
    backends = [("fa2", SDPBackend.FLASH_ATTENTION), ("effic", SDPBackend.EFFICIENT_ATTENTION),
                ("cudnn", SDPBackend.CUDNN_ATTENTION)]
    ratios = []
    for pair in args.gqa:
        hq, hkv = (int(x) for x in pair.split(":"))
        for causal in args.masks:
            for s in args.seqlens:
                b = max(1, 16384 // s)
                flops = 4.0 * b * hq * s * s * d / (2 if causal else 1)
                g = torch.Generator(device="cuda").manual_seed(1)
                q = torch.randn(b, hq, s, d, device="cuda", dtype=dtype, generator=g)
                k = torch.randn(b, hkv, s, d, device="cuda", dtype=dtype, generator=g)
                v = torch.randn(b, hkv, s, d, device="cuda", dtype=dtype, generator=g)

                def sdpa(be):
                    from torch.nn.attention import sdpa_kernel
                    with sdpa_kernel(be):
                        return torch.nn.functional.scaled_dot_product_attention(
                            q, k, v, is_causal=causal, enable_gqa=hq != hkv)
                fns, names, note = [], [], ""
                torch_out = None
                for name, be in backends:
                    try:
                        out = sdpa(be)
                        torch_out = out if torch_out is None else torch_out
                        fns.append(lambda be=be: sdpa(be))
                        names.append(name)
                    except RuntimeError:
                        pass
                t = lambda h: "[%d,%d,%d,%d]:%s" % (b, h, s, d, args.dtype)  # noqa: E731
                expr = "attention(Q%s, K%s, V%s, causal=%s)" % (t(hq), t(hkv), t(hkv),
                                                                "true" if causal else "false")
                try:
                    op = lt.LoomOp(expr, args.knobs, {"Q": q, "K": k, "V": v},
                                   use_db=not args.no_db)
                    out = op()
                    torch.cuda.synchronize()
                    if torch_out is None:
                        note = "FAIL no SDPA backend ran this shape to compare errors with"
                    else:
                        ref = lt.attention_reference_f32(q, k, v, causal)
                        ok, le, te = lt.check_attention(out, torch_out, ref)
                        del ref
                        note = op.program.knobs if ok else "FAIL max err %.2e vs PyTorch's %.2e" % (le, te)
                        if ok:
                            fns.insert(0, op)
                            names.insert(0, "loom")
                    del out
                except RuntimeError as e:
                    note = "not run: " + first_line(e)
                torch_out = None
                us = dict(zip(names, lt.time_interleaved(fns, args.reps, args.warmup, flush)))
                tf = {n: flops / (us[n] * 1e-6) / 1e12 for n in us}
                best = max([tf[n] for n, _ in backends if n in tf], default=None)
                ratio = tf["loom"] / best if "loom" in tf and best else None
                if ratio is not None:
                    ratios.append(ratio)
                print("%-7s %-4d %-6s %6d  %9s %9s %9s %9s  %9s  %s" % (
                    "%d:%d" % (hq, hkv), d, "true" if causal else "false", s, fmt(tf.get("loom")),
                    fmt(tf.get("fa2")), fmt(tf.get("effic")), fmt(tf.get("cudnn")),
                    fmt(ratio, "%.2f"), note), flush=True)
                fns = op = q = k = v = None
                torch.cuda.empty_cache()
    if ratios:
        print("# gqa summary: %d points, loom/best-SDPA min %.2f median %.2f max %.2f (bar >= 1.00)"
              % (len(ratios), min(ratios), sorted(ratios)[len(ratios) // 2], max(ratios)))


DECODE_BACKENDS = [("flash", SDPBackend.FLASH_ATTENTION),
                   ("efficient", SDPBackend.EFFICIENT_ATTENTION),
                   ("cudnn", SDPBackend.CUDNN_ATTENTION)]


def sdpa_gqa(q, k, v, backend):
    """SDPA through one backend, GQA by enable_gqa (the K/V heads are not expanded)."""
    from torch.nn.attention import sdpa_kernel
    gqa = q.shape[1] != k.shape[1]
    with sdpa_kernel(backend):
        if gqa:
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v)


def decode_expression(b, hq, hkv, sq, sk, d, dtype, causal=False):
    def t(h, s):
        return "[%d,%d,%d,%d]:%s" % (b, h, s, d, dtype)
    return "attention(Q%s, K%s, V%s, causal=%s)" % (t(hq, sq), t(hkv, sk), t(hkv, sk),
                                                   "true" if causal else "false")


def decode(args, flush):
    """The decode grid: Loom, SDPA's backends and a copy of K and V's bytes, interleaved.
    With --ab, each knob set is one more Loom row of the point, timed in the same
    interleaved run (the SDPA and copy columns are shared)."""
    names_sdpa = [n for n, _ in DECODE_BACKENDS]
    print("%-3s %-3s %-3s %-3s %-6s  %8s %8s %8s %8s %8s  %9s %8s %8s %6s  %s" % (
        "B", "Hq", "Hkv", "Sq", "Sk", "loom_us", "flash", "effic", "cudnn", "copy_us",
        "loom/best", "kv_GB/s", "copyGB/s", "frac", "loom knobs / notes"))
    dtype = lt.TORCH_DTYPES[args.dtype]
    hq, d = args.q_heads, args.head_dim
    # The Loom variants of every point: --knobs, then each --ab set (on top of --knobs).
    variants = [args.knobs] + [",".join(x for x in (args.knobs, ab) if x) for ab in args.ab]
    summary = {v: [] for v in variants}
    if args.prewarm > 0 and args.no_db:  # the cache key of a --no-db build (use_db False)
        prewarm([(decode_expression(b, hq, hkv, sq, sk, d, args.dtype), knobs)
                 for b in args.batches for hkv in args.kv_heads for sq in args.sq
                 for sk in args.sk for knobs in variants], args.prewarm)
    for b in args.batches:
        for hkv in args.kv_heads:
            for sq in args.sq:
                for sk in args.sk:
                    kv_bytes = 2 * b * hkv * sk * d * 2
                    if kv_bytes > args.max_kv_gb * 1e9:
                        print("%-3d %-3d %-3d %-3d %-6d  skipped: K+V %.1f GB > --max-kv-gb" % (
                            b, hq, hkv, sq, sk, kv_bytes / 1e9), flush=True)
                        continue
                    g = torch.Generator(device="cuda").manual_seed(1)
                    q = torch.randn(b, hq, sq, d, device="cuda", dtype=dtype, generator=g)
                    k = torch.randn(b, hkv, sk, d, device="cuda", dtype=dtype, generator=g)
                    v = torch.randn(b, hkv, sk, d, device="cuda", dtype=dtype, generator=g)
                    fns, names, notes = [], [], {}
                    ref = lt.attention_reference_f32(q, k, v, False)
                    torch_out = None
                    for _, be in DECODE_BACKENDS:
                        try:
                            torch_out = sdpa_gqa(q, k, v, be)
                            break
                        except Exception:  # noqa: BLE001 (a backend refusing the shape)
                            continue
                    if torch_out is None and hq != hkv:
                        # No backend takes enable_gqa (an older torch): the error yardstick
                        # from K and V expanded to Hq heads (not timed).
                        rep = hq // hkv
                        torch_out = torch.nn.functional.scaled_dot_product_attention(
                            q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1))
                    for vi, knobs in enumerate(variants):
                        try:
                            op = lt.LoomOp(decode_expression(b, hq, hkv, sq, sk, d, args.dtype),
                                           knobs, {"Q": q, "K": k, "V": v},
                                           use_db=not args.no_db)
                            out = op()
                            torch.cuda.synchronize()
                            if torch_out is None:
                                ok = False
                                msg = "no SDPA backend ran this shape to compare errors with"
                            else:
                                ok, le, te = lt.check_attention(out, torch_out, ref)
                                msg = "max err %.2e vs PyTorch's %.2e (limit 2x)" % (le, te)
                            del out
                            notes[knobs] = op.program.knobs if ok else "FAIL " + msg
                            if ok:
                                fns.append(op)
                                names.append("loom%d" % vi)
                        except (RuntimeError, ValueError) as e:
                            notes[knobs] = "not run: " + first_line(e)
                    del ref, torch_out
                    for name, be in DECODE_BACKENDS:
                        try:
                            sdpa_gqa(q, k, v, be)
                            fns.append((lambda be=be: sdpa_gqa(q, k, v, be)))
                            names.append(name)
                        except Exception:  # noqa: BLE001 (a backend refusing the shape)
                            pass
                    src = torch.empty(kv_bytes, dtype=torch.uint8, device="cuda")
                    dst = torch.empty_like(src)
                    fns.append(lambda: dst.copy_(src))
                    names.append("copy")
                    us = dict(zip(names, lt.time_interleaved(fns, args.reps, args.warmup, flush)))
                    best = min([us[n] for n in names_sdpa if n in us], default=None)
                    copy_gbs = 2 * kv_bytes / (us["copy"] * 1e-6) / 1e9
                    for vi, knobs in enumerate(variants):
                        mine = us.get("loom%d" % vi)
                        ratio = best / mine if best and mine else None
                        kv_gbs = kv_bytes / (mine * 1e-6) / 1e9 if mine else None
                        frac = kv_gbs / copy_gbs if kv_gbs else None
                        note = notes.get(knobs, "")
                        if vi > 0:
                            note = "[ab %s] %s" % (args.ab[vi - 1], note)
                        print("%-3d %-3d %-3d %-3d %-6d  %8s %8s %8s %8s %8.1f  %9s %8s %8.0f %6s  %s"
                              % (b, hq, hkv, sq, sk, fmt(mine), fmt(us.get("flash")),
                                 fmt(us.get("efficient")), fmt(us.get("cudnn")), us["copy"],
                                 fmt(ratio, "%.2f"), fmt(kv_gbs, "%.0f"), copy_gbs,
                                 fmt(frac, "%.2f"), note), flush=True)
                        summary[knobs].append((ratio, frac, sk))
                    fns = op = q = k = v = src = dst = None
                    torch.cuda.empty_cache()
    for vi, knobs in enumerate(variants):
        rows = summary[knobs]
        ratios = [r for r, _, _ in rows if r is not None]
        fracs = [f for _, f, sk in rows if f is not None and sk >= 8192]
        print("# decode summary%s: %d points, loom/best-SDPA %s, K/V bandwidth / copy (Sk >= 8k) %s"
              % (" [ab %s]" % args.ab[vi - 1] if vi else "", len(rows),
                 "min %.2f median %.2f max %.2f" % (min(ratios), sorted(ratios)[len(ratios) // 2],
                                                      max(ratios)) if ratios else "-",
                 "min %.2f median %.2f max %.2f" % (min(fracs), sorted(fracs)[len(fracs) // 2],
                                                      max(fracs)) if fracs else "-"))


def paged_expression(b, hq, hkv, sq, d, pages, page, maxp, dtype, causal=False):
    pool = "[%d,%d,%d,%d]:%s" % (pages, hkv, page, d, dtype)
    return ("attention(Q[%d,%d,%d,%d]:%s, Kc%s, Vc%s, block_table=BT[%d,%d]:i32, "
            "seqlens_k=L[%d]:i32, causal=%s)" % (b, hq, sq, d, dtype, pool, pool, b, maxp, b,
                                                 "true" if causal else "false"))


def with_knob(knobs, extra):
    return ",".join(x for x in (knobs, extra) if x)


def to_pages(x, page, perm):
    """[B, Hkv, Sk, D] -> the pool [B*Sk/page, Hkv, page, D], page (b, slot) at perm[b*maxp+slot]."""
    b, hkv, sk, d = x.shape
    pages = x.view(b, hkv, sk // page, page, d).permute(0, 2, 1, 3, 4).reshape(-1, hkv, page, d)
    # Not empty_like: at B = 1 the reshape is a strided view, whose strides empty_like keeps.
    pool = torch.empty(pages.shape, dtype=pages.dtype, device=pages.device)
    pool[perm] = pages
    return pool


def paged(args, flush):
    """Paged vs contiguous Loom on the decode grid (full-length sequences), SDPA contiguous."""
    page = args.paged
    names_sdpa = [n for n, _ in DECODE_BACKENDS]
    print("# paged KV: page %d, pages shuffled, every sequence Sk keys" % page)
    print("%-6s %-3s %-3s %-3s %-4s %-6s  %9s %9s %9s %8s %8s %8s  %11s %11s %9s  %s" % (
        "causal", "B", "Hq", "Hkv", "Sq", "Sk", "paged_us", "pmma_us", "contig_us", "flash", "effic",
        "cudnn", "paged/contig", "pmma/contig", "paged/best",
        "knobs (paged | paged mma.sync | contiguous) / notes"))
    dtype = lt.TORCH_DTYPES[args.dtype]
    hq, d = args.q_heads, args.head_dim
    summary = []
    points = [(causal, b, hkv, sq, sk) for causal in args.masks for b in args.batches
              for hkv in args.kv_heads for sq in args.sq for sk in args.sk]
    for causal, b, hkv, sq, sk in points:
        mask = "true" if causal else "false"
        if sk % page:
            print("%-6s %-3d %-3d %-3d %-3d %-6d  skipped: Sk not a multiple of the page"
                  % (mask, b, hq, hkv, sq, sk), flush=True)
            continue
        if causal and sq != sk:
            # Loom's causal mask is bottom-right, SDPA's top-left: one mask only at Sq = Sk.
            print("%-6s %-3d %-3d %-3d %-3d %-6d  skipped: causal needs Sq = Sk here"
                  % (mask, b, hq, hkv, sq, sk), flush=True)
            continue
        kv_bytes = 2 * b * hkv * sk * d * 2
        if 2 * kv_bytes > args.max_kv_gb * 1e9:
            print("%-6s %-3d %-3d %-3d %-3d %-6d  skipped: K+V twice %.1f GB > --max-kv-gb"
                  % (mask, b, hq, hkv, sq, sk, kv_bytes / 1e9), flush=True)
            continue
        g = torch.Generator(device="cuda").manual_seed(1)
        q = torch.randn(b, hq, sq, d, device="cuda", dtype=dtype, generator=g)
        k = torch.randn(b, hkv, sk, d, device="cuda", dtype=dtype, generator=g)
        v = torch.randn(b, hkv, sk, d, device="cuda", dtype=dtype, generator=g)
        maxp = sk // page
        perm = torch.randperm(b * maxp, device="cuda", generator=g)
        kc, vc = to_pages(k, page, perm), to_pages(v, page, perm)
        bt = perm.view(b, maxp).to(torch.int32).contiguous()
        lens = torch.full((b,), sk, dtype=torch.int32, device="cuda")
        fns, names, notes = [], [], []
        ref = lt.attention_reference_f32(q, k, v, causal)
        torch_out = None
        for _, be in DECODE_BACKENDS:
            try:
                torch_out = sdpa_gqa_causal(q, k, v, causal, be)
                break
            except Exception:  # noqa: BLE001 (a backend refusing the shape)
                continue
        pexpr = paged_expression(b, hq, hkv, sq, d, b * maxp, page, maxp, args.dtype, causal)
        ptensors = {"Q": q, "Kc": kc, "Vc": vc, "BT": bt, "L": lens}
        # The paged form on its default kernel, on the mma.sync kernel (a column:
        # the wgmma kernel is prefill's default on sm_90a), and the contiguous form.
        # --ab: more knob sets for the paged form alone ("paged+ab1", ..), each
        # reported against the same contiguous time.
        for name, expr, tensors, knobs in (
                ("paged", pexpr, ptensors, args.knobs),
                ("paged_mma", pexpr, ptensors, with_knob(args.knobs, "ATTN_MMA=mma_sync")),
                ("contig", decode_expression(b, hq, hkv, sq, sk, d, args.dtype, causal),
                 {"Q": q, "K": k, "V": v}, args.knobs)) + tuple(
                    ("paged+ab%d" % (i + 1), pexpr, ptensors, with_knob(args.knobs, ab))
                    for i, ab in enumerate(args.ab)):
            if name == "paged_mma" and not args.mma_column:
                continue
            try:
                op = lt.LoomOp(expr, knobs, tensors, use_db=not args.no_db)
                out = op()
                torch.cuda.synchronize()
                if torch_out is None:
                    notes.append(name + ": no SDPA output to compare errors with")
                    continue
                ok, le, te = lt.check_attention(out, torch_out, ref)
                if not ok:
                    notes.append("%s FAIL max err %.2e vs PyTorch's %.2e" % (name, le, te))
                    continue
                fns.append(op)
                names.append(name)
                notes.append(op.program.knobs)
            except (RuntimeError, ValueError) as e:
                notes.append(name + " not run: " + first_line(e))
        del ref, torch_out
        for name, be in DECODE_BACKENDS:
            try:
                sdpa_gqa_causal(q, k, v, causal, be)
                fns.append((lambda be=be: sdpa_gqa_causal(q, k, v, causal, be)))
                names.append(name)
            except Exception:  # noqa: BLE001 (a backend refusing the shape)
                pass
        us = dict(zip(names, lt.time_interleaved(fns, args.reps, args.warmup, flush)))
        best = min([us[n] for n in names_sdpa if n in us], default=None)
        ratio = us["paged"] / us["contig"] if "paged" in us and "contig" in us else None
        r_mma = (us["paged_mma"] / us["contig"]
                 if "paged_mma" in us and "contig" in us else None)
        vs_best = best / us["paged"] if best and "paged" in us else None
        print("%-6s %-3d %-3d %-3d %-4d %-6d  %9s %9s %9s %8s %8s %8s  %11s %11s %9s  %s" % (
            mask, b, hq, hkv, sq, sk, fmt(us.get("paged")), fmt(us.get("paged_mma")),
            fmt(us.get("contig")), fmt(us.get("flash")), fmt(us.get("efficient")),
            fmt(us.get("cudnn")), fmt(ratio, "%.3f"), fmt(r_mma, "%.3f"),
            fmt(vs_best, "%.2f"), " | ".join(notes)), flush=True)
        summary.append(ratio)
        for i, ab in enumerate(args.ab):
            n = "paged+ab%d" % (i + 1)
            if n in us and "contig" in us:
                print("    [ab %s] paged %s us, paged/contig %.3f, vs the default paged %.3f"
                      % (ab, fmt(us[n]), us[n] / us["contig"],
                         us[n] / us["paged"] if "paged" in us else float("nan")), flush=True)
        fns = op = q = k = v = kc = vc = None
        torch.cuda.empty_cache()
    ratios = [r for r in summary if r is not None]
    print("# paged summary (page %d): %d points, paged/contiguous time %s (bar <= 1.10)" % (
        page, len(summary), "min %.3f median %.3f max %.3f" % (
            min(ratios), sorted(ratios)[len(ratios) // 2], max(ratios)) if ratios else "-"))


VARLEN_MIXES = [[4096, 2048, 1024, 512, 256, 128], [1023, 777, 3001, 129, 2048, 1500],
                [8192] + [512] * 8]


def sdpa_gqa_causal(q, k, v, causal, backend):
    """SDPA through one backend, GQA by enable_gqa (or, where the backend refuses it, K and V
    expanded to Q's heads); causal is top-left (Sq = Sk here)."""
    from torch.nn.attention import sdpa_kernel
    with sdpa_kernel(backend):
        if q.shape[1] == k.shape[1]:
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        try:
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                                    enable_gqa=True)
        except RuntimeError:
            g = q.shape[1] // k.shape[1]
            return torch.nn.functional.scaled_dot_product_attention(
                q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1), is_causal=causal)


def varlen(args, flush):
    """Varlen Loom (default kernel and mma.sync) vs padded-batch Loom (default and mma.sync)
    and SDPA flash, padded."""
    dtype = lt.TORCH_DTYPES[args.dtype]
    hq, hkv = args.varlen_heads
    d = args.head_dim
    mixes = [[int(x) for x in m.split(",")] for m in args.mixes] if args.mixes else VARLEN_MIXES
    print("# varlen: Hq %d, Hkv %d, D %d" % (hq, hkv, d))
    print("%-6s %-34s  %9s %9s %9s %9s %9s  %8s %8s %8s  %s" % (
        "causal", "lengths", "varlen_us", "vmma_us", "pad_us", "pad_mma", "fa2_pad", "vs_pad",
        "vs_mma", "vmma_pad",
        "notes (vs_pad: varlen / (padded x real/padded pairs), vs_mma: the same over the padded "
        "mma.sync, vmma_pad: varlen on mma.sync over the padded default; bar <= 1.10)"))
    summary = []
    for causal in args.masks:
        for lens in mixes:
            b, m, t = len(lens), max(lens), sum(lens)
            g = torch.Generator(device="cuda").manual_seed(1)
            qp = torch.randn(b, hq, m, d, device="cuda", dtype=dtype, generator=g)
            kp = torch.randn(b, hkv, m, d, device="cuda", dtype=dtype, generator=g)
            vp = torch.randn(b, hkv, m, d, device="cuda", dtype=dtype, generator=g)
            pack = lambda x: torch.cat([x[i, :, :n].transpose(0, 1) for i, n in enumerate(lens)]
                                       ).contiguous()  # noqa: E731
            q, k, v = pack(qp), pack(kp), pack(vp)
            cu = torch.tensor([0] + list(__import__("itertools").accumulate(lens)),
                              dtype=torch.int32, device="cuda")
            c = "true" if causal else "false"
            vexpr = ("attention(Q[%d,%d,%d]:%s, K[%d,%d,%d]:%s, V[%d,%d,%d]:%s, cu_seqlens_q=CQ[%d]:i32, "
                     "cu_seqlens_k=CK[%d]:i32, max_seqlen_q=%d, causal=%s)" % (
                         t, hq, d, args.dtype, t, hkv, d, args.dtype, t, hkv, d, args.dtype, b + 1,
                         b + 1, m, c))

            def tq(hh):
                return "[%d,%d,%d,%d]:%s" % (b, hh, m, d, args.dtype)
            pexpr = "attention(Q%s, K%s, V%s, causal=%s)" % (tq(hq), tq(hkv), tq(hkv), c)
            fns, names, notes = [], [], []
            refs = []
            for i, n in enumerate(lens):
                qi, ki, vi = (x[i:i + 1, :, :n] for x in (qp, kp, vp))
                refs.append((lt.attention_reference_f32(qi, ki, vi, causal),
                             sdpa_gqa_causal(qi, ki, vi, causal, SDPBackend.FLASH_ATTENTION)))
            # --ab: more varlen kernels (each knob set on top of --knobs, '+' for ','), the
            # padded reference keeping --knobs alone.
            for name, knobs in (("varlen", args.knobs),
                                ("vmma", with_knob(args.knobs, "ATTN_MMA=mma_sync"))) + tuple(
                                    ("ab%d" % i, with_knob(args.knobs, ab.replace("+", ",")))
                                    for i, ab in enumerate(args.ab)):
                try:
                    op = lt.LoomOp(vexpr, knobs, {"Q": q, "K": k, "V": v, "CQ": cu, "CK": cu},
                                   use_db=False)
                    out = op()
                    torch.cuda.synchronize()
                    ok = True
                    worst = (0.0, 0.0)
                    for i, n in enumerate(lens):
                        s0 = int(cu[i])
                        ref, tor = refs[i]
                        got = out[s0:s0 + n].transpose(0, 1).unsqueeze(0)
                        good, le, te = lt.check_attention(got, tor, ref)
                        ok = ok and good
                        worst = max(worst, (le, te))
                    if ok:
                        fns.append(op)
                        names.append(name)
                        notes.append(op.program.knobs)
                    else:
                        notes.append("%s FAIL max err %.2e vs PyTorch's %.2e" % ((name,) + worst))
                except (RuntimeError, ValueError) as e:
                    notes.append(name + " not run: " + first_line(e))
            refs = None
            for name, knobs in (("pad", args.knobs),
                                ("pad_mma", with_knob(args.knobs, "ATTN_MMA=mma_sync"))):
                try:
                    pop = lt.LoomOp(pexpr, knobs, {"Q": qp, "K": kp, "V": vp}, use_db=not args.no_db)
                    fns.append(pop)
                    names.append(name)
                except (RuntimeError, ValueError) as e:
                    notes.append(name + " not run: " + first_line(e))
            fns.append(lambda: sdpa_gqa_causal(qp, kp, vp, causal, SDPBackend.FLASH_ATTENTION))
            names.append("fa2")
            us = dict(zip(names, lt.time_interleaved(fns, args.reps, args.warmup, flush)))
            if causal:
                real = sum(n * (n + 1) / 2 for n in lens)
                padded = b * m * (m + 1) / 2
            else:
                real = sum(n * n for n in lens)
                padded = b * m * m
            frac = real / padded
            r_pad = us["varlen"] / (us["pad"] * frac) if "varlen" in us and "pad" in us else None
            r_mma = (us["varlen"] / (us["pad_mma"] * frac)
                     if "varlen" in us and "pad_mma" in us else None)
            r_vmma = us["vmma"] / (us["pad"] * frac) if "vmma" in us and "pad" in us else None
            r_ab = [us["ab%d" % i] / (us["pad"] * frac) if "ab%d" % i in us and "pad" in us
                    else None for i in range(len(args.ab))]
            print("%-6s %-34s  %9s %9s %9s %9s %9s  %8s %8s %8s  %s" % (
                c, ",".join(map(str, lens))[:34], fmt(us.get("varlen")), fmt(us.get("vmma")),
                fmt(us.get("pad")), fmt(us.get("pad_mma")), fmt(us.get("fa2")),
                fmt(r_pad, "%.3f"), fmt(r_mma, "%.3f"), fmt(r_vmma, "%.3f"), " | ".join(notes)),
                flush=True)
            for i, ab in enumerate(args.ab):
                print("%-6s %-34s  %9s %37s  %8s  varlen %s (over the default varlen: %s)" % (
                    c, "  +ab%d" % i, fmt(us.get("ab%d" % i)), "", fmt(r_ab[i], "%.3f"), ab,
                    fmt(us["ab%d" % i] / us["varlen"] if "ab%d" % i in us and "varlen" in us
                        else None, "%.3f")), flush=True)
            summary.append((r_pad, r_mma, r_vmma) + tuple(r_ab))
            fns = op = q = k = v = qp = kp = vp = None
            torch.cuda.empty_cache()
    for i, what in ((0, "padded default"), (1, "padded mma.sync"),
                    (2, "padded default, varlen on mma.sync")) + tuple(
                        (3 + j, "padded default, varlen with " + ab) for j, ab in enumerate(args.ab)):
        rs = [x[i] for x in summary if x[i] is not None]
        print("# varlen summary vs %s: %s" % (what, "min %.3f median %.3f max %.3f" % (
            min(rs), sorted(rs)[len(rs) // 2], max(rs)) if rs else "-"))


def ladder(args, flush):
    l = loom.ladder(args.ladder, args.shape, args.dtype, args.causal)
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
    p.add_argument("--masks", nargs="+", default=None, choices=["false", "true"],
                   help="the causal masks (default: false true; paged mode: false; causal paged "
                        "points need Sq = Sk)")
    p.add_argument("--seqlens", type=int, nargs="+", default=[512, 1024, 2048, 4096, 8192, 16384])
    p.add_argument("--dtype", default="", choices=["", "bf16", "f16"])
    p.add_argument("--knobs", default="", help="Loom knobs for every point (K=V,..); with --variants, under each variant's")
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--no-db", action="store_true", help="Loom's defaults, not the tuning database")
    p.add_argument("--variants", nargs="+", default=[], metavar="NAME:K=V,..",
                   help="A/B mode: these Loom knob sets per point of the table (defaults, no "
                   "tuning database), timed interleaved with cuDNN")
    p.add_argument("--prewarm", type=int, default=0, metavar="JOBS",
                   help="A/B mode, and --decode with --no-db: first compile every point's "
                   "programs in JOBS processes (fills the cubin cache)")
    p.add_argument("--ladder", default="", help="run a ladder (flash) with an FA2 column")
    p.add_argument("--shape", default="", help="ladder shape BxHxSxD (default 4x16x4096x128)")
    p.add_argument("--causal", action="store_true", help="ladder: causal mask")
    p.add_argument("--decode", action="store_true",
                   help="the decode grid (Sq new tokens against a KV cache of Sk keys)")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    p.add_argument("--kv-heads", type=int, nargs="+", default=[32, 8])
    p.add_argument("--sq", type=int, nargs="+", default=[1, 4])
    p.add_argument("--sk", type=int, nargs="+", default=[8192, 32768])
    p.add_argument("--ab", nargs="+", default=[], metavar="KNOBS",
                   help="decode, varlen and paged: more Loom knob sets (each on top of --knobs; varlen: "
                        "'+' separates knobs, and only the varlen kernel takes them, the padded "
                        "reference keeps --knobs), one row each per point, timed in the same "
                        "interleaved run")
    p.add_argument("--q-heads", type=int, default=32)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--varlen", action="store_true",
                   help="varlen mode: packed sequences vs the padded batch")
    p.add_argument("--paged", type=int, default=0, metavar="PAGE",
                   help="paged KV mode: the decode grid, paged (pages of PAGE keys) vs contiguous")
    p.add_argument("--mma-column", action="store_true",
                   help="paged: also time the paged form on the mma.sync kernel")
    p.add_argument("--mixes", nargs="+", default=[], metavar="L1,L2,..",
                   help="varlen: the length mixes (default: three mixes of 6-9 sequences)")
    p.add_argument("--varlen-heads", type=int, nargs=2, default=[16, 16], metavar=("HQ", "HKV"),
                   help="varlen: query and key/value heads (default 16 16)")
    p.add_argument("--gqa", nargs="+", default=[], metavar="HQ:HKV",
                   help="GQA/MQA prefill: these head groupings at --head-dim over --seqlens "
                        "(16384 tokens), against SDPA's backends with enable_gqa")
    p.add_argument("--max-kv-gb", type=float, default=20.0,
                   help="decode: skip points whose K and V exceed this many GB")
    args = p.parse_args()
    if args.masks is None:
        args.masks = ["false"] if args.paged else ["false", "true"]
    args.masks = [m == "true" for m in args.masks]
    if not torch.cuda.is_available():
        sys.exit("attention_bench.py needs a CUDA GPU visible to torch")
    flush = lt.L2Flush()
    header(flush, args)
    if args.ladder:
        ladder(args, flush)
    elif args.decode:
        args.dtype = args.dtype or "bf16"
        decode(args, flush)
    elif args.paged:
        args.dtype = args.dtype or "bf16"
        paged(args, flush)
    elif args.varlen:
        args.dtype = args.dtype or "bf16"
        varlen(args, flush)
    elif args.variants:
        args.dtype = args.dtype or "bf16"
        ab(args, flush)
    elif args.gqa:
        args.dtype = args.dtype or "bf16"
        gqa_table(args, flush)
    else:
        args.dtype = args.dtype or "bf16"
        table(args, flush)


if __name__ == "__main__":
    main()
