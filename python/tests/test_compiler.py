"""The compiler API of the package (the former loom_py module, now loom._C re-exported
by `loom`). CPU part (needs only the built extension): the ladder as the C++ defines it,
compile() and its errors. GPU part (needs torch and CUDA; skipped with the reason
otherwise): Loom's kernels on torch tensors and streams through loom.Kernel, checked
against f32 references with the issue's rule, and loom.run's own verification.

Run: python3 -m pytest -v python/tests (LOOM_PY_PATH: the CMake build folder, default
<repo>/build; or the installed package with LOOM_TEST_INSTALLED=1).
"""
import math
import warnings

import pytest


# torch before loom's extension, as python/loom/__init__.py says why.
try:
    import torch
    HAVE_CUDA = torch.cuda.is_available()
    WHY = "" if HAVE_CUDA else "torch sees no CUDA GPU"
except ImportError:
    torch, HAVE_CUDA, WHY = None, False, "torch is not installed"

try:
    import loom as loom_py
except ImportError as e:  # pragma: no cover - depends on the build
    pytest.skip("loom's extension is not built (pip install ., or ninja loom_py with "
                "LOOM_PY_PATH): %s" % e, allow_module_level=True)

gpu = pytest.mark.skipif(not HAVE_CUDA, reason=WHY)


def attn(b, hq, hkv, sq, sk, d, dtype="bf16", causal="false"):
    return "attention(Q[%d,%d,%d,%d]:%s, K[%d,%d,%d,%d]:%s, V[%d,%d,%d,%d]:%s, causal=%s)" % (
        b, hq, sq, d, dtype, b, hkv, sk, d, dtype, b, hkv, sk, d, dtype, causal)


# ---- CPU ---------------------------------------------------------------------------

def test_flash_ladder_comes_from_cpp():
    l = loom_py.ladder("flash")
    assert l["reference"] == ""
    names = [s["name"] for s in l["steps"]]
    assert names[0] == "1 base" and names[-1] == "8 wgmma + TMA (sm_90)" and len(names) == 8
    assert "SOFTMAX=exp2" in l["steps"][5]["knobs"]
    assert "flash" in loom_py.ladder_names()
    l = loom_py.ladder("flash", "2x4x1000x64", "f16", True)
    assert l["expression"] == attn(2, 4, 4, 1000, 1000, 64, "f16", "true")


def test_compile_lists_the_callers_tensors():
    p = loom_py.compile(attn(1, 4, 2, 100, 80, 64), "", "sm_80")
    t = {x["name"]: x for x in p.tensors}
    assert t["Q"]["shape"] == [1, 4, 100, 64] and t["Q"]["role"] == "input"
    assert t["K"]["shape"] == [1, 2, 80, 64] and t["out"]["role"] == "output"
    assert t["out"]["dtype"] == "bf16" and t["out"]["bytes"] == 100 * 4 * 64 * 2
    assert p.flops == 4.0 * 4 * 64 * 100 * 80
    assert "BLOCK_M=" in p.knobs and "k_attention" in p.cuda
    g = loom_py.compile("matmul(A[M,64]:f16, B[64,32]:f16)", "ATOM=mma_f16", "sm_90a", "M=128")
    assert [x["name"] for x in g.tensors] == ["A", "B", "out"]


def test_program_ir_levels_are_loom_compiles():
    # Program.ir(level) is `loom compile --ir level`'s text (no GPU needed).
    p = loom_py.compile("relu(matmul(A[64,32]:f16, B[32,48]:f16))", "", "sm_80")
    loop, tile, kernel = p.ir("loop"), p.ir("tile"), p.ir("kernel")
    assert "relu" in loop and loop != tile and tile != kernel
    assert "out: f16[64, 48] output" in kernel, kernel[:400]
    assert p.ir() == p.ir("cuda") == p.cuda
    with pytest.raises(RuntimeError, match="level 'sass' is not one of loop, tile, kernel, cuda"):
        p.ir("sass")


