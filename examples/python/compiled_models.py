#!/usr/bin/env python3
"""Stock Hugging Face models under torch.compile(backend="loom"), against eager PyTorch and
torch.compile's default backend (Inductor).

Two models, built from configs with random weights (nothing downloaded), as a user has
them: a Llama-architecture decoder (the one of examples/python/llama.py) and a
BERT-architecture encoder, both with transformers' own SDPA attention. Nothing in the
models is changed: the loom backend finds their GEMMs and attention in the graphs Dynamo
captures (loom.explain() lists what it took and why it left the rest). For each model the
script

1. checks the outputs of the three (eager, Inductor, Loom) against an f32 run of the same
   weights: Loom's max error at most twice eager bf16's (docs/verification.md's rule);
2. counts the calls the loom backend put on Loom against the model's nn.Linear modules
   and attention layers (every one of them, or it says which not and why);
3. times, interleaved with CUDA events (median; with --cudagraphs both backends also
   with mode="reduce-overhead"): the Llama's prefill and one decode step
   against the KV cache of that prefill (a fresh copy of the cache per call, made outside
   the timed region), and the BERT's forward.

With --dynamic, the Llama's prefill is compiled with dynamic=True and run at three token
counts: one graph for all three, the linears on Loom's run-time-M kernel (one kernel per
weight shape, whatever the count), each count's logits checked, and the calls of a new
count timed against eager and Inductor (also dynamic).

  python3 examples/python/compiled_models.py [--layers 8] [--seq 1024] [--reps 10] [--only llama|bert]
                                            [--cudagraphs] [--dynamic]
"""
import argparse
import copy
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "python"))
import torch  # noqa: E402
import loom  # noqa: E402
from transformers import BertConfig, BertModel, LlamaConfig, LlamaForCausalLM  # noqa: E402

from timing import time_interleaved  # noqa: E402  (examples/python/timing.py)


def check(name, outs, ref):
    """outs: {variant: tensor}; the 2x rule against eager bf16 for every Loom variant."""
    errs = {k: (v.float() - ref).abs().max().item() for k, v in outs.items()}
    ok = all(errs[k] <= 2 * errs["eager"] for k in errs if k.startswith("loom"))
    print("%s: max error against f32 — %s: %s" % (
        name, ", ".join("%s %.4g" % kv for kv in errs.items()), "PASS" if ok else "FAIL"))
    return ok


def coverage(text, n_linear, n_attn):
    """Counts, from loom.explain()'s text, the linear and attention calls on Loom."""
    lines = [l.strip() for l in text.splitlines()]
    on = [l for l in lines if l.startswith("loom:")]
    lin = sum(1 for l in on if ": linear" in l)
    att = sum(1 for l in on if "scaled_dot_product_attention" in l)
    off = [l for l in lines if l.startswith("inductor:")]
    print("  on Loom: %d linear (of %d nn.Linear), %d attention (of %d layers); left to Inductor: %d%s" % (
        lin, n_linear, att, n_attn, len(off), "".join("\n    " + l for l in off)))
    fused = sorted({l.split(": ", 2)[-1] for l in on if "gemm_epilogue" in l})
    if fused:
        print("  fused epilogues: " + "; ".join(fused))
    return lin == n_linear and att == n_attn


def variants(model, cudagraphs):
    torch._dynamo.reset()
    v = {"eager": model,
         "inductor": torch.compile(model),
         "loom": torch.compile(model, backend="loom")}
    if cudagraphs:  # both backends with mode="reduce-overhead": the graph replayed whole
        v["inductor-cg"] = torch.compile(model, mode="reduce-overhead")
        v["loom-cg"] = torch.compile(model, backend="loom", mode="reduce-overhead")
    return v


def profile(what, fns, rows=12):
    """The GPU kernels of one call of each fn (torch.profiler), by total device time: where
    a backend's time goes."""
    from torch.profiler import ProfilerActivity, profile as prof
    for name, f in fns.items():
        f()
        torch.cuda.synchronize()
        with prof(activities=[ProfilerActivity.CUDA]) as p:
            f()
            torch.cuda.synchronize()
        total = sum(e.device_time_total for e in p.key_averages())
        print("  profile %s, %s: %d kernels' device time %.0f us" % (
            what, name, sum(e.count for e in p.key_averages()), total))
        for e in sorted(p.key_averages(), key=lambda e: -e.device_time_total)[:rows]:
            print("    %8.0f us %4d x  %s" % (e.device_time_total, e.count, e.key[:110]))


