#!/usr/bin/env python3
"""A Llama MLP tensor-parallel over the GPUs of one host, its GEMMs on Loom, inside
torch.distributed (NCCL): Loom runs in the user's distributed framework, it brings none.

down(silu(gate(x)) * up(x)) with gate/up split by columns (each rank holds N/world of
their outputs) and down by rows (each rank holds the matching K/world slice); each rank
computes its partial output with loom.linear (silu fused into the gate GEMM) and an
all-reduce sums them. Rank 0 checks the result against the unsplit MLP in f32 (Loom's
max error at most twice that of the same MLP run by PyTorch in bf16, unsplit) and times
the tensor-parallel step against the same step with torch.nn.functional.linear, both
interleaved, CUDA events, median.

  torchrun --nproc_per_node=2 examples/python/tp_mlp.py [--tokens 4096] [--hidden 4096]
      [--intermediate 14336]
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "python"))
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import loom  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--intermediate", type=int, default=14336)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    if args.intermediate % world:
        raise SystemExit("--intermediate %d is not divisible by %d ranks" % (args.intermediate, world))

    # The full weights, the same on every rank (seeded), then each rank's shard.
    g = torch.Generator(device="cuda").manual_seed(0)
    h, inter = args.hidden, args.intermediate
    x = torch.randn(args.tokens, h, device="cuda", generator=g).to(torch.bfloat16)
    w_gate = (torch.randn(inter, h, device="cuda", generator=g) / h ** 0.5).to(torch.bfloat16)
    w_up = (torch.randn(inter, h, device="cuda", generator=g) / h ** 0.5).to(torch.bfloat16)
    w_down = (torch.randn(h, inter, device="cuda", generator=g) / inter ** 0.5).to(torch.bfloat16)
    part = inter // world
    cols = slice(rank * part, (rank + 1) * part)
    gate_s, up_s = w_gate[cols].contiguous(), w_up[cols].contiguous()
    down_s = w_down[:, cols].contiguous()

    def tp_loom():
        y = loom.linear(x, gate_s, activation="silu") * loom.linear(x, up_s)
        out = loom.linear(y, down_s)
        dist.all_reduce(out)
        return out

    def tp_torch():
        y = F.silu(F.linear(x, gate_s)) * F.linear(x, up_s)
        out = F.linear(y, down_s)
        dist.all_reduce(out)
        return out

    out = tp_loom()
    torch_out = tp_torch()
    ok = True
    if rank == 0:
        ref = F.linear(F.silu(F.linear(x.float(), w_gate.float())) * F.linear(x.float(), w_up.float()),
                       w_down.float())
        full16 = F.linear(F.silu(F.linear(x, w_gate)) * F.linear(x, w_up), w_down)
        le = (out.float() - ref).abs().max().item()
        te = (full16.float() - ref).abs().max().item()
        tpe = (torch_out.float() - ref).abs().max().item()
        ok = le <= 2 * te
        print("# tensor-parallel Llama MLP on %d GPUs (%s), tokens %d, hidden %d, MLP %d, bf16" % (
            world, torch.cuda.get_device_name(), args.tokens, h, inter))
        print("max error against f32: Loom TP %.4g, torch TP %.4g, torch unsplit bf16 %.4g: %s" % (
            le, tpe, te, "PASS" if ok else "FAIL"))

    times = {"loom": [], "torch": []}
    for _ in range(3):
        tp_loom(), tp_torch()
    torch.cuda.synchronize()
    for _ in range(args.reps):
        for name, f in (("loom", tp_loom), ("torch", tp_torch)):
            dist.barrier()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            f()
            e.record()
            torch.cuda.synchronize()
            times[name].append(s.elapsed_time(e) * 1e3)
    if rank == 0:
        lm, tm = statistics.median(times["loom"]), statistics.median(times["torch"])
        print("TP step (3 GEMMs + all-reduce): Loom %.0f us, torch %.0f us: %.2fx" % (lm, tm, tm / lm))
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
