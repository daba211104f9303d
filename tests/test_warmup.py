"""``python -m ddflow.warmup`` reaches every kernel Python calls, and names the ones a workload set misses."""
import subprocess
import sys

import pytest

from ddflow import warmup
from ddflow.base.kernel_cache import entry_kernels
from ddflow.errors import UsageError


def test_entry_kernels_are_those_python_calls():
    for module in warmup.KERNEL_MODULES:
        __import__(module)
    entries = entry_kernels()
    assert "ddflow.operators.reduce.walk.walk_step" in entries
    assert "ddflow.base.kernels.kernels().seek" in entries
    # The walk's step compiles due_seeds into itself, and the walk of several value fields calls it from Python.
    assert "ddflow.operators.reduce.pending.due_seeds" in entries
    # A plain helper is only ever compiled into its callers.
    assert "ddflow.base.kernels.lex_order" not in entries


def test_kernel_modules_lists_every_module_that_defines_a_lazy_kernel():
    from test_layers import _modules

    from ddflow.base import jit

    for module, path in _modules().items():
        if "lazy_jit" in path.read_text() and not module.startswith("ddflow.streaming"):
            __import__(module)
    # Kernels a test module defines (tests/base/test_kernels.py) are not the warm-up's to compile.
    assert {f.__module__ for f in jit._lazy if f.__module__.startswith("ddflow.")} <= set(warmup.KERNEL_MODULES)


def test_the_workloads_reach_every_entry_kernel():
    run = subprocess.run([sys.executable, "-m", "ddflow.warmup"], capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, run.stderr[-2000:]
    assert all(f"{name} done" in run.stdout for name in warmup.WORKLOADS)


def test_a_kernel_no_workload_reaches_is_named(monkeypatch, capsys):
    monkeypatch.setattr(warmup, "WORKLOADS", {"loops": warmup.loops})
    assert warmup.main(["--processes", "1"]) == 1
    err = capsys.readouterr().err
    assert "ddflow.operators.session.session_step" in err and "ddflow.operators.reduce.walk.walk_step" not in err


def test_with_compiling_off_there_is_nothing_to_warm(monkeypatch, capsys):
    monkeypatch.setenv("DDFLOW_JIT", "0")
    assert warmup.main([]) == 0
    assert "nothing to compile" in capsys.readouterr().out
    with pytest.raises(UsageError, match="DDFLOW_JIT=0"):
        warmup.warm()
