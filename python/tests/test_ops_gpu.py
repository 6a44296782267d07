"""The ops on a GPU (each test skips without torch + CUDA, with the reason): every op
against torch under the issue's rule (Loom's max error against an f32/f64 reference
within twice that of torch's own result in the same dtype), gradients against torch's,
torch.compile(fullgraph=True) of a module using the ops, CUDA graph capture and replay,
the current stream, the kernel cache, and torch.library.opcheck."""
import math

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
try:
    import loom
except ImportError as e:  # pragma: no cover - depends on the build
    pytest.skip("loom's extension is not built: %s" % e, allow_module_level=True)

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA GPU")

# The references must be f32 products, not TF32's.
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def rnd(*shape, dtype=torch.bfloat16, seed=0, scale=1.0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.randn(*shape, device="cuda", dtype=torch.float32, generator=g) * scale).to(dtype)


def check(loom_out, torch_out, ref, what=""):
    """The issue's rule: max |loom - ref| <= 2 max |torch - ref| (plus f32 rounding of the
    reference for exact results)."""
    assert loom_out.shape == torch_out.shape and loom_out.dtype == torch_out.dtype, what
    le = (loom_out.double() - ref.double()).abs().max().item()
    te = (torch_out.double() - ref.double()).abs().max().item()
    tol = 2 * te + 1e-6 * max(1.0, ref.double().abs().max().item())
    assert math.isfinite(le) and le <= tol, "%s: Loom max err %.3e > 2 x torch's %.3e" % (what, le, te)


MATMUL_CASES = ([(c, d) for c in ("nn", "tt", "odd") for d in (torch.bfloat16, torch.float16,
                                                                  torch.float32)] +
                [(c, torch.bfloat16) for c in ("tn", "nt", "batched", "batched4", "shared_b",
                                               "shared_a")] +
                [("batched", torch.float32), ("shared_b", torch.float16)])


@pytest.mark.parametrize("case,dtype", MATMUL_CASES)
def test_matmul_matches_torch(case, dtype):
    m, n, k = 256, 192, 320
    if case == "odd":
        m, n, k = 100, 72, 136
    a, b = rnd(m, k, dtype=dtype, seed=1), rnd(k, n, dtype=dtype, seed=2)
    if case in ("tn", "tt"):
        a = rnd(k, m, dtype=dtype, seed=1).T
    if case in ("nt", "tt"):
        b = rnd(n, k, dtype=dtype, seed=2).T
    if case == "batched":
        a, b = rnd(3, m, k, dtype=dtype, seed=1), rnd(3, k, n, dtype=dtype, seed=2).transpose(1, 2).contiguous().transpose(1, 2)
    if case == "batched4":
        a, b = rnd(2, 3, m, k, dtype=dtype, seed=1), rnd(2, 3, k, n, dtype=dtype, seed=2)
    if case == "shared_b":
        a = rnd(3, m, k, dtype=dtype, seed=1)
    if case == "shared_a":
        b = rnd(3, k, n, dtype=dtype, seed=2)
    y = loom.matmul(a, b)
    check(y, torch.matmul(a, b), torch.matmul(a.double(), b.double()), "%s %s" % (case, dtype))


def test_bmm_matches_torch():
    a, b = rnd(4, 128, 96, seed=3), rnd(4, 96, 80, seed=4)
    check(loom.bmm(a, b), torch.bmm(a, b), torch.bmm(a.double(), b.double()))


@pytest.mark.parametrize("dtype,activation,with_bias", [
    (torch.bfloat16, None, False), (torch.bfloat16, None, True), (torch.bfloat16, "relu", True),
    (torch.bfloat16, "gelu", True), (torch.bfloat16, "silu", True), (torch.bfloat16, "gelu", False),
    (torch.float16, None, True), (torch.float16, "silu", False), (torch.float16, "relu", False),
    (torch.bfloat16, "gelu_tanh", True), (torch.float16, "gelu_tanh", False)])
