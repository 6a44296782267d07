"""Loom's ops on torch tensors: loom.matmul, loom.bmm, loom.linear and loom.attention.

Each is a torch.library custom op (torch.ops.loom.matmul, .bmm, .linear, .attention;
the names are stable: torch.compile backends and other code may call them) with a fake
implementation, so torch.compile(fullgraph=True) traces a model that uses them without a
graph break, and an autograd formula (matmul, bmm, linear: the backward GEMMs run on
Loom too; attention has none and says so).

From the tensors the op writes a Loom expression (docs/cli.md) with every size a number:
`matmul(A[512,256]:bf16, B[384,256]:bf16.T)` for a @ b.T. An operand is taken as stored
when it is contiguous or the transpose (of its last two dimensions) of a contiguous
tensor; any other strides raise LoomStrideError naming them and the fix. One kernel is
compiled per expression, GPU, knobs and use_db (the tuning database's record for the
shape on that GPU unless use_db=False, explicit knobs over it) on the first call, and
kept: later calls launch it. Outputs and the kernel's workspace come from PyTorch's
allocator on the inputs' device, and the launch goes on torch.cuda.current_stream(): no
allocation of Loom's own, no host synchronization, so a call can be captured into a CUDA
graph once the kernel is compiled (call the op once before capturing, as CUDA graph
warm-up does anyway; compiling inside a capture is refused with an error saying so).
"""
import atexit
import re
import threading
from typing import List, Optional, Tuple

import torch

from . import _C

__all__ = ["matmul", "bmm", "linear", "attention", "gemm_epilogue", "expression", "clear_cache",
           "cache_info", "runtime_m", "LoomStrideError"]

_DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}
_TORCH_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu")
CAUSAL = {"none": "false", "top_left": "top_left", "bottom_right": "true"}
_ALIGN = 16  # bytes: TMA and the 16-byte vector loads need it of every base address


class LoomStrideError(ValueError):
    """An operand's strides are not ones Loom's kernels take (row-major, or the transpose
    of row-major)."""


# ---- expressions from tensors ------------------------------------------------------

def _dtype(op, name, t, allowed=("f32", "f16", "bf16")):
    d = _DTYPES.get(t.dtype)
    if d is None or d not in allowed:
        names = {"f32": "torch.float32", "f16": "torch.float16", "bf16": "torch.bfloat16"}
        raise TypeError("loom.%s: %s has dtype %s; Loom's %s takes %s (convert it, e.g. "
                        "%s.to(torch.bfloat16))" % (op, name, t.dtype, op,
                                                    " or ".join(names[a] for a in allowed), name))
    return d


def _dims(shape):
    return ",".join(str(int(s)) for s in shape)


def _pitch(shape, strides):
    """The '|' part of a row-major view's shape ('' when dense): the strides of every dim
    but the innermost, when the innermost stride is 1 and each other stride is at least the
    extent of the dims inside it (rows that do not overlap: a column slice x[:, :1000], a
    pitched batch); None for any other layout."""
    r = len(shape)
    if r == 0 or 0 in shape:
        return ""
    if shape[-1] != 1 and strides[-1] != 1:
        return None
    out = [0] * (r - 1)
    extent = shape[-1]
    dense, inner = True, shape[-1]
    for i in range(r - 2, -1, -1):
        s = strides[i] if shape[i] != 1 else max(extent, inner)  # a size-1 dim's stride is moot
        if s < extent:
            return None
        out[i] = s
        dense = dense and s == inner
        extent = (shape[i] - 1) * s + extent
        inner *= shape[i]
    return "" if dense else "|" + ",".join(str(int(s)) for s in out)


def _view(op, name, t, transposable=True, pitched=True):
    """How Loom reads t: ('' or '.T', storage shape, '' or '|strides'). Row-major storage,
    dense or a view into a larger buffer (Loom's `A[M,K|1056]`), or the transpose (of the
    last two dims) of such storage, e.g. x.T of a column slice; otherwise LoomStrideError."""
    shape, st = list(t.shape), list(t.stride())
    if t.is_contiguous():
        return "", shape, ""
    cands = [("", shape, st)]
    if transposable and t.dim() >= 2:
        cands.append((".T", shape[:-2] + [shape[-1], shape[-2]], st[:-2] + [st[-1], st[-2]]))
    for tr, sh, s in cands:
        p = _pitch(sh, s)
        if p is not None and (pitched or not p):
            return tr, sh, p
    if not pitched:
        what = "row-major (contiguous) [B, H, S, D]"
    else:
        what = ("row-major rows with unit innermost stride whose other strides do not let "
                "rows overlap (contiguous, a slice such as x[:, :1000], a pitched batch)%s" %
                (", or the transpose of such a tensor (x.T)" if transposable else ""))
    raise LoomStrideError(
        "loom.%s: %s has shape %s and strides %s, which Loom's kernels cannot read: they take "
        "%s. Pass %s.contiguous()" % (op, name, list(t.shape), list(t.stride()), what, name))


def _layout(op, name, t, transposable=True):
    """'' when t is stored row-major (dense or pitched), '.T' when it is the transpose of
    such storage; otherwise LoomStrideError."""
    return _view(op, name, t, transposable)[0]


def _check(op, name, t, transposable=True, pitched=True):
    """What _operand checks, without writing sizes: the fake implementations call it, where
    sizes may be symbolic (torch.compile's dynamic shapes)."""
    _dtype(op, name, t)
    if t.is_contiguous():
        return
    try:
        _view(op, name, t, transposable, pitched)
    except TypeError:  # symbolic strides: the real call checks them
        pass


def _operand(op, name, label, t, dtype=None, transposable=True, pitched=True):
    dt = dtype or _dtype(op, name, t)
    tr, shape, pitch = _view(op, name, t, transposable, pitched)
    return "%s[%s%s]:%s%s" % (label, _dims(shape), pitch, dt, tr)


def _same(op, tensors):
    """One dtype and one device for every operand."""
    (n0, t0) = tensors[0]
    for n, t in tensors[1:]:
        if t.dtype != t0.dtype:
            raise TypeError("loom.%s: %s is %s but %s is %s; Loom's operands share one dtype "
                            "(convert one with .to(%s))" % (op, n0, t0.dtype, n, t.dtype, t0.dtype))
        if t.device != t0.device:
            raise ValueError("loom.%s: %s is on %s but %s is on %s; move them to one CUDA "
                             "device" % (op, n0, t0.device, n, t.device))


