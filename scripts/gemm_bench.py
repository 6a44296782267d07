#!/usr/bin/env python3
"""Loom's GEMMs against what a PyTorch user runs (cuBLAS through torch.matmul / torch.bmm /
F.linear, then PyTorch's elementwise ops), in one process on the GPU machine.

For each Loom expression of a suite (bench/suites/models.txt: one per line, '#' comments)
or given with -c, the same expression is evaluated by PyTorch on the same tensors: the
script reads the expression's calls (matmul, bmm, linear, relu, gelu, silu, add, sub, mul,
max, out=, .T) and maps each onto its torch function. Per shape:

1. verify: Loom's output and PyTorch's 16-bit output against an f32 reference computed by
   PyTorch from the same 16-bit inputs (TF32 off); Loom passes when its max error is at
   most twice PyTorch's own (the rule of docs/verification.md for 16-bit outputs). TF32
   operands: both against the f32 reference, PyTorch with allow_tf32 on. A shape that
   fails is reported and not timed.
2. time: Loom and PyTorch interleaved, a cold L2 before every launch, median of --reps
   (python/loom_torch.py's time_interleaved: the protocol of docs/benchmarking.md).

Prints one row per shape (Loom µs, torch µs, torch/Loom = Loom's speed-up, TFLOP/s, the
kernel family Loom picked) and a summary: geometric mean and the minimum of the ratios.

Build first (GPU machine): ninja -C build loom_py (see python/README.md).
Usage:
  python3 scripts/gemm_bench.py --suite bench/suites/models.txt [--reps 20] [--no-db]
      [--knobs K=V,..] [--match REGEX] [--out results.tsv]
  python3 scripts/gemm_bench.py -c "linear(X[16,4096]:bf16, W[4096,4096]:bf16)"
"""
import argparse
import datetime
import math
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "python"))
import loom_torch as lt  # noqa: E402
from loom_torch import loom_py, torch  # noqa: E402

F = torch.nn.functional
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32,
          "tf32": torch.float32}


# --- the expression, read as a tree -------------------------------------------------------
TOKEN = re.compile(r"\s*(?:(?P<num>[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)|(?P<id>[A-Za-z_]"
                   r"[A-Za-z_0-9]*)|(?P<p>[()\[\],:=.]))")


def tokens(text):
    pos, out = 0, []
    text = text.strip()
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ValueError("cannot read %r at column %d" % (text, pos + 1))
        out.append(m.group("num") or m.group("id") or m.group("p"))
        pos = m.end()
    return out


class Reader:
    """expr := call | tensor | number (docs/cli.md's grammar; sizes must be numbers here)."""

    def __init__(self, text):
        self.t, self.i = tokens(text), 0

    def peek(self, k=0):
        return self.t[self.i + k] if self.i + k < len(self.t) else None

    def take(self, want=None):
        tok = self.peek()
        if tok is None or (want is not None and tok != want):
            raise ValueError("expected %r, got %r" % (want, tok))
        self.i += 1
        return tok

    def expr(self):
        tok = self.take()
        if re.match(r"[0-9]", tok):
            return ("num", float(tok))
        if self.peek() == "(":
            self.take("(")
            args, kw = [], {}
            while True:
                if self.peek(1) == "=":
                    key = self.take()
                    self.take("=")
                    kw[key] = self.take()
                else:
                    args.append(self.expr())
                if self.take() == ")":
                    break
            return ("call", tok, args, kw)
        self.take("[")
        shape = [int(self.take())]
        while self.take() == ",":
            shape.append(int(self.take()))
        self.take(":")
        dtype = self.take()
        transposed = False
        if self.peek() == ".":
            self.take(".")
            self.take("T")
            transposed = True
        return ("tensor", tok, shape, dtype, transposed)


def tensors_of(node, found):
    if node[0] == "tensor":
        found.setdefault(node[1], node)
    elif node[0] == "call":
        for a in node[2]:
            tensors_of(a, found)
    return found


def evaluate(node, env, compute):
    """The expression on torch tensors. compute: the dtype contractions take (the 16-bit
    inputs for the vendor run, f32 for the reference)."""
    if node[0] == "num":
        return node[1]
    if node[0] == "tensor":
        x = env[node[1]].to(compute)
        return x.transpose(-1, -2) if node[4] else x
    _, f, args, kw = node
    vals = [evaluate(a, env, compute) for a in args]
    if f in ("matmul", "bmm", "linear"):
        y = {"matmul": torch.matmul, "bmm": torch.bmm, "linear": F.linear}[f](*vals)
        if "out" in kw:
            y = y.to(DTYPES[kw["out"]])
        return y
    if f == "relu":
        return torch.relu(vals[0])
    if f == "gelu":
        return F.gelu(vals[0])
    if f == "silu":
        return F.silu(vals[0])
    if f in ("add", "sub", "mul", "max"):
        a, b = vals
        return {"add": torch.add, "sub": torch.sub, "mul": torch.mul,
                "max": torch.maximum}[f](a, b if torch.is_tensor(b) else torch.tensor(b, dtype=a.dtype,
                                                                           device=a.device))
    raise ValueError("gemm_bench cannot evaluate %s(...)" % f)


def flops(program):
    return float(program.flops)


def family(program):
    k = dict(kv.split("=", 1) for kv in program.knobs.split(",") if "=" in kv) if isinstance(
        program.knobs, str) else dict(program.knobs)
    return "%s %sx%s%s%s" % (k.get("ATOM", "?"), k.get("BM", "?"), k.get("BN", "?"),
                             " splitk%s" % k["SPLITK"] if k.get("SPLITK", "1") != "1" else "",
                             " swapAB" if k.get("SWAP_AB", "0") == "1" else "")


