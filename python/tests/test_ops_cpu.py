"""The package without a GPU: `import loom` (with torch, without torch, without its
extension), the expressions the ops write from tensors (shapes, dtypes, transposed views),
their errors (dtypes, shapes, strides, devices, activations), the fake implementations
under FakeTensorMode and on meta tensors, autograd's graph through the fake ops, and
torch.compile(fullgraph=True) tracing a module that uses every op. Needs the built
extension and torch (skipped otherwise, with the reason)."""
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
try:
    import loom
except ImportError as e:  # pragma: no cover - depends on the build
    pytest.skip("loom's extension is not built: %s" % e, allow_module_level=True)
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def meta(*shape, dtype=torch.bfloat16):
    return torch.empty(*shape, dtype=dtype, device="meta")


def python(code, env=None):
    """Runs code in a fresh interpreter that imports this checkout's package."""
    e = dict(os.environ)
    e.update(env or {})
    e["PYTHONPATH"] = PYTHON_DIR + os.pathsep + e.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", code], env=e, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=300)


# ---- import ------------------------------------------------------------------------

def test_import_without_a_gpu_gives_the_compiler():
    r = python("import loom; p = loom.compile('matmul(A[64,32]:f16, B[32,48]:f16)'); "
               "print(len(p.cuda) > 0, 'BLOCK_M' in loom.knob_names(), "
               "loom.device() is None or isinstance(loom.device(), dict)); "
               "print(callable(loom.matmul))",
               {"CUDA_VISIBLE_DEVICES": ""})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "True", "True", "True"]


