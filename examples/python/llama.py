#!/usr/bin/env python3
"""A Hugging Face Llama-architecture model running its GEMMs and attention on Loom.

The model is built from a config with random weights (nothing is downloaded). Every
nn.Linear of the decoder (q/k/v/o, gate/up/down, the LM head) runs `loom.linear`, and
attention runs `loom.attention` through transformers' attention interface (registered as
"loom"; GQA natively, the causal mask aligned bottom-right so a prefill chunk and a
decode step against the KV cache both mask correctly). The script then

1. checks the logits of a prefill against the stock model (cuBLAS + SDPA) on the same
   weights: both against an f32 run of the same model, Loom's max error at most twice the
   stock 16-bit model's own (the error rule of docs/verification.md), and the greedy next
   tokens equal;
2. times a prefill (B x S tokens) and a decode step (one token per sequence against the
   KV cache of that prefill), Loom and stock interleaved, CUDA events, median;
3. prints how many linear and attention calls went to Loom (all of them, or it says which
   did not and why).

Needs a GPU, torch, transformers and the loom package (`pip install --no-build-isolation .`
or LOOM_PY_PATH=<cmake build>). Usage:
  python3 examples/python/llama.py [--layers 8] [--hidden 2048] [--batch 1] [--seq 1024]
"""
import argparse
import copy
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "python"))
import torch  # noqa: E402
import loom  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask  # noqa: E402
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS  # noqa: E402

from timing import time_interleaved  # noqa: E402  (examples/python/timing.py)

CALLS = {"linear": 0, "attention": 0, "attention_fallback": 0}
FALLBACK_WHY = set()


def loom_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                   **kwargs):
    """transformers' attention interface on Loom: query [B, Hq, Sq, D], key and value
    [B, Hkv, Sk, D] (the KV cache included); returns [B, Sq, Hq, D]."""
    if attention_mask is not None or dropout:
        # A padded batch's mask: not one Loom's attention takes (it takes the causal forms).
        CALLS["attention_fallback"] += 1
        FALLBACK_WHY.add("an explicit attention mask (padding)" if attention_mask is not None
                         else "dropout")
        out = torch.nn.functional.scaled_dot_product_attention(
            query, key, value, attn_mask=attention_mask, scale=scaling, enable_gqa=True)
        return out.transpose(1, 2).contiguous(), None
    CALLS["attention"] += 1
    sq = query.shape[2]
    # Sq = 1 (decode) sees every cached key; a prefill chunk masks bottom-right (its queries
    # are the last Sq positions of the Sk keys), which is top-left when Sq = Sk.
    causal = False if sq == 1 else "bottom_right"
    out = loom.attention(query.contiguous(), key.contiguous(), value.contiguous(),
                         causal=causal, scale=scaling)
    return out.transpose(1, 2).contiguous(), None


def loom_linear_forward(mod):
    def forward(x):
        CALLS["linear"] += 1
        return loom.linear(x.contiguous(), mod.weight, mod.bias)
    return forward


def loom_model(model):
    """A copy of the model whose every nn.Linear runs loom.linear and whose attention is
    "loom" (the registered interface above)."""
    m = copy.deepcopy(model)
    for mod in m.modules():
        if isinstance(mod, torch.nn.Linear):
            mod.forward = loom_linear_forward(mod)
    m.set_attn_implementation("loom")
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--intermediate", type=int, default=8192)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("llama.py needs a CUDA GPU: %s" % (loom.no_device_reason() or "torch sees none"))
        return 0

    ALL_ATTENTION_FUNCTIONS.register("loom", loom_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register("loom", sdpa_mask)  # None where causal suffices
    cfg = LlamaConfig(hidden_size=args.hidden, intermediate_size=args.intermediate,
                      num_hidden_layers=args.layers, num_attention_heads=args.heads,
                      num_key_value_heads=args.kv_heads, vocab_size=args.vocab,
                      max_position_embeddings=max(4096, 2 * args.seq), attn_implementation="sdpa")
    torch.manual_seed(0)
    model32 = LlamaForCausalLM(cfg).cuda().eval()  # random weights, f32
    model = copy.deepcopy(model32).to(torch.bfloat16)
    ids = torch.randint(0, args.vocab, (args.batch, args.seq), device="cuda")
    print("# Llama-architecture model: %d layers, hidden %d, MLP %d, %d/%d heads of %d, vocab %d; "
          "bf16; batch %d x %d tokens; %s, torch %s" % (
              args.layers, args.hidden, args.intermediate, args.heads, args.kv_heads,
              args.hidden // args.heads, args.vocab, args.batch, args.seq,
              torch.cuda.get_device_name(), torch.__version__))

    fast = loom_model(model)

    # 1. Logits of a prefill.
    with torch.no_grad():
        ref = model32(ids).logits.float()
        stock = model(ids).logits.float()
        CALLS.update(linear=0, attention=0, attention_fallback=0)
        mine = fast(ids).logits.float()
        calls = dict(CALLS)
    se = (stock - ref).abs().max().item()
    le = (mine - ref).abs().max().item()
    same_tokens = (mine[:, -1].argmax(-1) == stock[:, -1].argmax(-1)).float().mean().item()
    ok = math.isfinite(le) and le <= 2 * se
    print("logits: Loom max error %.4g, stock bf16 %.4g (against the f32 model): %s; greedy next "
          "token equal for %.0f%% of sequences" % (le, se, "PASS" if ok else "FAIL", 100 * same_tokens))
    n_linear = sum(isinstance(m, torch.nn.Linear) for m in model.modules())
    n_attn = args.layers
    print("calls on Loom in one prefill: %d linear (of %d nn.Linear modules), %d attention (of %d "
          "layers), %d attention fallbacks%s" % (
              calls["linear"], n_linear, calls["attention"], n_attn, calls["attention_fallback"],
              (" (%s)" % ", ".join(sorted(FALLBACK_WHY))) if FALLBACK_WHY else ""))
    all_loom = calls["linear"] == n_linear and calls["attention"] == n_attn

    # 2. Timings, Loom and stock interleaved: a prefill, and a decode step (one token per
    # sequence) against a copy of that prefill's KV cache.
    with torch.no_grad():
        out = model(ids, use_cache=True)
        cache = out.past_key_values
        nxt = out.logits[:, -1:].argmax(-1)

        def prefill(m):
            return lambda: m(ids, use_cache=False)

        def decode(m):
            return lambda: m(nxt, past_key_values=copy.deepcopy(cache), use_cache=True)

        stock_pre, loom_pre = time_interleaved([prefill(model), prefill(fast)], args.reps)
        stock_dec, loom_dec = time_interleaved([decode(model), decode(fast)], args.reps)
    print("prefill %d x %d: Loom %.0f us, stock (cuBLAS + SDPA) %.0f us: %.2fx" % (
        args.batch, args.seq, loom_pre, stock_pre, stock_pre / loom_pre))
    print("decode step (cache %d): Loom %.0f us, stock %.0f us: %.2fx (both include the "
          "cache copy and the Python of the model)" % (args.seq, loom_dec, stock_dec,
                                                      stock_dec / loom_dec))
    ok = ok and all_loom
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
