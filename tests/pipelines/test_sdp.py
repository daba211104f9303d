"""The real ``spark-pipelines run``, twice with a change between, feeding a view ddflow keeps incrementally.

An SDP project (spec, a Python pipeline file) reads a landing directory of Parquet change files as a stream
and appends it to a ``format="ddflow"`` sink; the ddflow pipeline file keeps a view of that table in a
Delta table.  The first run loads inserts; then a file of deletes, an update and inserts lands and the CLI
runs again: the stream reads only the new file, ddflow applies only its changes, and the Delta table
equals DuckDB's answer on the accumulated table after each run.
"""
from __future__ import annotations

import decimal
import json
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lake import bag, duckdb_answer

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.decimal128(10, 2)),
                    ("_change_type", pa.string())])
SQL = "SELECT name, COUNT(*) AS n, SUM(amount) AS total FROM orders GROUP BY name"

SPEC = """name: ddflow_sdp
storage: file://{root}/sdp-storage
libraries:
  - glob:
      include: transformations/**
"""

FLOW = '''from pyspark import pipelines as dp
from ddflow.pipelines import sdp

sdp.register(spark)
dp.create_sink("orders_ddflow", format="ddflow", options={{"pipeline": {views!r}, "table": "orders"}})


@dp.append_flow(target="orders_ddflow")
def orders_changes():
    schema = "id BIGINT, name STRING, amount DECIMAL(10,2), _change_type STRING"
    return spark.readStream.schema(schema).parquet({landing!r})
'''

VIEWS = '''from ddflow.pipelines import Pipeline, delta_table, delta_changelog
from ddflow.pipelines.sdp import feed

pipeline = Pipeline({state!r}, name="sdp")
pipeline.table("orders", feed({{"id": "bigint", "name": "string", "amount": "decimal(10,2)"}}))
pipeline.view("by_name", {sql!r}, key="name")
pipeline.sink("by_name", delta_table({out!r}))
pipeline.sink("by_name", delta_changelog({changes!r}))
'''


def spark_pipelines() -> str:
    import pyspark
    path = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-pipelines")
    if not os.path.exists(path):
        pytest.skip("pyspark has no spark-pipelines (pyspark >= 4.1 ships it)")
    return path


def land(root: str, name: str, rows: list[tuple]) -> None:
    t = pa.Table.from_pylist([dict(zip(SCHEMA.names, r)) for r in rows], schema=SCHEMA)
    pq.write_table(t, f"{root}/landing/.{name}")
    os.replace(f"{root}/landing/.{name}", f"{root}/landing/{name}")


def test_spark_pipelines_run_twice_refreshes_the_view_by_change(tmp_path):
    root = str(tmp_path)
    cli = spark_pipelines()
    os.makedirs(f"{root}/project/transformations")
    os.makedirs(f"{root}/landing")
    views = f"{root}/ddflow_views.py"
    with open(views, "w") as f:
        f.write(VIEWS.format(state=f"{root}/state", sql=SQL, out=f"{root}/by_name", changes=f"{root}/by_name_changes"))
    with open(f"{root}/project/spark-pipeline.yml", "w") as f:
        f.write(SPEC.format(root=root))
    with open(f"{root}/project/transformations/orders.py", "w") as f:
        f.write(FLOW.format(views=views, landing=f"{root}/landing"))
    d = decimal.Decimal
    first = [(1, "a", d("1.50"), "insert"), (2, "a", d("2.00"), "insert"), (3, "b", None, "insert"),
             (4, "c", d("0.25"), None)]
    second = [(2, "a", d("2.00"), "delete"), (3, "b", None, "update_preimage"), (3, "b", d("7.00"), "update_postimage"),
              (5, "c", d("1.00"), "insert")]
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_LOCAL_IP="127.0.0.1")
    table: dict[int, tuple] = {}
    from deltalake import DeltaTable
    for i, batch in enumerate([first, second]):
        land(root, f"part-{i}.parquet", batch)
        for r in batch:
            if r[3] in ("delete", "update_preimage"):
                table.pop(r[0])
            else:
                table[r[0]] = r
        done = subprocess.run([cli, "run"], cwd=f"{root}/project", env=env, capture_output=True, text=True,
                              timeout=900)
        assert done.returncode == 0, f"run {i}: {done.stdout[-3000:]}\n{done.stderr[-5000:]}"
        rows = pa.Table.from_pylist([{"name": r[1], "amount": r[2]} for r in table.values()],
                                    schema=pa.schema([("name", pa.string()), ("amount", pa.decimal128(10, 2))]))
        want = duckdb_answer(SQL, {"orders": rows}, ["name", "n", "total"])
        assert bag(DeltaTable(f"{root}/by_name").to_pyarrow_table(), ["name", "n", "total"]) == want, f"run {i}"
    with open(f"{root}/state.feeds/orders/runs.jsonl") as f:
        runs = [json.loads(line) for line in f]
    # One ddflow run per micro-batch; the second applied only the new file's four changes.
    assert [r["batch"] for r in runs] == [0, 1] and runs[1]["views"]["by_name"]["in"] == 4, runs