def test_import_without_torch_keeps_compile_only_functions():
    # torch blocked: `import torch` raises ImportError in that interpreter.
    r = python("import sys; sys.modules['torch'] = None\n"
               "import loom\n"
               "p = loom.compile('attention(Q[1,2,64,64]:bf16, K[1,2,64,64]:bf16, "
               "V[1,2,64,64]:bf16)')\n"
               "print('k_attention' in p.cuda, hasattr(loom, 'matmul'), len(loom.ladder_names()) > 0)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "False", "True"]


def test_missing_extension_names_what_to_build(tmp_path):
    # A copy of the package without its extension, and LOOM_PY_PATH at an empty folder.
    pkg = tmp_path / "loom"
    pkg.mkdir()
    for f in ("__init__.py", "ops.py", "tuning.py"):
        (pkg / f).write_text(open(os.path.join(PYTHON_DIR, "loom", f)).read())
    e = dict(os.environ, PYTHONPATH=str(tmp_path), LOOM_PY_PATH=str(tmp_path / "nothing"))
    # -S: no site-packages, where an installed loom's extension would be found.
    r = subprocess.run([sys.executable, "-S", "-c", "import loom"], env=e, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=300)
    assert r.returncode != 0
    assert "loom._C" in r.stderr and "pip install ." in r.stderr and "LOOM_PY_PATH" in r.stderr
    assert str(tmp_path / "nothing") in r.stderr


def test_the_extension_is_the_package_module():
    assert loom._C.__name__ == "loom._C"
    assert issubclass(loom.NoteWarning, UserWarning)
    for name in ("compile", "Kernel", "run", "ladder", "ladder_names", "knob_names", "device",
                 "no_device_reason", "tune", "matmul", "bmm", "linear", "attention"):
        assert hasattr(loom, name), name


# ---- expressions from tensors --------------------------------------------------------

def test_matmul_expressions_follow_shapes_dtypes_and_transposes():
    a, b = meta(512, 256), meta(256, 384)
    assert loom.expression("matmul", a, b) == "matmul(A[512,256]:bf16, B[256,384]:bf16)"
    # a.T of a contiguous [K, M] and b.T of a contiguous [N, K]: read in place, no copy.
    at, bt = meta(256, 512, dtype=torch.float16).T, meta(384, 256, dtype=torch.float16).T
    assert loom.expression("matmul", at, bt) == "matmul(A[256,512]:f16.T, B[384,256]:f16.T)"
    x, y = meta(4, 8, 64, 32, dtype=torch.float32), meta(4, 8, 48, 32, dtype=torch.float32)
    assert (loom.expression("matmul", x, y.transpose(-1, -2)) ==
            "matmul(A[4,8,64,32]:f32, B[4,8,48,32]:f32.T)")
    assert loom.expression("bmm", meta(3, 5, 7), meta(3, 7, 9)) == \
        "matmul(A[3,5,7]:bf16, B[3,7,9]:bf16)"
    # Shared operand without batch dims (Loom's [B,M,K]·[K,N]).
    assert loom.expression("matmul", meta(3, 5, 7), meta(7, 9)) == \
        "matmul(A[3,5,7]:bf16, B[7,9]:bf16)"


def test_linear_and_attention_expressions():
    x, w, bias = meta(128, 64), meta(256, 64), meta(256)
    assert (loom.expression("linear", x, w, bias=bias, activation="gelu") ==
            "gelu(linear(X[128,64]:bf16, W[256,64]:bf16, bias[256]:bf16))")
    assert loom.expression("linear", x, w) == "linear(X[128,64]:bf16, W[256,64]:bf16)"
    q, k = meta(2, 8, 100, 64), meta(2, 2, 300, 64)
    assert (loom.expression("attention", q, k, k) ==
            "attention(Q[2,8,100,64]:bf16, K[2,2,300,64]:bf16, V[2,2,300,64]:bf16, causal=false)")
    # torch's is_causal=True is the top-left aligned mask; bottom_right is Loom's causal=true.
    assert "causal=top_left" in loom.expression("attention", q, k, k, causal=True)
    assert "causal=true" in loom.expression("attention", q, k, k, causal="bottom_right")
    e = loom.expression("attention", q, k, k, scale=0.1, return_lse=True)
    assert e.endswith("scale=0.1, lse=true)")


def test_every_expression_compiles():
    # What the ops write is an expression the pipeline takes (sm_90a, no GPU).
    for op, ts, kw in [
        ("matmul", (meta(64, 32), meta(48, 32).T), {}),
        ("matmul", (meta(2, 64, 32, dtype=torch.float32), meta(32, 16, dtype=torch.float32)), {}),
        ("bmm", (meta(2, 64, 32, dtype=torch.float16), meta(2, 32, 16, dtype=torch.float16)), {}),
        ("linear", (meta(64, 32), meta(48, 32), meta(48)), {"activation": "silu"}),
        ("linear", (meta(64, 32), meta(48, 32)), {"activation": "relu"}),
        ("linear", (meta(64, 32), meta(48, 32)), {"activation": "gelu_tanh"}),
        ("attention", (meta(1, 4, 64, 64), meta(1, 1, 80, 64), meta(1, 1, 80, 64)),
         {"causal": True, "return_lse": True, "scale": 0.125}),
    ]:
        e = loom.expression(op, *ts, **kw)
        p = loom.compile(e)
        names = [t["name"] for t in p.tensors]
        assert "out" in names, e
        if kw.get("return_lse"):
            assert "lse" in names


# ---- errors ------------------------------------------------------------------------

def test_bad_dtypes_are_refused_with_the_fix():
    with pytest.raises(TypeError, match=r"a has dtype torch.float64.*\.to\(torch.bfloat16\)"):
        loom.matmul(meta(4, 4, dtype=torch.float64), meta(4, 4, dtype=torch.float64))
    with pytest.raises(TypeError, match="torch.int32"):
        loom.matmul(meta(4, 4, dtype=torch.int32), meta(4, 4, dtype=torch.int32))
    with pytest.raises(TypeError, match="a is torch.bfloat16 but b is torch.float16"):
        loom.matmul(meta(4, 4), meta(4, 4, dtype=torch.float16))
    with pytest.raises(TypeError, match="attention takes torch.float16 or torch.bfloat16"):
        f = meta(1, 1, 8, 8, dtype=torch.float32)
        loom.attention(f, f, f)


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="inner dimensions differ: a \\[4, 5\\] has K=5"):
        loom.matmul(meta(4, 5), meta(4, 5))
    with pytest.raises(ValueError, match="rank 1"):
        loom.matmul(meta(4), meta(4, 5))
    with pytest.raises(ValueError, match="bmm takes rank 3"):
        loom.bmm(meta(4, 5), meta(5, 4))
    with pytest.raises(ValueError, match="batch dimensions differ"):
        loom.matmul(meta(2, 4, 5), meta(3, 5, 4))
    with pytest.raises(ValueError, match="bias must be \\[N\\] = \\[6\\]"):
        loom.linear(meta(4, 5), meta(6, 5), meta(5))
    with pytest.raises(ValueError, match="Hq=6 are not a multiple of k's Hkv=4"):
        loom.attention(meta(1, 6, 8, 64), meta(1, 4, 8, 64), meta(1, 4, 8, 64))
    with pytest.raises(ValueError, match="head dims differ"):
        loom.attention(meta(1, 2, 8, 64), meta(1, 2, 8, 128), meta(1, 2, 8, 128))
    for bad in (0.0, -0.5, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="must be a positive finite number"):
            loom.attention(meta(1, 2, 8, 64), meta(1, 2, 8, 64), meta(1, 2, 8, 64), scale=bad)
    with pytest.raises(ValueError, match="causal='maybe'"):
        loom.attention(meta(1, 2, 8, 64), meta(1, 2, 8, 64), meta(1, 2, 8, 64), causal="maybe")