def test_linear_matches_torch(dtype, activation, with_bias):
    x, w = rnd(2, 100, 256, dtype=dtype, seed=5), rnd(192, 256, dtype=dtype, seed=6, scale=0.1)
    bias = rnd(192, dtype=dtype, seed=7) if with_bias else None
    F = torch.nn.functional
    act = {None: lambda t: t, "relu": F.relu, "gelu": F.gelu, "silu": F.silu,
           "gelu_tanh": lambda t: F.gelu(t, approximate="tanh")}[activation]
    ref = act(F.linear(x.double(), w.double(), None if bias is None else bias.double()))
    check(loom.linear(x, w, bias, activation), act(F.linear(x, w, bias)), ref,
          "%s %s bias=%s" % (dtype, activation, with_bias))


def mask_for(sq, sk, causal):
    i = torch.arange(sq, device="cuda")[:, None]
    j = torch.arange(sk, device="cuda")[None, :]
    if causal == "top_left":
        return j <= i
    if causal == "bottom_right":
        return j <= i + (sk - sq)
    return None


def repeat_kv(q, k, v):
    r = q.shape[1] // k.shape[1]
    return k.repeat_interleave(r, 1), v.repeat_interleave(r, 1)


def attention_f64(q, k, v, causal, scale):
    """O and LSE in f64 from the 16-bit inputs (GQA by repeating K/V heads)."""
    kk, vv = repeat_kv(q, k, v)
    s = torch.matmul(q.double(), kk.double().transpose(-1, -2)) * scale
    mask = mask_for(q.shape[2], k.shape[2], causal)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    return torch.matmul(p, vv.double()), lse


def attention_torch(q, k, v, causal, scale):
    """torch's own 16-bit result: SDPA with the mask written out (rows without a key: 0)."""
    kk, vv = repeat_kv(q, k, v)
    mask = mask_for(q.shape[2], k.shape[2], causal)
    o = torch.nn.functional.scaled_dot_product_attention(q, kk, vv, attn_mask=mask, scale=scale)
    return torch.nan_to_num(o, nan=0.0)


@pytest.mark.parametrize("b,hq,hkv,sq,sk,d,causal", [
    (2, 8, 8, 256, 256, 64, False), (2, 8, 8, 256, 256, 128, True),
    (1, 8, 2, 100, 300, 64, "bottom_right"), (1, 8, 2, 300, 100, 128, "top_left"),
    (2, 4, 1, 1, 513, 128, False), (1, 4, 4, 17, 17, 64, True)])
def test_attention_matches_torch(b, hq, hkv, sq, sk, d, causal):
    q = rnd(b, hq, sq, d, seed=8)
    k, v = rnd(b, hkv, sk, d, seed=9), rnd(b, hkv, sk, d, seed=10)
    scale = 1.0 / math.sqrt(d)
    out, lse = loom.attention(q, k, v, causal=causal, return_lse=True)
    mode = {False: None, True: "top_left"}.get(causal, causal)
    ref, ref_lse = attention_f64(q, k, v, mode, scale)
    check(out, attention_torch(q, k, v, mode, scale), ref, "attention")
    keep = torch.isfinite(ref_lse)
    assert torch.equal(torch.isfinite(lse), keep)
    lerr = (lse[keep].double() - ref_lse[keep]).abs().max().item()
    assert lerr <= 1e-3 * max(1.0, ref_lse[keep].abs().max().item()), lerr
    if causal is True:  # torch's own is_causal=True is the same mask
        kk, vv = repeat_kv(q, k, v)
        sd = torch.nn.functional.scaled_dot_product_attention(q, kk, vv, is_causal=True)
        check(out, sd, ref, "vs sdpa(is_causal=True)")


