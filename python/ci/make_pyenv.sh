#!/usr/bin/env bash
# The Python package's test environment for `make test` (Makefile: pyenv): a virtual
# environment in DIR (the build folder's pyenv/; never the user's site-packages) with
# torch, nanobind, scikit-build-core, numpy and pytest. The build folder is then configured
# with its Python, so CMake builds the extension loom._C and ctest runs python/tests
# (python_package). torch comes from the CPU wheel index when it is reachable (~200 MB),
# else from PyPI (its CUDA build, ~5 GB installed: both import and run the CPU tests
# alike). Without a network (pip fails) the environment is not made and the Python tests
# are skipped with the reason printed here; make test goes on. A finished environment is
# marked DIR/.ready and reused. docs/testing.md has the time it takes.
set -uo pipefail
DIR=${1:?usage: make_pyenv.sh DIR}
READY=$DIR/.ready
[ -f "$READY" ] && exit 0
PY=${PYTHON:-python3}
skip() {
  echo "Python package tests skipped: $1" >&2
  rm -rf "$DIR"
  exit 0
}
command -v "$PY" >/dev/null 2>&1 || skip "no $PY on PATH"
start=$(date +%s)
rm -rf "$DIR"
mkdir -p "$(dirname "$DIR")"
LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT
"$PY" -m venv "$DIR" >"$LOG" 2>&1 || skip "$PY -m venv $DIR failed: $(tail -1 "$LOG")"
PIP=("$DIR/bin/python" -m pip --disable-pip-version-check -q)
echo "making the Python test environment $DIR (torch, nanobind, scikit-build-core, pytest)" >&2
if ! "${PIP[@]}" install --retries 0 --timeout 20 torch \
     --index-url https://download.pytorch.org/whl/cpu >"$LOG" 2>&1; then
  "${PIP[@]}" install --retries 2 --timeout 60 torch >"$LOG" 2>&1 ||
    skip "pip could not install torch (no network?): $(tail -1 "$LOG")"
fi
"${PIP[@]}" install nanobind scikit-build-core pytest numpy >"$LOG" 2>&1 ||
  skip "pip could not install nanobind, scikit-build-core, pytest: $(tail -1 "$LOG")"
touch "$READY"
echo "Python test environment ready in $(( $(date +%s) - start )) s: $DIR" >&2