def test_strides_loom_cannot_read_name_the_stride_and_the_fix():
    a = meta(64, 128)[:, ::2]  # every other column
    with pytest.raises(loom.LoomStrideError,
                       match=r"a has shape \[64, 64\] and strides \[128, 2\].*a.contiguous\(\)"):
        loom.matmul(a, meta(64, 32))
    # A permuted batch ([B,M,K] from [M,B,K]) is not a transpose of the last two dims.
    b = meta(8, 3, 16).permute(1, 0, 2)
    with pytest.raises(loom.LoomStrideError, match=r"strides \[16, 48, 1\]"):
        loom.bmm(b, meta(3, 16, 4))
    # Attention takes [B,H,S,D] as stored: a [B,S,H,D] tensor viewed as [B,H,S,D] is refused.
    q = meta(1, 16, 4, 64).transpose(1, 2)
    with pytest.raises(loom.LoomStrideError, match=r"q has shape \[1, 4, 16, 64\].*contiguous"):
        loom.attention(q, q.contiguous(), q.contiguous())
    # linear's x with leading dims: rows that do not overlap (a permuted batch overlaps).
    x = meta(4, 8, 32).transpose(0, 1)
    with pytest.raises(loom.LoomStrideError, match="x.contiguous"):
        loom.linear(x, meta(16, 32))
    # A tensor that is both (a [1, N] row) is simply contiguous.
    assert loom.expression("matmul", meta(1, 8), meta(8, 4)).startswith("matmul(A[1,8]:bf16,")


def test_views_are_read_in_place_with_their_pitch():
    # A column slice of a [64, 1024] buffer: rows 1024 apart, 1000 wide.
    a = meta(64, 1024)[:, :1000]
    e = loom.expression("matmul", a, meta(1000, 32))
    assert e == "matmul(A[64,1000|1024]:bf16, B[1000,32]:bf16)"
    assert "out" in [t["name"] for t in loom.compile(e).tensors]
    # The transpose of a pitched tensor: stored [64, 1000|1024], read as its .T.
    assert (loom.expression("matmul", meta(64, 32), a[:, :32].T) ==
            "matmul(A[64,32]:bf16, B[64,32|1024]:bf16.T)")
    assert loom.expression("matmul", a.T, meta(64, 8)) == "matmul(A[64,1000|1024]:bf16.T, B[64,8]:bf16)"
    # A pitched batch, and a KV cache with capacity past its length (batch stride 16384).
    assert (loom.expression("bmm", meta(4, 64, 128)[:, :, :100], meta(4, 100, 8)) ==
            "bmm(A[4,64,100|8192,128]:bf16, B[4,100,8]:bf16)")
    k = meta(4, 256, 64)[:, :100]
    assert loom.expression("bmm", meta(4, 16, 64), k.transpose(1, 2)) == (
        "bmm(A[4,16,64]:bf16, B[4,100,64|16384,64]:bf16.T)")
    # The Q third of a fused QKV projection's output, as linear's weight and as its x.
    qkv = meta(3 * 256, 512)
    assert (loom.expression("linear", meta(16, 512), qkv[:256]) ==
            "linear(X[16,512]:bf16, W[256,512]:bf16)")  # a row slice is dense
    out = meta(16, 3 * 256)
    assert (loom.expression("linear", out[:, :256], meta(64, 256)) ==
            "linear(X[16,256|768]:bf16, W[64,256]:bf16)")
    # 3-D linear from a pitched [B,S,K] view whose batches are not dense over its rows.
    x = meta(8, 600, 4160)[:, :512, :4096]
    assert (loom.expression("linear", x, meta(1024, 4096)) ==
            "linear(X[8,512,4096|2496000,4160]:bf16, W[1024,4096]:bf16)")
    # Expressions from views compile (the pitch reaches the kernel's tensors).
    for e in ("linear(X[8,512,4096|2496000,4160]:bf16, W[1024,4096]:bf16)",
              "bmm(A[4,16,64]:bf16, B[4,100,64|16384,64]:bf16.T)"):
        assert "out" in [t["name"] for t in loom.compile(e).tensors], e


