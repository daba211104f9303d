"""Spark Declarative Pipelines (``spark-pipelines run``) feeding a ddflow pipeline: views refreshed by change.

SDP's materialized views are recomputed in full on every run.  With this
module a pipeline file run by the real ``spark-pipelines`` CLI sends the
changes of a table to ddflow, which keeps its views incrementally and
writes them to its own sinks (Delta, Iceberg, Parquet tables):

* The ddflow side is an ordinary pipeline file (``ddflow_views.py``)
  whose tables are :func:`feed`\\s: rows that arrive from SDP.
* The SDP side registers the ``ddflow`` format and, per ddflow table, a
  sink fed by an append flow (any streaming DataFrame: new files of a
  directory, a streaming table, Kafka)::

      from pyspark import pipelines as dp
      from ddflow.pipelines import sdp

      sdp.register(spark)
      dp.create_sink("orders_ddflow", format="ddflow",
                     options={"pipeline": "/abs/ddflow_views.py", "table": "orders"})

      @dp.append_flow(target="orders_ddflow")
      def orders_changes():
          return spark.readStream.schema(ORDERS).json("/landing/orders")

Each micro-batch of the flow is one commit of the ddflow table (its
version is the batch id): the rows are its columns, plus, if present,
Spark's ``_change_type`` (``insert``, ``delete``, ``update_preimage``,
``update_postimage``; absent or NULL means insert) so deletes and updates flow
too.  The sink's tasks stage the batch's rows as Arrow files beside the
ddflow state; the sink's commit (on the driver) moves them under the batch
id and runs one ddflow refresh.  A batch Spark replays after a failure is
staged again under the same id and applied once (the ddflow state records
the last batch id it applied), so the views are exactly once.

What SDP's open-source API does not allow, and how this works around it:
a sink is only a target of append flows (no retractions flow into it, so
deletes travel as ``_change_type`` rows), a sink has no per-flow options
(one sink per ddflow table), and pyspark 4.3's CLI fails after a
completed run in which any Python data source ran: the Python workers'
profiler accumulators reach it as observed metrics, which it does not
expect (``UNKNOWN_RESPONSE ... __python_accumulator__``).  :func:`register`
makes the CLI's client skip those responses.
"""
from __future__ import annotations

import json
import os
import shutil
import uuid
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import pyarrow as pa

from ddflow.base.schema import sql_type
from ddflow.pipelines.source import Commit, Progress, Read, Source, SourceError
from ddflow.pipelines.types import canonical

#: The format name SDP's ``create_sink(..., format=...)`` takes.
FORMAT = "ddflow"
#: Seconds a sink's commit waits for another ddflow run of the same pipeline (flows commit concurrently).
LOCK_WAIT = 600.0