def test_attention_runtime_sizes_serve_every_length_with_one_kernel():
    # runtime="B,Sq,Sk": one kernel (batch and lengths at each launch) for prefill shapes,
    # causal and not, GQA, against f64 by the rule; a decode shape (Sq = 1, run-time Sk)
    # another one.
    loom.clear_cache()
    for causal in (False, "bottom_right"):
        for b, sq, sk in ((1, 17, 17), (2, 100, 300), (3, 1000, 1000), (1, 4097, 4097)):
            q, k, v = rnd(b, 8, sq, 128, seed=sq), rnd(b, 2, sk, 128, seed=sk), rnd(b, 2, sk, 128, seed=7)
            out, lse = loom.attention(q, k, v, causal=causal, return_lse=True, runtime="B,Sq,Sk")
            ref, ref_lse = attention_f64(q, k, v, causal or None, 1 / math.sqrt(128))
            check(out, attention_torch(q, k, v, causal or None, 1 / math.sqrt(128)), ref,
                  "runtime B=%d Sq=%d Sk=%d causal=%s" % (b, sq, sk, causal))
            keep = torch.isfinite(ref_lse)
            assert (lse[keep].double() - ref_lse[keep]).abs().max().item() <= 1e-3 * max(
                1.0, ref_lse[keep].abs().max().item())
    kernels = [k[0] for k in loom.cache_info()["kernels"]]
    assert len(kernels) == 2 and all("Q[B,8,Sq,128]" in k for k in kernels), kernels
    for sk in (1, 1000, 8191):
        q, k = rnd(4, 32, 1, 128, seed=sk), rnd(4, 8, sk, 128, seed=sk + 1)
        out = loom.attention(q, k, k, runtime="Sk")
        ref, _ = attention_f64(q, k, k, None, 1 / math.sqrt(128))
        check(out, attention_torch(q, k, k, None, 1 / math.sqrt(128)), ref, "decode Sk=%d" % sk)
    assert len(loom.cache_info()["kernels"]) == 3


def test_attention_scale_and_no_lse():
    q, k = rnd(1, 2, 64, 64, seed=11), rnd(1, 2, 64, 64, seed=12)
    out = loom.attention(q, k, k, scale=0.3)
    assert isinstance(out, torch.Tensor)
    ref, _ = attention_f64(q, k, k, None, 0.3)
    check(out, attention_torch(q, k, k, None, 0.3), ref)


def grads(fn, inputs):
    for t in inputs:
        t.grad = None
    out = fn(*inputs)
    out.backward(rnd(*out.shape, dtype=out.dtype, seed=99) if out.dim() else torch.ones_like(out))
    return [t.grad for t in inputs]


@pytest.mark.parametrize("shapes", [((96, 64), (64, 80)), ((3, 96, 64), (64, 80)),
                                    ((96, 64), (3, 64, 80)), ((2, 96, 64), (2, 64, 80))])
def test_matmul_gradients_match_torch(shapes):
    a = rnd(*shapes[0], seed=20).requires_grad_()
    b = rnd(*shapes[1], seed=21).requires_grad_()
    la, lb = grads(loom.matmul, [a, b])
    ta, tb = grads(torch.matmul, [a, b])
    a64 = a.detach().double().requires_grad_()
    b64 = b.detach().double().requires_grad_()
    out = torch.matmul(a64, b64)
    out.backward(rnd(*out.shape, dtype=torch.bfloat16, seed=99).double())
    check(la, ta, a64.grad, "dA")
    check(lb, tb, b64.grad, "dB")


def test_bmm_gradients_match_torch():
    a = rnd(2, 64, 48, seed=22).requires_grad_()
    b = rnd(2, 48, 32, seed=23).requires_grad_()
    la, lb = grads(loom.bmm, [a, b])
    ta, tb = grads(torch.bmm, [a, b])
    a64, b64 = [t.detach().double().requires_grad_() for t in (a, b)]
    torch.bmm(a64, b64).backward(rnd(2, 64, 32, seed=99).double())
    check(la, ta, a64.grad, "dA")
    check(lb, tb, b64.grad, "dB")


@pytest.mark.parametrize("activation", [None, "relu", "gelu", "gelu_tanh", "silu"])
def test_linear_gradients_match_torch(activation):
    F = torch.nn.functional
    act = {None: lambda t: t, "relu": F.relu, "gelu": F.gelu, "silu": F.silu,
           "gelu_tanh": lambda t: F.gelu(t, approximate="tanh")}[activation]
    x = rnd(2, 48, 64, seed=24).requires_grad_()
    w = rnd(96, 64, seed=25, scale=0.1).requires_grad_()
    bias = rnd(96, seed=26).requires_grad_()
    lg = grads(lambda x, w, b: loom.linear(x, w, b, activation), [x, w, bias])
    tg = grads(lambda x, w, b: act(F.linear(x, w, b)), [x, w, bias])
    r = [t.detach().double().requires_grad_() for t in (x, w, bias)]
    act(F.linear(*r)).backward(rnd(2, 48, 96, seed=99).double())
    for name, l, t, ref in zip(("dx", "dw", "dbias"), lg, tg, r):
        check(l, t, ref.grad, "%s %s" % (name, activation))