def _matmul_shape(op, a, b):
    ranks = (3,) if op == "bmm" else (2, 3, 4)
    for n, t in (("a", a), ("b", b)):
        if t.dim() not in ranks:
            raise ValueError("loom.%s: %s has rank %d (shape %s); %s takes %s" % (
                op, n, t.dim(), list(t.shape), op,
                "rank 3 [B,M,K]·[B,K,N]" if op == "bmm" else
                "ranks 2 to 4: [M,K]·[K,N] under up to two batch dims, equal in both or "
                "absent from one (shared by every batch entry)"))
    if a.shape[-1] != b.shape[-2]:
        raise ValueError("loom.%s: inner dimensions differ: a %s has K=%d but b %s has K=%d" % (
            op, list(a.shape), a.shape[-1], list(b.shape), b.shape[-2]))
    ba, bb = list(a.shape[:-2]), list(b.shape[:-2])
    if ba and bb and ba != bb:
        raise ValueError("loom.%s: batch dimensions differ: a %s, b %s; Loom takes equal batch "
                         "dims, or none on one operand (no broadcasting of size-1 dims: "
                         "expand and .contiguous() it)" % (op, list(a.shape), list(b.shape)))
    _same(op, [("a", a), ("b", b)])
    return (ba or bb) + [a.shape[-2], b.shape[-1]]


def _matmul_expr(op, a, b):
    return "matmul(%s, %s)" % (_operand(op, "a", "A", a), _operand(op, "b", "B", b))


