#!/usr/bin/env python3
"""Replays a sample of fuzz inputs through `loom compile --cubin`, which runs NVRTC on every
program Loom accepts, and counts what happened to each: accepted and compiled, refused with
a message (fine), or accepted and then rejected by NVRTC (a defect: every accepted program
must compile). The inputs are the NUL-separated fields of fuzz/fuzz_pipeline.cpp.

  python3 scripts/fuzz_nvrtc_sample.py LOOM_BINARY N CORPUS_DIR [CORPUS_DIR ...]

The inputs run JOBS at a time (environment; default: the CPU count).

Exit 1 when NVRTC rejected any accepted program, naming the inputs; 0 otherwise.
"""
import concurrent.futures
import os
import random
import subprocess
import sys
import tempfile

NVRTC_REJECTS = (b"NVRTC could not compile", b"NVRTC rejected an option", b"NVRTC produced no cubin")


def argv_for(loom, data, cubin):
    fields = (data.split(b"\0", 3) + [b"", b"", b""])[:4]
    expr, knobs, target, dims = fields
    argv = [loom.encode(), b"compile", b"-c", expr, b"--no-db", b"--cubin", cubin.encode()]
    if knobs:
        argv += [b"--knobs", knobs]
    if target:
        argv += [b"--target", target]
    if dims:
        argv += [b"--dims", dims]
    return argv


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    loom, n, dirs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    files = sorted(os.path.join(d, f) for d in dirs for f in os.listdir(d))
    random.Random(1).shuffle(files)
    counts = {"compiled": 0, "refused": 0, "nvrtc_rejected": 0, "timeout": 0, "crashed": 0}
    bad = []
    env = dict(os.environ)
    env.pop("LOOM_KNOBS", None)

    def replay(index_path):
        index, path = index_path
        with open(path, "rb") as f:
            data = f.read()
        cubin = os.path.join(tmp, "k%d.cubin" % index)
        try:
            p = subprocess.run(argv_for(loom, data, cubin), capture_output=True, timeout=300, env=env)
        except subprocess.TimeoutExpired:
            return path, "timeout", "no answer in 300 s"
        except ValueError:  # an argument with an embedded NUL cannot be passed
            return path, "refused", ""
        if p.returncode == 0:
            return path, "compiled", ""
        if p.returncode < 0:
            return path, "crashed", "signal %d" % -p.returncode
        if any(m in p.stderr for m in NVRTC_REJECTS):
            return path, "nvrtc_rejected", p.stderr.decode(errors="replace").splitlines()[0]
        return path, "refused", ""

    jobs = int(os.environ.get("JOBS", os.cpu_count() or 1))
    with tempfile.TemporaryDirectory() as tmp:
        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            for path, outcome, why in pool.map(replay, enumerate(files[:n])):
                counts[outcome] += 1
                if outcome in ("timeout", "crashed", "nvrtc_rejected"):
                    bad.append((path, why))
    total = sum(counts.values())
    print("fuzz_nvrtc_sample: %d inputs: %s" % (total, ", ".join("%s %d" % kv for kv in counts.items())))
    for path, why in bad:
        print("  %s: %s" % (path, why))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
