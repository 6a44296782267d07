"""Attention's serving forms on torch tensors: a paged KV cache and packed variable-length
sequences (docs/attention.md, "Serving forms"), as torch.library custom ops
(torch.ops.loom.attention_paged, torch.ops.loom.attention_varlen) with fake
implementations, beside loom.attention.

    out = loom.attention_paged(q, k_cache, v_cache, block_table, seqlens_k, causal=False)
      q [B, Hq, Sq, D]; k_cache, v_cache [P, Hkv, page, D] (FlashInfer's HND layout; an NHD
      cache [P, page, Hkv, D] is k.permute(0, 2, 1, 3).contiguous()); block_table
      [B, maxp] int32 (page numbers); seqlens_k [B] int32 (keys per sequence). causal=True
      is aligned bottom-right per sequence (decode: Sq new tokens after the cached ones).
    out = loom.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                causal=False)
      q [Tq, Hq, D], k and v [Tk, Hkv, D] packed; cu_seqlens_* [B + 1] int32 (the
      sequences' starts, FlashAttention's varlen API); max_seqlen_q an int (the grid is
      built from it: a kernel per value). causal: True = bottom-right per sequence,
      'top_left' as torch's is_causal.

Both run on the mma.sync attention kernel (every target); float16/bfloat16; contiguous
operands. Inference only: the backward raises. return_lse=True also returns the f32
log-sum-exp ([B, Hq, Sq]; varlen: [Tq, Hq]).
"""
from typing import Optional, Tuple

import torch

from .ops import (ATTENTION_BACKWARD_ERROR, _check_scale, _dims, _dtype, _knobs, _launch,
                  _same)

__all__ = ["attention_paged", "attention_varlen"]

# The mask keywords of the expression language for these forms: FlashAttention's
# bottom-right alignment is causal=true; torch's is_causal is top_left.
_CAUSAL = {False: "false", None: "false", True: "true", "none": "false",
           "bottom_right": "true", "top_left": "top_left"}


def _causal(op, causal):
    if isinstance(causal, (bool, type(None))) or causal in ("none", "bottom_right", "top_left"):
        return _CAUSAL[causal]
    raise ValueError("loom.%s: causal=%r; it takes False, True (bottom-right aligned per "
                     "sequence, FlashAttention's), 'bottom_right' or 'top_left'" % (op, causal))


def _index(op, name, t, shape_text):
    if t.dtype != torch.int32:
        raise TypeError("loom.%s: %s has dtype %s; it holds indices: pass it as torch.int32 "
                        "(%s.to(torch.int32)), shape %s" % (op, name, t.dtype, name, shape_text))
    if not t.is_contiguous():
        raise ValueError("loom.%s: %s is not contiguous; pass %s.contiguous()" % (op, name, name))


def _contiguous(op, tensors):
    for n, t in tensors:
        if not t.is_contiguous():
            raise ValueError("loom.%s: %s has strides %s; Loom's attention takes contiguous "
                             "operands: pass %s.contiguous()" % (op, n, list(t.stride()), n))


def _tail(causal, scale, lse):
    args = ["causal=" + causal]
    if scale is not None:
        args.append("scale=" + repr(float(scale)))
    if lse:
        args.append("lse=true")
    return ", ".join(args)


def paged_expression(q, k_cache, v_cache, block_table, seqlens_k, causal="false", scale=None,
                     lse=False):
    op = "attention_paged"
    for n, t, r in (("q", q, 4), ("k_cache", k_cache, 4), ("v_cache", v_cache, 4),
                    ("block_table", block_table, 2), ("seqlens_k", seqlens_k, 1)):
        if t.dim() != r:
            raise ValueError("loom.%s: %s must have rank %d; got shape %s" % (op, n, r, list(t.shape)))
    _same(op, [("q", q), ("k_cache", k_cache), ("v_cache", v_cache)])
    dt = _dtype(op, "q", q, allowed=("f16", "bf16"))
    _contiguous(op, [("q", q), ("k_cache", k_cache), ("v_cache", v_cache)])
    _index(op, "block_table", block_table, "[B, max_pages]")
    _index(op, "seqlens_k", seqlens_k, "[B]")
    b = q.shape[0]
    if block_table.shape[0] != b or seqlens_k.shape[0] != b:
        raise ValueError("loom.%s: block_table %s and seqlens_k %s must have q's batch %d" % (
            op, list(block_table.shape), list(seqlens_k.shape), b))
    return ("attention(Q[%s]:%s, Kc[%s]:%s, Vc[%s]:%s, block_table=BT[%s]:i32, "
            "seqlens_k=L[%s]:i32, %s)" % (
                _dims(q.shape), dt, _dims(k_cache.shape), dt, _dims(v_cache.shape), dt,
                _dims(block_table.shape), _dims(seqlens_k.shape), _tail(causal, scale, lse)))


