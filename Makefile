# Two commands matter: `make demo` (the main job) and `make test` (the whole suite).
# Each creates .venv and installs what it needs on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test bench microbench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev,spark,pipelines]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m ddflow.streaming.demo

test: $(STAMP)
	$(PY) -m ddflow.warmup
	$(PY) -m pytest -q --durations=25 tests

microbench: $(STAMP)
	$(PY) -m pytest -q bench --benchmark-only --benchmark-columns=min,median,mean,rounds

clean:
	rm -rf $(VENV) .pytest_cache .benchmarks
