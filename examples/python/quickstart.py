"""loom.matmul and loom.attention on torch tensors, each within twice torch's own error against an
f64 reference. Run after `pip install .` (or: LOOM_PY_PATH=<CMake build> PYTHONPATH=python)."""
import torch, loom  # noqa: E401
F = torch.nn.functional
a, b = (torch.randn(2048, 1024, device="cuda", dtype=torch.bfloat16) for _ in range(2))
q, k, v = (torch.randn(2, 16, 1024, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
for name, mine, theirs, ref in [  # b.T is read in place; causal=True is SDPA's is_causal=True
        ("matmul", loom.matmul(a, b.T), a @ b.T, a.double() @ b.double().T),
        ("attention", loom.attention(q, k, v, causal=True), F.scaled_dot_product_attention(q, k, v, is_causal=True),
         F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True))]:
    le, te = ((x.double() - ref).abs().max().item() for x in (mine, theirs))
    print("%-9s loom max err %.3e, torch %.3e: %s" % (name, le, te, "PASS" if le <= 2 * te else "FAIL"))
    assert le <= 2 * te, name
