"""A state directory that does not match the pipeline is refused by name; a full refresh rebuilds; the CLI.

Each refusal names what differs and says what to do, and leaves the state and the sinks as they were;
``refresh(full=True)`` (``--full-refresh``) then rebuilds.  The CLI prints a progress bar per source and
a line per view, and exits 0, or non-zero with the reason.
"""
from __future__ import annotations

import decimal
import os
import subprocess
import sys

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from ddflow.pipelines import Pipeline, PipelineError, SourceError, delta, delta_changelog, delta_table, parquet
from lake import T_SCHEMA, bag, random_row

SQL = "SELECT g, COUNT(*) AS n, SUM(amt) AS total FROM t GROUP BY g"


def rows(ks, seed=1):
    import random
    rng = random.Random(seed)
    return pa.Table.from_pylist([random_row(rng, k) for k in ks], schema=T_SCHEMA)


def pipeline(root: str, sql: str = SQL, source: str | None = None, name: str = "p", cdf="auto") -> Pipeline:
    p = Pipeline(f"{root}/state", name=name)
    p.table("t", delta(source or f"{root}/t", cdf=cdf))
    p.view("by_g", sql, key="g")
    p.sink("by_g", delta_table(f"{root}/out"))
    p.sink("by_g", delta_changelog(f"{root}/out_changes"))
    return p


@pytest.fixture
def lake(tmp_path):
    root = str(tmp_path)
    write_deltalake(f"{root}/t", rows(range(5)), configuration={"delta.enableChangeDataFeed": "true"})
    with pipeline(root) as p:
        assert p.refresh().run == 0
    return root


def test_another_view_is_refused_by_name_and_a_full_refresh_rebuilds(lake):
    other = "SELECT g, COUNT(*) AS n, MAX(amt) AS total FROM t GROUP BY g"
    before = DeltaTable(f"{lake}/out").version()
    with pipeline(lake, sql=other) as p:
        with pytest.raises(PipelineError, match=r"view 'by_g' changed its sql.*full refresh"):
            p.refresh()
        assert DeltaTable(f"{lake}/out").version() == before
        r = p.refresh(full=True)
        assert r.full and r.run == 1
    got = DeltaTable(f"{lake}/out").to_pyarrow_table()
    import duckdb
    con = duckdb.connect()
    con.register("t", DeltaTable(f"{lake}/t").to_pyarrow_table())
    want = con.execute(other).fetchall()
    assert bag(got, ["g", "n", "total"]) == bag([dict(zip(["g", "n", "total"], r)) for r in want], ["g", "n", "total"])
    with pipeline(lake, sql=other) as p:  # the rebuilt state is this pipeline's now
        assert p.refresh().run == 2


def test_another_source_and_another_pipeline_are_refused(lake, tmp_path_factory):
    elsewhere = str(tmp_path_factory.mktemp("elsewhere"))
    write_deltalake(f"{elsewhere}/t", rows(range(3)))
    with pipeline(lake, source=f"{elsewhere}/t") as p:
        with pytest.raises(PipelineError, match=r"table 't' changed its source"):
            p.refresh()
    with pipeline(lake, name="q") as p:
        with pytest.raises(PipelineError, match=r"belongs to pipeline 'p', not 'q'"):
            p.refresh()


def test_a_source_replaced_or_vacuumed_is_refused(lake):
    write_deltalake(f"{lake}/t", rows([7]), mode="append")
    DeltaTable(f"{lake}/t").delete("k = 1")
    dt = DeltaTable(f"{lake}/t")
    dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    with pipeline(lake, cdf=False) as p:  # the files' differences need the removed file, which VACUUM deleted
        with pytest.raises(SourceError, match=r"cannot be read.*VACUUM.*full refresh"):
            p.refresh()
    import shutil
    shutil.rmtree(f"{lake}/t")
    write_deltalake(f"{lake}/t", rows(range(3)))
    with pipeline(lake) as p:
        with pytest.raises(SourceError, match=r"the table was replaced"):
            p.refresh()
        assert p.refresh(full=True).full


def test_a_sink_deleted_under_the_pipeline_is_refused(lake):
    import shutil
    shutil.rmtree(f"{lake}/out")
    with pipeline(lake) as p:
        with pytest.raises(PipelineError, match=r"no longer holds this pipeline's commits"):
            p.refresh()