def test_views_whose_rows_overlap_or_are_strided_are_still_refused():
    # Columns 2 apart, and rows that overlap (stride 8 < width 16): no pitch says either.
    with pytest.raises(loom.LoomStrideError, match=r"strides \[128, 2\]"):
        loom.matmul(meta(64, 128)[:, ::2], meta(64, 32))
    with pytest.raises(loom.LoomStrideError, match=r"strides \[8, 1\]"):
        loom.matmul(meta(64, 16).as_strided((64, 16), (8, 1)), meta(16, 8))
    # Attention reads dense [B,H,S,D]: a pitched q is refused, as before.
    q = meta(1, 4, 16, 128)[..., :64]
    with pytest.raises(loom.LoomStrideError, match="row-major .contiguous. .B, H, S, D."):
        loom.attention(q, q.contiguous(), q.contiguous())


def test_activations_are_the_epilogue_languages():
    assert (loom.expression("linear", meta(4, 8), meta(4, 8), activation="gelu_tanh") ==
            "gelu_tanh(linear(X[4,8]:bf16, W[4,8]:bf16))")
    with pytest.raises(ValueError, match="'gelu_tanh' is torch's approximate='tanh'"):
        loom.linear(meta(4, 8), meta(4, 8), activation="gelu_new")
    with pytest.raises(ValueError, match="'relu', 'gelu', 'gelu_tanh', 'silu'"):
        loom.linear(meta(4, 8), meta(4, 8), activation="swish")


def test_cpu_tensors_are_refused_with_the_fix():
    a = torch.randn(8, 8)
    with pytest.raises(ValueError, match=r"on cpu; Loom's kernels run on CUDA tensors.*\.cuda\(\)"):
        loom.matmul(a, a)


# ---- fake implementations, autograd, torch.compile ---------------------------------

def test_fake_impls_give_shapes_and_dtypes():
    with FakeTensorMode():
        a = torch.empty(3, 64, 32, dtype=torch.float16)
        b = torch.empty(32, 48, dtype=torch.float16)
        y = loom.matmul(a, b)
        assert y.shape == (3, 64, 48) and y.dtype == torch.float16
        z = loom.bmm(a, torch.empty(3, 32, 8, dtype=torch.float16))
        assert z.shape == (3, 64, 8)
        x = torch.empty(2, 5, 32, dtype=torch.bfloat16)
        w = torch.empty(16, 32, dtype=torch.bfloat16)
        assert loom.linear(x, w, torch.empty(16, dtype=torch.bfloat16), "silu").shape == (2, 5, 16)
        q = torch.empty(2, 8, 17, 64, dtype=torch.bfloat16)
        k = torch.empty(2, 2, 33, 64, dtype=torch.bfloat16)
        o, lse = loom.attention(q, k, k, causal=True, return_lse=True)
        assert o.shape == q.shape and o.dtype == torch.bfloat16
        assert lse.shape == (2, 8, 17) and lse.dtype == torch.float32
        assert loom.attention(q, k, k).shape == q.shape


