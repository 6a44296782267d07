"""The serving forms of attention from torch (loom.attention_paged, loom.attention_varlen):
the expressions they write compile through Loom's pipeline (no GPU), their errors, their
fake implementations under FakeTensorMode, the refused backward; on a GPU, each against an
f32 reference gathered from the same pages or sequences (the error rule: at most twice the
error of PyTorch's bf16 SDPA on the same data)."""
import math

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
try:
    import loom
    from loom import serving
except ImportError as e:  # pragma: no cover - depends on the build
    pytest.skip("loom's extension is not built: %s" % e, allow_module_level=True)
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402


def paged_inputs(device="cpu", b=2, hq=8, hkv=2, sq=1, d=64, page=16, maxp=4, dtype=torch.bfloat16):
    pages = b * maxp
    g = torch.Generator(device=device).manual_seed(0)
    q = torch.randn(b, hq, sq, d, generator=g, device=device).to(dtype)
    kc = torch.randn(pages, hkv, page, d, generator=g, device=device).to(dtype)
    vc = torch.randn(pages, hkv, page, d, generator=g, device=device).to(dtype)
    bt = torch.randperm(pages, generator=g, device=device).to(torch.int32).view(b, maxp)
    lens = torch.tensor([page * maxp - 3, page + 5][:b], dtype=torch.int32, device=device)
    return q, kc, vc, bt, lens


def varlen_inputs(device="cpu", lens=(5, 17, 1), hq=4, hkv=2, d=64, dtype=torch.bfloat16):
    g = torch.Generator(device=device).manual_seed(0)
    t = sum(lens)
    q = torch.randn(t, hq, d, generator=g, device=device).to(dtype)
    k = torch.randn(t, hkv, d, generator=g, device=device).to(dtype)
    v = torch.randn(t, hkv, d, generator=g, device=device).to(dtype)
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32, device=device)
    return q, k, v, cu, cu.clone(), max(lens)


def test_paged_expression_compiles_through_the_pipeline():
    q, kc, vc, bt, lens = paged_inputs()
    e = serving.paged_expression(q, kc, vc, bt, lens, "true", None, True)
    assert e.startswith("attention(Q[2,8,1,64]:bf16, Kc[8,2,16,64]:bf16, Vc[8,2,16,64]:bf16, "
                        "block_table=BT[2,4]:i32, seqlens_k=L[2]:i32, causal=true"), e
    p = loom.compile(e)
    assert "loom_t_BT" in p.cuda


def test_varlen_expression_compiles_through_the_pipeline():
    q, k, v, cq, ck, m = varlen_inputs()
    e = serving.varlen_expression(q, k, v, cq, ck, m, "top_left", 0.125, False)
    assert "cu_seqlens_q=CQ[4]:i32" in e and "max_seqlen_q=17" in e and "scale=0.125" in e, e
    assert "loom_t_CQ" in loom.compile(e).cuda


def test_errors_name_the_operand_and_the_fix():
    q, kc, vc, bt, lens = paged_inputs()
    with pytest.raises(TypeError, match="block_table has dtype torch.int64.*torch.int32"):
        serving.paged_expression(q, kc, vc, bt.long(), lens)
    with pytest.raises(ValueError, match="k_cache must have rank 4"):
        serving.paged_expression(q, kc[0], vc, bt, lens)
    with pytest.raises(ValueError, match="must have q's batch 2"):
        serving.paged_expression(q, kc, vc, bt[:1], lens)
    with pytest.raises(ValueError, match=r"\.contiguous\(\)"):
        serving.paged_expression(q, kc, vc.transpose(2, 3), bt, lens)
    qv, k, v, cq, ck, m = varlen_inputs()
    with pytest.raises(ValueError, match=r"\[B \+ 1\]"):
        serving.varlen_expression(qv, k, v, cq, ck[:2], m)
    with pytest.raises(ValueError, match="max_seqlen_q"):
        serving.varlen_expression(qv, k, v, cq, ck, 0)
    with pytest.raises(ValueError, match="causal="):
        loom.attention_varlen(qv, k, v, cq, ck, m, causal="maybe")