def _check_activation(activation):
    if activation is None or activation == "none":
        return None
    if activation in ACTIVATIONS:
        return activation
    hint = ""
    if activation in ("tanh", "gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        hint = (" ('gelu' is the exact erf form, torch's approximate='none'; 'gelu_tanh' is "
                "torch's approximate='tanh')")
    raise ValueError("loom.linear: activation=%r is not one of Loom's epilogues: None, %s%s" % (
        activation, ", ".join(repr(a) for a in ACTIVATIONS), hint))


_ACT_FNS = {"relu": torch.relu, "gelu": torch.nn.functional.gelu,
            "gelu_tanh": lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
            "silu": torch.nn.functional.silu}


def _linear_shape(x, w, bias):
    if x.dim() < 2 or x.dim() > 4 or w.dim() != 2:
        raise ValueError("loom.linear: x must be [M,K], [B,S,K] or [B,H,S,K] and w [N,K] (torch's "
                         "layout); got x %s, w %s" % (list(x.shape), list(w.shape)))
    if x.shape[-1] != w.shape[1]:
        raise ValueError("loom.linear: inner dimensions differ: x %s has K=%d but w %s has K=%d" % (
            list(x.shape), x.shape[-1], list(w.shape), w.shape[1]))
    ts = [("x", x), ("w", w)]
    if bias is not None:
        if bias.dim() != 1 or bias.shape[0] != w.shape[0]:
            raise ValueError("loom.linear: bias must be [N] = [%d]; got %s" % (
                w.shape[0], list(bias.shape)))
        ts.append(("bias", bias))
    _same("linear", ts)
    return list(x.shape[:-1]) + [w.shape[0]]


def _rows(x):
    """x [..., K] as [rows, K]: a view when the leading dims are dense over the rows (a pitched
    x keeps its pitch), else a copy."""
    try:
        return x.view(-1, x.shape[-1])
    except RuntimeError:
        return x.reshape(-1, x.shape[-1])


def _linear_expr(x, w, bias, activation):
    e = "linear(%s, %s%s)" % (
        _operand("linear", "x", "X", x), _operand("linear", "w", "W", w),
        "" if bias is None else ", " + _operand("linear", "bias", "bias", bias))
    return "%s(%s)" % (activation, e) if activation else e


def _causal(causal):
    if causal is False or causal is None:
        return "none"
    if causal is True:
        return "top_left"
    if isinstance(causal, str) and causal in CAUSAL:
        return causal
    raise ValueError("loom.attention: causal=%r; it takes False, True (torch's is_causal: "
                     "the top-left aligned mask), 'top_left' or 'bottom_right' (FlashAttention's "
                     "alignment when Sq != Sk)" % (causal,))


def _check_scale(scale):
    if scale is not None and not (0 < float(scale) < float("inf")):
        raise ValueError("loom.attention: scale=%r; it must be a positive finite number (default "
                         "1/sqrt(D))" % (scale,))


def _attention_shape(q, k, v):
    for n, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4:
            raise ValueError("loom.attention: %s must be [B, H, S, D] (rank 4); got %s" % (
                n, list(t.shape)))
    _same("attention", [("q", q), ("k", k), ("v", v)])
    for n, t in (("q", q), ("k", k), ("v", v)):
        _dtype("attention", n, t, allowed=("f16", "bf16"))
    b, hq, sq, d = q.shape
    if k.shape[0] != b or v.shape[0] != b:
        raise ValueError("loom.attention: batch sizes differ: q %s, k %s, v %s" % (
            list(q.shape), list(k.shape), list(v.shape)))
    if k.shape[1] != v.shape[1] or k.shape[2] != v.shape[2]:
        raise ValueError("loom.attention: k %s and v %s must have the same heads and length" % (
            list(k.shape), list(v.shape)))
    hkv = k.shape[1]
    if hkv == 0 or hq % hkv:
        raise ValueError("loom.attention: q's heads Hq=%d are not a multiple of k's Hkv=%d "
                         "(GQA/MQA need Hkv to divide Hq)" % (hq, hkv))
    if k.shape[3] != d:
        raise ValueError("loom.attention: head dims differ: q %s has D=%d but k %s has %d" % (
            list(q.shape), d, list(k.shape), k.shape[3]))
    return [b, hq, sq, v.shape[3]], [b, hq, sq]


def _attention_expr(q, k, v, causal, scale, lse=True):
    args = [_operand("attention", n, n.upper(), t, transposable=False, pitched=False)
            for n, t in (("q", q), ("k", k), ("v", v))]
    args.append("causal=" + CAUSAL[causal])
    if scale is not None:
        args.append("scale=" + repr(float(scale)))
    if lse:
        args.append("lse=true")
    return "attention(%s)" % ", ".join(args)


def expression(op, *tensors, **kwargs):
    """The Loom expression an op compiles for these tensors (real, fake or meta ones:
    only shapes, dtypes and strides are read), e.g. for loom.tune or `loom run -c`."""
    if op in ("matmul", "bmm"):
        a, b = tensors
        _matmul_shape(op, a, b)
        return _matmul_expr(op, a, b)
    if op == "linear":
        x, w = tensors[:2]
        bias = tensors[2] if len(tensors) > 2 else kwargs.get("bias")
        act = _check_activation(kwargs.get("activation"))
        _linear_shape(x, w, bias)
        return _linear_expr(x, w, bias, act)
    if op == "attention":
        q, k, v = tensors
        _check_scale(kwargs.get("scale"))
        _attention_shape(q, k, v)
        return _attention_expr(q, k, v, _causal(kwargs.get("causal", False)), kwargs.get("scale"),
                               bool(kwargs.get("return_lse", False)))
    if op == "gemm_epilogue":  # expression("gemm_epilogue", a, b, kind=, bias=, extras=, steps=, out_dtype=)
        a, b = tensors
        return _ep_expr(kwargs.get("kind", "linear"), a, b, kwargs.get("bias"),
                        list(kwargs.get("extras", ())), kwargs.get("steps", ""),
                        _out_dtype("gemm_epilogue", kwargs.get("out_dtype")))[0]
    raise ValueError("loom.expression: unknown op %r; one of matmul, bmm, linear, attention, "
                     "gemm_epilogue" % (op,))


# ---- compiled kernels, cached ------------------------------------------------------

class _Entry:
    __slots__ = ("kernel", "outputs", "workspace")

    def __init__(self, kernel):
        self.kernel = kernel
        self.outputs = [(t["name"], list(t["shape"]), _TORCH_DTYPES[t["dtype"]])
                        for t in kernel.program.tensors if t["role"] == "output"]
        self.workspace = [(w["name"], int(w["bytes"]), bool(w["zero_init"]))
                          for w in kernel.workspace]


_cache = {}
_lock = threading.Lock()
_stats = {"hits": 0, "misses": 0, "direct": 0}


def clear_cache():
    """Forget every compiled kernel (the next call of each op compiles again, e.g. after
    loom.tune wrote a record)."""
    with _lock:
        _cache.clear()


# Kernels go before the interpreter tears the extension down (their modules unload while
# the CUDA context is still there, and nanobind finds no instance left behind).
atexit.register(clear_cache)


def cache_info():
    """{'hits': .., 'misses': .., 'direct': eager calls that skipped the dispatcher,
    'kernels': [(expression, device, knobs, use_db), ...]}"""
    with _lock:
        return dict(_stats, kernels=list(_cache))


def _entry(op, expr, index, knobs, use_db, runtime=""):
    key = (expr, index, knobs, use_db)
    with _lock:
        e = _cache.get(key)
        if e is not None:
            _stats["hits"] += 1
            return e
    if torch.cuda.is_current_stream_capturing():
        raise RuntimeError(
            "loom.%s: the kernel for `%s` is not compiled yet and the current stream is "
            "capturing a CUDA graph, where compiling and loading a module is not allowed: "
            "call the op once with these shapes before capturing (a warm-up run)" % (op, expr))
    with torch.cuda.device(index):
        e = _Entry(_C.Kernel(expr, knobs, index, use_db, "", runtime))
    with _lock:
        _stats["misses"] += 1
        return _cache.setdefault(key, e)


def _launch(op, expr, inputs, device, knobs, use_db, sizes=None, shapes=None):
    """Runs `expr` on `inputs` ({tensor name: torch tensor}); returns {output name: tensor}.
    sizes: the values of `expr`'s run-time sizes ({"M": 1000}: _with_runtime_m); shapes:
    the outputs' shapes where they hold run-time sizes other than M (by output name)."""
    if device.type != "cuda":
        raise ValueError("loom.%s: the operands are on %s; Loom's kernels run on CUDA tensors "
                         "(move them with .cuda())" % (op, device))
    for name, t in inputs.items():
        if t.data_ptr() % _ALIGN:
            raise ValueError(
                "loom.%s: %s's data starts at address 0x%x, which is not %d-byte aligned (a "
                "view at storage offset %d); Loom's kernels need %d-byte aligned operands: "
                "pass a copy (.clone())" % (op, name, t.data_ptr(), _ALIGN, t.storage_offset(),
                                            _ALIGN))
    index = device.index if device.index is not None else torch.cuda.current_device()
    e = _entry(op, expr, index, knobs, use_db, ",".join(sizes or {}))
    ptrs = {name: t.data_ptr() for name, t in inputs.items()}
    outs = {}
    for name, shape, dt in e.outputs:
        if sizes and shapes and name in shapes:
            shape = shapes[name]
        elif sizes:  # a run-time M: the output's -1 dims are its rows
            shape = [sizes["M"] if d < 0 else d for d in shape]
        outs[name] = torch.empty(shape, dtype=dt, device=device)
        ptrs[name] = outs[name].data_ptr()
    keep = []
    for name, nbytes, zero in e.workspace:
        buf = (torch.zeros if zero else torch.empty)(max(nbytes, _ALIGN), dtype=torch.uint8,
                                                     device=device)
        keep.append(buf)  # freed after the launch is enqueued: stream-ordered reuse
        ptrs[name] = buf.data_ptr()
    stream = _raw_stream(index)
    if torch.cuda.current_device() == index:  # the usual case: no device switch to pay for
        e.kernel.launch(ptrs, stream, sizes or {})
    else:
        with torch.cuda.device(index):
            e.kernel.launch(ptrs, stream, sizes or {})
    return outs


def _raw_stream(index):
    """The current stream of GPU `index` as a cudaStream_t integer (what Inductor's
    generated code reads; torch.cuda.current_stream() builds a Stream object per call)."""
    try:
        return torch._C._cuda_getCurrentRawStream(index)
    except AttributeError:  # another torch
        return torch.cuda.current_stream(index).cuda_stream


# ---- one kernel for every token count (opt-in) ---------------------------------------

_runtime_m = [False]


def runtime_m(enabled=True):
    """With it on, loom.matmul of two 2-D operands and loom.linear compile one kernel per
    weight shape with the row count (the token count) M left to run time, and launch it
    for every M; off (the default), each M compiles its own kernel. One kernel avoids a
    compile (about a second, once per shape) for every new batch a serving stack or
    torch.compile's dynamic shapes bring. On sm_90a that "kernel" is a few, one per range
    of M (a swapped decode tile for a few rows, one row of 128-row tiles, the medium and
    the large persistent schedules: each the per-shape default at its range's top),
    compiled together and picked by M at each launch (Kernel.variants lists them;
    docs/api.md, run-time sizes). Returns the previous setting."""
    prev = _runtime_m[0]
    _runtime_m[0] = bool(enabled)
    return prev


def _with_runtime_m(expr, first, rows, on=False):
    """(expr, sizes): with run-time M asked for (`on`, or loom.runtime_m()) and the first
    operand `first` row-major, `expr` with that operand's row count spelled as the size
    symbol M -- and the rows of every epilogue operand of the result's shape (E0[rows, N]..)
    -- and sizes {"M": rows}; otherwise (expr, None). Every other size is a number."""
    if not (on or _runtime_m[0]) or not first.is_contiguous() or first.dim() != 2:
        return expr, None
    head, rest = expr.split("[", 1)  # "linear(X", "128,4096]:bf16, W[...]..."
    assert rest.startswith("%d," % rows), expr
    rest = re.sub(r"\b(E\d+)\[%d," % rows, r"\1[M,", rest.split(",", 1)[1])
    return "%s[M,%s" % (head, rest), {"M": rows}


def _knobs(knobs):
    if knobs is None:
        return ""
    if isinstance(knobs, dict):
        return ",".join("%s=%s" % kv for kv in knobs.items())
    return str(knobs)


# ---- the custom ops ----------------------------------------------------------------

# Expressions already written, by what they were written from (op, each tensor's shape,
# strides, dtype and device, the op's other arguments): a repeated call skips the checks and
# the string (the checks passed for that signature, or it would not be here). Bounded: a
# program with ever-new shapes starts over rather than growing without end.
_EXPRS = {}
_EXPRS_MAX = 4096


def _signature(*parts):
    key = []
    for p in parts:
        if isinstance(p, torch.Tensor):
            key += [p.shape, p.stride(), p.dtype, p.device]
        else:
            key.append(p)
    return tuple(key)


def _written(key, write):
    hit = _EXPRS.get(key)
    if hit is None:
        hit = write()
        if len(_EXPRS) >= _EXPRS_MAX:
            _EXPRS.clear()
        _EXPRS[key] = hit
    return hit


def _mm_impl(op, a, b, knobs, use_db, runtime_m=False):
    # checks dtypes and strides before any empty return
    shape, expr = _written(_signature(op, a, b),
                           lambda: (_matmul_shape(op, a, b), _matmul_expr(op, a, b)))
    if 0 in shape or a.shape[-1] == 0:
        return a.new_zeros(shape)
    sizes = None
    if op == "matmul" and b.dim() == 2:
        expr, sizes = _with_runtime_m(expr, a, a.shape[0], runtime_m)
    return _launch(op, expr, {"A": a, "B": b}, a.device, knobs, use_db, sizes)["out"]


@torch.library.custom_op("loom::matmul", mutates_args=())
def _matmul_op(a: torch.Tensor, b: torch.Tensor, knobs: str, use_db: bool,
               runtime_m: bool = False) -> torch.Tensor:
    return _mm_impl("matmul", a, b, knobs, use_db, runtime_m)


@torch.library.custom_op("loom::bmm", mutates_args=())
def _bmm_op(a: torch.Tensor, b: torch.Tensor, knobs: str, use_db: bool) -> torch.Tensor:
    return _mm_impl("bmm", a, b, knobs, use_db)


def _mm_fake(op):
    def fake(a, b, knobs, use_db, runtime_m=False):
        shape = _matmul_shape(op, a, b)
        _check(op, "a", a)
        _check(op, "b", b)
        return a.new_empty(shape)
    return fake


_matmul_op.register_fake(_mm_fake("matmul"))
_bmm_op.register_fake(_mm_fake("bmm"))


def _gemm_operand(t):
    """t itself when Loom reads it as stored (row-major or transposed), else a copy."""
    if t.is_contiguous() or (t.dim() >= 2 and t.transpose(-1, -2).is_contiguous()):
        return t
    return t.contiguous()


def _sum_to(t, shape):
    """Sums a batched gradient over the batch dims its operand did not have."""
    extra = t.dim() - len(shape)
    return t.sum(dim=tuple(range(extra))) if extra > 0 else t


def _mm_setup(ctx, inputs, output):
    a, b = inputs[:2]
    use_db = inputs[3]
    ctx.save_for_backward(a, b)
    ctx.use_db = use_db


def _mm_backward_for(opfn):
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        g = _gemm_operand(grad)
        da = db = None
        if ctx.needs_input_grad[0]:  # dA = dC·Bᵀ
            da = _sum_to(opfn(g, b.transpose(-1, -2), "", ctx.use_db), a.shape)
        if ctx.needs_input_grad[1]:  # dB = Aᵀ·dC
            db = _sum_to(opfn(a.transpose(-1, -2), g, "", ctx.use_db), b.shape)
        return (da, db) + (None,) * (len(ctx.needs_input_grad) - 2)
    return backward


_matmul_op.register_autograd(_mm_backward_for(_matmul_op), setup_context=_mm_setup)
_bmm_op.register_autograd(_mm_backward_for(_bmm_op), setup_context=_mm_setup)


def _linear_impl(x, w, bias, activation, knobs, use_db, runtime_m=False):
    def write():
        act = _check_activation(activation or None)
        return act, _linear_shape(x, w, bias), _linear_expr(x, w, bias, act)
    act, shape, expr = _written(_signature("linear", x, w, bias, activation), write)
    if 0 in shape:
        return x.new_empty(shape)
    if x.shape[-1] == 0:  # an empty sum: act(0 + bias)
        y = x.new_zeros(shape) + (bias if bias is not None else 0)
        return _ACT_FNS.get(act, lambda t: t)(y)
    ins = {"X": x, "W": w}
    if bias is not None:
        ins["bias"] = bias
    expr, sizes = _with_runtime_m(expr, x, x.shape[0], runtime_m)
    return _launch("linear", expr, ins, x.device, knobs, use_db, sizes)["out"]


@torch.library.custom_op("loom::linear", mutates_args=())
def _linear_op(x: torch.Tensor, w: torch.Tensor, bias: Optional[torch.Tensor], activation: str,
               knobs: str, use_db: bool, runtime_m: bool = False) -> torch.Tensor:
    return _linear_impl(x, w, bias, activation, knobs, use_db, runtime_m)


@_linear_op.register_fake
def _linear_fake(x, w, bias, activation, knobs, use_db, runtime_m=False):
    _check_activation(activation or None)
    shape = _linear_shape(x, w, bias)
    for n, t in (("x", x), ("w", w), ("bias", bias)):
        if t is not None:
            _check("linear", n, t)
    return x.new_empty(shape)


def _linear_setup(ctx, inputs, output):
    x, w, bias, activation, knobs, use_db = inputs[:6]
    ctx.activation = activation or None
    ctx.use_db = use_db
    ctx.has_bias = bias is not None
    ctx.save_for_backward(x, w, bias, output if activation == "relu" else None)


def _linear_backward(ctx, grad):
    x, w, bias, y = ctx.saved_tensors
    g = _gemm_operand(grad)
    act = ctx.activation
    if act is None:
        dz = g
    elif act == "relu":
        dz = g * (y > 0)
    else:  # the pre-activation again, on Loom; the elementwise derivative on torch
        z = _linear_op(x, w, bias, "", "", ctx.use_db)
        if act in ("gelu", "gelu_tanh"):
            dz = torch.ops.aten.gelu_backward(g, z, approximate="tanh" if act == "gelu_tanh" else "none")
        else:
            dz = torch.ops.aten.silu_backward(g, z)
    dz = _gemm_operand(dz)
    dx = dw = db = None
    if ctx.needs_input_grad[0]:  # dX = dZ·W
        dx = _matmul_op(dz, w, "", ctx.use_db)
    if ctx.needs_input_grad[1]:  # dW = dZᵀ·X
        dw = _matmul_op(dz.transpose(0, 1), x, "", ctx.use_db)
    if ctx.has_bias and ctx.needs_input_grad[2]:
        db = dz.sum(0, dtype=torch.float32).to(bias.dtype)
    return (dx, dw, db) + (None,) * (len(ctx.needs_input_grad) - 3)


_linear_op.register_autograd(_linear_backward, setup_context=_linear_setup)


# attention's sizes that may be left to run time, and where each sits in Q and in K/V
_ATTENTION_RUNTIME = {"B": (0, 0), "Sq": (2, None), "Sk": (None, 2)}


def _attention_runtime(expr, q, k, names):
    """(expr, sizes): attention's `expr` with the sizes `names` (a comma-joined subset of
    B, Sq, Sk) spelled as symbols in Q, K and V, and their values; (expr, None) for none.
    One kernel then serves every value (docs/api.md: the lengths are kernel arguments)."""
    names = [n for n in names.split(",") if n]
    if not names:
        return expr, None
    bad = [n for n in names if n not in _ATTENTION_RUNTIME]
    if bad:
        raise ValueError("loom.attention: runtime sizes %s; the run-time sizes of attention are "
                         "B, Sq and Sk" % ",".join(bad))
    head, rest = expr.split("(", 1)
    parts = rest.split(", ")
    for i, label in enumerate(("Q", "K", "V")):  # "Q[2,32,1000,128]:bf16"
        name, tail = parts[i].split("[", 1)
        assert name == label, expr
        dims, tail = tail.split("]", 1)
        dims = dims.split(",")
        for n in names:
            at = _ATTENTION_RUNTIME[n][0 if label == "Q" else 1]
            if at is not None:
                dims[at] = n
        parts[i] = "%s[%s]%s" % (label, ",".join(dims), tail)
    sizes = {"B": q.shape[0], "Sq": q.shape[2], "Sk": k.shape[2]}
    return "%s(%s" % (head, ", ".join(parts)), {n: sizes[n] for n in names}


def _attention_impl(q, k, v, causal, scale, return_lse, knobs, use_db, runtime=""):
    def write():
        c = _causal(causal)
        _check_scale(scale)
        return _attention_shape(q, k, v), _attention_expr(q, k, v, c, scale, return_lse)
    (oshape, lshape), expr = _written(_signature("attention", q, k, v, causal, scale, return_lse),
                                      write)
    if 0 in oshape or k.shape[2] == 0 or q.shape[3] == 0:  # no key for any row: O = 0, LSE = -inf
        lse = torch.full(lshape if return_lse else [0], float("-inf"), dtype=torch.float32,
                         device=q.device)
        return q.new_zeros(oshape), lse
    expr, sizes = _attention_runtime(expr, q, k, runtime)
    outs = _launch("attention", expr, {"Q": q, "K": k, "V": v}, q.device, knobs, use_db, sizes,
                   {"out": oshape, "lse": lshape})
    lse = outs["lse"] if return_lse else torch.empty(0, dtype=torch.float32, device=q.device)
    return outs["out"], lse


@torch.library.custom_op("loom::attention", mutates_args=())
def _attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: str,
                  scale: Optional[float], return_lse: bool, knobs: str,
                  use_db: bool, runtime: str = "") -> Tuple[torch.Tensor, torch.Tensor]:
    return _attention_impl(q, k, v, causal, scale, return_lse, knobs, use_db, runtime)