def test_attention_backward_says_to_use_sdpa():
    q = rnd(1, 2, 64, 64, seed=27).requires_grad_()
    out = loom.attention(q, q, q)
    with pytest.raises(RuntimeError, match="Loom has no attention backward yet"):
        out.sum().backward()


class Block(torch.nn.Module):
    def __init__(self, d=128, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(d, 3 * d, dtype=torch.bfloat16, device="cuda")
        self.up = torch.nn.Linear(d, 2 * d, dtype=torch.bfloat16, device="cuda")
        self.down = torch.nn.Parameter(rnd(2 * d, d, seed=30, scale=0.05))

    def forward(self, x):
        b, s, d = x.shape
        qkv = loom.linear(x, self.qkv.weight, self.qkv.bias)
        qkv = qkv.view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4).contiguous()
        o = loom.attention(qkv[0], qkv[1], qkv[2], causal=True)
        o = o.transpose(1, 2).reshape(b, s, d)
        h = loom.linear(o, self.up.weight, self.up.bias, activation="gelu")
        return loom.matmul(h, self.down)


def test_torch_compile_fullgraph_matches_eager():
    torch._dynamo.reset()
    torch.manual_seed(0)
    m = Block()
    x = rnd(2, 64, 128, seed=31)
    with torch.no_grad():
        eager = m(x)
        compiled = torch.compile(m, fullgraph=True)(x)
    torch.cuda.synchronize()
    assert torch.equal(eager, compiled), (eager.double() - compiled.double()).abs().max().item()


def test_torch_compile_training_step_uses_loom_backward():
    torch._dynamo.reset()

    def f(a, b, x, w):
        return loom.matmul(a, b).float().sum() + loom.linear(x, w, activation="silu").float().sum()

    args = [rnd(*s, seed=40 + i).requires_grad_() for i, s in
            enumerate([(64, 32), (32, 48), (40, 32), (24, 32)])]
    eager = grads(f, args)
    compiled = grads(torch.compile(f, fullgraph=True), args)
    for e, c in zip(eager, compiled):
        # The same Loom GEMMs; silu's derivative may round differently once inductor fuses it.
        torch.testing.assert_close(c, e, rtol=1.6e-2, atol=1e-2 * e.abs().max().item())


def test_cuda_graph_capture_and_replay():
    a, b = rnd(256, 128, seed=50), rnd(128, 64, seed=51)
    x, w, bias = rnd(64, 128, seed=52), rnd(96, 128, seed=53, scale=0.1), rnd(96, seed=54)
    q = rnd(1, 4, 128, 64, seed=55)

    def step():
        return (loom.matmul(a, b), loom.linear(x, w, bias, "relu"),
                loom.attention(q, q, q, causal=True))

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up: compiles every kernel before the capture
        step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        outs = step()
    # New values in the captured inputs, then replay: the results follow them.
    for t, seed in ((a, 60), (b, 61), (x, 62), (q, 63)):
        t.copy_(rnd(*t.shape, seed=seed))
    g.replay()
    torch.cuda.synchronize()
    want = step()
    for o, e in zip(outs, want):
        assert torch.equal(o, e)


def test_compiling_inside_a_capture_is_refused_with_the_fix():
    loom.clear_cache()
    a = rnd(64, 64, seed=70)
    g = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="not compiled yet.*call the op once"):
        with torch.cuda.graph(g):
            loom.matmul(a, a)
    torch.cuda.synchronize()
    loom.matmul(a, a)  # outside a capture it compiles and runs


