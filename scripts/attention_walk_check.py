#!/usr/bin/env python3
"""The persistent attention walk's dynamic schedule (ATTN_SCHEDULE=dynamic) over repeated
launches on one workspace: the work counter must be back at 0 after every launch (the
launch's last fetch wraps it), or the next launch skips units (stale O) or deals them
twice. Each point runs LAUNCHES launches, O cleared before each, and checks every one
against the f32 reference (scripts/attention_bench.py's rule); prints PASS/FAIL per point.

  LOOM_PY_PATH=build-device python3 scripts/attention_walk_check.py [--launches 4]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "python"))
import loom_torch as lt  # noqa: E402
from loom_torch import torch  # noqa: E402
from torch.nn.attention import SDPBackend  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--launches", type=int, default=4)
    p.add_argument("--knobs", default="ATTN_PERSISTENT=1,ATTN_SCHEDULE=dynamic")
    args = p.parse_args()
    failed = 0
    # (batch, heads, seqlen, D, causal): the checkpoint's shapes at 16k tokens, and one
    # with fewer units than SMs.
    points = [(16, 16, 1024, 128, True), (4, 8, 4096, 256, True), (16, 16, 1024, 128, False),
              (1, 2, 300, 128, True)]
    for b, h, s, d, causal in points:
        g = torch.Generator(device="cuda").manual_seed(3)
        q, k, v = [torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, generator=g)
                   for _ in range(3)]
        t = "[%d,%d,%d,%d]:bf16" % (b, h, s, d)
        expr = "attention(Q%s, K%s, V%s, causal=%s)" % (t, t, t, "true" if causal else "false")
        ref = lt.attention_reference_f32(q, k, v, causal)
        torch_out = lt.sdpa(q, k, v, causal, SDPBackend.FLASH_ATTENTION)
        try:
            op = lt.LoomOp(expr, args.knobs, {"Q": q, "K": k, "V": v}, use_db=False)
        except RuntimeError as e:
            print("FAIL %s: not compiled: %s" % (expr, str(e).splitlines()[0]))
            failed += 1
            continue
        bad = []
        for launch in range(args.launches):
            op.tensors["out"].fill_(float("nan"))
            out = op()
            torch.cuda.synchronize()
            ok, le, te = lt.check_attention(out, torch_out, ref)
            if not ok:
                bad.append("launch %d: max err %.2e vs PyTorch's %.2e" % (launch, le, te))
        print("%s %s knobs=%s x%d launches%s" % ("FAIL" if bad else "PASS", expr, args.knobs,
                                                args.launches, (": " + "; ".join(bad)) if bad else ""),
              flush=True)
        failed += bool(bad)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
