# Two commands matter: `make demo` (the main job) and `make test` (the whole suite).
# Each creates .venv and installs what it needs on a fresh machine.
PYTHON ?= python3
CXX ?= g++
#: What `make asan` runs under the sanitizers: the kernels' tests against their references, and the oracles.
ASAN_TESTS ?= tests/base tests/traces tests/operators tests/graph tests/test_dataflows.py
#: The part of it `make test` (CI) runs too, to fit CI's time: every kernel's property tests against its reference.
ASAN_CI_TESTS ?= tests/base tests/traces tests/graph tests/operators/test_join.py tests/operators/test_loop_kernels.py \
  tests/operators/test_walk_kernels.py tests/operators/test_round.py tests/operators/test_session.py
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test bench microbench clean native asan

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev,spark,pipelines,metrics]"
	touch $(STAMP)

demo: native
	$(PY) -m ddflow.streaming.demo

test: native
	$(PY) -m pytest -q --durations=25 tests
	$(MAKE) --no-print-directory asan ASAN_TESTS="$(ASAN_CI_TESTS)"

microbench: $(STAMP)
	$(PY) -m pytest -q bench --benchmark-only --benchmark-columns=min,median,mean,rounds

clean:
	rm -rf $(VENV) .pytest_cache .benchmarks

# The native extension, rebuilt incrementally while developing it (pip install -e . builds it from scratch):
# nothing to do while the installed one is newer than every native source.
native: $(STAMP)
	@mkdir -p build
	@so=$$(ls ddflow/_native*.so 2>/dev/null | head -1); \
	if [ -z "$$so" ] || [ -n "$$(find native setup.py -newer "$$so" \( -name '*.cpp' -o -name '*.hpp' -o -name setup.py \) | head -1)" ]; then \
		flock build/.native.lock $(MAKE) --no-print-directory -f native/Makefile PY=$(PY) -j2; fi

# The kernel tests and the engine's oracles against the extension built with AddressSanitizer and
# UndefinedBehaviorSanitizer and bounds checks on every array access (gcc's runtime; build/native-asan).
asan: $(STAMP)
	@mkdir -p build
	flock build/.native.lock $(MAKE) --no-print-directory -f native/Makefile PY=$(PY) SANITIZE=1 -j2
	rm -f build/native-asan/report.*
	DDFLOW_NATIVE_LIBRARY=$$(ls build/native-asan/ddflow/_native*.so) \
	LD_PRELOAD=$$($(CXX) -print-file-name=libasan.so):$$($(CXX) -print-file-name=libubsan.so) \
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:log_path=build/native-asan/report \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=build/native-asan/report \
	$(PY) -m pytest -q -p no:cacheprovider $(ASAN_TESTS) \
	|| { cat build/native-asan/report.* 2>/dev/null; exit 1; }
