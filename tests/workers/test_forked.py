"""Forked workers (:mod:`ddflow.workers.forked`): what they inherit from the driver."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import os, sys, ddflow
    import ddflow.workers.forked as forked

    events = []
    fork, preload = os.fork, forked.preload

    def watched_fork():
        events.append(("fork", "ddflow._native" in sys.modules))
        return fork()

    def watched_preload():
        preload()
        events.append(("preload", "ddflow._native" in sys.modules))

    os.fork, forked.preload = watched_fork, watched_preload
    with ddflow.Dataflow(workers=2) as flow:  # the workers fork at the first run
        x_in, x = flow.new_collection("x")
        out = x.project(0).count().capture()
        x_in.update([(k % 3, k) for k in range(9)], 0)
        flow.advance_to(1)
        flow.run()
        print("out", sorted(out.drain()))
    print("events", events)
    print("loaded", "ddflow._native" in sys.modules)
""")


@pytest.mark.parametrize("native", [True, False])
def test_workers_are_forked_after_the_extension_is_loaded(native):
    """The driver loads the native extension (``native.preload``) before it forks, so each worker inherits it
    loaded; under ``DDFLOW_NATIVE=0`` nothing loads it, in the driver or the workers, and they compute the same.

    Runs in a fresh interpreter, where nothing has loaded the extension before the dataflow starts.
    """
    run = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "DDFLOW_NATIVE": "1" if native else "0"})
    assert run.returncode == 0, run.stderr
    lines = dict(line.split(" ", 1) for line in run.stdout.strip().splitlines())
    assert lines["out"] == str([((k, 3), 0, 1) for k in range(3)])
    assert lines["events"] == str([("preload", native), ("fork", native), ("fork", native)])
    assert lines["loaded"] == str(native)