def bench_one(expr, args, flush):
    tree = Reader(expr).expr()
    ts = tensors_of(tree, {})
    g = torch.Generator(device="cuda").manual_seed(1)
    env = {}
    for name, (_, _, shape, dtype, _) in ts.items():
        # Scaled so that sums over K stay O(1): the error rule compares like with like.
        env[name] = (torch.randn(shape, device="cuda", generator=g) * 0.5).to(DTYPES[dtype])
    tf32 = any(t[3] == "tf32" for t in ts.values())
    op = lt.LoomOp(expr, args.knobs, inputs=env, use_db=not args.no_db)
    vendor_dtype = torch.float32 if tf32 else next(DTYPES[t[3]] for t in ts.values())

    def vendor():
        return evaluate(tree, env, vendor_dtype)

    with torch.no_grad():
        torch.backends.cuda.matmul.allow_tf32 = False
        ref = evaluate(tree, env, torch.float32).float()
        torch.backends.cuda.matmul.allow_tf32 = tf32
        vout = vendor()
        lout = op()
        torch.cuda.synchronize()
        le = (lout.float() - ref).abs().max().item()
        ve = (vout.float() - ref).abs().max().item()
        scale = ref.abs().max().item()
        ok = math.isfinite(le) and le <= 2 * ve
        if not ok:
            return dict(expr=expr, ok=False, loom_err=le, torch_err=ve, scale=scale,
                        family=family(op.program))
        lus, vus = lt.time_interleaved([op, vendor], reps=args.reps, warmup=args.warmup,
                                       flush=flush)
    torch.backends.cuda.matmul.allow_tf32 = False
    return dict(expr=expr, ok=True, loom_us=lus, torch_us=vus, ratio=vus / lus,
                tflops=flops(op.program) / lus * 1e-6, loom_err=le, torch_err=ve,
                family=family(op.program))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", help="a file of expressions, one per line")
    ap.add_argument("-c", dest="exprs", action="append", default=[], help="an expression")
    ap.add_argument("--match", help="only the suite's expressions matching this regex")
    ap.add_argument("--knobs", default="", help="knobs for every expression (K=V,...)")
    ap.add_argument("--no-db", action="store_true", help="the defaults, not the tuning database")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--out", help="also write the rows as tab-separated values here")
    args = ap.parse_args()
    exprs = list(args.exprs)
    if args.suite:
        with open(args.suite) as f:
            exprs += [l.split("#", 1)[0].strip() for l in f if l.split("#", 1)[0].strip()]
    if args.match:
        exprs = [e for e in exprs if re.search(args.match, e)]
    if not exprs:
        ap.error("no expressions: give --suite FILE or -c EXPR")
    flush = lt.L2Flush()
    dev = loom_py.device() or {}
    print("# %s  %s (%s)  torch %s  CUDA %s  driver %s" % (
        datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), dev.get("name", "?"),
        dev.get("arch", "?"), torch.__version__, torch.version.cuda,
        dev.get("driver_version", "?")))
    print("# timing: interleaved, CUDA events, median of %d (warm-up %d); L2: %s"
          % (args.reps, args.warmup, flush.describe()))
    print("# command: %s" % " ".join(sys.argv))
    print("# %-58s %10s %10s %7s %8s  %s" % ("expression", "loom_us", "torch_us", "speedup",
                                             "TFLOP/s", "loom kernel"))
    rows = []
    for e in exprs:
        try:
            r = bench_one(e, args, flush)
        except Exception as ex:  # a refused or failed shape is a row, not the end of the run
            r = dict(expr=e, ok=False, error=str(ex).splitlines()[0] if str(ex) else repr(ex))
        rows.append(r)
        if r["ok"]:
            print("%-60s %10.1f %10.1f %7.3f %8.1f  %s" % (e, r["loom_us"], r["torch_us"],
                                                          r["ratio"], r["tflops"], r["family"]))
        elif "error" in r:
            print("%-60s ERROR %s" % (e, r["error"]))
        else:
            print("%-60s VERIFY FAILED loom err %.3g > 2 x torch err %.3g (|ref| %.3g) %s" % (
                e, r["loom_err"], r["torch_err"], r["scale"], r["family"]))
        sys.stdout.flush()
    good = [r["ratio"] for r in rows if r["ok"]]
    if good:
        gm = math.exp(sum(math.log(x) for x in good) / len(good))
        print("# summary: %d shapes, %d verified and timed; speed-up over PyTorch geomean %.3f, "
              "min %.3f (%s), shapes below 0.95: %d" % (
                  len(rows), len(good), gm, min(good),
                  min((r for r in rows if r["ok"]), key=lambda r: r["ratio"])["expr"],
                  sum(1 for x in good if x < 0.95)))
    else:
        print("# summary: %d shapes, none verified" % len(rows))
    if args.out:
        with open(args.out, "w") as f:
            f.write("expression\tok\tloom_us\ttorch_us\tspeedup\ttflops\tfamily\n")
            for r in rows:
                f.write("%s\t%s\t%s\t%s\t%s\t%s\t%s\n" % (
                    r["expr"], r["ok"], r.get("loom_us", ""), r.get("torch_us", ""),
                    r.get("ratio", ""), r.get("tflops", ""), r.get("family", r.get("error", ""))))
    return 0 if good and len(good) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
