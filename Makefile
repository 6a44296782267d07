# Loom's two commands: `make run` (build, then compile/verify/benchmark the default GEMM)
# and `make test` (build, then run every test; GPU tests skip with a reason on CPU-only
# machines). Both install missing build dependencies first (scripts/install-deps.sh).
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
GENERATOR := $(shell command -v ninja >/dev/null 2>&1 && echo Ninja || echo "Unix Makefiles")
BUILD_TYPE ?= RelWithDebInfo
# Extra arguments of the configure step (first build of $(BUILD) only), e.g.
# CMAKE_ARGS=-DLOOM_WERROR=ON as CI sets it.
CMAKE_ARGS ?=

# The Python package's tests (python/tests) run inside ctest (python_package, label cpu)
# when the build folder was configured with a Python that has nanobind, torch and pytest:
# `make` makes that Python, a virtual environment in $(PYENV), before the first configure
# (python/ci/make_pyenv.sh; skipped with the reason when pip has no network).
# PYENV= (empty) leaves it out.
PYENV ?= $(BUILD)/pyenv

.PHONY: all build run test test-cpu test-gpu test-python pyenv deps clean fuzz

all: build

deps:
	@bash scripts/install-deps.sh

pyenv:
	@$(if $(PYENV),bash python/ci/make_pyenv.sh $(PYENV),true)

$(BUILD)/CMakeCache.txt: | deps pyenv
	cmake -S . -B $(BUILD) -G "$(GENERATOR)" -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_ARGS) \
	  $$(test -n "$(PYENV)" && test -f "$(PYENV)/.ready" && echo "-DPython_EXECUTABLE=$(abspath $(PYENV))/bin/python")

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# `make run` builds the `loom` command alone (not the test executables), so a fresh clone
# shows the demo as soon as the libraries are compiled.
run: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) --target loom -j $(JOBS)
	$(BUILD)/loom demo

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)
	@$(BUILD)/loom device > /dev/null 2>&1 || echo "GPU-labelled tests were skipped: $$($(BUILD)/loom device)"
	@$(MAKE) --no-print-directory python-status

# Only the Python package's tests (after building the extension).
test-python: build
	ctest --test-dir $(BUILD) --output-on-failure -R '^python_package$$'
	@$(MAKE) --no-print-directory python-status

.PHONY: python-status
python-status:
	@grep -q '^LOOM_PYTHON:BOOL=ON' $(BUILD)/CMakeCache.txt || echo "Python package tests were skipped: $(BUILD) is configured without the extension (no nanobind in its Python; make_pyenv.sh said why above, or the folder was configured before: rm -rf $(BUILD) or configure with -DPython_EXECUTABLE=$(PYENV)/bin/python)"
	@! grep -q '^LOOM_PYTHON:BOOL=ON' $(BUILD)/CMakeCache.txt || ctest --test-dir $(BUILD) -N -R '^python_package$$' | grep -q 'Total Tests: 1' || echo "Python package tests were skipped: $(BUILD)'s Python has no pytest"

test-cpu: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) -L cpu

test-gpu: build
	ctest --test-dir $(BUILD) --output-on-failure -L gpu

# The libFuzzer target over the whole pipeline (fuzz/), in its own clang-built, sanitized
# build directory, run for FUZZ_SECONDS (scripts/fuzz.sh; CI runs it after the tests).
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 120
FUZZ_FLAGS ?=
fuzz: deps
	@command -v clang++ >/dev/null 2>&1 || { echo "make fuzz needs clang (apt-get install clang)" >&2; exit 1; }
	@test -f $(FUZZ_BUILD)/CMakeCache.txt || cmake -S . -B $(FUZZ_BUILD) -G "$(GENERATOR)" \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ -DLOOM_FUZZ=ON -DLOOM_PYTHON=OFF
	cmake --build $(FUZZ_BUILD) --target fuzz_pipeline -j $(JOBS)
	bash scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_FLAGS)

clean:
	rm -rf $(BUILD) $(FUZZ_BUILD)