@_attention_op.register_fake
def _attention_fake(q, k, v, causal, scale, return_lse, knobs, use_db, runtime=""):
    _causal(causal)
    _check_scale(scale)
    oshape, lshape = _attention_shape(q, k, v)
    for n, t in (("q", q), ("k", k), ("v", v)):
        _check("attention", n, t, transposable=False, pitched=False)
    return q.new_empty(oshape), q.new_empty(lshape if return_lse else [0], dtype=torch.float32)


ATTENTION_BACKWARD_ERROR = ("Loom has no attention backward yet; use "
                            "torch.nn.functional.scaled_dot_product_attention for training")


def _attention_setup(ctx, inputs, output):
    pass


def _attention_backward(ctx, grad_out, grad_lse):
    raise RuntimeError(ATTENTION_BACKWARD_ERROR)


_attention_op.register_autograd(_attention_backward, setup_context=_attention_setup)


# ---- GEMMs with an elementwise epilogue ---------------------------------------------
#
# `steps` is the epilogue as data: ';'-separated steps applied in order to the GEMM's
# result z (bias already added for linear), each `relu`, `gelu` (erf), `gelu_tanh`, `silu`, or a binary
# `add`, `sub`, `mul` with `t<i>` (the i-th tensor of `extras`, the result's shape or [N])
# or a number: "silu;mul:t0" is silu(z)·extras[0], "mul:0.5;add:t0" is z·0.5 + extras[0].
# out_dtype ('' = the operands') is the result's dtype. The torch.compile backend builds
# these from what follows a GEMM in the captured graph; loom.linear's scale/residual/
# out_dtype arguments are the common case.