def varlen_expression(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, causal="false",
                      scale=None, lse=False):
    op = "attention_varlen"
    for n, t, r in (("q", q, 3), ("k", k, 3), ("v", v, 3), ("cu_seqlens_q", cu_seqlens_q, 1),
                    ("cu_seqlens_k", cu_seqlens_k, 1)):
        if t.dim() != r:
            raise ValueError("loom.%s: %s must have rank %d; got shape %s" % (op, n, r, list(t.shape)))
    _same(op, [("q", q), ("k", k), ("v", v)])
    dt = _dtype(op, "q", q, allowed=("f16", "bf16"))
    _contiguous(op, [("q", q), ("k", k), ("v", v)])
    _index(op, "cu_seqlens_q", cu_seqlens_q, "[B + 1]")
    _index(op, "cu_seqlens_k", cu_seqlens_k, "[B + 1]")
    if cu_seqlens_q.shape[0] != cu_seqlens_k.shape[0] or cu_seqlens_q.shape[0] < 2:
        raise ValueError("loom.%s: cu_seqlens_q %s and cu_seqlens_k %s must both be [B + 1], "
                         "B >= 1" % (op, list(cu_seqlens_q.shape), list(cu_seqlens_k.shape)))
    if int(max_seqlen_q) < 1:
        raise ValueError("loom.%s: max_seqlen_q=%r; it is the longest query sequence (>= 1)" % (
            op, max_seqlen_q))
    return ("attention(Q[%s]:%s, K[%s]:%s, V[%s]:%s, cu_seqlens_q=CQ[%s]:i32, "
            "cu_seqlens_k=CK[%s]:i32, max_seqlen_q=%d, %s)" % (
                _dims(q.shape), dt, _dims(k.shape), dt, _dims(v.shape), dt,
                _dims(cu_seqlens_q.shape), _dims(cu_seqlens_k.shape), int(max_seqlen_q),
                _tail(causal, scale, lse)))


def _no_lse(q):
    return torch.empty(0, dtype=torch.float32, device=q.device)


@torch.library.custom_op("loom::attention_paged", mutates_args=())
def _paged_op(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
              block_table: torch.Tensor, seqlens_k: torch.Tensor, causal: str,
              scale: Optional[float], return_lse: bool, knobs: str,
              use_db: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    expr = paged_expression(q, k_cache, v_cache, block_table, seqlens_k, causal, scale, return_lse)
    outs = _launch("attention_paged", expr, {"Q": q, "Kc": k_cache, "Vc": v_cache,
                                             "BT": block_table, "L": seqlens_k},
                   q.device, knobs, use_db)
    return outs["out"], outs["lse"] if return_lse else _no_lse(q)


@_paged_op.register_fake
def _paged_fake(q, k_cache, v_cache, block_table, seqlens_k, causal, scale, return_lse, knobs,
                use_db):
    _check_scale(scale)
    b, hq, sq, _ = q.shape
    return (q.new_empty([b, hq, sq, v_cache.shape[3]]),
            q.new_empty([b, hq, sq] if return_lse else [0], dtype=torch.float32))


@torch.library.custom_op("loom::attention_varlen", mutates_args=())
def _varlen_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
               cu_seqlens_k: torch.Tensor, max_seqlen_q: int, causal: str,
               scale: Optional[float], return_lse: bool, knobs: str,
               use_db: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    expr = varlen_expression(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, causal, scale,
                             return_lse)
    outs = _launch("attention_varlen", expr, {"Q": q, "K": k, "V": v, "CQ": cu_seqlens_q,
                                              "CK": cu_seqlens_k}, q.device, knobs, use_db)
    return outs["out"], outs["lse"] if return_lse else _no_lse(q)


@_varlen_op.register_fake
def _varlen_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, causal, scale, return_lse,
                 knobs, use_db):
    _check_scale(scale)
    tq, hq, _ = q.shape
    return (q.new_empty([tq, hq, v.shape[2]]),
            q.new_empty([tq, hq] if return_lse else [0], dtype=torch.float32))


def _no_backward(ctx, *grads):
    raise RuntimeError(ATTENTION_BACKWARD_ERROR)


_paged_op.register_autograd(_no_backward, setup_context=lambda ctx, inputs, output: None)
_varlen_op.register_autograd(_no_backward, setup_context=lambda ctx, inputs, output: None)


def attention_paged(q, k_cache, v_cache, block_table, seqlens_k, causal=False, scale=None,
                    return_lse=False, *, knobs=None, use_db=True):
    """Attention over a paged KV cache (the module's docstring)."""
    _check_scale(scale)
    out, lse = _paged_op(q, k_cache, v_cache, block_table, seqlens_k,
                         _causal("attention_paged", causal),
                         None if scale is None else float(scale), bool(return_lse),
                         _knobs(knobs), bool(use_db))
    return (out, lse) if return_lse else out


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, causal=False,
                     scale=None, return_lse=False, *, knobs=None, use_db=True):
    """Attention over packed variable-length sequences (the module's docstring)."""
    _check_scale(scale)
    out, lse = _varlen_op(q, k, v, cu_seqlens_q, cu_seqlens_k, int(max_seqlen_q),
                          _causal("attention_varlen", causal),
                          None if scale is None else float(scale), bool(return_lse),
                          _knobs(knobs), bool(use_db))
    return (out, lse) if return_lse else out
