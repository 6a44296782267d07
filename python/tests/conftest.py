"""The package under test is python/loom of this checkout (its extension from LOOM_PY_PATH,
a CMake build folder, or <repo>/build), unless LOOM_TEST_INSTALLED=1 asks for the `loom`
that `pip install .` put in site-packages (python/ then comes last on sys.path: only
python/loom_torch.py, the timing and reference helpers, is taken from it)."""
import os
import sys

_PYTHON = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.environ.get("LOOM_TEST_INSTALLED") == "1":
    sys.path.append(_PYTHON)
else:
    sys.path.insert(0, _PYTHON)
