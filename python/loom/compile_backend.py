"""torch.compile(model, backend="loom"): a model's GEMMs and attention on Loom, the rest on
Inductor.

Dynamo hands the backend the FX graph it captured (torch-level calls: torch._C._nn.linear
for nn.Linear, torch.matmul / operator.matmul / torch.bmm / torch.mm, the activations,
F.scaled_dot_product_attention). `rewrite(gm)` replaces each call Loom's ops take with that
op, fusing an activation that is the linear's only user (relu, silu, gelu in its exact erf
form) into the Loom GEMM, and leaves every other node as it was; `loom_backend` then hands
the rewritten graph to Inductor, which compiles everything else and calls the Loom ops
(torch.library custom ops with fake implementations) as they are. So the model compiles
whole, with no graph break.

What is rewritten, and what is not and why, is kept as a report: `loom.explain()` returns
the last compile's, and LOOM_EXPLAIN=1 prints each as it is made. Shapes are the ones of
each compile: Dynamo recompiles for new shapes (or marks them dynamic, which Loom's ops
take: they compile one kernel per concrete shape at run time and cache it).
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


_last: Optional[Report] = None


def explain() -> str:
    """The report of the last graph the loom backend compiled ('' before any)."""
    return str(_last) if _last is not None else ""


def _value(arg):
    """The example tensor Dynamo recorded for a node argument (None for non-tensors)."""
    if isinstance(arg, torch.fx.Node):
        v = arg.meta.get("example_value", arg.meta.get("val"))
        return v if isinstance(v, torch.Tensor) else None
    return None


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


def rewrite(gm: torch.fx.GraphModule, devices=("cuda",)) -> Report:
    """Replaces, in place, the calls of `gm` that Loom's ops take (see the module's
    docstring); returns the report. `devices`: the tensor device types taken (tests pass
    "cpu" to check the matching on a CPU-captured graph)."""
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
            # An activation that is the linear's only user is fused into its epilogue.
            users = list(node.users)
            act, act_node = None, None
            if len(users) == 1 and users[0].op == "call_function" and users[0].target in _ACTIVATIONS:
                u = users[0]
                form = _ACTIVATIONS[u.target]
                if form != "gelu" or _gelu_form(u) == "none":
                    act, act_node = form, u
            with g.inserting_before(act_node or node):
                args = (_contiguous(g, x), w, bias)
                new = g.call_function(loom.linear, args, {"activation": act} if act else {})
            replaced = act_node or node
            new.meta = dict(replaced.meta)
            replaced.replace_all_uses_with(new)
            if act_node is not None:
                g.erase_node(act_node)
            g.erase_node(node)
            report.matched.append("%s: linear%s -> loom.linear" % (
                node.name, " + " + act if act else ""))
        elif t in _MATMUL:
            a, b = node.args[0], node.args[1]
            why = _why_not([_value(a), _value(b)], devices)
            if why is None and (_value(a).dim() < 2 or _value(b).dim() < 2):
                why = "a vector operand (Loom's matmul takes matrices and batches of them)"
            if why:
                report.unmatched.append("%s (%s): %s" % (node.name, name, why))
                continue
            op = loom.bmm if t is torch.bmm else loom.matmul
            with g.inserting_before(node):
                new = g.call_function(op, (_contiguous(g, a), _contiguous(g, b)))
            new.meta = dict(node.meta)
            node.replace_all_uses_with(new)
            g.erase_node(node)
            report.matched.append("%s: %s -> loom.%s" % (node.name, name, op.__name__))
        elif t in _SDPA:
            q, k, v = node.args[:3]
            kw = dict(node.kwargs)
            for i, key in enumerate(("attn_mask", "dropout_p", "is_causal", "scale"), start=3):
                if len(node.args) > i:
                    kw[key] = node.args[i]
            why = _why_not([_value(q), _value(k), _value(v)], devices)
            if why is None and kw.get("attn_mask") is not None:
                why = "an explicit attn_mask (Loom takes the causal forms)"
            if why is None and kw.get("dropout_p", 0.0) not in (0, 0.0):
                why = "dropout"
            if why is None and (_value(q).dim() != 4 or _value(q).shape[-1] % 8 or
                                _value(q).shape[-1] > 256):
                why = "q of shape %s (Loom takes [B, H, S, D], D a multiple of 8 up to 256)" % (
                    list(_value(q).shape),)
            if why:
                report.unmatched.append("%s (%s): %s" % (node.name, name, why))
                continue
            with g.inserting_before(node):
                new = g.call_function(loom.attention, tuple(_contiguous(g, x) for x in (q, k, v)),
                                      {"causal": bool(kw.get("is_causal", False)),
                                       "scale": kw.get("scale")})
            new.meta = dict(node.meta)
            node.replace_all_uses_with(new)
            g.erase_node(node)
            report.matched.append("%s: scaled_dot_product_attention%s -> loom.attention" % (
                node.name, " (causal)" if kw.get("is_causal") else ""))
    g.lint()
    gm.recompile()
    return report


def loom_backend(gm: torch.fx.GraphModule, example_inputs):
    """The torch.compile backend: Loom's ops where they apply (rewrite), Inductor for the
    rest."""
    global _last
    _last = rewrite(gm)
    if os.environ.get("LOOM_EXPLAIN"):
        print(_last)
    from torch._inductor.compile_fx import compile_fx
    return compile_fx(gm, example_inputs)


def register():
    """Registers "loom" with torch.compile (done by `import loom` when torch is there)."""
    from torch._dynamo import list_backends, register_backend
    if "loom" not in list_backends(exclude_tags=()):
        register_backend(loom_backend, name="loom")