def test_fake_implementations_give_the_shapes():
    mode = FakeTensorMode()
    q, kc, vc, bt, lens = (mode.from_tensor(t) for t in paged_inputs())
    qv, k, v, cq, ck = (mode.from_tensor(t) for t in varlen_inputs()[:5])
    with mode:
        out, lse = torch.ops.loom.attention_paged(q, kc, vc, bt, lens, "true", None, True, "", True)
        assert list(out.shape) == [2, 8, 1, 64] and list(lse.shape) == [2, 8, 1]
        out, lse = torch.ops.loom.attention_varlen(qv, k, v, cq, ck, 17, "false", None, False, "",
                                                   True)
        assert list(out.shape) == [23, 4, 64] and lse.numel() == 0


def test_the_backward_is_refused():
    q, kc, vc, bt, lens = paged_inputs()
    q.requires_grad_(True)
    mode = FakeTensorMode()
    fq = mode.from_tensor(q)
    with mode:
        out, _ = torch.ops.loom.attention_paged(fq, mode.from_tensor(kc), mode.from_tensor(vc),
                                                mode.from_tensor(bt), mode.from_tensor(lens),
                                                "false", None, False, "", True)
        with pytest.raises(RuntimeError, match="no attention backward"):
            out.sum().backward()


def reference_paged(q, kc, vc, bt, lens, causal, dtype=torch.float32):
    """Per sequence: K and V gathered through the table, then SDPA in `dtype` (f32: the
    reference; bf16: PyTorch's own 16-bit result, whose error the rule doubles)."""
    b, hq, sq, d = q.shape
    hkv, page = kc.shape[1], kc.shape[2]
    out = torch.zeros(b, hq, sq, d, dtype=torch.float32, device=q.device)
    for i in range(b):
        n = int(lens[i])
        pages = bt[i, : (n + page - 1) // page].long()
        k = kc[pages].permute(1, 0, 2, 3).reshape(hkv, -1, d)[:, :n]
        v = vc[pages].permute(1, 0, 2, 3).reshape(hkv, -1, d)[:, :n]
        k = k.repeat_interleave(hq // hkv, 0).to(dtype)
        v = v.repeat_interleave(hq // hkv, 0).to(dtype)
        mask = None
        if causal:  # bottom-right: query row r sees keys up to r + n - sq
            r = torch.arange(sq, device=q.device)[:, None]
            c = torch.arange(n, device=q.device)[None, :]
            mask = c <= r + n - sq
        out[i] = torch.nn.functional.scaled_dot_product_attention(
            q[i].to(dtype), k, v, attn_mask=mask).float()
    return out


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("causal", [False, True])
def test_paged_matches_the_reference_on_the_gpu(causal):
    q, kc, vc, bt, lens = paged_inputs("cuda", sq=4 if causal else 1)
    out = loom.attention_paged(q, kc, vc, bt, lens, causal=causal)
    ref = reference_paged(q, kc, vc, bt, lens, causal)
    torch16 = reference_paged(q, kc, vc, bt, lens, causal, torch.bfloat16)
    le = (out.float() - ref).abs().max().item()
    te = (torch16 - ref).abs().max().item()
    assert math.isfinite(le) and le <= 2 * te, (le, te)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("causal", [False, True])
def test_paged_prefill_matches_the_reference_on_the_gpu(causal):
    """Sq = 65 queries over 64-key pages: the wgmma kernel (prefill's default on sm_90a) reads
    the pool through page-piece TMA boxes; elsewhere the mma.sync kernel runs it."""
    q, kc, vc, bt, lens = paged_inputs("cuda", sq=65, page=64, maxp=4)
    out = loom.attention_paged(q, kc, vc, bt, lens, causal=causal)
    ref = reference_paged(q, kc, vc, bt, lens, causal)
    torch16 = reference_paged(q, kc, vc, bt, lens, causal, torch.bfloat16)
    le = (out.float() - ref).abs().max().item()
    te = (torch16 - ref).abs().max().item()
    assert math.isfinite(le) and le <= 2 * te, (le, te)