def test_the_current_stream_is_respected():
    # On a side stream: a long GPU sleep, then new values written into a, then the op.
    # Launched anywhere but the current stream, Loom would read a's old values.
    a, b = rnd(512, 256, seed=80), rnd(256, 128, seed=81)
    loom.matmul(a, b)  # compiled outside the timed part
    new = rnd(512, 256, seed=82)
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(50_000_000)
        a.copy_(new)
        y = loom.matmul(a, b)
    s.synchronize()
    check(y, torch.matmul(new, b), torch.matmul(new.double(), b.double()))


def test_second_call_hits_the_kernel_cache():
    loom.clear_cache()
    before = loom.cache_info()
    a, b = rnd(128, 64, seed=90), rnd(64, 32, seed=91)
    loom.matmul(a, b)
    mid = loom.cache_info()
    loom.matmul(rnd(128, 64, seed=92), b)  # same shapes, dtypes, strides: same kernel
    after = loom.cache_info()
    assert mid["misses"] == before["misses"] + 1
    assert after["misses"] == mid["misses"] and after["hits"] == mid["hits"] + 1
    loom.matmul(a.T.contiguous().T, b)  # a transposed layout: another kernel
    assert loom.cache_info()["misses"] == after["misses"] + 1


def test_runtime_m_compiles_one_kernel_for_every_token_count():
    # loom.runtime_m(): one kernel per weight shape, M given at each launch, right at every
    # M; a transposed first operand (its stored rows are K) keeps a kernel of its own.
    loom.clear_cache()
    prev = loom.runtime_m(True)
    try:
        w, bias = rnd(1024, 512, seed=110), rnd(1024, seed=111)
        b = rnd(512, 1024, seed=112)
        for m in (1, 7, 64, 1000, 4097):
            x = rnd(m, 512, seed=m)
            y = loom.linear(x, w, bias, "gelu")
            ref = torch.nn.functional.gelu(x.double() @ w.double().T + bias.double())
            check(y, torch.nn.functional.gelu(torch.nn.functional.linear(x, w, bias)), ref,
                  "linear M=%d" % m)
            check(loom.matmul(x, b), torch.matmul(x, b), x.double() @ b.double(), "matmul M=%d" % m)
        kernels = [k[0] for k in loom.cache_info()["kernels"]]
        assert sorted(kernels) == sorted([
            "gelu(linear(X[M,512]:bf16, W[1024,512]:bf16, bias[1024]:bf16))",
            "matmul(A[M,512]:bf16, B[512,1024]:bf16)"]), kernels
        a_t = rnd(512, 96, seed=113).T  # stored [K, M]: M is not its row count
        check(loom.matmul(a_t, b), torch.matmul(a_t, b), a_t.double() @ b.double(), "a.T")
        assert len(loom.cache_info()["kernels"]) == 3
    finally:
        loom.runtime_m(prev)


def test_outputs_on_the_inputs_device_and_empty_shapes():
    a = rnd(0, 64, seed=93)
    y = loom.matmul(a, rnd(64, 32, seed=94))
    assert y.shape == (0, 32) and y.device == a.device
    z = loom.matmul(rnd(8, 0, seed=95), rnd(0, 16, seed=96))
    assert torch.equal(z, torch.zeros(8, 16, dtype=torch.bfloat16, device="cuda"))


def test_misaligned_views_are_refused_with_the_fix():
    base = rnd(64 * 64 + 1, seed=97)
    a = base[1:].view(64, 64)  # starts 2 bytes into the allocation
    with pytest.raises(ValueError, match="not 16-byte aligned.*clone"):
        loom.matmul(a, a)


def test_opcheck():
    a, b = rnd(64, 32, seed=98), rnd(32, 48, seed=99)
    torch.library.opcheck(torch.ops.loom.matmul.default, (a, b, "", True))
    x, w, bias = rnd(16, 32, seed=100), rnd(24, 32, seed=101), rnd(24, seed=102)
    torch.library.opcheck(torch.ops.loom.linear.default, (x, w, bias, "gelu", "", True))
    q = rnd(1, 2, 32, 64, seed=103)
    torch.library.opcheck(torch.ops.loom.attention.default, (q, q, q, "top_left", None, True, "", True),
                          test_utils=("test_schema", "test_faketensor"))


