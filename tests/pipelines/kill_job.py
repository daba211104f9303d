"""One pipeline run in its own process, killed with SIGKILL at a chosen step (the kill matrix's job).

    python kill_job.py ROOT [--fault POINT[@DELAY]]

The pipeline reads Delta tables ``ROOT/lake/t`` and ``ROOT/lake/dim`` and keeps the oracle views
(tests/pipelines/lake.py) in ``ROOT/out``: a Delta contents table, a Delta changelog and a Parquet
changelog each.  ``--fault POINT`` kills the process when the run reaches POINT (a
``Pipeline._fault`` point: ``read``, ``ran``, ``sink_begin:VIEW:I``, ``sink_done:VIEW:I``,
``state_begin``, ``state_done``); ``POINT@DELAY`` kills it DELAY seconds after reaching POINT, in the
middle of whatever comes next (a sink's commit, the manifest's).
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ddflow.pipelines import Pipeline, delta, delta_changelog, delta_table, parquet_changelog  # noqa: E402
from lake import VIEWS  # noqa: E402


def build(root: str) -> Pipeline:
    p = Pipeline(f"{root}/state", name="kill")
    p.table("t", delta(f"{root}/lake/t"))
    p.table("dim", delta(f"{root}/lake/dim"))
    for view, (sql, key) in VIEWS.items():
        p.view(view, sql, key=key)
        p.sink(view, delta_table(f"{root}/out/{view}"))
        p.sink(view, delta_changelog(f"{root}/out/{view}_changes"))
        p.sink(view, parquet_changelog(f"{root}/out/{view}_pq"))
    return p


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--fault", default=None)
    args = ap.parse_args()
    p = build(args.root)
    if args.fault:
        point, _, delay = args.fault.partition("@")

        def die() -> None:
            os.kill(os.getpid(), signal.SIGKILL)

        def fault(at: str, run: int) -> None:
            if at == point:
                if delay:
                    threading.Timer(float(delay), die).start()
                else:
                    die()
        p._fault = fault
    report = p.refresh()
    print(f"run {report.run} resumed={report.resumed}")
    p.close()


if __name__ == "__main__":
    main()
