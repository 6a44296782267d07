"""Loom from Python: ops on PyTorch tensors (loom.matmul, loom.bmm, loom.linear,
loom.attention; also torch.ops.loom.*, which torch.compile and CUDA graphs take) and the
compiler itself (loom.compile, loom.Kernel, loom.run, loom.tune, ...). python/README.md.

The extension loom._C is found, in this order: in LOOM_PY_PATH when it is set (a CMake
build folder: <build>/python/loom/_C*.so, built by `ninja -C <build> loom_py`), beside
this file (`pip install .`), in <repository>/build (unless LOOM_PY_PATH is set), then in
an installed package's loom/ on sys.path (this checkout's python/ imported by a script
where `pip install .` put the extension in site-packages). Importing needs no GPU; the
ops need torch, imported here first when it is installed (the extension shares
libnvrtc/libcublas by soname with whichever copy a process loads first, and torch's own
must win).
"""
import importlib.machinery
import importlib.util
import os
import sys

try:  # before the extension: see the docstring
    import torch as _torch  # noqa: F401
except ImportError:  # compile-only use
    _torch = None


def _candidates(folder):
    for sub in ("", os.path.join("python", "loom")):
        d = os.path.join(folder, sub)
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(d, "_C" + suffix)
            if os.path.isfile(path):
                yield path


def _load_from(path):
    spec = importlib.util.spec_from_file_location(__name__ + "._C", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[__name__ + "._C"] = mod
    spec.loader.exec_module(mod)
    return mod


def _load_extension():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(here))
    env = os.environ.get("LOOM_PY_PATH")
    searched = []
    if env:
        for path in _candidates(env):
            return _load_from(path), path
        searched.append("LOOM_PY_PATH=%s (and its python/loom/)" % env)
    for path in _candidates(here):
        return _load_from(path), path
    searched.append(here)
    if not env:
        default = os.path.join(repo, "build")
        for path in _candidates(default):
            return _load_from(path), path
        searched.append(default + " (and its python/loom/)")
    # This checkout's package on sys.path (a script's python/) while `pip install .` put
    # the extension in site-packages: take that one.
    for entry in sys.path:
        d = os.path.join(os.path.abspath(entry or "."), "loom")
        if d != here:
            for path in _candidates(d):
                return _load_from(path), path
    searched.append("loom/ under each sys.path entry")
    raise ImportError(
        "loom's extension loom._C (%s) is not built: found none in %s. Build it with "
        "`pip install .` at the repository root (needs the CUDA toolkit and nanobind; "
        "`pip install --no-build-isolation .` where they and scikit-build-core are "
        "installed already), or with CMake (-DLOOM_PYTHON=ON, `ninja -C BUILD loom_py`) "
        "and set LOOM_PY_PATH=BUILD" % (
            "_C" + importlib.machinery.EXTENSION_SUFFIXES[0], "; ".join(searched)))


_C, _C_PATH = _load_extension()

# The compiler (the loom_py API): compile-only functions work without a GPU.
Program = _C.Program
Kernel = _C.Kernel
NoteWarning = _C.NoteWarning
compile = _C.compile  # noqa: A001 - loom.compile, as `loom compile`
run = _C.run
ladder = _C.ladder
ladder_names = _C.ladder_names
knob_names = _C.knob_names
device = _C.device
no_device_reason = _C.no_device_reason

from .tuning import tune, loom_binary  # noqa: E402

if _torch is not None:
    from .ops import (matmul, bmm, linear, attention, gemm_epilogue, expression,  # noqa: E402
                      clear_cache, cache_info, runtime_m)
    from .ops import LoomStrideError  # noqa: E402
    from .compile_backend import explain  # noqa: E402
    from .serving import attention_paged, attention_varlen  # noqa: E402
    try:  # torch.compile(model, backend="loom")
        from .compile_backend import register as _register_backend
        _register_backend()
    except Exception as _e:  # an older torch without the registry: the ops still work
        import warnings as _warnings
        _warnings.warn("loom: torch.compile backend not registered: %s" % _e)

__all__ = ["Program", "Kernel", "NoteWarning", "compile", "run", "ladder", "ladder_names",
           "knob_names", "device", "no_device_reason", "tune", "loom_binary"]
if _torch is not None:
    __all__ += ["matmul", "bmm", "linear", "attention", "gemm_epilogue", "expression", "clear_cache",
                "cache_info", "LoomStrideError", "explain", "attention_paged", "attention_varlen"]
