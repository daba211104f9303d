"""A micro-batch's rows go from the executors that hold them straight to the ddflow workers.

With workers on executors (``StreamingDataflow.workers(n, spark=spark)``)
the driver does not collect the micro-batch.  It runs one Spark job over
the batch's partitions (``mapInArrow``); in each partition's task,
:class:`Router` admits, casts and logs the rows through the driver's own
feed (:func:`ddflow.streaming.admission.admit_batch`), and the dataflow's
:class:`~ddflow.workers.ingest.Ingest` (``Dataflow.ingest()``) encodes
them as the driver's input handles would, splits them by key hash and
sends each worker its share; the router writes the partition's
input log file into the state directory (which must then be a path every
executor can write), and returns one small summary row: how many
updates, the largest time, the dead letters, the log file and its
checksums.  The driver then advances the frontier, runs the workers on
that batch (``Dataflow.run(routed=(batch, partitions))``), writes the
outputs, and commits the manifest naming the partitions' log files.

Updates the inputs rejected in that run (the workers report them to the
driver) are taken out of the log before the commit, as on the driver's
path (:func:`~ddflow.streaming.admission.applied_log`): the driver reads
the batch's partition files back (:func:`read_log`, checked against the
checksums the executors reported) and logs their rows, in partition
order (the order the workers took them in), less the rejected ones, in
its own file of the batch, which the manifest names instead of them.
Until the manifest is written none of these files is part of the state,
so a crash at any point replays the batch: its rows are fixed by its
offsets, the workers restored from the log reject the same updates
again, and the executors and the driver write the same files again.
An update rejected only after its own batch was committed is cancelled
in the later batch's log, as on the driver's path.
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Iterator, Sequence

import pyarrow as pa

from ddflow.streaming.admission import admit_batch
from ddflow.streaming.parse import InputSpec
from ddflow.streaming.state import REMEDY, StateError, StateStore
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
        handles = {spec.name: ingest.input(spec.name) for spec in self.inputs}
        got = admit_batch(self.inputs, handles, table, ingest.frontier, self.max_time_ahead, self.batch_id)
        sent = ingest.send(self.batch_id, part, got.updates)
        log, checks = None, None
        if self.log_dir is not None and got.logged:
            log = f"log-{self.batch_id:012d}-p{part:05d}.arrow"
            checks = json.dumps(StateStore.write_table(os.path.join(self.log_dir, log), got.logged))
        dead, updates, max_time = got.dead, got.count, got.max_time
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


def read_log(directory: str, name: str, checks: dict) -> dict[str, pa.Table]:
    """A partition's log file (per input), refused unless it is what its executor reported writing.

    ``checks``: the file's size and SHA-256, from the partition's summary.
    Raises :class:`~ddflow.streaming.state.StateError` naming the file.
    Cost: O(file).
    """
    path = os.path.join(directory, name)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise StateError(f"ddflow state {path}: the log file of a partition cannot be read ({e.strerror or e}); "
                         f"the state directory must be one every executor and the driver share; {REMEDY}") from None
    if len(data) != checks["bytes"] or hashlib.sha256(data).hexdigest() != checks["sha256"]:
        raise StateError(f"ddflow state {path}: {len(data)} bytes, not the {checks['bytes']} bytes (and SHA-256) its "
                         f"executor wrote; {REMEDY}")
    return StateStore.read_file(path)