def test_meta_tensors_run_the_fake_impls():
    y = loom.matmul(meta(64, 32).T, meta(64, 48))
    assert y.device.type == "meta" and y.shape == (32, 48)


def test_autograd_through_the_fake_ops():
    # The backward formulas run on fake tensors: every gradient has its operand's shape,
    # and the backward GEMMs are Loom's ops (dA = dC·Bᵀ, dB = Aᵀ·dC).
    with FakeTensorMode():
        for shapes in [((64, 32), (32, 48)), ((3, 64, 32), (32, 48)), ((64, 32), (3, 32, 48)),
                       ((2, 3, 64, 32), (2, 3, 32, 48))]:
            a = torch.empty(*shapes[0], requires_grad=True)
            b = torch.empty(*shapes[1], requires_grad=True)
            loom.matmul(a, b).sum().backward()
            assert a.grad.shape == a.shape and b.grad.shape == b.shape
        x = torch.empty(4, 10, 32, dtype=torch.bfloat16, requires_grad=True)
        w = torch.empty(16, 32, dtype=torch.bfloat16, requires_grad=True)
        bias = torch.empty(16, dtype=torch.bfloat16, requires_grad=True)
        for act in (None, "relu", "gelu", "silu"):
            x.grad = w.grad = bias.grad = None
            loom.linear(x, w, bias, act).sum().backward()
            assert x.grad.shape == x.shape and w.grad.shape == w.shape
            assert bias.grad.shape == bias.shape and bias.grad.dtype == torch.bfloat16
        q = torch.empty(1, 2, 8, 64, dtype=torch.bfloat16, requires_grad=True)
        o = loom.attention(q, q, q)
        with pytest.raises(RuntimeError, match="Loom has no attention backward yet; use "
                           "torch.nn.functional.scaled_dot_product_attention for training"):
            o.sum().backward()


class Block(torch.nn.Module):
    def __init__(self, d=64, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(d, 3 * d, dtype=torch.bfloat16)
        self.up = torch.nn.Linear(d, 2 * d, dtype=torch.bfloat16)
        self.down = torch.nn.Parameter(torch.randn(2 * d, d, dtype=torch.bfloat16))

    def forward(self, x):  # x [B, S, d]
        b, s, d = x.shape
        qkv = loom.linear(x, self.qkv.weight, self.qkv.bias)
        qkv = qkv.view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4).contiguous()
        o = loom.attention(qkv[0], qkv[1], qkv[2], causal=True)
        o = o.transpose(1, 2).reshape(b, s, d)
        h = loom.linear(o, self.up.weight, self.up.bias, activation="gelu")
        return loom.matmul(h, self.down)


def test_torch_compile_traces_every_op_without_a_graph_break():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    m = Block().to("meta")
    f = torch.compile(m, fullgraph=True, backend=backend)
    with torch.no_grad():
        y = f(torch.empty(2, 16, 64, dtype=torch.bfloat16, device="meta"))
    assert y.shape == (2, 16, 64)
    assert len(graphs) == 1
    targets = {str(n.target) for n in graphs[0].graph.nodes if n.op == "call_function"}
    for op in ("loom.linear.default", "loom.attention.default", "loom.matmul.default"):
        assert op in targets, targets


def test_torch_compile_traces_symbolic_shapes():
    # dynamic=True: sizes reach the fake implementations as symbols; they must not force
    # them to numbers (a kernel is compiled per shape at run time, not at trace time).
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()

    def f(x, w, q):
        return loom.linear(x, w, activation="relu").sum() + loom.attention(q, q, q).sum()

    g = torch.compile(f, fullgraph=True, dynamic=True, backend=backend)
    for n in (16, 24):
        g(meta(n, 32), meta(8, 32), meta(1, 2, n, 64))
    assert len(graphs) == 1, "one graph for both sizes"
    x = [n for n in graphs[0].graph.nodes if n.op == "placeholder"]
    assert any(isinstance(n.meta.get("example_value"), torch.SymInt) for n in x), \
        "the size is a graph input (symbolic)"


