"""torch.compile(model, backend="loom"): a model's GEMMs and attention on Loom, the rest on
Inductor.

Dynamo hands the backend the FX graph it captured (torch-level calls: torch._C._nn.linear
for nn.Linear, torch.matmul / operator.matmul / torch.bmm / torch.mm, the activations,
F.scaled_dot_product_attention). `rewrite(gm)` replaces each call Loom's ops take with that
op, fusing into the GEMM's epilogue the chain of elementwise ops that follows it while
each is its predecessor's only user: relu, silu, gelu (exact or tanh), `+ - *` with
a number or with a tensor of the result's shape or [N] (a residual add, a scale, the
gating multiply of a SwiGLU MLP), and dtype casts (`.to(dtype)`, `.float()`: the
result's dtype); it leaves every other node as it was; `loom_backend` then hands
the rewritten graph to Inductor, which compiles everything else and calls the Loom ops
(torch.library custom ops with fake implementations) as they are. So the model compiles
whole, with no graph break.

What is rewritten, and what is not and why, is kept as a report: `loom.explain()` returns
the last compile's, and LOOM_EXPLAIN=1 prints each as it is made. Shapes are the ones of
each compile: Dynamo recompiles for new shapes, or makes a size a symbol (dynamic=True, or
its automatic dynamic shapes after a size changed). A symbolic size goes to Loom's symbolic
dimensions where the kernel family takes one: a linear's or a 2-D matmul's row count (the
token count; N and K numbers, 16-bit, on sm_90a) compiles one wgmma kernel with M left to
run time (`runtime_m=True`), launched for every M; an attention's symbolic batch and
lengths (heads and head dim numbers) go to run time too (`runtime="B,Sq,Sk"`). Any other
symbolic size (a bmm's batch, N or K) runs a kernel per concrete size, compiled at its
first call and cached. The report says which each op got.
"""
import operator
import os
from typing import List, Optional

import torch
import torch.nn.functional as F

__all__ = ["loom_backend", "rewrite", "explain", "Report"]

_LINEAR = {F.linear, torch._C._nn.linear}
_MATMUL = {torch.matmul, operator.matmul, torch.mm, torch.bmm, torch.Tensor.matmul}
_SDPA = {F.scaled_dot_product_attention}
_ACTIVATIONS = {torch.relu: "relu", F.relu: "relu", torch.nn.functional.silu: "silu",
                torch.nn.functional.gelu: "gelu"}
_BINARY = {operator.add: "add", torch.add: "add", operator.sub: "sub", torch.sub: "sub",
           operator.mul: "mul", torch.mul: "mul"}
_BINARY_METHODS = {"add": "add", "sub": "sub", "mul": "mul"}
_CAST_METHODS = {"float": torch.float32, "half": torch.float16, "bfloat16": torch.bfloat16}
_DTYPE_NAMES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}
_SIXTEEN_BIT = (torch.float16, torch.bfloat16)


class Report:
    """What one compile matched (node -> Loom op) and what it left to Inductor, and why."""

    def __init__(self):
        self.matched: List[str] = []
        self.unmatched: List[str] = []

    def __str__(self):
        lines = ["loom backend: %d call(s) on Loom, %d left to Inductor" % (
            len(self.matched), len(self.unmatched))]
        lines += ["  loom:     " + m for m in self.matched]
        lines += ["  inductor: " + u for u in self.unmatched]
        return "\n".join(lines)


_last: Optional[Report] = None   # the last graph's
_reports: List[Report] = []      # every graph's since the last explain(reset=True)


def explain(reset: bool = False) -> str:
    """What the loom backend did with each graph it compiled since the last
    explain(reset=True) (a model with graph breaks is several graphs): one graph's report,
    or a total line and each graph's. '' before any. reset=True forgets them after
    returning them."""
    reps = list(_reports)
    if reset:
        _reports.clear()
    if not reps:
        return ""
    if len(reps) == 1:
        return str(reps[0])
    on = sum(len(r.matched) for r in reps)
    off = sum(len(r.unmatched) for r in reps)
    head = "loom backend: %d graphs, %d call(s) on Loom, %d left to Inductor" % (len(reps), on, off)
    return "\n".join([head] + ["graph %d: %s" % (i, r) for i, r in enumerate(reps)])


def _value(arg):
    """The example tensor Dynamo recorded for a node argument (None for non-tensors)."""
    if isinstance(arg, torch.fx.Node):
        v = arg.meta.get("example_value", arg.meta.get("val"))
        return v if isinstance(v, torch.Tensor) else None
    return None