@pytest.mark.parametrize("knobs", ["SPLITK=4", "SPLITK=4,SPLITK_MODE=partials"])
def test_split_k_workspace_comes_from_torch(knobs):
    # Split-K's partial sums (and, for partials, zeroed tile counters) are the program's
    # workspace: torch allocates it per call (zeroed where the program says), eagerly and
    # inside a captured graph, replayed twice (the kernels leave the counters zero).
    a, b = rnd(128, 8192, seed=110), rnd(8192, 128, seed=111)
    ref, tref = torch.matmul(a.double(), b.double()), torch.matmul(a, b)
    check(loom.matmul(a, b, knobs=knobs), tref, ref, knobs)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = loom.matmul(a, b, knobs=knobs)
    for _ in range(2):
        out.zero_()
        g.replay()
        torch.cuda.synchronize()
        check(out, tref, ref, knobs + " (graph)")


def test_torch_compile_reduce_overhead_replays_a_graph():
    # torch.compile's CUDA graphs (cudagraph trees): warm-up runs compile Loom's kernels,
    # later calls replay the captured launches.
    torch._dynamo.reset()
    torch.manual_seed(1)
    m = Block()
    x = rnd(2, 64, 128, seed=32)
    f = torch.compile(m, mode="reduce-overhead", fullgraph=True)
    with torch.no_grad():
        eager = m(x)
        for _ in range(3):
            y = f(x)
    torch.cuda.synchronize()
    assert torch.equal(eager, y), (eager.double() - y.double()).abs().max().item()


def test_tune_runs_the_loom_command_on_the_gpu(tmp_path):
    a, b = rnd(512, 256, seed=120), rnd(256, 512, seed=121)
    report = loom.tune(loom.matmul, a, b, budget=15, trials=4, candidates=4, record=False,
                       timeout=10)
    assert "matmul(A[512,256]:bf16, B[256,512]:bf16)" in report, report[-2000:]


def test_eager_calls_skip_the_dispatcher_only_when_nothing_needs_it():
    a, b = rnd(64, 64, seed=130), rnd(64, 64, seed=131)
    d0 = loom.cache_info()["direct"]
    y = loom.matmul(a, b)  # plain eager call: the implementation directly
    assert loom.cache_info()["direct"] == d0 + 1
    assert torch.equal(y, torch.ops.loom.matmul(a, b, "", True))  # the op: the same result
    g = a.clone().requires_grad_()
    loom.matmul(g, b).sum().backward()  # a gradient to record: through the op
    assert loom.cache_info()["direct"] == d0 + 1 and g.grad is not None
    with torch.no_grad():
        loom.matmul(g, b)  # no gradient recorded: directly
    assert loom.cache_info()["direct"] == d0 + 2
    with torch.profiler.profile() as prof:  # the profiler sees the op by name
        loom.matmul(a, b)
    assert loom.cache_info()["direct"] == d0 + 2
    assert any("loom::matmul" in e.name for e in prof.events())
    w = torch.nn.Parameter(rnd(32, 64, seed=132), requires_grad=False)
    loom.linear(a, w)  # a Parameter that needs no gradient: directly
    q = rnd(1, 2, 64, 64, seed=133)
    loom.attention(q, q, q)
    assert loom.cache_info()["direct"] == d0 + 4


# ---- GEMMs with an epilogue --------------------------------------------------------

EPILOGUE_CASES = [
    ("linear", "silu;mul:t0", "full", None),          # a SwiGLU gate: silu(x·Wgᵀ)·up
    ("linear", "add:t0", "full", None),               # a residual add
    ("linear", "gelu;mul:0.5;add:t0", "row", None),   # scale, then an [N] vector
    ("linear", "relu;sub:1.5", None, torch.float32),  # a number, an f32 result
    ("matmul", "mul:t0", "full", None),
    ("bmm", "add:t0;silu", "full", None),
]