EPILOGUE_UNARY = ("relu", "gelu", "gelu_tanh", "silu")
EPILOGUE_BINARY = ("add", "sub", "mul")


def _parse_steps(steps, n_extras):
    out = []
    for raw in [s for s in steps.split(";") if s]:
        op, _, arg = raw.partition(":")
        if op in EPILOGUE_UNARY and not arg:
            out.append((op, None))
            continue
        if op in EPILOGUE_BINARY and arg:
            if arg.startswith("t"):
                i = int(arg[1:])
                if not 0 <= i < n_extras:
                    raise ValueError("loom epilogue step %r names extras[%d], but %d extra "
                                     "tensor(s) were given" % (raw, i, n_extras))
                out.append((op, i))
            else:
                v = float(arg)
                if v != v or v in (float("inf"), float("-inf")):
                    raise ValueError("loom epilogue step %r: the number must be finite" % raw)
                out.append((op, v))
            continue
        raise ValueError("loom epilogue step %r is not one of %s, or %s with ':t<i>' or "
                         "':<number>'" % (raw, ", ".join(EPILOGUE_UNARY),
                                          ", ".join(EPILOGUE_BINARY)))
    return out


def _out_dtype(op, out_dtype):
    if not out_dtype:
        return None
    if out_dtype not in _TORCH_DTYPES:
        raise ValueError("loom.%s: out_dtype=%r; one of %s" % (op, out_dtype, ", ".join(_TORCH_DTYPES)))
    return out_dtype