def _concrete(d):
    """Whether size `d` is a number (a SymInt Dynamo specialized counts as one)."""
    # Exported in symbolic_shapes.__all__ (a public name, unlike SymInt.node.expr, which
    # is what it reads).
    from torch.fx.experimental.symbolic_shapes import is_concrete_int
    return is_concrete_int(d)


def _dynamic(t):
    """Whether example tensor `t` has a symbolic size."""
    return t is not None and not all(_concrete(d) for d in t.shape)


def _rows_at_run_time(first, second, runtime_rows):
    """Whether a GEMM whose first operand is `first` ([..., M, K], its rows the leading
    dims together) and second `second` (2-D) takes the run-time-M kernel: asked for
    (runtime_rows), some leading dim symbolic, every other size a number."""
    return (runtime_rows and second.dim() == 2 and _dynamic(first)
            and _concrete(first.shape[-1]) and not _dynamic(second))


def _sm90(tensors):
    """runtime_rows' default: the run-time-M wgmma kernel is built for sm_90a."""
    dev = tensors[0].device
    return dev.type == "cuda" and torch.cuda.get_device_capability(dev) == (9, 0)


def _why_not(tensors, devices):
    """Why Loom's ops do not take these operands (None when they do)."""
    if any(t is None for t in tensors):
        return "an operand is not a tensor Dynamo recorded"
    if any(t.device.type not in devices for t in tensors):
        return "operands on %s, not a CUDA GPU" % tensors[0].device
    if any(t.dtype not in _SIXTEEN_BIT for t in tensors):
        return "dtype %s: the Loom ops here take float16/bfloat16 (f32 GEMMs stay exact on " \
               "cuBLAS)" % tensors[0].dtype
    if len({t.dtype for t in tensors}) != 1:
        return "mixed dtypes"
    return None


def _contiguous(graph, node):
    """`node.contiguous()` in front of a Loom op (a no-op on contiguous tensors)."""
    return graph.call_method("contiguous", (node,))


def _gelu_form(node):
    approx = node.kwargs.get("approximate", node.args[1] if len(node.args) > 1 else "none")
    return approx


def _only_user(node):
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def _step(cur, u, out, extras):
    """The epilogue step that node `u` applies to `cur` (its only input from the chain),
    or None when u is not one Loom's epilogue takes. Tensors u reads are appended to
    `extras` (fx nodes)."""
    if u.op == "call_function" and u.target in _ACTIVATIONS:
        form = _ACTIVATIONS[u.target]
        if u.args[0] is not cur:
            return None
        if form == "gelu":
            approx = _gelu_form(u)
            if approx not in ("none", "tanh"):
                return None
            form = "gelu_tanh" if approx == "tanh" else "gelu"
        return form
    if u.op == "call_function" and u.target is F.dropout:
        p = u.kwargs.get("p", u.args[1] if len(u.args) > 1 else 0.5)
        training = u.kwargs.get("training", u.args[2] if len(u.args) > 2 else True)
        inplace = u.kwargs.get("inplace", u.args[3] if len(u.args) > 3 else False)
        return "" if u.args[0] is cur and not inplace and (training is False or p == 0) else None
    if u.op == "call_function" and u.target in _BINARY:
        op = _BINARY[u.target]
    elif u.op == "call_method" and u.target in _BINARY_METHODS:
        op = _BINARY_METHODS[u.target]
    elif u.op == "call_method" and (u.target in _CAST_METHODS or u.target == "to"):
        if u.target == "to":  # .to(dtype) only: no device moves, no copy=/memory_format=
            dt = u.kwargs.get("dtype", u.args[1] if len(u.args) > 1 else None)
            if not isinstance(dt, torch.dtype) or len(u.args) > 2 or set(u.kwargs) - {"dtype"}:
                return None
        else:
            dt = _CAST_METHODS[u.target]
        return "" if dt in _DTYPE_NAMES else None  # the dtype is read from the chain's end
    else:
        return None
    if len(u.args) != 2 or set(u.kwargs):  # torch.add(x, y, alpha=..) and the like stay
        return None
    a, b = u.args
    if b is cur and op != "sub":
        a, b = b, a
    if a is not cur or b is cur:
        return None
    if isinstance(b, (int, float)) and not isinstance(b, bool):
        return "%s:%r" % (op, float(b))
    v = _value(b)
    if v is None or v.dtype not in _DTYPE_NAMES or v.device != out.device:
        return None
    if list(v.shape) != list(out.shape) and list(v.shape) != [out.shape[-1]]:
        return None
    extras.append(b)
    return "%s:t%d" % (op, len(extras) - 1)