class Feed(Source):
    """A ddflow table whose commits arrive from SDP micro-batches (see the module docstring).

    ``columns``: ``{name: sql type}``.  ``path``: where batches are staged
    (default: ``<state>.feeds/<table>`` beside the pipeline's state).
    """

    kind = "sdp"

    def __init__(self, columns: Mapping[str, str], path: str | None = None):
        self._columns = {n: sql_type(t, f"feed column {n!r}") for n, t in columns.items()}
        self.path = os.path.abspath(path) if path else None
        self.table: str | None = None

    def bind(self, state: str, table: str) -> None:
        """Called by :meth:`Pipeline.table`: where this feed stages its batches unless a path was given."""
        self.table = table
        if self.path is None:
            self.path = os.path.join(state.rstrip("/") + ".feeds", table)

    def describe(self) -> dict:
        return {"kind": "sdp", "location": self.path}

    def where(self) -> str:
        return f"SDP feed {self.table} ({self.path})"

    def columns(self) -> dict[str, str]:
        return dict(self._columns)

    def version_of(self, position: dict | None) -> int:
        return -1 if position is None else int(position["version"])

    def batches(self) -> list[int]:
        """The batch ids staged and not yet cleaned up."""
        if self.path is None or not os.path.isdir(self.path):
            return []
        return sorted(int(d[len("batch-"):]) for d in os.listdir(self.path) if d.startswith("batch-"))

    def stage(self, batch_id: int, files: list[str]) -> None:
        """Move one micro-batch's staged files under its batch id (replacing a replayed batch's earlier copy)."""
        final = os.path.join(self.path, f"batch-{batch_id:012d}")
        tmp = os.path.join(self.path, f".batch-{batch_id:012d}-{uuid.uuid4().hex}")
        os.makedirs(tmp)
        for i, f in enumerate(files):
            os.replace(f, os.path.join(tmp, f"part-{i:05d}.arrow"))
        if os.path.exists(final):
            shutil.rmtree(final)
        os.rename(tmp, final)

    def read(self, position: dict | None, end: dict | None, progress: Progress) -> Read:
        done = self.version_of(position)
        todo = [b for b in self.batches() if b > done and (end is None or b <= int(end["version"]))]
        for b in [b for b in self.batches() if b <= done]:  # applied in an earlier run: no longer needed
            shutil.rmtree(os.path.join(self.path, f"batch-{b:012d}"), ignore_errors=True)
        if end is not None and int(end["version"]) > done and int(end["version"]) not in todo:
            raise SourceError(f"{self.where()}: batch {end['version']}, which a committed sink holds, is no longer "
                              "staged; run the ddflow pipeline with a full refresh")
        commits = []
        for i, b in enumerate(todo):
            commits.append(Commit(b, 0, self._rows(os.path.join(self.path, f"batch-{b:012d}"))))
            progress(i + 1, len(todo))
        if not todo:
            progress(0, 0)
        last = todo[-1] if todo else done
        return Read(commits, {"version": last})

    def _rows(self, folder: str) -> pa.Table:
        from ddflow.pipelines.envelopes import CHANGE_DIFFS
        parts = []
        for f in sorted(os.listdir(folder)):
            with pa.memory_map(os.path.join(folder, f)) as src:
                parts.append(pa.ipc.open_file(src).read_all())
        cols = list(self._columns)
        if not parts:
            empty = pa.schema([(n, pa.null()) for n in cols]).empty_table()
            return canonical(empty, self._columns, self.where()).append_column("diff", pa.array([], pa.int64()))
        t = pa.concat_tables(parts, promote_options="default")
        missing = [c for c in cols if c not in t.column_names]
        if missing:
            raise SourceError(f"{self.where()}: the flow's rows lack columns {missing} (they have {t.column_names})")
        if "_change_type" in t.column_names:
            kinds = ["insert" if k is None else k for k in t.column("_change_type").to_pylist()]
            bad = [k for k in kinds if k not in CHANGE_DIFFS]
            if bad:
                raise SourceError(f"{self.where()}: field '_change_type' is {bad[0]!r}, not one of "
                                  f"{sorted(CHANGE_DIFFS)}")
            diff = np.array([CHANGE_DIFFS[k] for k in kinds], dtype=np.int64)
        else:
            diff = np.ones(t.num_rows, dtype=np.int64)
        return canonical(t.select(cols), self._columns, self.where()).append_column("diff", pa.array(diff))


def feed(columns: Mapping[str, str], path: str | None = None) -> Feed:
    """A ddflow table fed by an SDP sink of format ``ddflow`` (see the module docstring).

    >>> feed({"id": "bigint", "name": "string"}).columns()
    {'id': 'bigint', 'name': 'string'}
    """
    return Feed(columns, path)


def _pipeline_and_feed(options: Mapping[str, str]):
    from ddflow.pipelines.__main__ import load
    path, table = options.get("pipeline"), options.get("table")
    if not path or not table:
        raise ValueError("a ddflow sink needs options pipeline (the ddflow pipeline file) and table (its feed)")
    for p in load(path):
        tab = p.tables.get(table)
        if tab is not None:
            if not isinstance(tab.source, Feed):
                raise ValueError(f"{path}: table {table!r} is a {tab.source.kind} source, not an sdp.feed(...)")
            return p, tab.source
    raise ValueError(f"{path} declares no table {table!r}")


try:  # the data source's base classes; without pyspark the feed still works, register() does not
    from pyspark.sql.datasource import DataSource, DataSourceStreamArrowWriter, WriterCommitMessage
except ImportError:  # pragma: no cover - the pipelines extra installs pyspark
    DataSource = DataSourceStreamArrowWriter = WriterCommitMessage = object


