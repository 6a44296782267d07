# One prefill attention case launched 6 times (for ncu --launch-skip 3): Loom's default or cuDNN.
import os, sys
sys.path.insert(0, os.environ["LOOM_PY_PATH"]); sys.path.insert(0, "python"); sys.path.insert(0, "scripts")
import attention_bench as ab
import loom_torch as lt
import torch
from torch.nn.attention import SDPBackend
who, s, d, causal = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "true"
b, h = 16384 // s, 2048 // d
g = torch.Generator(device="cuda").manual_seed(1)
q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
if who == "loom":
    op = lt.LoomOp(ab.expression(b, h, s, d, "bf16", causal), "", {"Q": q, "K": k, "V": v}, use_db=False)
    f = op
else:
    f = lambda: lt.sdpa(q, k, v, causal, SDPBackend.CUDNN_ATTENTION)  # noqa: E731
for _ in range(6):
    out = f()
torch.cuda.synchronize()
print(who, s, d, causal, "max err vs f32", (out.float() - lt.attention_reference_f32(q, k, v, causal)).abs().max().item())
