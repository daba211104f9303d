"""A micro-batch's rows go from the executors that hold them straight to the ddflow workers.

With workers on executors (``StreamingDataflow.workers(n, spark=spark)``)
the driver does not collect the micro-batch.  It runs one Spark job over
the batch's partitions (``mapInArrow``); in each partition's task,
:class:`Router` admits the rows exactly as the driver would
(:func:`ddflow.streaming.admission.admit`), and the dataflow's
:class:`~ddflow.workers.ingest.Ingest` (``Dataflow.ingest()``) encodes
them as the driver's input handles would, splits them by key hash and
sends each worker its share; the router writes the partition's
input log file into the state directory (which must then be a path every
executor can write), and returns one small summary row: how many
updates, the largest time, the dead letters, the log file and its
checksums.  The driver then advances the frontier, runs the workers on
that batch (``Dataflow.run(routed=(batch, partitions))``), writes the
outputs, and commits the manifest naming the partitions' log files.
"""
from __future__ import annotations

import json
import os
from typing import Iterator, Sequence

import pyarrow as pa

from ddflow.streaming.admission import admit
from ddflow.streaming.parse import InputSpec
from ddflow.streaming.state import StateStore
from ddflow.workers.ingest import Ingest

#: What each partition's task returns to the driver (one row).
SUMMARY = ("partition long, updates long, max_time long, dead binary, log string, checks string, kinds string, "
           "bytes long")


class Router:
    """The function each partition of a micro-batch runs (``df.mapInArrow(router, SUMMARY)``).

    ``inputs``: the inputs' specs, in order.  ``ingest``: the dataflow's
    :class:`~ddflow.workers.ingest.Ingest` (``Dataflow.ingest()``), which
    encodes the rows as the driver's handles would and sends the workers
    their shares.  ``log_dir``: the state directory, or None.
    """

    def __init__(self, inputs: Sequence[InputSpec], ingest: Ingest, max_time_ahead: int | None, batch_id: int,
                 log_dir: str | None):
        self.inputs = list(inputs)
        self.ingest = ingest
        self.max_time_ahead = max_time_ahead
        self.batch_id = batch_id
        self.log_dir = log_dir

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        part = TaskContext.get().partitionId()
        batches = list(batches)
        table = pa.Table.from_batches(batches) if batches else None
        ingest = self.ingest
        dead: list[pa.Table] = []
        logged: dict[str, pa.Table] = {}
        rows_of: dict[str, tuple] = {}
        max_time = None
        updates = 0
        for spec in self.inputs if table is not None and table.num_rows else ():
            handle = ingest.input(spec.name)
            json_kinds = None
            if spec.format == "json":  # a table's JSON fields keep its column kinds (the null mask is not a field)
                json_kinds = handle.table.kinds[:-1] if handle.table is not None else handle.kinds
            rows = admit(spec, table, json_kinds, ingest.frontier, self.max_time_ahead, self.batch_id, dead)
            if not rows.num_rows:
                continue
            fields = [c for c in rows.column_names if c not in ("time", "diff")]
            rows_of[spec.name] = (rows.select(fields), rows.column("time").to_numpy(), rows.column("diff").to_numpy())
            logged[spec.name] = rows
            updates += rows.num_rows
            mt = int(rows.column("time").to_numpy().max())
            max_time = mt if max_time is None else max(max_time, mt)
        sent = ingest.send(self.batch_id, part, rows_of)
        log, checks = None, None
        if self.log_dir is not None and logged:
            log = f"log-{self.batch_id:012d}-p{part:05d}.arrow"
            checks = json.dumps(StateStore.write_table(os.path.join(self.log_dir, log), logged))
        dl = None
        if dead:
            sink = pa.BufferOutputStream()
            t = pa.concat_tables(dead)
            with pa.ipc.new_stream(sink, t.schema) as w:
                w.write_table(t)
            dl = sink.getvalue().to_pybytes()
        yield pa.RecordBatch.from_pydict(
            {"partition": [part], "updates": [updates], "max_time": [max_time], "dead": [dl], "log": [log],
             "checks": [checks], "kinds": [json.dumps(sent["kinds"])], "bytes": [sent["bytes"]]},
            schema=pa.schema([("partition", pa.int64()), ("updates", pa.int64()), ("max_time", pa.int64()),
                              ("dead", pa.binary()), ("log", pa.string()), ("checks", pa.string()),
                              ("kinds", pa.string()), ("bytes", pa.int64())]))


def read_summary(summary: pa.Table) -> dict:
    """The partitions' summaries, added up: partitions, updates, max time, dead letters, log files, kinds."""
    rows = summary.to_pylist()
    times = [r["max_time"] for r in rows if r["max_time"] is not None]
    kinds: dict[str, list[str]] = {}
    for r in rows:
        for name, k in json.loads(r["kinds"]).items():
            kinds.setdefault(name, k)
    return {"partitions": len(rows), "updates": sum(r["updates"] for r in rows),
            "max_time": max(times) if times else None,
            "dead": [pa.ipc.open_stream(r["dead"]).read_all() for r in rows if r["dead"] is not None],
            "files": {r["log"]: json.loads(r["checks"]) for r in rows if r["log"] is not None},
            "kinds": kinds, "bytes": sum(r["bytes"] for r in rows)}