def _epilogue_chain(node):
    """The longest chain of single-user elementwise nodes after GEMM `node` that Loom's
    epilogue takes: (steps, extra tensor nodes, the chain's last node, descriptions)."""
    steps, extras, what, cur = [], [], [], node
    out = _value(node)
    while out is not None:
        u = _only_user(cur)
        if u is None:
            break
        n_extras = len(extras)
        st = _step(cur, u, out, extras)
        if st is None:
            del extras[n_extras:]
            break
        if st:
            steps.append(st)
        what.append(st.split(":")[0] if st else
                    "dropout (inactive)" if u.target is F.dropout else "cast")
        cur = u
    return steps, extras, cur, what


def rewrite(gm: torch.fx.GraphModule, devices=("cuda",), runtime_rows=None) -> Report:
    """Replaces, in place, the calls of `gm` that Loom's ops take (see the module's
    docstring); returns the report. `devices`: the tensor device types taken (tests pass
    "cpu" to check the matching on a CPU-captured graph). runtime_rows: whether a symbolic
    row count takes the run-time-M kernel (None: where the operands' GPU is sm_90)."""
    import loom  # the ops; imported here so importing this module stays cheap

    report = Report()
    g = gm.graph
    for node in list(g.nodes):
        if node.op != "call_function":
            continue
        t = node.target
        name = getattr(t, "__name__", str(t))
        if t in _LINEAR:
            x, w = node.args[0], node.args[1]
            bias = node.args[2] if len(node.args) > 2 else node.kwargs.get("bias")
            tensors = [_value(x), _value(w)] + ([_value(bias)] if bias is not None else [])
            why = _why_not(tensors, devices)
            if why is None and _value(w).dim() != 2:
                why = "weight of rank %d" % _value(w).dim()
            if why:
                report.unmatched.append("%s (%s): %s" % (node.name, name, why))
                continue
            steps, extras, last, what = _epilogue_chain(node)
            final = _value(last)
            cast = final is not None and final.dtype != _value(x).dtype
            rt = _rows_at_run_time(_value(x), _value(w), _runtime_rows(runtime_rows, tensors))
            rt_kw = {"runtime_m": True} if rt else {}
            with g.inserting_before(last):
                if len(steps) <= 1 and not extras and not cast and (
                        not steps or steps[0] in ("relu", "silu", "gelu", "gelu_tanh")):
                    kw = dict(rt_kw, activation=steps[0]) if steps else rt_kw
                    new = g.call_function(loom.linear, (_contiguous(g, x), w, bias), kw)
                    opname = "loom.linear"
                else:
                    ex = [_contiguous(g, e) for e in extras]
                    new = g.call_function(loom.gemm_epilogue, ("linear", _contiguous(g, x), w, bias, ex,
                                                               ";".join(steps),
                                                               _DTYPE_NAMES[final.dtype] if cast else None),
                                          rt_kw)
                    opname = "loom.gemm_epilogue"
            _replace_chain(g, node, last, new)
            report.matched.append("%s: linear%s -> %s%s" % (
                node.name, "".join(" + " + w_ for w_ in what), opname,
                _sizes_note(rt, tensors + [_value(e) for e in extras])))
        elif t in _MATMUL:
            a, b = node.args[0], node.args[1]
            why = _why_not([_value(a), _value(b)], devices)
            if why is None and (_value(a).dim() < 2 or _value(b).dim() < 2):
                why = "a vector operand (Loom's matmul takes matrices and batches of them)"
            if why:
                report.unmatched.append("%s (%s): %s" % (node.name, name, why))
                continue
            kind = "bmm" if t is torch.bmm else "matmul"
            steps, extras, last, what = _epilogue_chain(node)
            final = _value(last)
            cast = final is not None and final.dtype != _value(a).dtype
            rt = (kind == "matmul" and _value(a).dim() == 2 and _rows_at_run_time(
                _value(a), _value(b), _runtime_rows(runtime_rows, [_value(a)])))
            kw = {"runtime_m": True} if rt else {}
            with g.inserting_before(last):
                if not steps and not cast:
                    op = loom.bmm if kind == "bmm" else loom.matmul
                    new = g.call_function(op, (_contiguous(g, a), _contiguous(g, b)), kw)
                    opname = "loom." + op.__name__
                else:
                    ex = [_contiguous(g, e) for e in extras]
                    new = g.call_function(loom.gemm_epilogue, (kind, _contiguous(g, a), _contiguous(g, b),
                                                               None, ex, ";".join(steps),
                                                               _DTYPE_NAMES[final.dtype] if cast else None),
                                          kw)
                    opname = "loom.gemm_epilogue"
            _replace_chain(g, node, last, new)
            report.matched.append("%s: %s%s -> %s%s" % (
                node.name, name, "".join(" + " + w_ for w_ in what), opname,
                _sizes_note(rt, [_value(a), _value(b)] + [_value(e) for e in extras])))
        elif t in _SDPA:
            q, k, v = node.args[:3]
            kw = dict(node.kwargs)
            for i, key in enumerate(("attn_mask", "dropout_p", "is_causal", "scale"), start=3):
                if len(node.args) > i:
                    kw[key] = node.args[i]
            why = _why_not([_value(q), _value(k), _value(v)], devices)
            causal = bool(kw.get("is_causal", False))
            mask_form = ""
            if why is None and kw.get("attn_mask") is not None:
                form, why = _mask_form(gm, kw["attn_mask"], _value(q), _value(k))
                if why is None:
                    causal = form
                    mask_form = " (attn_mask folded to %s)" % (
                        "top-left causal" if form is True else "bottom-right causal" if form
                        else "no mask")
            if why is None and kw.get("dropout_p", 0.0) not in (0, 0.0):
                why = "dropout"
            if why is None and (_value(q).dim() != 4 or _value(q).shape[-1] % 8 or
                                _value(q).shape[-1] > 256):
                why = "q of shape %s (Loom takes [B, H, S, D], D a multiple of 8 up to 256)" % (
                    list(_value(q).shape),)
            if why:
                report.unmatched.append("%s (%s): %s" % (node.name, name, why))
                continue
            runtime = _attention_runtime(_value(q), _value(k), _value(v))
            kwargs = {"causal": causal or False, "scale": kw.get("scale")}
            if runtime:
                kwargs["runtime"] = runtime
            with g.inserting_before(node):
                new = g.call_function(loom.attention, tuple(_contiguous(g, x) for x in (q, k, v)),
                                      kwargs)
            new.meta = dict(node.meta)
            node.replace_all_uses_with(new)
            g.erase_node(node)
            report.matched.append("%s: scaled_dot_product_attention%s -> loom.attention%s" % (
                node.name, mask_form or (" (causal)" if causal else ""),
                " [%s symbolic: one kernel, at run time]" % runtime if runtime else
                _sizes_note(False, [_value(q), _value(k), _value(v)])))
    g.lint()
    gm.recompile()
    return report