def test_errors_carry_looms_message():
    with pytest.raises(RuntimeError, match="unknown knob 'NOPE'"):
        loom_py.compile(attn(1, 1, 1, 64, 64, 64), "NOPE=1")
    with pytest.raises(RuntimeError, match="BxHxSxD"):
        loom_py.ladder("flash", "64x64")
    p = loom_py.compile(attn(1, 1, 1, 64, 64, 64))
    with pytest.raises(RuntimeError, match="no pointer for input V"):
        p.check_pointers({"Q": 1, "K": 2, "out": 3})


def test_notes_are_warnings_and_a_property():
    # Explicit tiling knobs without ATOM leave sm_90a's default wgmma atom for the SIMT
    # schedule: legal, so a note, which `loom compile` prints as "loom: note: ..." and
    # loom raises as a NoteWarning (a UserWarning) and keeps on Program.notes.
    e = "matmul(A[4096,4096]:f16, B[4096,4096]:f16)"
    with pytest.warns(loom_py.NoteWarning, match="select the SIMT schedule") as caught:
        p = loom_py.compile(e, "BN=128,FM=2")
    assert issubclass(loom_py.NoteWarning, UserWarning)
    assert len(p.notes) == 1 and "add ATOM=wgmma_f16" in p.notes[0]
    assert [str(w.message) for w in caught if w.category is loom_py.NoteWarning] == p.notes
    assert caught[0].filename == __file__, "the warning points at the caller's line"
    assert "ATOM=fma" in p.knobs
    # The same tile with its atom: no note, no warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        q = loom_py.compile(e, "ATOM=wgmma_f16,BN=128")
    assert q.notes == []
    # A caller that makes warnings errors gets the note as an exception.
    with warnings.catch_warnings():
        warnings.simplefilter("error", loom_py.NoteWarning)
        with pytest.raises(loom_py.NoteWarning, match="BN,FM"):
            loom_py.compile(e, "BN=128,FM=2")


def test_knob_names_are_the_registry():
    names = loom_py.knob_names()
    assert "BLOCK_M" in names and "KV_STAGES" in names


# ---- GPU ---------------------------------------------------------------------------

@gpu
@pytest.mark.parametrize("d,causal,sq,sk,hq,hkv", [
    (64, False, 1024, 1024, 8, 8), (128, True, 1024, 1024, 8, 8), (128, False, 1000, 1000, 4, 4),
    (64, True, 17, 4097, 32, 8), (128, True, 4097, 1000, 4, 1), (64, False, 1, 17, 2, 2)])
def test_attention_on_torch_tensors(d, causal, sq, sk, hq, hkv):
    import loom_torch as lt
    g = torch.Generator(device="cuda").manual_seed(3)
    q = torch.randn(2, hq, sq, d, device="cuda", dtype=torch.bfloat16, generator=g)
    k = torch.randn(2, hkv, sk, d, device="cuda", dtype=torch.bfloat16, generator=g)
    v = torch.randn(2, hkv, sk, d, device="cuda", dtype=torch.bfloat16, generator=g)
    op = lt.LoomOp(attn(2, hq, hkv, sq, sk, d, causal="true" if causal else "false"), "",
                   {"Q": q, "K": k, "V": v})
    out = op()
    torch.cuda.synchronize()
    ref = lt.attention_reference_f32(q, k, v, causal)
    # PyTorch's bf16 reference: SDPA with K/V heads repeated (GQA) and the mask written out
    # bottom-right, as Loom's causal=true is.
    rep = hq // hkv
    kk, vv = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    mask = None
    if causal:
        i = torch.arange(sq, device="cuda")[:, None]
        j = torch.arange(sk, device="cuda")[None, :]
        mask = j <= i + (sk - sq)
    tref = torch.nn.functional.scaled_dot_product_attention(q, kk, vv, attn_mask=mask)
    tref = torch.nan_to_num(tref, nan=0.0)
    if causal and sq > sk:  # rows that keep no key: both must be 0
        assert out[:, :, :sq - sk].abs().max().item() == 0
    ok, le, te = lt.check_attention(out, tref, ref)
    assert ok, "Loom max err %.3e > 2 x PyTorch's %.3e" % (le, te)