def test_aot_autograd_traces_the_backward_graph():
    # aot_eager: dynamo + AOTAutograd's joint forward/backward graph on fake tensors, the
    # backward made of Loom's ops.
    torch._dynamo.reset()

    def f(a, b, x, w):
        return loom.matmul(a, b).sum() + loom.linear(x, w, activation="relu").sum()

    from functorch.compile import make_boxed_func
    from torch._functorch.aot_autograd import aot_function
    bw_graphs = []

    def bw_compiler(gm, _):
        bw_graphs.append(gm)
        return make_boxed_func(gm)

    g = aot_function(f, fw_compiler=lambda gm, _: make_boxed_func(gm), bw_compiler=bw_compiler)
    args = [torch.empty(s, device="meta", requires_grad=True)
            for s in [(8, 4), (4, 6), (5, 4), (3, 4)]]
    g(*args).backward()
    assert [a.grad.shape for a in args] == [a.shape for a in args]
    targets = {str(n.target) for n in bw_graphs[0].graph.nodes if n.op == "call_function"}
    assert "loom.matmul.default" in targets, targets


def test_tune_dry_run_plans_a_shape_without_a_gpu():
    try:
        loom.loom_binary()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    report = loom.tune("matmul", meta(256, 128), meta(128, 256), dry_run=True, candidates=2,
                       budget=60)
    assert "matmul(A[256,128]:bf16, B[128,256]:bf16)" in report
    with pytest.raises(RuntimeError, match="loom tune failed"):
        loom.tune("matmul(A[4,4]:f16, B[5,4]:f16)", dry_run=True)


# ---- building ----------------------------------------------------------------------

REPO = os.path.dirname(PYTHON_DIR)


def configure(tmp_path, *args):
    import shutil
    cmake = shutil.which("cmake")
    if not cmake:
        pytest.skip("no cmake on PATH")
    return subprocess.run([cmake, "-S", REPO, "-B", str(tmp_path / "b")] + list(args),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)


def test_a_missing_cuda_toolkit_is_named_with_the_fix(tmp_path):
    # What `pip install .` shows where there is no toolkit (its configure step).
    r = configure(tmp_path, "-DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON")
    assert r.returncode != 0
    text = " ".join(r.stdout.split())
    assert "Loom needs the CUDA toolkit" in text and "CUDAToolkit_ROOT" in text, r.stdout[-2000:]


def test_a_missing_nanobind_is_named_with_the_fix(tmp_path):
    r = configure(tmp_path, "-DLOOM_PYTHON=ON", "-DCMAKE_DISABLE_FIND_PACKAGE_nanobind=ON")
    assert r.returncode != 0
    text = " ".join(r.stdout.split())
    assert "found no nanobind: pip install nanobind" in text, r.stdout[-2000:]


def test_the_eager_shortcut_reads_this_torchs_state():
    # The direct eager path (ops._direct) needs torch's dispatch-mode, profiler and functorch
    # state; were they gone from this torch, every call would silently pay the dispatcher.
    from loom import ops
    assert ops._dispatch_mode is not None
    before = loom.cache_info()["direct"]
    assert not ops._direct(meta(2, 2))  # not a CUDA tensor
    assert not ops._direct(torch.empty(2, 2))
    with FakeTensorMode():
        assert not ops._direct(torch.empty(2, 2))
    assert loom.cache_info()["direct"] == before


# ---- GEMMs with an epilogue (loom.gemm_epilogue, loom.linear's scale/residual/out_dtype) --

def test_epilogue_expressions_apply_the_steps_in_order():
    x, w, b, r = meta(128, 64), meta(256, 64), meta(256), meta(128, 256)
    e = loom.expression("gemm_epilogue", x, w, kind="linear", bias=b, extras=[r],
                        steps="silu;mul:0.5;add:t0")
    assert e == ("add(mul(silu(linear(X[128,64]:bf16, W[256,64]:bf16, bias[256]:bf16)), 0.5), "
                 "E0[128,256]:bf16)")
    e = loom.expression("gemm_epilogue", x, w.T, kind="matmul", extras=[meta(256)],
                        steps="sub:t0", out_dtype="f32")
    assert e == "sub(matmul(A[128,64]:bf16, B[256,64]:bf16.T, out=f32), E0[256]:bf16)"
    assert loom.compile(e).tensors[-1]["dtype"] in ("f32", "bf16")  # the pipeline takes it
    for st in ("silu;mul:0.5;add:t0", "gelu;mul:t0", "relu;sub:2;mul:t0"):
        loom.compile(loom.expression("gemm_epilogue", x, w, kind="linear", extras=[r], steps=st))


