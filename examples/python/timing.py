"""The examples' timer: CUDA events around each call, the callables interleaved so clock and
thermal drift fall on all of them alike, the median of each."""
import statistics

import torch


def time_interleaved(fns, reps, warmup=2, before=None):
    """Median µs of each fn over `reps` interleaved rounds, after `warmup` calls of each.
    before(i): untimed work before each call of fns[i] (e.g. a fresh copy of a cache)."""
    for i, f in enumerate(fns):
        for _ in range(warmup):
            if before:
                before(i)
            f()
    torch.cuda.synchronize()
    times = [[] for _ in fns]
    for _ in range(reps):
        for i, f in enumerate(fns):
            if before:
                before(i)
            torch.cuda.synchronize()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            f()
            e.record()
            torch.cuda.synchronize()
            times[i].append(s.elapsed_time(e) * 1e3)
    return [statistics.median(t) for t in times]
