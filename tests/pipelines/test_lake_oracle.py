"""Every view's tables at every committed version equal DuckDB's answer on the source tables as of that version.

Random commit histories (inserts, deletes, updates, several commits per run, runs of no commits) are
written to real Delta (with and without the change data feed), Iceberg (a SQL catalog on SQLite) and
Parquet tables; after each run the contents sinks must equal the views at the run's last versions, and
every changelog sink, accumulated up to each data time of the run, the views at that time's versions.
The pipeline is closed and reopened between some runs (a new process rebuilds from its state).
"""
from __future__ import annotations

import decimal
import random

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddflow.pipelines import (Pipeline, delta, delta_changelog, delta_table, iceberg, iceberg_changelog, iceberg_table,
                              parquet, parquet_changelog)
from lake import VIEWS, Lake, bag, changelog_at, duckdb_answer, random_history, random_row

FORMATS = [("delta", True), ("delta", False), ("iceberg", True), ("parquet", True)]


def make_pipeline(lake: Lake, root: str) -> tuple[Pipeline, dict]:
    p = Pipeline(f"{root}/state", name="oracle")
    for name in ("t", "dim"):
        if lake.fmt == "delta":
            p.table(name, delta(lake.path(name), cdf="auto"))
        elif lake.fmt == "iceberg":
            p.table(name, iceberg(f"db.{name}", lake.catalog))
        else:
            p.table(name, parquet(lake.path(name)))
    sinks = {}
    for view, (sql, key) in VIEWS.items():
        p.view(view, sql, key=key)
        if lake.fmt == "iceberg":
            p.sink(view, iceberg_table(f"out.{view}", lake.catalog))
            p.sink(view, iceberg_changelog(f"out.{view}_changes", lake.catalog))
        else:
            p.sink(view, delta_table(f"{root}/out/{view}"))
            p.sink(view, delta_changelog(f"{root}/out/{view}_changes"))
        p.sink(view, parquet_changelog(f"{root}/out/{view}_pq"))
        sinks[view] = key
    return p, sinks


def read_sink(lake: Lake, root: str, view: str, changes: bool) -> pa.Table:
    if lake.fmt == "iceberg":
        return lake.catalog.load_table(f"out.{view}{'_changes' if changes else ''}").scan().to_arrow()
    from deltalake import DeltaTable
    return DeltaTable(f"{root}/out/{view}{'_changes' if changes else ''}").to_pyarrow_table()


def read_parquet_changes(root: str, view: str) -> pa.Table:
    import pyarrow.dataset as pds
    return pds.dataset(f"{root}/out/{view}_pq", format="parquet").to_table()


def check(lake: Lake, root: str, report, columns: dict[str, list[str]]) -> None:
    last = {"t": lake.version("t"), "dim": lake.version("dim")}
    times = [(t, v) for t, v in report.timeline] or [(report.frontier - 1, None)]
    for view, (sql, _) in VIEWS.items():
        cols = columns[view]
        want_now = duckdb_answer(sql, lake.tables_at(last), cols)
        got = read_sink(lake, root, view, changes=False)
        assert bag(got, cols) == want_now, f"{view}: contents after run {report.run}"
        for changes in (read_sink(lake, root, view, changes=True), read_parquet_changes(root, view)):
            for t, versions in times:
                if versions is None:
                    continue
                want = duckdb_answer(sql, lake.tables_at(versions), cols)
                assert changelog_at(changes, t, cols) == want, f"{view}: changelog at time {t} ({versions})"


def run_history(fmt: str, cdf: bool, history: list, root: str) -> None:
    lake = Lake(fmt, f"{root}/lake", cdf)
    p, _ = make_pipeline(lake, root)
    columns = None
    try:
        for i, run in enumerate(history):
            for commit in run:
                for op in commit:
                    lake.apply(op)
            if i % 2 == 1:  # a later process: rebuilt from the state
                p.close()
                p, _ = make_pipeline(lake, root)
            report = p.refresh()
            assert report.run == i
            if columns is None:
                columns = {v: list(p._captures[v].schema.names) for v in VIEWS}
            check(lake, root, report, columns)
    finally:
        p.close()


def named_history(inserts_only: bool) -> list:
    """Run 0 loads rows; run 1 updates and deletes in two commits; run 2 has none; run 3 mixes all three."""
    rng = random.Random(3)
    rows = [random_row(rng, k) for k in range(8)]
    rows[0].update(g="a", amt=decimal.Decimal("1.25"), flag=True)
    rows[1].update(g="a", amt=None, flag=True)
    more = [random_row(rng, k) for k in range(8, 12)]
    dims = [("insert_dim", [{"g": "a", "label": "x"}, {"g": "b", "label": "x"}])]
    if inserts_only:
        return [[dims + [("insert", rows[:5])], [("insert", rows[5:])]], [[("insert", more[:2])]], [],
                [[("insert_dim", [{"g": "c", "label": "y"}])], [("insert", more[2:])]]]
    return [[dims + [("insert", rows)]],
            [[("update", 0, decimal.Decimal("9.50")), ("delete", 1)], [("update", 0, decimal.Decimal("0.01"))]],
            [],
            [[("insert", more), ("delete", 0)], [("insert_dim", [{"g": "c", "label": "y"}])],
             [("update", 5, decimal.Decimal("3.00")), ("delete", 9)]]]


@pytest.mark.parametrize("fmt,cdf", FORMATS, ids=["delta-cdf", "delta-files", "iceberg", "parquet"])
def test_a_named_history(fmt, cdf, tmp_path):
    """Inserts, updates, deletes, several commits in one run, a run of none."""
    run_history(fmt, cdf, named_history(inserts_only=fmt == "parquet"), str(tmp_path))


@pytest.mark.parametrize("fmt,cdf", FORMATS, ids=["delta-cdf", "delta-files", "iceberg", "parquet"])
@settings(max_examples=3)
@given(seed=st.integers(0, 10**6))
def test_random_histories(fmt, cdf, seed, tmp_path_factory):
    root = str(tmp_path_factory.mktemp(f"{fmt}-{seed}"))
    run_history(fmt, cdf, random_history(seed, runs=3, inserts_only=fmt == "parquet"), root)
