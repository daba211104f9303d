"""SIGKILL at every step of a run, then run again: the same tables as a run never killed.

Each step is one run of a real pipeline process (tests/pipelines/kill_job.py) over Delta tables, with a
new commit history before it, killed at that step; then the same run again, not killed.  After it the
contents tables equal the views at the last versions, every changelog accumulates to the views at every
version, and no sink holds a run twice (each run is at most one commit of each Delta table, one
file of each Parquet changelog): zero lost, zero duplicated.
"""
from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys

import pytest

from lake import VIEWS, Lake, changelog_at, duckdb_answer, random_history

JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kill_job.py")

#: Where the first attempt of each run dies: after reading, after running, before and after each sink's
#: commit (the contents table, the Delta changelog, the Parquet changelog of the first view; the last
#: view's last sink, so the manifest is next), during a sink's commit and during the manifest's, and after
#: the manifest (a completed run: the rerun is the next run).
ALL_POINTS = ["read", "ran", "sink_begin:by_g:0", "sink_done:by_g:0", "sink_done:by_g:1", "sink_done:labelled:2",
              "state_begin", "sink_begin:by_g:0@0.05", "sink_begin:labelled:0@0.02", "state_begin@0.002",
              "state_done"]
#: CI runs one point of each kind (each costs two pipeline processes); DDFLOW_KILL_MATRIX=all runs every point.
POINTS = ALL_POINTS if os.environ.get("DDFLOW_KILL_MATRIX") == "all" else [
    "ran", "sink_done:by_g:0", "state_begin", "sink_begin:by_g:0@0.05", "state_done"]


def job(root: str, fault: str | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, JOB, root] + (["--fault", fault] if fault else [])
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def sink_runs(root: str, view: str) -> dict[str, list[int]]:
    """The run numbers each sink of ``view`` holds, one entry per commit (or file)."""
    import pyarrow.parquet as pq
    from deltalake import DeltaTable
    out = {}
    for suffix in ("", "_changes"):
        runs = [int(h["ddflow.run"]) for h in DeltaTable(f"{root}/out/{view}{suffix}").history() if "ddflow.run" in h]
        out[suffix or "contents"] = runs
    d = f"{root}/out/{view}_pq"
    out["parquet"] = [int(pq.read_schema(os.path.join(d, f)).metadata[b"ddflow.run"]) for f in sorted(os.listdir(d))
                      if f.endswith(".parquet")]
    return out


def check(lake: Lake, root: str, times: list[tuple[int, dict]]) -> None:
    from deltalake import DeltaTable
    import pyarrow.dataset as pds
    from lake import bag
    last = {"t": lake.version("t"), "dim": lake.version("dim")}
    for view, (sql, _) in VIEWS.items():
        contents = DeltaTable(f"{root}/out/{view}").to_pyarrow_table()
        cols = contents.column_names
        assert bag(contents, cols) == duckdb_answer(sql, lake.tables_at(last), cols), f"{view}: contents"
        for changes in (DeltaTable(f"{root}/out/{view}_changes").to_pyarrow_table(),
                        pds.dataset(f"{root}/out/{view}_pq", format="parquet").to_table()):
            for t, versions in times:
                assert changelog_at(changes, t, cols) == duckdb_answer(sql, lake.tables_at(versions), cols), \
                    f"{view}: changelog at time {t}"
        for sink, runs in sink_runs(root, view).items():
            dup = [r for r, n in collections.Counter(runs).items() if n > 1]
            assert not dup, f"{view} {sink}: runs {dup} committed twice"


def times_of(lake: Lake, since: int) -> list[tuple[int, dict]]:
    """The data times after the first run and the versions at each: only ``t`` changes after it, so a data
    time is ``t``'s version plus ``dim``'s plus one."""
    vd = lake.version("dim")
    return [(vt + vd + 1, {"t": vt, "dim": vd}) for vt in sorted(lake.snapshots["t"]) if vt >= since]


def test_kill_at_every_step_then_run_again(tmp_path):
    root = str(tmp_path)
    lake = Lake("delta", f"{root}/lake", cdf=True)
    history = random_history(11, runs=len(POINTS) + 1)
    # After the first run only t changes, so each data time names one pair of versions.
    history = history[:1] + [[[op for op in c if op[0] != "insert_dim"] for c in run] for run in history[1:]]
    for commit in history[0]:
        for op in commit:
            lake.apply(op)
    first = job(root)
    assert first.returncode == 0, first.stderr
    since = lake.version("t")
    for point, run in zip(POINTS, history[1:]):
        for commit in run:
            for op in commit:
                lake.apply(op)
        killed = job(root, point)
        assert killed.returncode == -signal.SIGKILL, \
            f"{point}: not killed ({killed.returncode}): {killed.stderr[-2000:]}"
        again = job(root)
        assert again.returncode == 0, f"after a kill at {point}: {again.stderr[-3000:]}"
        check(lake, root, times_of(lake, since))