def test_a_parquet_file_that_changes_is_refused_unless_replace_on_change(tmp_path):
    import pyarrow.parquet as pq
    root = str(tmp_path)
    os.makedirs(f"{root}/in")
    pq.write_table(rows(range(3)), f"{root}/in/a.parquet")

    def make(replace: bool) -> Pipeline:
        p = Pipeline(f"{root}/state", name="pq")
        p.table("t", parquet(f"{root}/in", replace_on_change=replace))
        p.view("by_g", SQL, key="g")
        p.sink("by_g", delta_table(f"{root}/out"))
        return p

    with make(False) as p:
        p.refresh()
        pq.write_table(rows([1, 2], seed=5), f"{root}/in/a.parquet")
        with pytest.raises(SourceError, match=r"file a.parquet changed.*replace_on_change=True"):
            p.refresh()
    with make(True) as p:
        with pytest.raises(PipelineError, match="replace_on_change"):  # a different declaration: its own state
            p.refresh()
        p.refresh(full=True)
        pq.write_table(rows([4], seed=6), f"{root}/in/a.parquet")
        pq.write_table(rows([8, 9], seed=7), f"{root}/in/b.parquet")
        p.refresh()
    import pyarrow.dataset as pds
    import duckdb
    con = duckdb.connect()
    con.register("t", pds.dataset(f"{root}/in", format="parquet").to_table())
    want = [dict(zip(["g", "n", "total"], r)) for r in con.execute(SQL).fetchall()]
    assert bag(DeltaTable(f"{root}/out").to_pyarrow_table(), ["g", "n", "total"]) == bag(want, ["g", "n", "total"])


PIPELINE_FILE = '''
from ddflow.pipelines import Pipeline, delta, delta_table
pipeline = Pipeline({state!r}, name="cli")
pipeline.table("t", delta({source!r}))
pipeline.view("by_g", {sql!r}, key="g")
pipeline.sink("by_g", delta_table({out!r}))
'''