@pytest.mark.parametrize("kind,steps,extra,out_dtype", EPILOGUE_CASES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_gemm_epilogue_matches_torch(kind, steps, extra, out_dtype, dtype):
    import loom.ops as ops
    m, n, k = 200, 264, 320
    if kind == "linear":
        a, b, bias = rnd(m, k, dtype=dtype, seed=1), rnd(n, k, dtype=dtype, seed=2, scale=0.1), rnd(n, dtype=dtype, seed=3)
        shape = [m, n]
    elif kind == "matmul":
        a, b, bias = rnd(m, k, dtype=dtype, seed=1), rnd(k, n, dtype=dtype, seed=2, scale=0.1), None
        shape = [m, n]
    else:
        a, b, bias = rnd(3, m, k, dtype=dtype, seed=1), rnd(3, k, n, dtype=dtype, seed=2, scale=0.1), None
        shape = [3, m, n]
    extras = []
    if extra == "full":
        extras = [rnd(*shape, dtype=dtype, seed=4)]
    elif extra == "row":
        extras = [rnd(n, dtype=dtype, seed=4)]
    got = loom.gemm_epilogue(kind, a, b, bias, extras, steps, out_dtype, use_db=False)

    def gemm(a_, b_, bias_):
        if kind == "linear":
            return torch.nn.functional.linear(a_, b_, bias_)
        return torch.matmul(a_, b_)
    od = out_dtype or dtype
    ref = ops._apply_steps(gemm(a.double(), b.double(), None if bias is None else bias.double()),
                           [e.double() for e in extras], steps)
    eager = ops._apply_steps(gemm(a, b, bias), extras, steps).to(od)
    check(got, eager, ref, "%s %s %s" % (kind, steps, dtype))


def test_linear_scale_residual_and_out_dtype_match_torch():
    x, w, bias = rnd(4, 50, 256, seed=1), rnd(512, 256, seed=2, scale=0.05), rnd(512, seed=3)
    r = rnd(4, 50, 512, seed=4)
    got = loom.linear(x, w, bias, "silu", scale=0.25, residual=r)
    eager = torch.nn.functional.silu(torch.nn.functional.linear(x, w, bias)) * 0.25 + r
    ref = torch.nn.functional.silu(torch.nn.functional.linear(x.double(), w.double(), bias.double())) * 0.25 + r.double()
    check(got, eager, ref, "linear silu scale residual")
    got32 = loom.linear(x, w, out_dtype=torch.float32)
    assert got32.dtype == torch.float32 and got32.shape == (4, 50, 512)
    ref32 = torch.nn.functional.linear(x.double(), w.double())
    check(got32, torch.nn.functional.linear(x.float(), w.float()), ref32, "linear out f32")


def test_gemm_epilogue_gradients_match_torch():
    import loom.ops as ops
    x = rnd(96, 128, seed=1).requires_grad_(True)
    w = rnd(160, 128, seed=2, scale=0.1).requires_grad_(True)
    bias = rnd(160, seed=3).requires_grad_(True)
    up = rnd(96, 160, seed=4).requires_grad_(True)
    steps = "silu;mul:t0;add:1.0"
    loom.gemm_epilogue("linear", x, w, bias, [up], steps).float().square().sum().backward()
    got = [t.grad for t in (x, w, bias, up)]
    leaves = [t.detach().double().requires_grad_(True) for t in (x, w, bias, up)]
    ops._apply_steps(torch.nn.functional.linear(*leaves[:3]), leaves[3:], steps).square().sum().backward()
    for g, l_ in zip(got, leaves):
        err = (g.double() - l_.grad).abs().max().item()
        assert err <= 0.05 * (l_.grad.abs().max().item() + 1), err


def test_gemm_epilogue_opcheck():
    a, w = rnd(64, 128, seed=1), rnd(96, 128, seed=2, scale=0.1)
    r = rnd(64, 96, seed=3)
    torch.library.opcheck(torch.ops.loom.gemm_epilogue.default,
                          ("linear", a, w, None, [r], "relu;add:t0", "", "", True),
                          test_utils=("test_schema", "test_faketensor"))


# ---- views into larger buffers (leading dimensions) ---------------------------------

def _ref(a, b):
    return torch.matmul(a.double(), b.double())


VIEW_CASES = ["col_slice", "col_slice_odd", "transposed_slice", "pitched_batch", "kv_cache",
              "qkv_part", "offset_slice"]


@pytest.mark.parametrize("case,dtype", [(c, torch.bfloat16) for c in VIEW_CASES] +
                         [("col_slice", torch.float16), ("col_slice_odd", torch.float32),
                          ("transposed_slice", torch.float32), ("kv_cache", torch.float16)])
def test_views_match_torch_without_a_copy(case, dtype):
    big = rnd(256, 1088, dtype=dtype, seed=11)
    if case == "col_slice":  # a [256, 1000] slice of rows 1088 wide (16-byte pitch: TMA)
        a, b = big[:, :1000], rnd(1000, 192, dtype=dtype, seed=12)
    elif case == "col_slice_odd":  # an odd pitch (2-byte aligned rows for 16-bit types)
        a, b = rnd(200, 1001, dtype=dtype, seed=11)[:, :999], rnd(999, 136, dtype=dtype, seed=12)
    elif case == "transposed_slice":  # x.T of a pitched tensor, as both operands
        a, b = big[:, :320].T, rnd(256, 1056, dtype=dtype, seed=12)[:, :192]
    elif case == "pitched_batch":
        a = rnd(3, 128, 400, dtype=dtype, seed=11)[:, :, :320]
        b = rnd(3, 320, 136, dtype=dtype, seed=12)[:, :, :128]
    elif case == "kv_cache":  # keys [B, capacity, D] filled to 100: batch stride 512 x 64
        a = rnd(4, 64, 64, dtype=dtype, seed=11)
        b = rnd(4, 512, 64, dtype=dtype, seed=12)[:, :100].transpose(1, 2)
    elif case == "qkv_part":  # the K third of a fused QKV projection's output rows
        a = rnd(128, 3 * 256, dtype=dtype, seed=11)[:, 256:512]
        b = rnd(256, 64, dtype=dtype, seed=12)
    else:  # a slice that starts inside the buffer (a 64-byte offset)
        a, b = big[:, 32:1000], rnd(968, 64, dtype=dtype, seed=12)
    assert not a.is_contiguous() or not b.is_contiguous(), case
    e = loom.expression("matmul", a, b)
    assert "|" in e, e  # read in place, with its pitch
    got = loom.matmul(a, b)
    check(got, torch.matmul(a, b), _ref(a, b), "%s %s: %s" % (case, dtype, e))


@pytest.mark.parametrize("dtype", [torch.bfloat16])
def test_linear_on_views_matches_torch(dtype):
    w = rnd(256, 320, dtype=dtype, seed=21)
    bias = rnd(256, dtype=dtype, seed=22)
    # 3-D X with dense batches over a pitch: one [rows, K] GEMM on the view.
    x = rnd(4, 64, 384, dtype=dtype, seed=23)[..., :320]
    torch_out = torch.nn.functional.linear(x, w, bias)
    ref = (x.double() @ w.double().T + bias.double())
    check(loom.linear(x, w, bias), torch_out, ref, "linear 3-D pitched")
    # Batches not dense over the rows: the 3-D expression X[B,S,K|strides].
    x = rnd(4, 80, 384, dtype=dtype, seed=24)[:, :64, :320]
    check(loom.linear(x, w, bias, activation="relu"),
          torch.relu(torch.nn.functional.linear(x, w, bias)),
          torch.relu(x.double() @ w.double().T + bias.double()), "linear 3-D batch-strided")
    # W a slice of a fused weight, X a column slice.
    wq = rnd(3 * 256, 336, dtype=dtype, seed=25)[256:512, :320]
    x = rnd(100, 352, dtype=dtype, seed=26)[:, :320]
    check(loom.linear(x, wq), torch.nn.functional.linear(x, wq), x.double() @ wq.double().T,
          "linear on slices")


def test_misaligned_view_is_refused_with_the_fix():
    big = rnd(64, 1024, seed=31)
    with pytest.raises(ValueError, match="not 16-byte aligned"):
        loom.matmul(big[:, 1:1001], rnd(1000, 64, seed=32))