def _ep_base(kind, a, b, bias, out_dtype):
    """The GEMM's expression and its result's shape; bias only for linear."""
    if kind == "linear":
        shape = _linear_shape(a, w=b, bias=bias)
        e = "linear(%s, %s%s" % (_operand("linear", "x", "X", a), _operand("linear", "w", "W", b),
                                 "" if bias is None else ", " + _operand("linear", "bias", "bias", bias))
    elif kind in ("matmul", "bmm"):
        if bias is not None:
            raise ValueError("loom.%s with an epilogue: bias is linear's; add it as an 'add:t<i>' "
                             "step" % kind)
        shape = _matmul_shape(kind, a, b)
        e = "matmul(%s, %s" % (_operand(kind, "a", "A", a), _operand(kind, "b", "B", b))
    else:
        raise ValueError("loom epilogue: unknown GEMM %r (linear, matmul, bmm)" % (kind,))
    return e + (", out=%s)" % out_dtype if out_dtype else ")"), list(shape)


def _check_extra(kind, i, t, shape):
    s = list(t.shape)
    if s != list(shape) and s != [shape[-1]]:
        raise ValueError("loom.%s epilogue: extras[%d] has shape %s; it must be the result's "
                         "shape %s or [%d] (broadcast over rows)" % (kind, i, s, list(shape), shape[-1]))
    if _DTYPES.get(t.dtype) is None:
        raise TypeError("loom.%s epilogue: extras[%d] has dtype %s (float32, float16 or "
                        "bfloat16)" % (kind, i, t.dtype))
    if not t.is_contiguous():
        raise LoomStrideError("loom.%s epilogue: extras[%d] (shape %s) is not contiguous; pass "
                              "extras[%d].contiguous()" % (kind, i, s, i))


def _ep_expr(kind, a, b, bias, extras, steps, out_dtype):
    e, shape = _ep_base(kind, a, b, bias, out_dtype)
    for i, t in enumerate(extras):
        _check_extra(kind, i, t, shape)
    for op, arg in _parse_steps(steps, len(extras)):
        if arg is None:
            e = "%s(%s)" % (op, e)
        elif isinstance(arg, int):
            t = extras[arg]
            e = "%s(%s, E%d[%s]:%s)" % (op, e, arg, _dims(t.shape), _DTYPES[t.dtype])
        else:
            e = "%s(%s, %r)" % (op, e, arg)
    return e, shape


def _apply_steps(z, extras, steps):
    """The epilogue in torch (the backward differentiates it; the tests compare with it)."""
    fns = _ACT_FNS
    for op, arg in _parse_steps(steps, len(extras)):
        if arg is None:
            z = fns[op](z)
        else:
            o = extras[arg] if isinstance(arg, int) else arg
            z = z + o if op == "add" else z - o if op == "sub" else z * o
    return z


def _ep_impl(kind, a, b, bias, extras, steps, out_dtype, knobs, use_db, runtime_m=False):
    out_dtype = _out_dtype(kind, out_dtype)
    expr, shape = _written(_signature("gemm_epilogue", kind, a, b, bias, steps, out_dtype, *extras),
                           lambda: _ep_expr(kind, a, b, bias, extras, steps, out_dtype))
    if 0 in shape or a.shape[-1] == 0:  # an empty sum: the epilogue of zeros (+ bias)
        z = a.new_zeros(shape, dtype=torch.float32)
        if bias is not None:
            z = z + bias.float()
        y = _apply_steps(z, [t.float() for t in extras], steps)
        return y.to(_TORCH_DTYPES[out_dtype] if out_dtype else a.dtype)
    ins = {"X" if kind == "linear" else "A": a, "W" if kind == "linear" else "B": b}
    if bias is not None:
        ins["bias"] = bias
    for i, t in enumerate(extras):
        ins["E%d" % i] = t
    sizes = None
    if kind == "linear" or (kind == "matmul" and b.dim() == 2):
        expr, sizes = _with_runtime_m(expr, a, a.shape[0], runtime_m)
    return _launch(kind, expr, ins, a.device, knobs, use_db, sizes)["out"]