def test_the_cli_prints_a_bar_per_source_and_a_line_per_view_and_exits_by_status(tmp_path):
    root = str(tmp_path)
    write_deltalake(f"{root}/t", rows(range(4)), configuration={"delta.enableChangeDataFeed": "true"})
    path = f"{root}/pipeline.py"
    with open(path, "w") as f:
        f.write(PIPELINE_FILE.format(state=f"{root}/state", source=f"{root}/t", sql=SQL, out=f"{root}/out"))

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "ddflow.pipelines", "run", path, *args], capture_output=True,
                              text=True, timeout=600)

    first = cli()
    assert first.returncode == 0, first.stderr
    assert "reading t" in first.stderr and "1/1" in first.stderr
    assert first.stdout.startswith("view by_g: 4 changes in, ") and "run 0 done" in first.stdout
    write_deltalake(f"{root}/t", rows([10, 11]), mode="append")
    DeltaTable(f"{root}/t").update(updates={"amt": "CAST('1.00' AS DECIMAL(10, 2))"}, predicate="k = 10")
    second = cli("--metrics-file", f"{root}/run.prom")
    assert second.returncode == 0, second.stderr
    assert "2/2" in second.stderr and "view by_g: 4 changes in" in second.stdout  # 2 inserts, 1 update (2 rows)
    # The run's metrics, for a textfile collector: what the run did, and the views' dataflow.
    from prometheus_client.parser import text_string_to_metric_families

    prom = {(smp.name, tuple(sorted(smp.labels.items()))): smp.value
            for fam in text_string_to_metric_families(open(f"{root}/run.prom").read()) for smp in fam.samples}
    assert prom[("ddflow_pipeline_view_changes_in", (("pipeline", "cli"), ("view", "by_g")))] == 4
    assert prom[("ddflow_pipeline_source_commits", (("pipeline", "cli"), ("table", "t")))] == 2
    assert prom[("ddflow_pipeline_source_version", (("pipeline", "cli"), ("table", "t")))] == DeltaTable(
        f"{root}/t").version()
    assert prom[("ddflow_pipeline_run", (("pipeline", "cli"),))] == 1
    assert os.stat(f"{root}/run.prom").st_mode & 0o777 == 0o644  # a collector, another user, reads it
    assert prom[("ddflow_input_updates_total", (("dataflow", "cli"), ("input", "t")))] >= 4
    with open(path, "a") as f:
        f.write("pipeline.views['by_g'].sql = 'SELECT g, COUNT(*) AS n FROM t GROUP BY g'\n")
    refused = cli()
    assert refused.returncode == 2 and "changed its sql" in refused.stderr and "--full-refresh" in refused.stderr
    assert cli("--full-refresh").returncode == 0
    # Served while the CLI runs (and lingers): a scrape over loopback sees the finished run.
    import urllib.request
    served = subprocess.Popen([sys.executable, "-m", "ddflow.pipelines", "run", path, "--quiet", "--metrics-port",
                               "0", "--metrics-linger", "30"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    try:
        url = served.stderr.readline().strip().rsplit(" ", 1)[-1]
        assert url.startswith("http://127.0.0.1:"), url
        served.stdout.readline()  # the view's line: the run is done and published
        body = urllib.request.urlopen(url, timeout=10).read().decode()
        assert 'ddflow_pipeline_run{pipeline="cli"} 3.0' in body
    finally:
        served.kill()
        served.wait()
    assert DeltaTable(f"{root}/out").to_pyarrow_table().column_names == ["g", "n"]
    broken = f"{root}/broken.py"
    with open(broken, "w") as f:
        f.write("x = 1\n")
    bad = subprocess.run([sys.executable, "-m", "ddflow.pipelines", "run", broken], capture_output=True, text=True)
    assert bad.returncode == 1 and "defines no ddflow.pipelines.Pipeline" in bad.stderr


def test_an_iceberg_table_rolled_back_past_the_recorded_snapshot_is_refused(tmp_path):
    from pyiceberg.catalog.sql import SqlCatalog
    from ddflow.pipelines import iceberg, iceberg_table
    root = str(tmp_path)
    cat = SqlCatalog("c", uri=f"sqlite:///{root}/c.db", warehouse=f"file://{root}/wh")
    cat.create_namespace("db")
    tbl = cat.create_table("db.t", schema=T_SCHEMA)
    tbl.append(rows(range(3)))
    first = tbl.current_snapshot().snapshot_id
    tbl.append(rows([5]))

    def make() -> Pipeline:
        p = Pipeline(f"{root}/state", name="ice")
        p.table("t", iceberg("db.t", cat))
        p.view("by_g", SQL, key="g")
        p.sink("by_g", iceberg_table("out.by_g", cat))
        return p

    with make() as p:
        p.refresh()
    cat.load_table("db.t").manage_snapshots().set_current_snapshot(first).commit()
    cat.load_table("db.t").append(rows([6]))
    with make() as p:
        with pytest.raises(SourceError, match=r"no longer an ancestor.*full refresh"):
            p.refresh()
        p.refresh(full=True)
    got = cat.load_table("out.by_g").scan().to_arrow()
    import duckdb
    con = duckdb.connect()
    con.register("t", cat.load_table("db.t").scan().to_arrow())
    want = [dict(zip(["g", "n", "total"], r)) for r in con.execute(SQL).fetchall()]
    assert bag(got, ["g", "n", "total"]) == bag(want, ["g", "n", "total"])


def test_source_lag_is_what_the_run_left_unread(tmp_path):
    """A run read to the end is 0 versions behind; one held back with ``until`` is behind by what it left."""
    from ddflow.pipelines import delta
    from ddflow.pipelines.metrics import run_families
    root = str(tmp_path)
    write_deltalake(f"{root}/t", rows(range(4)))
    for more in ([10], [11], [12]):
        write_deltalake(f"{root}/t", rows(more), mode="append")
    latest = DeltaTable(f"{root}/t").version()
    with Pipeline(f"{root}/state", name="lag") as p:
        p.table("t", delta(f"{root}/t"))
        p.view("by_g", SQL, key="g")
        held = p.refresh(until={"t": {"version": latest - 2}})
        assert held.sources["t"].version == latest - 2 and held.sources["t"].behind == 2
        fams = {f.name: f.samples for f in run_families("lag", held, p.metrics())}
        assert fams["ddflow_pipeline_source_behind"] == [({"pipeline": "lag", "table": "t"}, 2)]
        done = p.refresh()
        assert done.sources["t"].version == latest and done.sources["t"].behind == 0
