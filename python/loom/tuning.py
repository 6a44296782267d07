"""loom.tune: `loom tune` from Python.

The tuner measures each candidate in an isolated worker process that is the `loom`
command itself (`loom tune-worker`: a candidate that faults or hangs cannot take the
caller down), so loom.tune runs `loom tune` as a child process: the `loom` that `pip
install .` puts in the package (loom/bin/loom), else the one in LOOM_PY_PATH (a CMake
build folder), else <repository>/build/loom, else LOOM_BINARY. The winner goes into the
tuning database (docs/tuning.md), where every later compile of the shape on that GPU
finds it (loom.matmul & co. with use_db=True, their default); the ops' kernel cache is
cleared so that the next call compiles with it.
"""
import os
import subprocess

__all__ = ["tune", "loom_binary"]


def loom_binary():
    """The `loom` command loom.tune runs (see the module's docstring)."""
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(here))
    candidates = [os.path.join(here, "bin", "loom")]
    if os.environ.get("LOOM_PY_PATH"):
        candidates.insert(0, os.path.join(os.environ["LOOM_PY_PATH"], "loom"))
    candidates.append(os.path.join(repo, "build", "loom"))
    if os.environ.get("LOOM_BINARY"):
        candidates.insert(0, os.environ["LOOM_BINARY"])
    for c in candidates:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    raise FileNotFoundError(
        "loom.tune needs the `loom` command (the tuner's worker) and found none in: %s. "
        "Reinstall the package (`pip install .` ships it), or build it (`ninja -C BUILD loom`) "
        "and set LOOM_PY_PATH=BUILD" % ", ".join(candidates))


def tune(op, *tensors, budget=120.0, trials=None, candidates=None, device=None,
         dry_run=False, record=True, db=None, timeout=None, **op_kwargs):
    """Tunes the kernel an op compiles for these tensors (or an expression string given as
    `op`) on GPU `device` (default: the tensors' one, else 0) and returns `loom tune`'s
    report. op: 'matmul', 'bmm', 'linear', 'attention', one of the loom.* ops, or an
    expression; tensors may be real, fake or meta (only shapes, dtypes and strides are
    read); op_kwargs are the op's own (bias=, activation=, causal=, scale=, return_lse=).
    budget: seconds, space and compilation included. dry_run: rank the space without a GPU.
    record=False or db=PATH keep the default database untouched. Raises RuntimeError with
    the report when the expression could not be tuned."""
    if callable(op):
        op = op.__name__
    if tensors:
        from .ops import expression
        expr = expression(op, *tensors, **op_kwargs)
        if device is None:
            devs = [t.device for t in tensors if hasattr(t, "device") and t.device.type == "cuda"]
            device = devs[0].index if devs and devs[0].index is not None else None
    else:
        if op_kwargs:
            raise TypeError("loom.tune(expression, ...) takes no op arguments (%s); pass the "
                            "tensors of an op instead" % ", ".join(op_kwargs))
        expr = op
    argv = [loom_binary(), "tune", "-c", expr, "--budget", repr(float(budget))]
    if device is not None:
        argv += ["--devices", str(int(device))]
    if trials is not None:
        argv += ["--trials", str(int(trials))]
    if candidates is not None:
        argv += ["--candidates", str(int(candidates))]
    if timeout is not None:
        argv += ["--timeout", repr(float(timeout))]
    if dry_run:
        argv.append("--dry-run")
    if not record:
        argv.append("--no-record")
    if db is not None:
        argv += ["--db", os.fspath(db)]
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    report = p.stdout + (("\n" + p.stderr.strip()) if p.returncode and p.stderr.strip() else "")
    if p.returncode != 0:
        raise RuntimeError("loom tune failed (exit %d) for `%s`:\n%s" % (p.returncode, expr, report))
    if not dry_run:
        try:
            from .ops import clear_cache
            clear_cache()
        except ImportError:  # no torch: no op cache
            pass
    return report
