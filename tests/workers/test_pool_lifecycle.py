"""Worker pools left to the garbage collector go away cleanly (no tracebacks, no processes left)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import gc, os, ddflow

    def make():
        flow = ddflow.Dataflow(workers=2)
        x_in, x = flow.new_collection("x")
        out = x.count().capture()
        x_in.insert((1,), 0)
        flow.advance_to(1)
        flow.run()
        assert out.drain() == [((1, 1), 0, 1)]
        return flow._pool.pids

    pids = [p for _ in range(4) for p in make()]  # never shut down, never closed
    gc.collect()
    alive = []
    for p in pids:
        try:
            os.kill(p, 0)
            alive.append(p)
        except ProcessLookupError:
            pass
    print("alive", alive)
""")


def test_dataflows_left_to_the_collector_leave_no_tracebacks_and_no_workers():
    run = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stderr == "", run.stderr
    assert run.stdout.strip().splitlines()[-1] == "alive []"