@gpu
def test_gemm_on_a_side_stream():
    import loom_torch as lt
    a = torch.randn(512, 256, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(256, 384, device="cuda", dtype=torch.bfloat16)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        op = lt.LoomOp("matmul(A[512,256]:bf16, B[256,384]:bf16)", "", {"A": a, "B": b})
        out = op()
    s.synchronize()
    ref = a.float() @ b.float()
    err = (out.float() - ref).abs().max().item()
    terr = ((a @ b).float() - ref).abs().max().item()
    assert math.isfinite(err) and err <= 2 * terr + 1e-6, (err, terr)


@gpu
def test_same_context_as_torch():
    # Loom's static cudart and torch's shared one must both use the primary context:
    # a pointer torch allocated is usable by Loom, and Loom's launch is ordered on
    # torch's stream (the result is read without any extra synchronization by Loom).
    import loom_torch as lt
    x = torch.randn(1, 2, 64, 64, device="cuda", dtype=torch.float16)
    op = lt.LoomOp(attn(1, 2, 2, 64, 64, 64, "f16"), "", {"Q": x, "K": x, "V": x})
    out = op().clone()  # clone is enqueued after the launch on the same stream
    ref = lt.attention_reference_f32(x, x, x, False)
    assert (out.float() - ref).abs().max().item() < 1e-2
    dev = loom_py.device()
    assert dev is not None and dev["arch"].startswith("sm_")


@gpu
def test_run_verifies_against_fp64():
    r = loom_py.run(attn(1, 4, 4, 256, 256, 64, causal="true"), bench=True, reps=5)
    assert r["passed"], r["verify"]
    assert r["median_us"]["Loom"] > 0
    # Attention's timing follows the same cold-L2 plan as a GEMM's (here: inputs too small
    # for 64 rotated sets, so a read flush), not the old write flush.
    l2 = [ln for ln in r["report"].splitlines() if ln.startswith("L2:")]
    assert l2 and ("read:" in l2[0] or "rotate" in l2[0]), r["report"]


@gpu
def test_bad_pointers_are_refused_before_launch():
    k = loom_py.Kernel(attn(1, 1, 1, 64, 64, 64))
    with pytest.raises(RuntimeError, match="no tensor named O"):
        k.launch({"Q": 1, "K": 2, "V": 3, "out": 4, "O": 5}, 0)


@gpu
def test_runtime_m_kernel_holds_a_kernel_per_range():
    # A run-time M (the default knobs, sm_90a): one loom.Kernel holds a kernel per range of
    # M and each launch runs its M's (Kernel.variants, Kernel.variant_for), each right.
    if not torch.cuda.get_device_capability()[0] == 9:
        pytest.skip("the ranges are sm_90a's defaults")
    expr = "matmul(A[M,4096]:bf16, B[4096,4096]:bf16)"
    k = loom_py.Kernel(expr, "", torch.cuda.current_device(), False, "", "M")
    v = k.variants
    assert len(v) > 1 and v[0]["size"] == "M" and v[0]["lo"] == 1, v
    assert all(v[i]["lo"] == v[i - 1]["hi"] + 1 for i in range(1, len(v))), v
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    seen = set()
    for m in (1, 50, 100, 300, 700):
        i = k.variant_for({"M": m})
        assert v[i]["lo"] <= m <= v[i]["hi"], (m, v[i])
        seen.add(i)
        a = torch.randn(m, 4096, device="cuda", dtype=torch.bfloat16)
        out = torch.full((m, 4096), float("nan"), device="cuda", dtype=torch.bfloat16)
        k.launch({"A": a.data_ptr(), "B": b.data_ptr(), "out": out.data_ptr()},
                 torch.cuda.current_stream().cuda_stream, {"M": m})
        ref = a.float() @ b.float()
        err = (out.float() - ref).abs().max().item()
        terr = ((a @ b).float() - ref).abs().max().item()
        assert math.isfinite(err) and err <= 2 * terr + 1e-6, (m, err, terr, v[i]["knobs"])
    assert len(seen) == 5, seen
    with pytest.raises(RuntimeError, match="takes M at run time"):
        k.variant_for({})