def test_runtime_m_spells_the_rows_of_the_gemm_and_of_its_epilogue_operands():
    # runtime_m: the first operand's rows and those of every extra of the result's shape
    # become the symbol M (an [N] extra keeps its number); the expression compiles to the
    # wgmma kernel for sm_90a.
    from loom import ops
    x, w, r, v = meta(96, 64), meta(256, 64), meta(96, 256), meta(256)
    e = loom.expression("gemm_epilogue", x, w, kind="linear", extras=[r, v],
                        steps="silu;mul:t0;add:t1")
    got, sizes = ops._with_runtime_m(e, x, 96, True)
    assert got == ("add(mul(silu(linear(X[M,64]:bf16, W[256,64]:bf16)), E0[M,256]:bf16), "
                   "E1[256]:bf16)"), got
    assert sizes == {"M": 96}
    assert ops._with_runtime_m(e, x, 96, False) == (e, None)  # off, and loom.runtime_m() off
    assert ops._with_runtime_m(e, x.T.contiguous().T, 96, True) == (e, None)  # not row-major
    p = loom.compile(got.replace("64]", "4096]").replace("256", "4096"), target="sm_90a", runtime="M")
    assert "wgmma" in p.cuda, "the run-time-M schedule is the wgmma one"


def test_attention_runtime_sizes_spell_batch_and_lengths_as_symbols():
    from loom import ops
    q, k = meta(2, 8, 100, 64), meta(2, 2, 300, 64)
    e = loom.expression("attention", q, k, k, causal=True)
    got, sizes = ops._attention_runtime(e, q, k, "B,Sq,Sk")
    assert got == ("attention(Q[B,8,Sq,64]:bf16, K[B,2,Sk,64]:bf16, V[B,2,Sk,64]:bf16, "
                   "causal=top_left)"), got
    assert sizes == {"B": 2, "Sq": 100, "Sk": 300}
    got, sizes = ops._attention_runtime(e, q, k, "Sk")
    assert got.startswith("attention(Q[2,8,100,64]:bf16, K[2,2,Sk,64]:bf16") and sizes == {"Sk": 300}
    assert ops._attention_runtime(e, q, k, "") == (e, None)
    with pytest.raises(ValueError, match="runtime sizes H.*B, Sq and Sk"):
        ops._attention_runtime(e, q, k, "H")
    for target in ("sm_90a", "sm_80"):  # one kernel for every size compiles
        loom.compile(ops._attention_runtime(e, q, k, "B,Sq,Sk")[0], target=target,
                     runtime="B,Sq,Sk")


def test_epilogue_errors_name_the_step_and_the_fix():
    x, w, r = meta(128, 64), meta(256, 64), meta(128, 256)
    for steps, extras, what in [
        ("tanh", [], "'tanh' is not one of relu, gelu, gelu_tanh, silu"),
        ("add:t1", [r], "names extras[1], but 1 extra"),
        ("mul:nan", [], "must be finite"),
        ("add", [], "is not one of"),
        ("add:t0", [meta(128, 255)], "must be the result's shape [128, 256] or [256]"),
    ]:
        with pytest.raises(ValueError, match=what.replace("[", r"\[").replace("]", r"\]")):
            loom.expression("gemm_epilogue", x, w, kind="linear", extras=extras, steps=steps)
    with pytest.raises(loom.LoomStrideError, match="extras.0. .shape .128, 256.. is not contiguous"):
        loom.expression("gemm_epilogue", x, w, kind="linear",
                        extras=[meta(256, 128).T], steps="add:t0")
    with pytest.raises(ValueError, match="out_dtype='f64'"):
        loom.expression("gemm_epilogue", x, w, kind="linear", out_dtype="f64")
    with pytest.raises(ValueError, match="bias is linear's"):
        loom.expression("gemm_epilogue", x, w.T, kind="matmul", bias=meta(256))