@dataclass
class StagedFiles(WriterCommitMessage):
    """A sink task's commit message: the Arrow files it staged and their rows."""

    files: list[str]
    rows: int


class DdflowSink(DataSource):
    """SDP's ``format="ddflow"``: micro-batches become commits of a ddflow pipeline's feed."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def streamWriter(self, schema, overwrite):  # noqa: N802 - PySpark's name
        return FeedWriter(dict(self.options))


class FeedWriter(DataSourceStreamArrowWriter):
    """Stages each task's rows (executors), then applies the batch and refreshes the pipeline (driver)."""

    def __init__(self, options: dict):
        self.options = options
        _, source = _pipeline_and_feed(options)
        self.staging = os.path.join(source.path, ".staging")

    def write(self, iterator):
        os.makedirs(self.staging, exist_ok=True)
        path = os.path.join(self.staging, f"{uuid.uuid4().hex}.arrow")
        writer, rows = None, 0
        try:
            for batch in iterator:
                if writer is None:
                    writer = pa.ipc.new_file(path, batch.schema)
                writer.write_batch(batch)
                rows += batch.num_rows
        finally:
            if writer is not None:
                writer.close()
        return StagedFiles([path] if writer is not None else [], rows)

    def commit(self, messages, batchId):  # noqa: N803 - PySpark's name
        pipeline, source = _pipeline_and_feed(self.options)
        files = [f for m in messages if m is not None for f in m.files]
        try:
            if batchId <= source.version_of(_recorded(pipeline, source)):
                self.abort(messages, batchId)  # a batch Spark replayed after ddflow applied it
                return
            source.stage(batchId, files)
            report = pipeline.refresh(wait=LOCK_WAIT)
        finally:
            pipeline.close()
        with open(os.path.join(source.path, "runs.jsonl"), "a") as f:
            f.write(json.dumps({"batch": batchId, "run": report.run, "views": {
                v.view: {"in": v.changes_in, "out": v.changes_out, "rows": v.rows} for v in report.views.values()}})
                    + "\n")

    def abort(self, messages, batchId):  # noqa: N803
        for m in messages:
            for f in (m.files if m is not None else []):
                if os.path.exists(f):
                    os.unlink(f)


def _recorded(pipeline, source: Feed) -> dict | None:
    """The feed's position in the pipeline's committed state (None before its first run)."""
    from ddflow.pipelines.pipeline import POSITIONS, _rows_of
    from ddflow.pipelines.source import position_from_rows
    from ddflow.streaming.state import StateStore
    if not os.path.exists(os.path.join(pipeline.state, "manifest.json")):
        return None
    logged = StateStore(pipeline.state).verify().get(POSITIONS)
    return position_from_rows(source.table, _rows_of(logged)) if logged is not None else None


def register(spark: Any) -> None:
    """Register the ``ddflow`` format with an SDP pipeline's Spark session (call it in the pipeline file).

    Also makes the Spark Connect client of this process skip the Python
    workers' accumulator responses that pyspark 4.3's ``spark-pipelines``
    does not expect (see the module docstring).  O(1).
    """
    spark.dataSource.register(DdflowSink)
    _tolerate_python_accumulators()


def _tolerate_python_accumulators() -> None:
    from pyspark.sql.connect.client.core import PlanObservedMetrics, SparkConnectClient
    from pyspark.errors import PySparkValueError
    original = SparkConnectClient.execute_command_as_iterator
    if getattr(original, "_ddflow", False):
        return

    def execute_command_as_iterator(self, command, observations=None):
        req = self._execute_plan_request_with_metadata()
        self._set_command_in_plan(req.plan, command)
        for response in self._execute_and_fetch_as_iterator(req, observations or {}):
            if isinstance(response, dict):
                yield response
            elif isinstance(response, PlanObservedMetrics) and response.name == "__python_accumulator__":
                continue  # the Python workers' profiler accumulators: nothing the pipeline's events carry
            else:
                raise PySparkValueError(errorClass="UNKNOWN_RESPONSE", messageParameters={"response": str(response)})

    execute_command_as_iterator._ddflow = True
    SparkConnectClient.execute_command_as_iterator = execute_command_as_iterator