def report_times(what, names, times):
    t = dict(zip(names, times))
    line = "  %s: " % what + ", ".join("%s %.0f us" % (n, t[n]) for n in names)
    line += "; loom/eager %.2fx, loom/inductor %.2fx" % (t["eager"] / t["loom"], t["inductor"] / t["loom"])
    if "loom-cg" in t:
        line += ", loom-cg/inductor-cg %.2fx" % (t["inductor-cg"] / t["loom-cg"])
    print(line + " (speedups)")


def llama_models(args):
    """The Llama-architecture config and its f32 and bf16 models (the same random weights)."""
    cfg = LlamaConfig(hidden_size=args.hidden, intermediate_size=4 * args.hidden,
                      num_hidden_layers=args.layers, num_attention_heads=args.hidden // 128,
                      num_key_value_heads=max(1, args.hidden // 512), vocab_size=32000,
                      max_position_embeddings=max(4096, 2 * args.seq), attn_implementation="sdpa")
    torch.manual_seed(0)
    m32 = LlamaForCausalLM(cfg).cuda().eval()
    return cfg, m32, copy.deepcopy(m32).to(torch.bfloat16)


def llama(args):
    cfg, m32, m16 = llama_models(args)
    ids = torch.randint(0, cfg.vocab_size, (1, args.seq), device="cuda")
    print("# Llama-architecture: %d layers, hidden %d, MLP %d, %d/%d heads of 128, vocab %d, bf16, "
          "1 x %d tokens" % (args.layers, args.hidden, 4 * args.hidden, cfg.num_attention_heads,
                             cfg.num_key_value_heads, cfg.vocab_size, args.seq))
    vs = variants(m16, args.cudagraphs)
    ok = True
    with torch.no_grad():
        ref = m32(ids, use_cache=False).logits.float()
        t0 = time.time()
        outs = {}
        for k, f in vs.items():
            loom.explain(reset=True)
            outs[k] = f(ids, use_cache=False).logits.clone()
            if k == "loom":
                text = loom.explain(reset=True)
        print("  first calls (compiles included): %.0f s" % (time.time() - t0))
        ok &= check("prefill logits", outs, ref)
        n_linear = sum(isinstance(x, torch.nn.Linear) for x in m16.modules())
        ok &= coverage(text, n_linear, args.layers)

        # Decode: one token against a copy of the prefill's cache (made before each call).
        out = m16(ids, use_cache=True)
        cache, nxt = out.past_key_values, out.logits[:, -1:].argmax(-1)
        pending = {}

        def fresh(i):
            pending[i] = copy.deepcopy(cache)

        names = list(vs)
        dec = [lambda i=i: vs[names[i]](nxt, past_key_values=pending[i], use_cache=True)
               for i in range(len(names))]
        douts = {}
        for i, k in enumerate(names):
            loom.explain(reset=True)
            fresh(i)
            douts[k] = dec[i]().logits.clone()
            if k == "loom":
                dtext = loom.explain(reset=True)
        ok &= check("decode-step logits (vs eager's own step, f32 reference from the f32 model "
                    "on the same cache)", douts, _decode_ref(m32, cache, nxt))
        ok &= coverage(dtext, n_linear, args.layers)
        pre = time_interleaved([lambda f=f: f(ids, use_cache=False) for f in vs.values()], args.reps)
        dct = time_interleaved(dec, args.reps, before=fresh)
    report_times("prefill", names, pre)
    report_times("decode step", names, dct)
    if args.profile:
        with torch.no_grad():
            profile("prefill", {k: (lambda f=vs[k]: f(ids, use_cache=False)) for k in ("inductor", "loom")})
    return ok


def llama_dynamic(args):
    """The Llama's prefill under dynamic=True at three token counts (see the docstring)."""
    cfg, m32, m16 = llama_models(args)
    counts = [args.seq, args.seq // 2 + 37, args.seq // 4 + 5]
    print("# Llama-architecture, dynamic=True: %d layers, hidden %d, bf16, prefill at %s tokens"
          % (args.layers, args.hidden, counts))
    torch._dynamo.reset()
    loom.clear_cache()
    vs = {"eager": m16, "inductor": torch.compile(m16, dynamic=True),
          "loom": torch.compile(m16, backend="loom", dynamic=True)}
    ok = True
    loom.explain(reset=True)
    with torch.no_grad():
        for n in counts:
            ids = torch.randint(0, cfg.vocab_size, (1, n), device="cuda")
            ref = m32(ids, use_cache=False).logits.float()
            t0 = time.time()
            outs = {k: f(ids, use_cache=False).logits.clone() for k, f in vs.items()}
            print("  %d tokens: first calls %.1f s" % (n, time.time() - t0))
            ok &= check("  %d-token logits" % n, outs, ref)
            t = time_interleaved([lambda f=f: f(ids, use_cache=False) for f in vs.values()], args.reps)
            report_times("prefill at %d tokens" % n, list(vs), t)
    from loom import compile_backend
    graphs = len(compile_backend._reports)
    text = loom.explain(reset=True)
    lines = [l.strip() for l in text.splitlines()]
    runtime = sum("M at run time" in l for l in lines)
    linears = sum(1 for l in lines if l.startswith("loom:") and ": linear" in l)
    gemm_kernels = [k[0] for k in loom.cache_info()["kernels"] if not k[0].startswith("attention")]
    print("  graphs compiled by the loom backend: %d; linears on Loom %d (%d with M at run time); "
          "GEMM kernels compiled for the three counts: %d, with M at run time: %d" % (
              graphs, linears, runtime, len(gemm_kernels), sum("[M," in k for k in gemm_kernels)))
    for l in lines:
        if l.startswith("inductor:"):
            print("    " + l)
    return ok


def _decode_ref(m32, cache, nxt):
    """The f32 model's decode-step logits on the bf16 prefill's cache (upcast)."""
    c = copy.deepcopy(cache)
    for layer in getattr(c, "layers", []):
        for name in ("keys", "values"):
            t = getattr(layer, name, None)
            if isinstance(t, torch.Tensor):
                setattr(layer, name, t.float())
    return m32(nxt, past_key_values=c, use_cache=True).logits.float()


def bert(args):
    cfg = BertConfig(hidden_size=1024, intermediate_size=4096, num_hidden_layers=args.layers,
                     num_attention_heads=16, vocab_size=30522, max_position_embeddings=512,
                     attn_implementation="sdpa")
    torch.manual_seed(0)
    m32 = BertModel(cfg).cuda().eval()
    m16 = copy.deepcopy(m32).to(torch.bfloat16)
    ids = torch.randint(0, cfg.vocab_size, (args.bert_batch, 512), device="cuda")
    print("# BERT-architecture: %d layers, hidden 1024, MLP 4096, 16 heads of 64, bf16, %d x 512 "
          "tokens" % (args.layers, args.bert_batch))
    vs = variants(m16, args.cudagraphs)
    ok = True
    with torch.no_grad():
        ref = m32(ids).last_hidden_state.float()
        outs = {}
        for k, f in vs.items():
            loom.explain(reset=True)
            outs[k] = f(ids).last_hidden_state.clone()
            if k == "loom":
                text = loom.explain(reset=True)
        ok &= check("last hidden state", outs, ref)
        n_linear = sum(isinstance(x, torch.nn.Linear) for x in m16.modules())
        ok &= coverage(text, n_linear, args.layers)
        t = time_interleaved([lambda f=f: f(ids) for f in vs.values()], args.reps)
    report_times("forward", list(vs), t)
    if args.profile:
        with torch.no_grad():
            profile("forward", {k: (lambda f=vs[k]: f(ids)) for k in ("inductor", "loom")})
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--bert-batch", type=int, default=8)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--only", choices=("llama", "bert"))
    ap.add_argument("--profile", action="store_true",
                    help="print the GPU kernels of one Inductor and one loom call (torch.profiler)")
    ap.add_argument("--cudagraphs", action="store_true",
                    help="also time both backends with mode='reduce-overhead' (CUDA graphs)")
    ap.add_argument("--dynamic", action="store_true",
                    help="the Llama's prefill under dynamic=True at three token counts")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("compiled_models.py needs a CUDA GPU: %s" % (loom.no_device_reason() or "torch sees none"))
        return 0
    print("# %s, torch %s" % (torch.cuda.get_device_name(), torch.__version__))
    ok = True
    if args.dynamic:
        ok &= llama_dynamic(args)
        print("RESULT: %s" % ("PASS" if ok else "FAIL"))
        return 0 if ok else 1
    if args.only in (None, "llama"):
        ok &= llama(args)
    if args.only in (None, "bert"):
        ok &= bert(args)
    print("RESULT: %s" % ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
