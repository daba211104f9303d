"""Forked workers (:mod:`ddflow.workers.forked`): what they inherit from the driver."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import os, sys, ddflow

    ready_at_fork = []
    fork = os.fork

    def watched_fork():
        ready_at_fork.append("numba.np.arraymath" in sys.modules)  # imported only by numba's target context
        return fork()

    os.fork = watched_fork
    with ddflow.Dataflow(workers=2) as flow:  # the workers fork at the first run
        flow.new_collection("x")[1].capture()
        flow.run()
    print("ready", ready_at_fork)
""")


def test_workers_are_forked_after_numbas_contexts_are_built():
    """Each worker inherits numba's contexts: built in a child at its first kernel, they cost it about a second.

    Runs in a fresh interpreter, where nothing has built them before the dataflow starts.
    """
    run = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "DDFLOW_JIT": "1"})
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().splitlines()[-1] == "ready [True, True]"