@torch.library.custom_op("loom::gemm_epilogue", mutates_args=())
def _ep_op(kind: str, a: torch.Tensor, b: torch.Tensor, bias: Optional[torch.Tensor],
           extras: List[torch.Tensor], steps: str, out_dtype: str, knobs: str,
           use_db: bool, runtime_m: bool = False) -> torch.Tensor:
    return _ep_impl(kind, a, b, bias, extras, steps, out_dtype, knobs, use_db, runtime_m)


@_ep_op.register_fake
def _ep_fake(kind, a, b, bias, extras, steps, out_dtype, knobs, use_db, runtime_m=False):
    out_dtype = _out_dtype(kind, out_dtype)
    _parse_steps(steps, len(extras))
    if kind == "linear":
        shape = _linear_shape(a, b, bias)
    else:
        shape = _matmul_shape(kind, a, b)
    for n, t in (("a", a), ("b", b), ("bias", bias)):
        if t is not None:
            _check(kind, n, t)
    for i, t in enumerate(extras):
        if list(t.shape) != list(shape) and list(t.shape) != [shape[-1]]:
            _check_extra(kind, i, t, shape)
    return a.new_empty(shape, dtype=_TORCH_DTYPES[out_dtype] if out_dtype else a.dtype)


def _ep_setup(ctx, inputs, output):
    kind, a, b, bias, extras, steps, out_dtype, knobs, use_db = inputs[:9]
    ctx.kind, ctx.steps, ctx.use_db = kind, steps, use_db
    ctx.n_extras = len(extras)
    ctx.save_for_backward(a, b, bias, *extras)


def _ep_backward(ctx, grad):
    """The GEMM's result again on Loom (no epilogue), the epilogue's derivative by torch's
    autograd on it, then the GEMM's gradients on Loom."""
    a, b, bias, *extras = ctx.saved_tensors
    kind = ctx.kind
    if kind == "linear":
        z = _linear_op(a, b, bias, "", "", ctx.use_db)
    else:
        z = (_bmm_op if kind == "bmm" else _matmul_op)(a, b, "", ctx.use_db)
    with torch.enable_grad():
        zz = z.detach().requires_grad_(True)
        ex = [t.detach().requires_grad_(t.is_floating_point()) for t in extras]
        y = _apply_steps(zz, ex, ctx.steps)
        wrt = [zz] + [t for t in ex if t.requires_grad]
        grads = list(torch.autograd.grad(y, wrt, grad.to(y.dtype), allow_unused=True))
    dz = _gemm_operand(grads[0].to(a.dtype))
    dextras = []
    gi = iter(grads[1:])
    for t, e in zip(extras, ex):
        g = next(gi) if e.requires_grad else None
        if g is not None and list(g.shape) != list(t.shape):
            g = g.sum(dim=tuple(range(g.dim() - t.dim())))
        dextras.append(None if g is None else g.to(t.dtype))
    da = db = dbias = None
    if kind == "linear":
        if ctx.needs_input_grad[1]:
            da = _matmul_op(dz, b, "", ctx.use_db)
        if ctx.needs_input_grad[2]:
            db = _matmul_op(dz.transpose(0, 1), a, "", ctx.use_db)
        if bias is not None and ctx.needs_input_grad[3]:
            dbias = dz.sum(0, dtype=torch.float32).to(bias.dtype)
    else:
        opfn = _bmm_op if kind == "bmm" else _matmul_op
        if ctx.needs_input_grad[1]:
            da = _sum_to(opfn(dz, b.transpose(-1, -2), "", ctx.use_db), a.shape)
        if ctx.needs_input_grad[2]:
            db = _sum_to(opfn(a.transpose(-1, -2), dz, "", ctx.use_db), b.shape)
    return (None, da, db, dbias, dextras) + (None,) * (len(ctx.needs_input_grad) - 5)


_ep_op.register_autograd(_ep_backward, setup_context=_ep_setup)


def gemm_epilogue(kind, a, b, bias=None, extras=(), steps="", out_dtype=None, *, knobs=None,
                  use_db=True, runtime_m=False):
    """A GEMM (kind 'linear': a·bᵀ + bias, b [N,K]; 'matmul'/'bmm': a·b) with the epilogue
    `steps` (see above) as one Loom kernel; extras: the tensors the steps name (t0, t1, ..).
    torch.ops.loom.gemm_epilogue is the op; this wrapper takes eager calls past the
    dispatcher as the other ops do."""
    extras = list(extras)
    if kind == "linear" and a.dim() > 2:  # leading dims: one [rows, K] GEMM, as loom.linear
        lead = list(a.shape[:-1])
        _layout("linear", "x", a, transposable=False)
        flat = [t.reshape(-1, t.shape[-1]) if t.dim() == a.dim() else t for t in extras]
        y = gemm_epilogue(kind, _rows(a), b, bias, flat, steps, out_dtype,
                          knobs=knobs, use_db=use_db, runtime_m=runtime_m)
        return y.view(lead + [b.shape[0]])
    od = "" if out_dtype is None else (_DTYPES.get(out_dtype) if isinstance(out_dtype, torch.dtype)
                                       else str(out_dtype))
    if od is None:
        raise ValueError("loom.gemm_epilogue: out_dtype=%r; torch.float32, float16 or bfloat16" % (out_dtype,))
    if _direct(a, b, bias, *extras):
        return _ep_impl(kind, a, b, bias, extras, steps, od, _knobs(knobs), bool(use_db),
                        bool(runtime_m))
    return _ep_op(kind, a, b, bias, extras, steps, od, _knobs(knobs), bool(use_db),
                  bool(runtime_m))


# ---- the public functions ----------------------------------------------------------