def _attention_runtime(q, k, v):
    """The sizes of an attention Loom's kernel takes at run time that are symbols here
    ("B,Sq,Sk" or a part), or "" when none is or another size (heads, D) is one too."""
    if not any(_dynamic(t) for t in (q, k, v)):
        return ""
    if not all(_concrete(t.shape[i]) for t in (q, k, v) for i in (1, 3)):
        return ""
    names = [n for n, d in (("B", q.shape[0]), ("Sq", q.shape[2]), ("Sk", k.shape[2]))
             if not _concrete(d)]
    if "B" not in names and not all(_concrete(t.shape[0]) for t in (k, v)):
        return ""  # K/V's batch symbolic while Q's is not: not one size Loom can name
    return ",".join(names)


def _runtime_rows(asked, tensors):
    return _sm90(tensors) if asked is None else bool(asked)


def _sizes_note(runtime_m, tensors):
    """The report's word on symbolic sizes: which kernel a dynamic op gets."""
    if runtime_m:
        return " [rows symbolic: one kernel, M at run time]"
    if any(_dynamic(t) for t in tensors):
        return " [symbolic sizes: a kernel per size, cached]"
    return ""


_RANDOM = ("rand", "bernoulli", "dropout", "normal", "uniform", "multinomial", "poisson")


