"""The torch.compile backend's graph rewriting on the CPU: graphs Dynamo captures from a
module (nn.Linear with and without a following activation, matmul and bmm, SDPA causal and
not, with a mask, in f32) are rewritten by loom.compile_backend.rewrite with CPU tensors
admitted, and the report and the rewritten graph are checked: which calls became Loom ops
(with the activation fused), which stayed, and why. Running the rewritten graph needs a GPU
(tests/test_ops_gpu.py's torch.compile tests run Loom's ops under Inductor). Epilogue
chains (residual adds, scales, casts, the SwiGLU multiply) are checked for what they
fuse, where they stop, and that the fused steps compute what the captured graph did."""
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
try:
    import loom
    from loom import compile_backend as cb
except ImportError as e:  # pragma: no cover - depends on the build
    pytest.skip("loom's extension is not built: %s" % e, allow_module_level=True)

F = torch.nn.functional


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(64, 128, bias=True)
        self.gate = torch.nn.Linear(64, 128, bias=False)
        self.down = torch.nn.Linear(128, 64, bias=False)

    def forward(self, x, q, k, v, mask):
        h = F.silu(self.gate(x)) * self.up(x)       # gate + silu fused; up alone
        y = self.down(h)                            # plain linear
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        b = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)   # stays: a mask
        s = torch.matmul(q, k.transpose(-1, -2))    # a batched matmul
        return y, a, b, s


def captured(module, *inputs, with_inputs=False, dynamic=None):
    """The one graph Dynamo captures of module(*inputs) (dynamic: torch.compile's)."""
    graphs = []

    def grab(gm, example_inputs):
        graphs.append((gm, example_inputs))
        return gm.forward

    torch._dynamo.reset()
    torch.compile(module, backend=grab, fullgraph=True, dynamic=dynamic)(*inputs)
    assert len(graphs) == 1
    return graphs[0] if with_inputs else graphs[0][0]


def inputs(dtype=torch.bfloat16):
    x = torch.randn(32, 64, dtype=dtype)
    q = torch.randn(2, 4, 16, 64, dtype=dtype)
    k = torch.randn(2, 4, 16, 64, dtype=dtype)
    v = torch.randn(2, 4, 16, 64, dtype=dtype)
    mask = torch.ones(16, 16, dtype=torch.bool)
    return x, q, k, v, mask