def test_epilogue_fakes_and_linear_keywords():
    with FakeTensorMode():
        x = torch.empty(2, 5, 32, dtype=torch.bfloat16)
        w = torch.empty(16, 32, dtype=torch.bfloat16)
        r = torch.empty(2, 5, 16, dtype=torch.bfloat16)
        y = loom.linear(x, w, None, "silu", scale=0.5, residual=r)
        assert y.shape == (2, 5, 16) and y.dtype == torch.bfloat16
        y = loom.linear(x, w, out_dtype=torch.float32)
        assert y.shape == (2, 5, 16) and y.dtype == torch.float32
        a = torch.empty(64, 32, dtype=torch.float16)
        y = loom.gemm_epilogue("matmul", a, a.T, extras=[torch.empty(64, dtype=torch.float16)],
                               steps="mul:t0")
        assert y.shape == (64, 64) and y.dtype == torch.float16


def test_epilogue_autograd_on_fakes_gives_every_gradient_its_shape():
    with FakeTensorMode():
        x = torch.empty(64, 32, dtype=torch.bfloat16, requires_grad=True)
        w = torch.empty(48, 32, dtype=torch.bfloat16, requires_grad=True)
        b = torch.empty(48, dtype=torch.bfloat16, requires_grad=True)
        g = torch.empty(64, 48, dtype=torch.bfloat16, requires_grad=True)
        r = torch.empty(48, dtype=torch.bfloat16, requires_grad=True)
        loom.gemm_epilogue("linear", x, w, b, [g, r], "silu;mul:t0;add:t1").sum().backward()
        for t in (x, w, b, g, r):
            assert t.grad is not None and t.grad.shape == t.shape


def test_epilogue_backward_matches_torch_on_the_cpu(monkeypatch):
    # The backward's own arithmetic (the steps' derivative by autograd, the GEMM gradients)
    # checked on the CPU, with torch's GEMMs standing in for Loom's kernels.
    import loom.ops as ops
    monkeypatch.setattr(ops, "_linear_op", lambda x, w, b, act, k, u: torch.nn.functional.linear(x, w, b))
    monkeypatch.setattr(ops, "_matmul_op", lambda a, b, k, u: a @ b)
    torch.manual_seed(0)
    x, w, b = torch.randn(8, 4, dtype=torch.float64), torch.randn(6, 4, dtype=torch.float64), \
        torch.randn(6, dtype=torch.float64)
    g, r = torch.randn(8, 6, dtype=torch.float64), torch.randn(6, dtype=torch.float64)

    class Ctx:
        kind, steps, use_db, n_extras = "linear", "silu;mul:t0;add:t1;mul:0.5", True, 2
        needs_input_grad = (False, True, True, True, True)
        saved_tensors = (x, w, b, g, r)
    up = torch.randn(8, 6, dtype=torch.float64)
    _, dx, dw, db, dex, *_ = ops._ep_backward(Ctx, up)
    leaves = [t.clone().requires_grad_(True) for t in (x, w, b, g, r)]
    y = ops._apply_steps(torch.nn.functional.linear(*leaves[:3]), leaves[3:], Ctx.steps)
    ref = torch.autograd.grad(y, leaves, up)
    for got, want in zip([dx, dw, db] + dex, ref):
        assert torch.allclose(got, want), (got, want)


def test_written_expressions_are_keyed_by_everything_the_checks_read():
    import loom.ops as ops
    a = torch.empty(64, 32, dtype=torch.bfloat16)
    keys = {ops._signature("matmul", a, b) for b in (
        torch.empty(32, 16, dtype=torch.bfloat16), torch.empty(16, 32, dtype=torch.bfloat16).T,
        torch.empty(32, 16, dtype=torch.float16), torch.empty(32, 16, dtype=torch.bfloat16, device="meta"),
        torch.empty(32, 17, dtype=torch.bfloat16)[:, :16])}
    assert len(keys) == 5
    # A signature whose checks fail is never kept: the second call raises again.
    bad = torch.empty(31, 16, dtype=torch.bfloat16)
    for _ in range(2):
        with pytest.raises(ValueError, match="inner dimensions differ"):
            ops._mm_impl("matmul", a, bad, "", True)
    assert ops._signature("matmul", a, bad) not in ops._EXPRS