def _fold(gm, node):
    """The value of `node` when it is a function of constants alone -- no graph input
    (tensor or size), no module call, no random or impure op -- computed now: (value, None).
    Dynamo guards the shapes it specialized on, so such a value holds for every call of
    this graph. Otherwise (None, why)."""
    keep, stack = set(), [node]
    while stack:
        n = stack.pop()
        if n in keep:
            continue
        if n.op == "placeholder":
            return None, "it depends on the graph's input %s" % n.name
        if n.op == "call_module" or (n.op != "get_attr" and n.is_impure()) or any(
                r in getattr(n.target, "__name__", str(n.target)).lower() for r in _RANDOM):
            return None, "it depends on %s (%s), not only on constants" % (n.name, n.target)
        keep.add(n)
        stack.extend(n.all_input_nodes)
    sub, env = torch.fx.Graph(), {}
    for n in gm.graph.nodes:
        if n in keep:
            env[n] = sub.node_copy(n, lambda x: env[x])
    sub.output(env[node])
    try:
        with torch.no_grad():
            return torch.fx.GraphModule(gm, sub)(), None
    except Exception as e:  # noqa: BLE001 - the reason is reported, the SDPA stays
        return None, "evaluating it failed (%s)" % e


def _mask_form(gm, mask_node, q, k):
    """Which of Loom's masks SDPA's attn_mask is: (False | 'top_left' | 'bottom_right',
    None), or (None, why not). The mask must fold to a constant (a model building its
    causal mask from the sequence's positions under tracing, as transformers does, gives
    one; a padding mask the caller passes does not) and allow exactly the keys one of
    Loom's forms does, every row at least one (SDPA's rows with none are NaN)."""
    m, why = _fold(gm, mask_node)
    if why:
        return None, "an explicit attn_mask that is not a constant: " + why
    if not isinstance(m, torch.Tensor):
        return None, "an attn_mask that is not a tensor"
    sq, sk = q.shape[-2], k.shape[-2]
    try:
        m = m.expand(q.shape[0], q.shape[1], sq, sk)
    except RuntimeError:
        return None, "an attn_mask of shape %s that does not broadcast to the scores" % list(m.shape)
    if m.dtype == torch.bool:
        allowed = m
    elif m.is_floating_point():
        if not bool(((m == 0) | (m == float("-inf"))).all()):
            return None, "an additive attn_mask with values other than 0 and -inf (a bias)"
        allowed = m == 0
    else:
        return None, "an attn_mask of dtype %s" % m.dtype
    if not bool(allowed.any(-1).all()):
        return None, "an attn_mask with rows that keep no key (SDPA gives NaN there)"
    i = torch.arange(sq, device=m.device)[:, None]
    j = torch.arange(sk, device=m.device)[None, :]
    for form, want in ((False, torch.ones(sq, sk, dtype=torch.bool, device=m.device)),
                       ("top_left", j <= i), ("bottom_right", j <= i + (sk - sq))):
        if bool((allowed == want).all()):
            return (True if form == "top_left" else form), None
    return None, "an attn_mask that is not causal (top-left or bottom-right) or empty"


def _replace_chain(g, first, last, new):
    """`new` takes the place of the chain first..last (each node its predecessor's only
    user): last's users read new, and the chain's nodes go."""
    new.meta = dict(last.meta)
    last.replace_all_uses_with(new)
    chain, cur = [], first
    while True:
        chain.append(cur)
        if cur is last:
            break
        cur = _only_user(cur)
    for n in reversed(chain):
        g.erase_node(n)


def loom_backend(gm: torch.fx.GraphModule, example_inputs, mode=None, options=None):
    """The torch.compile backend: Loom's ops where they apply (rewrite), Inductor for the
    rest. torch.compile's `mode` and `options` go to Inductor as they would with its own
    backend: mode="reduce-overhead" replays the whole graph, Loom's kernels included, as
    a CUDA graph; options are Inductor's config (e.g. {"triton.cudagraphs": True})."""
    global _last
    _last = rewrite(gm)
    _reports.append(_last)
    if os.environ.get("LOOM_EXPLAIN"):
        print(_last)
    from torch._inductor import list_mode_options
    from torch._inductor.compile_fx import compile_fx
    patches = dict(list_mode_options(mode) if mode else {})
    patches.update(options or {})
    return compile_fx(gm, example_inputs, config_patches=patches or None)


def register():
    """Registers "loom" with torch.compile (done by `import loom` when torch is there)."""
    from torch._dynamo import list_backends, register_backend
    if "loom" not in list_backends(exclude_tags=()):
        register_backend(loom_backend, name="loom")
