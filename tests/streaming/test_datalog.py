"""``StreamingDataflow.datalog``: a Datalog program served from a Spark query (files -> Spark -> ddflow -> sink)."""
from __future__ import annotations

import json

import pytest

from ddflow.streaming.driver import StreamingDataflow
from ddflow.streaming.sinks import MemorySink

TC = """
.decl edge(x: number, y: number)
.input edge
.decl reach(x: number, y: number)
reach(x, y) :- edge(x, y).
reach(x, z) :- reach(x, y), edge(y, z).
.decl fanout(x: number, n: number)
fanout(x, n) :- edge(x, _), n = count : { reach(x, _) }.
"""


def _closure(edges: set) -> set:
    out = set(edges)
    while True:
        more = {(x, w) for (x, y) in out for (z, w) in edges if y == z} - out
        if not more:
            return out
        out |= more


@pytest.mark.spark
def test_a_datalog_program_served_from_a_spark_query(spark, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    ups = [{"src": a, "dst": b, "t": 0, "diff": 1} for a, b in [(1, 2), (2, 3), (3, 4), (5, 6)]]
    ups += [{"src": 2, "dst": 3, "t": 1, "diff": -1}, {"src": 4, "dst": 5, "t": 1, "diff": 1}]
    (src / "part-0.json").write_text("".join(json.dumps(u) + "\n" for u in ups))
    reach, fanout = MemorySink(), MemorySink()
    stream = (StreamingDataflow(name="datalog")
              .table("edge", {"src": "bigint", "dst": "bigint"}, time="t", diff="diff")
              .datalog(TC)
              .output("reach", reach)
              .output("fanout", fanout))
    df = spark.readStream.schema("src long, dst long, t long, diff long").json(str(src))
    query = stream.start(df, checkpointLocation=str(tmp_path / "ckpt"), trigger={"availableNow": True})
    try:
        query.awaitTermination()
    finally:
        stream.stop()
    assert query.exception() is None
    edges = {(1, 2), (3, 4), (5, 6), (4, 5)}
    assert reach.contents() == {p: 1 for p in _closure(edges)}
    reached = _closure(edges)
    want = {(x, sum(1 for a, _ in reached if a == x)) for x, _ in edges}
    assert fanout.contents() == {r: 1 for r in want}
    assert reach.table().column_names == ["x", "y", "time", "diff"]