def targets(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def test_rewrites_linears_fusing_the_activation_and_attention_and_matmul():
    gm = captured(Block().to(torch.bfloat16), *inputs())
    report = cb.rewrite(gm, devices=("cpu",))
    text = str(report)
    # Three linears: the gate's silu and the multiply by up's output fused into the gate's
    # GEMM; the causal SDPA; the matmul.
    assert sum(t is loom.linear for t in targets(gm)) == 2, text
    assert "linear + silu + mul -> loom.gemm_epilogue" in text
    assert F.silu not in targets(gm), "the silu was fused into the gate's Loom GEMM"
    ep = [n for n in gm.graph.nodes if n.target is loom.gemm_epilogue]
    assert len(ep) == 1 and ep[0].args[0] == "linear" and ep[0].args[5] == "silu;mul:t0", text
    assert sum(t is loom.attention for t in targets(gm)) == 1, text
    assert sum(t is loom.matmul for t in targets(gm)) == 1, text
    # The masked SDPA stays, with its reason.
    assert sum(t is F.scaled_dot_product_attention for t in targets(gm)) == 1
    assert any("attn_mask" in u for u in report.unmatched), text
    n_loom = len(report.matched)
    assert n_loom == 5, text
    # The causal flag travels as a keyword argument.
    attn = [n for n in gm.graph.nodes if n.target is loom.attention][0]
    assert attn.kwargs["causal"] is True
    gm.graph.lint()


def test_epilogue_chains_fuse_residuals_scales_and_casts():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.o = torch.nn.Linear(64, 64, bias=False)
            self.d = torch.nn.Linear(64, 64)
            self.h = torch.nn.Linear(64, 32)

        def forward(self, x, r, bias_like):
            y = r + self.o(x)                      # residual add, the linear second
            z = (self.d(y) * 0.5 - bias_like)      # scale, then subtract an [N] vector
            w = self.h(z).float()                  # cast: the result's dtype
            return y, z, w

    x = torch.randn(2, 8, 64, dtype=torch.bfloat16)
    xs = torch.randn(8, 64, dtype=torch.bfloat16)
    m = M().to(torch.bfloat16)

    class Wrap(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, x, r, b, xs):
            y, z, w = self.m(x, r, b)
            return y, z, w, torch.matmul(xs, xs.transpose(0, 1)) * 2.0

    args = (x, torch.randn(2, 8, 64, dtype=torch.bfloat16), torch.randn(64, dtype=torch.bfloat16), xs)
    gm, example = captured(Wrap(), *args, with_inputs=True)
    with torch.no_grad():
        want = gm(*example)
    report = cb.rewrite(gm, devices=("cpu",))
    text = str(report)
    eps = [n for n in gm.graph.nodes if n.target is loom.gemm_epilogue]
    got = sorted((n.args[0], n.args[5], n.args[6]) for n in eps)
    assert got == [("linear", "", "f32"), ("linear", "add:t0", None),
                   ("linear", "mul:0.5;sub:t0", None), ("matmul", "mul:2.0", None)], text
    assert "linear + cast -> loom.gemm_epilogue" in text
    gm.graph.lint()
    # The steps mean what the graph did: the rewritten graph on the CPU, with torch's
    # arithmetic standing in for Loom's kernel, gives the captured graph's answers.
    import loom.ops as ops

    def on_cpu(kind, a, b, bias=None, extras=(), steps="", out_dtype=None, **kw):
        if kind == "linear":
            z = torch.nn.functional.linear(a.float(), b.float(), None if bias is None else bias.float())
        else:
            z = a.float() @ b.float()
        y = ops._apply_steps(z, [e.float() for e in extras], steps)
        return y.to(ops._TORCH_DTYPES[out_dtype] if out_dtype else a.dtype)

    saved = (loom.gemm_epilogue, loom.linear)
    for n in gm.graph.nodes:
        if n.target is loom.gemm_epilogue:
            n.target = on_cpu
        elif n.target is loom.linear:
            n.target = lambda x, w, b=None, activation=None, **kw: on_cpu(
                "linear", x, w, b, (), activation or "")
    gm.recompile()
    with torch.no_grad():
        have = gm(*example)
    assert saved == (loom.gemm_epilogue, loom.linear)
    for h, w_ in zip(have, want):
        assert h.dtype == w_.dtype and h.shape == w_.shape
        assert (h.float() - w_.float()).abs().max().item() <= 0.05 * (w_.float().abs().max().item() + 1)


def test_epilogue_chains_stop_where_loom_cannot_follow():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(64, 64, bias=False)

        def forward(self, x, r, col):
            y1 = self.a(x)
            u = y1 + r                     # two users of y1: no fusion at all
            v = y1 * 3.0
            y2 = torch.add(self.a(x), r, alpha=2.0)   # alpha: stays an op
            y3 = 1.0 - self.a(x)           # number minus the result: not a sub step
            y4 = self.a(x) + col           # a [M, 1] column: not the result's shape or [N]
            return u, v, y2, y3, y4

    args = (torch.randn(8, 64, dtype=torch.bfloat16), torch.randn(8, 64, dtype=torch.bfloat16),
            torch.randn(8, 1, dtype=torch.bfloat16))
    gm = captured(M().to(torch.bfloat16), *args)
    report = cb.rewrite(gm, devices=("cpu",))
    assert sum(t is loom.linear for t in targets(gm)) == 4, str(report)
    assert loom.gemm_epilogue not in targets(gm), str(report)
    gm.graph.lint()


def test_cpu_graphs_and_f32_stay_on_torch_with_their_reason():
    gm = captured(Block().to(torch.bfloat16), *inputs())
    report = cb.rewrite(gm)  # only CUDA tensors are taken by default
    assert not report.matched
    assert all("not a CUDA GPU" in u for u in report.unmatched), str(report)
    gm32 = captured(Block(), *inputs(torch.float32))
    report32 = cb.rewrite(gm32, devices=("cpu",))
    assert not report32.matched
    assert any("float32" in u for u in report32.unmatched), str(report32)


def test_both_gelus_are_fused():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(64, 64)

        def forward(self, x):
            return F.gelu(self.lin(x), approximate="tanh"), F.gelu(self.lin(x))

    gm = captured(M().to(torch.bfloat16), torch.randn(8, 64, dtype=torch.bfloat16))
    report = cb.rewrite(gm, devices=("cpu",))
    acts = sorted(n.kwargs.get("activation") or "" for n in gm.graph.nodes if n.target is loom.linear)
    assert acts == ["gelu", "gelu_tanh"], str(report)
    assert F.gelu not in targets(gm)


def test_the_backend_is_registered_and_explains():
    assert "loom" in torch._dynamo.list_backends(exclude_tags=())
    gm = captured(Block().to(torch.bfloat16), *inputs())
    loom.explain(reset=True)
    cb._reports.append(cb.rewrite(gm, devices=("cpu",)))
    assert loom.explain().startswith("loom backend: 5 call(s) on Loom")
    cb._reports.append(cb.Report())
    two = loom.explain(reset=True)
    assert two.startswith("loom backend: 2 graphs, 5 call(s) on Loom, 1 left to Inductor"), two
    assert "\ngraph 1: loom backend: 0 call(s)" in two and loom.explain() == ""


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_block_compiles_whole_on_the_gpu_and_matches_eager():
    # Dynamo + the loom backend + Inductor, fullgraph: the five calls run Loom's kernels
    # and the outputs keep the error rule against an f32 run (max error at most twice that
    # of the eager bf16 module).
    torch._dynamo.reset()
    m = Block().cuda().to(torch.bfloat16)
    args = [t.cuda() for t in inputs()]
    compiled = torch.compile(m, backend="loom", fullgraph=True)
    loom.explain(reset=True)
    with torch.no_grad():
        got = compiled(*args)
        eager = m(*args)
        m32 = Block().cuda()
        m32.load_state_dict({k: v.float() for k, v in m.state_dict().items()})
        ref = m32(*[a.float() if a.is_floating_point() else a for a in args])
    assert loom.explain().startswith("loom backend: 5 call(s) on Loom"), loom.explain()
    for g, e, r in zip(got, eager, ref):
        le = (g.float() - r).abs().max().item()
        te = (e.float() - r).abs().max().item()
        assert le <= 2 * te, (le, te)


class MaskedAttention(torch.nn.Module):
    """SDPA with a mask built in the graph from positions (as transformers builds its causal
    mask under tracing), or from an input, or as a bias."""

    def __init__(self, form):
        super().__init__()
        self.form = form

    def forward(self, q, k, v, given):
        sq, sk = q.shape[-2], k.shape[-2]
        i = torch.arange(sq, device=q.device)[:, None]
        j = torch.arange(sk, device=q.device)[None, :]
        if self.form == "top_left":
            mask = j <= i
        elif self.form == "bottom_right":
            mask = j <= i + (sk - sq)
        elif self.form == "none":
            mask = torch.ones(q.shape[0], 1, sq, sk, dtype=torch.bool, device=q.device)
        elif self.form == "additive":
            mask = torch.zeros(sq, sk, dtype=q.dtype, device=q.device).masked_fill(j > i, float("-inf"))
        elif self.form == "bias":
            mask = (j - i).to(q.dtype) * 0.1
        elif self.form == "empty_row":
            mask = j < i
        elif self.form == "window":
            mask = (j <= i) & (j > i - 4)
        elif self.form == "random":
            mask = torch.rand(sq, sk, device=q.device) > 0.5
        else:
            mask = given
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@pytest.mark.parametrize("form,sk,expect", [
    ("top_left", 16, True), ("bottom_right", 24, "bottom_right"), ("none", 24, False),
    ("additive", 16, True),
    ("bias", 16, "values other than 0 and -inf"), ("empty_row", 16, "rows that keep no key"),
    ("window", 16, "not causal"), ("random", 16, "not only on constants"),
    ("given", 16, "depends on the graph's input"),
])
def test_sdpa_masks_that_fold_to_a_loom_form_are_matched(form, sk, expect):
    q = torch.randn(1, 2, 16, 64, dtype=torch.bfloat16)
    k = torch.randn(1, 2, sk, 64, dtype=torch.bfloat16)
    given = torch.ones(16, sk, dtype=torch.bool)
    gm = captured(MaskedAttention(form), q, k, k, given)
    report = cb.rewrite(gm, devices=("cpu",))
    text = str(report)
    attn = [n for n in gm.graph.nodes if n.target is loom.attention]
    if isinstance(expect, str) and expect not in ("bottom_right",):
        assert not attn and len(report.unmatched) == 1 and expect in report.unmatched[0], text
        return
    assert len(attn) == 1, text
    assert attn[0].kwargs["causal"] == expect, text
    assert "attn_mask folded to" in text


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("form,sk", [("top_left", 300), ("bottom_right", 300), ("none", 200)])
def test_folded_masks_run_loom_attention_and_match_eager(form, sk):
    torch._dynamo.reset()
    loom.explain(reset=True)
    q = torch.randn(2, 4, 200, 64, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(2, 4, sk, 64, dtype=torch.bfloat16, device="cuda")
    v = torch.randn(2, 4, sk, 64, dtype=torch.bfloat16, device="cuda")
    given = torch.ones(200, sk, dtype=torch.bool, device="cuda")
    m = MaskedAttention(form)
    with torch.no_grad():
        got = torch.compile(m, backend="loom", fullgraph=True)(q, k, v, given)
        eager = m(q, k, v, given)
        ref = m(q.double(), k.double(), v.double(), given)
    assert "attn_mask folded to" in loom.explain(), loom.explain()
    le = (got.double() - ref).abs().max().item()
    te = (eager.double() - ref).abs().max().item()
    assert le <= 2 * te, (le, te)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_epilogue_chains_run_on_the_gpu_and_match_eager():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = torch.nn.Linear(256, 512, bias=False)
            self.up = torch.nn.Linear(256, 512, bias=False)
            self.down = torch.nn.Linear(512, 256, bias=False)

        def forward(self, x):
            h = F.silu(self.gate(x)) * self.up(x)
            return (x + self.down(h)).float() * 0.5

    torch._dynamo.reset()
    loom.explain(reset=True)
    m = M().cuda().to(torch.bfloat16)
    x = torch.randn(3, 100, 256, dtype=torch.bfloat16, device="cuda")
    with torch.no_grad():
        got = torch.compile(m, backend="loom", fullgraph=True)(x)
        eager = m(x)
        m32 = M().cuda()
        m32.load_state_dict({k: v.float() for k, v in m.state_dict().items()})
        ref = m32(x.float())
    text = loom.explain()
    assert "linear + silu + mul -> loom.gemm_epilogue" in text, text
    assert "linear + add + cast + mul -> loom.gemm_epilogue" in text, text
    assert got.dtype == eager.dtype == torch.float32
    le = (got - ref).abs().max().item()
    te = (eager - ref).abs().max().item()
    assert le <= 2 * te, (le, te)


def test_mode_and_options_reach_inductor(monkeypatch):
    import torch._inductor.compile_fx as cfx
    seen = []
    monkeypatch.setattr(cfx, "compile_fx", lambda gm, ex, config_patches=None: seen.append(
        config_patches) or gm.forward)
    gm = captured(Block().to(torch.bfloat16), *inputs())
    cb.loom_backend(gm, [], mode="reduce-overhead")
    cb.loom_backend(gm, [], options={"max_autotune": True})
    cb.loom_backend(gm, [])
    assert seen == [{"triton.cudagraphs": True}, {"max_autotune": True}, None]
    loom.explain(reset=True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_reduce_overhead_replays_loom_kernels_in_a_cuda_graph():
    torch._dynamo.reset()
    loom.explain(reset=True)
    m = Block().cuda().to(torch.bfloat16)
    args = [t.cuda() for t in inputs()]
    compiled = torch.compile(m, backend="loom", mode="reduce-overhead")
    with torch.no_grad():
        eager = m(*args)
        for _ in range(3):  # warm-up, record, replay
            got = [t.clone() for t in compiled(*args)]
    assert "5 call(s) on Loom" in loom.explain(), loom.explain()
    for g, e in zip(got, eager):
        assert (g.float() - e.float()).abs().max().item() <= 0.05 * (e.float().abs().max().item() + 1)


def test_dynamic_shapes_keep_the_gemms_and_say_why_a_mask_stays():
    # Under dynamic=True the token count is a symbol: the GEMMs still become Loom ops (they
    # take every size: a kernel per size, or one for every M with loom.runtime_m), while
    # a mask built from that length is no longer a constant and stays, with the reason.
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(64, 64)

        def forward(self, x, q, k, v):
            s = q.shape[-2]
            i = torch.arange(s)[:, None]
            mask = torch.arange(s)[None, :] <= i
            return self.lin(x), F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    q = torch.randn(1, 2, 24, 64, dtype=torch.bfloat16)
    gm = captured(M().to(torch.bfloat16), torch.randn(24, 64, dtype=torch.bfloat16), q, q, q,
                  dynamic=True)
    report = cb.rewrite(gm, devices=("cpu",))
    text = str(report)
    assert "linear -> loom.linear" in text, text
    assert len(report.unmatched) == 1 and "not a constant" in report.unmatched[0], text


def test_a_symbolic_token_count_takes_the_run_time_m_kernel():
    # dynamic=True makes the token count a symbol: linears (plain, fused, 3-D input) and a
    # 2-D matmul get runtime_m=True (one kernel for every M) where runtime_rows says the
    # GPU has that kernel; attention on projected heads gets its lengths at run time
    # (runtime="Sq,Sk"), and on inputs whose head count and head dim are symbols too a
    # kernel per size, as bmm and a matmul with a symbolic N; the report says which.
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = torch.nn.Linear(64, 128, bias=False)
            self.up = torch.nn.Linear(64, 128, bias=False)
            self.out = torch.nn.Linear(128, 64)
            self.w = torch.nn.Parameter(torch.randn(64, 32))  # static, as parameters are

        def forward(self, x, w, a, b, q):
            h = self.out(F.silu(self.gate(x)) * self.up(x))
            p = self.gate(x).view(1, x.shape[1], 2, 64).transpose(1, 2)  # [1, 2, S, 64]
            return (h, torch.matmul(x[0], self.w), torch.matmul(x[0], w),  # w: an input,
                    torch.bmm(a, b), F.scaled_dot_product_attention(q, q, q),  # its sizes symbols
                    F.scaled_dot_product_attention(p, p, p, is_causal=True))

    def capture(dynamic=True):
        return captured(M().to(torch.bfloat16), *[torch.randn(*s, dtype=torch.bfloat16) for s in (
            (1, 24, 64), (64, 32), (2, 24, 64), (2, 64, 24), (1, 2, 24, 64))], dynamic=dynamic)

    def runtime_m_of(gm):
        return sorted(((getattr(n.target, "__name__", str(n.target)),
                        n.kwargs.get("runtime_m", n.kwargs.get("runtime", False)))
                       for n in gm.graph.nodes if n.op == "call_function"
                       and getattr(n.target, "__module__", "").startswith("loom")), key=str)

    gm = capture()
    text = str(cb.rewrite(gm, devices=("cpu",), runtime_rows=True))
    assert runtime_m_of(gm) == [("attention", "Sq,Sk"), ("attention", False), ("bmm", False),
                                ("gemm_epilogue", True), ("linear", True), ("linear", True),
                                ("linear", True), ("matmul", False), ("matmul", True)], runtime_m_of(gm)
    assert text.count("[rows symbolic: one kernel, M at run time]") == 5, text
    assert text.count("[Sq,Sk symbolic: one kernel, at run time]") == 1, text
    assert text.count("[symbolic sizes: a kernel per size, cached]") == 3, text
    gm = capture()
    text = str(cb.rewrite(gm, devices=("cpu",), runtime_rows=False))  # e.g. not an sm_90 GPU
    assert [rt for _, rt in runtime_m_of(gm)] == ["Sq,Sk"] + [False] * 8, runtime_m_of(gm)
    assert text.count("[symbolic sizes: a kernel per size, cached]") == 8, text
    gm = capture(dynamic=False)  # static shapes: no word on sizes, no runtime_m
    text = str(cb.rewrite(gm, devices=("cpu",), runtime_rows=True))
    assert "symbolic" not in text and all(not rt for _, rt in runtime_m_of(gm)), text


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0),
                    reason="needs an sm_90 GPU (the run-time-M wgmma kernel)")
def test_dynamic_token_counts_run_one_kernel_per_linear_on_the_gpu():
    # torch.compile(dynamic=True) of an MLP block: one graph for every token count above 1,
    # each linear one Loom kernel (M at run time) for all of them, each result within the
    # error rule (twice the eager bf16 module's error against f32). One token is a graph
    # of its own (Dynamo specializes sizes 0 and 1) with its own kernels.
    class Mlp(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = torch.nn.Linear(256, 512, bias=False)
            self.up = torch.nn.Linear(256, 512, bias=False)
            self.down = torch.nn.Linear(512, 256)

        def forward(self, x):
            return self.down(F.silu(self.gate(x)) * self.up(x)) + x

    torch._dynamo.reset()
    loom.explain(reset=True)
    loom.clear_cache()
    m = Mlp().cuda().to(torch.bfloat16)
    m32 = Mlp().cuda()
    m32.load_state_dict({k: v.float() for k, v in m.state_dict().items()})
    compiled = torch.compile(m, backend="loom", dynamic=True)
    with torch.no_grad():
        for rows in (7, 64, 1000, 4097, 1):
            x = torch.randn(1, rows, 256, device="cuda", dtype=torch.bfloat16)
            got, eager, ref = compiled(x), m(x), m32(x.float())
            le = (got.float() - ref).abs().max().item()
            te = (eager.float() - ref).abs().max().item()
            assert le <= 2 * te, (rows, le, te)
    text = loom.explain()
    # two graphs of 3 calls (gate·silu·up, up, down + x): the symbolic one and the one-token one
    assert text.startswith("loom backend: 2 graphs, 6 call(s) on Loom"), text
    assert text.count("M at run time") == 3, text
    kernels = sorted(k[0] for k in loom.cache_info()["kernels"])
    assert len(kernels) == 6 and sum("[M," in k for k in kernels) == 3, kernels


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_dynamic_lengths_run_one_attention_kernel_on_the_gpu():
    # torch.compile(dynamic=True) of causal self-attention on projected heads: one graph,
    # the attention one Loom kernel with its lengths at run time, each length within the
    # rule against an f32 run.
    class Attn(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = torch.nn.Linear(512, 3 * 512, bias=False)

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = self.qkv(x).view(b, s, 3, 4, 128).permute(2, 0, 3, 1, 4)
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    torch._dynamo.reset()
    loom.explain(reset=True)
    loom.clear_cache()
    m = Attn().cuda().to(torch.bfloat16)
    m32 = Attn().cuda()
    m32.load_state_dict({k: v.float() for k, v in m.state_dict().items()})
    compiled = torch.compile(m, backend="loom", dynamic=True)
    with torch.no_grad():
        for s in (17, 300, 1000, 2049):
            x = torch.randn(2, s, 512, device="cuda", dtype=torch.bfloat16)
            got, eager, ref = compiled(x), m(x), m32(x.float())
            le = (got.float() - ref).abs().max().item()
            te = (eager.float() - ref).abs().max().item()
            assert le <= 2 * te, (s, le, te)
    text = loom.explain()
    assert "scaled_dot_product_attention (causal) -> loom.attention [B,Sq,Sk symbolic" in text or \
        "scaled_dot_product_attention (causal) -> loom.attention [Sq,Sk symbolic" in text, text
    attn = [k[0] for k in loom.cache_info()["kernels"] if k[0].startswith("attention")]
    assert len(attn) == 1, attn
