"""Loom beside PyTorch in one process: what scripts/attention_bench.py and the package's
tests share. Importing this module imports torch and the package `loom` (python/loom, put
on sys.path here; its extension loom._C comes from `pip install .` or a CMake build
folder: LOOM_PY_PATH, default <repo>/build).

Timing (docs/benchmarking.md): every candidate is timed the same way, interleaved
(rep r runs candidate 0, 1, 2 ... in turn), each launch bracketed by its own pair of
CUDA events on the current stream, the median of the reps reported. Before every timed
launch the L2 is made cold the same way for all: a read of a buffer twice the L2's size
(a sum over it: the lines it leaves are clean, so the timed launch evicts them without
writing back — Loom's `--l2 read`), then torch.cuda._sleep keeps the GPU busy for ~50 µs
while the host enqueues the start event and the launch, so Python's launch overhead
(Loom's binding or SDPA's dispatch) never opens a gap inside the timed interval.
"""
import math
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

# torch first: the extension shares libcublas.so.13 and libnvrtc.so.13 by soname with
# whichever copy is loaded first, and torch's (its wheels', possibly newer) must win, or
# torch could call into an older system copy (loom/__init__.py imports torch first too).
import torch  # noqa: E402
import loom  # noqa: E402

loom_py = loom  # the compiler API under the extension's former name

# The f32 references must be f32 products, not TF32's 10-bit mantissas.
torch.backends.cuda.matmul.allow_tf32 = False

TORCH_DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32,
                "i32": torch.int32}  # i32: attention's block_table= and seqlens_k=


class L2Flush:
    """A read of twice the L2 (see the module's docstring)."""

    def __init__(self):
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        l2 = getattr(props, "L2_cache_size", 0) or (loom.device() or {}).get("l2_bytes", 0)
        self.l2_bytes = l2 or 64 << 20
        self.buf = torch.ones(2 * self.l2_bytes // 4, dtype=torch.float32, device="cuda")
        # ~50 µs at 1.98 GHz: longer than a Python launch takes to enqueue.
        self.sleep_cycles = 100_000

    def __call__(self):
        self.buf.sum()
        torch.cuda._sleep(self.sleep_cycles)

    def describe(self):
        return "read of %.0f MiB (2x L2) + 50 us GPU sleep before each timed launch" % (
            self.buf.numel() * 4 / 2**20)


def time_interleaved(fns, reps=30, warmup=5, flush=None):
    """Median µs of each function, timed interleaved with a cold L2 before every launch."""
    flush = flush or L2Flush()
    for f in fns:
        for _ in range(warmup):
            f()
    torch.cuda.synchronize()
    events = [[(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
               for _ in range(reps)] for _ in fns]
    for r in range(reps):
        for i, f in enumerate(fns):
            flush()
            start, end = events[i][r]
            start.record()
            f()
            end.record()
    torch.cuda.synchronize()
    out = []
    for ev in events:
        ts = sorted(s.elapsed_time(e) * 1e3 for s, e in ev)
        n = len(ts)
        out.append(ts[n // 2] if n % 2 else 0.5 * (ts[n // 2 - 1] + ts[n // 2]))
    return out


class LoomOp:
    """A Loom program bound to torch tensors: outputs allocated here, launched on the
    current stream."""

    def __init__(self, expression, knobs="", inputs=None, use_db=True, dims=""):
        self.kernel = loom.Kernel(expression, knobs, torch.cuda.current_device(), use_db, dims)
        self.program = self.kernel.program
        self.tensors = {}
        for t in self.program.tensors:
            if t["role"] == "input":
                x = (inputs or {}).get(t["name"])
                if x is None:
                    raise ValueError("no tensor for input %s of %s" % (t["name"], expression))
                want = (list(t["shape"]), TORCH_DTYPES[t["dtype"]])
                if (list(x.shape), x.dtype) != want or not x.is_contiguous() or not x.is_cuda:
                    raise ValueError("input %s must be a contiguous CUDA tensor %s %s (got %s %s)"
                                     % (t["name"], want[0], want[1], list(x.shape), x.dtype))
                self.tensors[t["name"]] = x
            else:
                self.tensors[t["name"]] = torch.empty(t["shape"], dtype=TORCH_DTYPES[t["dtype"]],
                                                      device="cuda")
        # The program's workspace (split-K's partial sums, tile counters): torch's memory.
        for w in self.kernel.workspace:
            alloc = torch.zeros if w["zero_init"] else torch.empty
            self.tensors[w["name"]] = alloc(max(w["bytes"], 16), dtype=torch.uint8, device="cuda")
        self.ptrs = {n: x.data_ptr() for n, x in self.tensors.items()}

    def __call__(self):
        self.kernel.launch(self.ptrs, torch.cuda.current_stream().cuda_stream)
        return self.tensors["out"]


def attention_reference_f32(q, k, v, causal, scale=None):
    """softmax(scale·QKᵀ, masked)V in f32 from the 16-bit inputs, a few heads at a time
    (the score matrix of a 16k sequence is 1 GiB per head). Causal is bottom-right
    aligned (FlashAttention's and Loom's causal=true); GQA by repeating K/V heads."""
    b, hq, sq, d = q.shape
    hkv, sk = k.shape[1], k.shape[2]
    scale = scale if scale is not None else 1.0 / math.sqrt(d)
    out = torch.empty(q.shape, dtype=torch.float32, device=q.device)
    keep = None
    if causal:
        i = torch.arange(sq, device=q.device)[:, None]
        j = torch.arange(sk, device=q.device)[None, :]
        keep = j <= i + (sk - sq)
    chunk = max(1, (1 << 28) // max(1, sq * sk))
    for bi in range(b):
        for h0 in range(0, hq, chunk):
            hs = range(h0, min(hq, h0 + chunk))
            kv = [h // (hq // hkv) for h in hs]
            qf = q[bi, h0:h0 + len(hs)].float()
            kf = k[bi, kv].float()
            vf = v[bi, kv].float()
            s = torch.matmul(qf, kf.transpose(-1, -2)) * scale
            if keep is not None:
                s = s.masked_fill(~keep, float("-inf"))
            p = torch.softmax(s, dim=-1)
            if keep is not None:
                p = torch.nan_to_num(p, nan=0.0)  # rows that keep no key: O = 0
            out[bi, h0:h0 + len(hs)] = torch.matmul(p, vf)
    return out


def sdpa(q, k, v, causal, backend):
    """PyTorch's SDPA through one backend (a torch.nn.attention.SDPBackend)."""
    from torch.nn.attention import sdpa_kernel
    with sdpa_kernel(backend):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)


def check_attention(loom_out, torch_out, ref):
    """The issue's rule: Loom's max error against the f32 reference within twice that of
    a 16-bit PyTorch reference. Returns (passed, loom_err, torch_err)."""
    le = (loom_out.float() - ref).abs().max().item()
    te = (torch_out.float() - ref).abs().max().item()
    return (math.isfinite(le) and le <= 2 * te), le, te
