"""``python -m ddflow.warmup`` reaches every kernel Python calls, and names the ones a workload set misses."""
import subprocess
import sys

from ddflow import warmup
from ddflow.base.kernel_cache import entry_kernels


def test_entry_kernels_are_those_python_calls():
    for module in warmup.KERNEL_MODULES:
        __import__(module)
    entries = entry_kernels()
    assert "ddflow.operators.reduce.walk.walk_step" in entries
    assert "ddflow.base.kernels.kernels().seek" in entries
    # due_seeds is compiled into the walk's step (it lists it in uses=), so it is no entry of its own.
    assert "ddflow.operators.reduce.pending.due_seeds" not in entries


def test_the_workloads_reach_every_entry_kernel():
    run = subprocess.run([sys.executable, "-m", "ddflow.warmup"], capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, run.stderr[-2000:]
    assert all(f"{name} done" in run.stdout for name in warmup.WORKLOADS)


def test_a_kernel_no_workload_reaches_is_named(monkeypatch, capsys):
    monkeypatch.setattr(warmup, "WORKLOADS", {"loops": warmup.loops})
    assert warmup.main(["--processes", "1"]) == 1
    err = capsys.readouterr().err
    assert "ddflow.operators.session.session_step" in err and "ddflow.operators.reduce.walk.walk_step" not in err