# Eager calls skip the dispatcher when it would only call the implementation: a Python
# custom op's dispatch (autograd wrapper, redispatch, alias checks) costs tens of µs per
# call, several times a small kernel. Any tracing, mode, profiler, subclass or tensor that
# needs a gradient takes the op (torch.ops.loom.*) as before.
try:
    from torch.utils._python_dispatch import _get_current_dispatch_mode as _dispatch_mode
    _functorch_wrapped = torch._C._functorch.is_functorch_wrapped_tensor
    _profiler = torch.autograd.profiler
    _profiler._is_profiler_enabled  # noqa: B018 - present in this torch
except (ImportError, AttributeError):  # another torch: always through the dispatcher
    _dispatch_mode = None
_PLAIN = (torch.Tensor, torch.nn.Parameter)


def _direct(*tensors):
    """Whether calling the implementation directly is all the dispatcher would do."""
    if (_dispatch_mode is None or torch.compiler.is_compiling() or _profiler._is_profiler_enabled
            or torch._C._is_torch_function_mode_enabled() or _dispatch_mode() is not None):
        return False
    grad = torch.is_grad_enabled()
    for t in tensors:
        if t is None:
            continue
        if (type(t) not in _PLAIN or not t.is_cuda or (grad and t.requires_grad)
                or _functorch_wrapped(t)):
            return False
    _stats["direct"] += 1
    return True


def matmul(a, b, *, knobs=None, use_db=True, runtime_m=False):
    """a @ b on Loom: [M,K]·[K,N] under up to two batch dims (equal in both, or absent from
    one operand). float32, float16 or bfloat16 (both alike; the result has their dtype).
    knobs: Loom knobs over the defaults/tuned record ("BM=128,BN=128" or a dict).
    runtime_m=True: a row-major 2-D `a`'s row count is left to run time, one kernel for
    every M (as loom.runtime_m() does for every call; the torch.compile backend asks for it
    where Dynamo made the token count a symbol)."""
    if _direct(a, b):
        return _mm_impl("matmul", a, b, _knobs(knobs), bool(use_db), bool(runtime_m))
    return _matmul_op(a, b, _knobs(knobs), bool(use_db), bool(runtime_m))


def bmm(a, b, *, knobs=None, use_db=True):
    """torch.bmm on Loom: [B,M,K]·[B,K,N]."""
    if _direct(a, b):
        return _mm_impl("bmm", a, b, _knobs(knobs), bool(use_db))
    return _bmm_op(a, b, _knobs(knobs), bool(use_db))


def linear(x, w, bias=None, activation=None, *, scale=None, residual=None, out_dtype=None,
           knobs=None, use_db=True, runtime_m=False):
    """activation(x @ w.T + bias) · scale + residual as one Loom kernel
    (torch.nn.functional.linear's layout: w is [N,K], bias [N]); x may have leading dims
    ([..., K], contiguous). activation: None, 'relu', 'gelu' (the erf form, torch's
    default) or 'silu'. scale: a number; residual: a tensor of the result's shape (or [N]);
    out_dtype: the result's dtype (default x's), e.g. torch.float32. runtime_m=True: the
    row count (x's leading dims together) is left to run time, one kernel for every M
    (loom.matmul's runtime_m)."""
    act = _check_activation(activation)
    if scale is not None or residual is not None or out_dtype is not None:
        steps = [act] if act else []
        if scale is not None:
            steps.append("mul:%r" % float(scale))
        extras = []
        if residual is not None:
            extras.append(residual.reshape(-1, residual.shape[-1]) if x.dim() > 2 and
                          residual.dim() == x.dim() else residual)
            steps.append("add:t0")
        y = gemm_epilogue("linear", x.reshape(-1, x.shape[-1]) if x.dim() > 2 else x, w, bias,
                          extras, ";".join(steps), out_dtype, knobs=knobs, use_db=use_db,
                          runtime_m=runtime_m)
        return y.view(list(x.shape[:-1]) + [w.shape[0]]) if x.dim() > 2 else y
    direct = _direct(x, w, bias)
    op = _linear_impl if direct else _linear_op
    if x.dim() > 2:
        lead = list(x.shape[:-1])
        _layout("linear", "x", x, transposable=False)
        try:  # one [rows, K] GEMM; a view, so the rows keep a pitched x's pitch
            rows = x.view(-1, x.shape[-1])
        except RuntimeError:  # batch strides that are not dense over the rows
            if direct:  # Loom reads x as it is: X[B,S,K|strides], a batch of GEMMs
                return _linear_impl(x, w, bias, act or "", _knobs(knobs), bool(use_db))
            rows = x.reshape(-1, x.shape[-1])  # the autograd op takes [M,K]: a copy
        y = op(rows, w, bias, act or "", _knobs(knobs), bool(use_db), bool(runtime_m))
        return y.view(lead + [w.shape[0]])
    return op(x, w, bias, act or "", _knobs(knobs), bool(use_db), bool(runtime_m))


def attention(q, k, v, causal=False, scale=None, return_lse=False, *, knobs=None, use_db=True,
              runtime=""):
    """softmax(scale·q·kᵀ, masked)·v on Loom, q [B,Hq,Sq,D], k and v [B,Hkv,Sk,D] (Hkv
    divides Hq: GQA, MQA), float16 or bfloat16, contiguous. causal: False, True (as
    torch's scaled_dot_product_attention(is_causal=True): top-left aligned),
    'top_left', or 'bottom_right' (FlashAttention's alignment when Sq != Sk). A row
    that keeps no key gets O = 0 (and LSE = -inf). scale: default 1/sqrt(D).
    return_lse: also return the f32 log-sum-exp [B,Hq,Sq]. Inference only: its backward
    raises. runtime: sizes left to run time, a comma-joined subset of "B,Sq,Sk" (one kernel
    for every batch / length; the torch.compile backend passes the sizes Dynamo made
    symbols). A decode shape with a run-time Sk runs without split-KV (docs/api.md)."""
    op = _attention_impl if _direct(q, k, v) else _attention_op
    out, lse = op(q, k, v, _causal(causal), None if scale is None else float(scale),
                  bool(return_lse), _knobs(knobs), bool(use_db), str(runtime))
    return (out, lse) if return_lse else out
