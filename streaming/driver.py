"""Attach a ddflow dataflow to a Spark streaming DataFrame.

Users write a function that builds the dataflow and a few builder calls;
the ``foreachBatch`` plumbing is here::

    def build(flow):
        edges_in, edges = flow.new_collection("edges")
        ...
        return {"edges": edges_in}, {"reach": reach}     # inputs, outputs

    query = (StreamingDataflow(build)
             .input("edges", fields=["src", "dst"], format="json", time="t", diff="diff")
             .output("reach", KafkaSink(bootstrap, "reach"), names=["node", "root"])
             .deadLetter(JsonLinesSink("/tmp/dead"))
             .start(df, checkpointLocation="/tmp/ckpt"))

Per micro-batch: rows become input updates (fields from Kafka's JSON
value or from DataFrame columns, the data time from a column such as the
Kafka offset or timestamp or an event-time field, the diff from a column,
an op mapping, or +1), the frontier advances past the batch's times so all
of them retire in one pass, the dataflow runs, output changes go to the
sinks under the batch id, the input is logged, and only then does Spark
commit.  A replayed batch id that the log already holds is skipped.
Messages that do not parse (see :mod:`ddflow.streaming.parse`), and
updates behind the frontier, go to the dead-letter sink with the reason;
they never stop the query.

Why this module is long: it is one micro-batch's life, in order (the
builder, opening and restoring, admission, running, writing outputs, dead
letters and the input log), and every step's exactly-once argument
depends on the ones around it.
"""
from __future__ import annotations

import datetime
import decimal
import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

import ddflow
from ddflow.base.endpoint import MetricsServer
from ddflow.base.metrics import families
from ddflow.base.renamed import renamed
from ddflow.operators.capture import sql_table
from ddflow.streaming.admission import admit_batch, applied_log, as_update, consolidated
from ddflow.streaming.parse import DEAD_LETTER_SCHEMA, InputSpec, check_names
from ddflow.streaming.progress import Progress, kafka_lag_probe
from ddflow.streaming.release import QueryResources
from ddflow.streaming.sinks import Sink
from ddflow.streaming.state import (StateStore, check_first_batch, check_spark_commits, refuse_negative,
                                     spark_query_id)

__all__ = ["Build", "Metrics", "OutputSpec", "StreamingDataflow"]

#: How far past the frontier one record may move time, by default (``maxTimeAhead``).
DEFAULT_MAX_TIME_AHEAD = 2**40

#: The user's dataflow: ``build(flow) -> ({input name: handle}, {output name: collection})``.
Build = Callable[[ddflow.Dataflow], tuple[Mapping[str, ddflow.InputHandle], Mapping[str, ddflow.Collection]]]


@dataclass
class OutputSpec:
    """Where one output collection's changes go (``StreamingDataflow.output`` builds it)."""

    name: str
    sink: Sink
    names: list[str] | None = None
    mode: str = "changelog"  # or "final": a windowed view's rows once each, when their window closes


@dataclass
class Metrics:
    """Running totals over the micro-batches this process handled; ``last`` is the latest batch's stats."""

    batches: int = 0
    skipped_batches: int = 0
    updates: int = 0
    dead_letters: int = 0
    output_changes: int = 0
    ddflow_s: float = 0.0
    worker_restarts: int = 0  # dataflows reopened on new workers after a worker was lost
    routed_bytes: int = 0  # bytes the executors sent the workers directly
    last: dict = field(default_factory=dict)


class StreamingDataflow:
    """A ddflow dataflow fed by a Spark Structured Streaming query (builder style)."""

    def __init__(self, build: Build | None = None, name: str = "ddflow"):
        self.build = build
        self.name = name
        self.tables: dict[str, Mapping[str, Any]] = {}  # SQL tables: name -> schema
        self._table_fields: dict[str, bool] = {}  # tables: their columns are JSON keys, never Kafka's columns
        self._nonnegative: dict[str, str | None] = {}  # input -> what a removal of an absent record does
        self._rejected: dict[str, list[dict]] = {}  # the last run's updates the inputs dropped
        self.views: dict[str, str] = {}  # SQL views: name -> query
        self.programs: list[tuple[str, bool]] = []  # Datalog programs over the tables, with their hints on or off
        #: The loop limits of each view's and program's fixpoints (``max_iterations``, ``max_seconds``,
        #: ``max_records``), by view name or program index; unset ones take ``flow.sql``'s defaults.
        self._limits: dict[Any, dict[str, Any]] = {}
        self.inputs: dict[str, InputSpec] = {}
        self.outputs: dict[str, OutputSpec] = {}
        self.dead_letter: Sink | None = None
        self.state_path: str | None = None
        self.snapshot_every = 50
        self.frontier_policy = "after-batch"
        self._lateness: int | None = None  # event-time tables: the watermark's lateness, microseconds
        self._latest: int | None = None  # the largest event time seen
        self.max_time_ahead: int | None = DEFAULT_MAX_TIME_AHEAD
        self.n_workers = 1
        self.spark: Any = None  # workers(n, spark=...): the workers run on its executors
        self.route = False  # and each batch's rows go from the executors straight to them
        self.retries = 2
        self.metrics = Metrics()
        #: Progress records (Spark's ``StreamingQueryProgress`` shape) and the query's counters: ``lastProgress``.
        self.progress = Progress(name)
        self._metrics_server: MetricsServer | None = None
        self._published: dict[str, list] = {"families": []}
        self.on_batch: Callable[[int, dict], None] | None = None
        self._flow: ddflow.Dataflow | None = None
        self._handles: Mapping[str, ddflow.InputHandle] = {}
        self._captures: dict[str, ddflow.Capture] = {}
        self._store: StateStore | None = None
        self.checkpoint_location: str | None = None  # Spark's, once ``start`` knows it: cross-checked at open
        self._first_batch = False  # the next batch is the first since open: Spark's batch id is cross-checked
        # Test hook (crash tests only): ``_fault(point, batch_id)`` is called at "restore" (state fed
        # back, not yet run; the manifest's batch id), and in every processed batch at "before_output",
        # "mid_output" (after the first sink's write), "before_state", "in_snapshot" (the manifest names
        # a new snapshot, older files not yet deleted) and "after_state" (the end of foreachBatch, before
        # Spark commits), e.g. to kill the process group there.  None in normal use.
        self._fault: Callable[[str, int], None] | None = None
        self._resources: QueryResources | None = None  # the running query's, for stop() to release

    # -- builder ------------------------------------------------------------------
    @renamed(value_column="valueColumn")
    def input(self, name: str, fields: Sequence[str], *, format: str = "columns", time: str | None = None,
              diff: str | None = None, op: tuple[str, Mapping[Any, int]] | None = None, topic: str | None = None,
              valueColumn: str = "value", late: str = "dead-letter", onError: str = "fail",  # noqa: N803
              nonnegative: str | None = "dead-letter") -> "StreamingDataflow":
        """Feed input ``name`` (a handle ``build`` returns) from each micro-batch's rows.

        ``fields`` are DataFrame columns (``format="columns"``) or keys of the
        JSON object in ``valueColumn`` (``format="json"``), where Kafka's own
        columns are named ``kafka.key``, ``kafka.offset``, ``kafka.timestamp``...
        (a bare ``key``, ``offset``, ``timestamp``... could mean either and is
        refused: write ``json.key`` or ``kafka.key``); ``time`` names the
        data-time column or key (Kafka's offset by default, or
        ``kafka.timestamp``, or an event-time field); the diff comes from ``diff``,
        from ``op=(field, {value: diff})``, or is +1.  ``topic`` keeps only that
        topic's rows; ``late="error"`` fails the query on an update behind the
        frontier instead of dead-lettering it.

        ``onError`` is what a row-wise function (``map``, ``filter``,
        ``flat_map``) that raises on a record from this input does:
        ``"fail"`` (default) fails the batch with the error, naming the
        operator; ``"dead-letter"`` drops the update the function raised on
        and sends it (record, time, diff, operator, traceback) to the dead
        letters, then goes on.  A function fed by several inputs
        dead-letters only if all of them say so.  The function is called
        again on replay after a restart, so it must be deterministic; the
        updates it dropped are dropped the same way again.

        ``nonnegative`` is what an update that would take a record's count
        below zero does (a removal of a record that is not there, which
        could make a loop diverge): ``"dead-letter"`` (default) sends it to
        the dead letters with that reason before any operator sees it,
        ``"error"`` fails the batch naming it, ``None`` lets the input be a
        signed multiset::

            .input("edges", ["src", "dst"], format="json", time="t", diff="diff", topic="edges")
            .input("orders", ["id", "qty"], op=("op", {"insert": 1, "delete": -1}))
        """
        if format not in ("columns", "json"):
            raise ValueError(f"input {name!r}: format must be 'columns' or 'json', got {format!r}")
        if late not in ("dead-letter", "error"):
            raise ValueError(f"input {name!r}: late must be 'dead-letter' or 'error', got {late!r}")
        if onError not in ("fail", "dead-letter"):
            raise ValueError(f"input {name!r}: onError must be 'fail' or 'dead-letter', got {onError!r}")
        if time is None:
            time = "kafka.offset" if format == "json" else "offset"
        names = [time, *([diff] if diff else []), *([op[0]] if op else [])]
        check_names(name, format, names if self._table_fields.get(name) else [*fields, *names])
        if nonnegative not in (None, "error", "dead-letter"):
            raise ValueError(f"input {name!r}: nonnegative must be 'dead-letter', 'error' or None, got {nonnegative!r}")
        self.inputs[name] = InputSpec(name, list(fields), format, valueColumn, time, diff, op, topic, late,
                                      on_error=onError)
        self._nonnegative[name] = nonnegative
        return self

    def table(self, name: str, schema: Mapping[str, Any], lateness: str | int | None = None,
              **options: Any) -> "StreamingDataflow":
        """A SQL table fed from each micro-batch: named, typed columns (``schema``), no dataflow code.

        ``options`` are those of :meth:`input` (``format``, ``time``, ``diff``,
        ``op``, ``topic``, ...); the fields are the schema's columns.  A JSON
        field that is missing or null is NULL; one of the wrong type is a
        dead letter (a timestamp in JSON is an integer: microseconds since
        the epoch)::

            .table("orders", {"o_id": "bigint", "cust": "string", "amount": "bigint"},
                   format="json", time="t", diff="diff", topic="orders")

        ``lateness`` (``"10 seconds"``, or microseconds) makes ``time`` a
        ``timestamp`` column of the table its *event time*, Spark's
        ``withWatermark(time, lateness)``: each row's data time is its
        timestamp, and after each batch the frontier (the watermark)
        follows the largest event time seen minus the lateness, so windows
        close and their state is dropped.  A row behind the watermark is
        late: a dead letter saying so, never applied.  Every event-time
        table of a query shares the one watermark (the largest lateness)::

            .table("bids", {"auction": "bigint", "price": "bigint", "ts": "timestamp"},
                   format="json", time="ts", lateness="10 seconds", topic="bids")
        """
        self.tables[name] = dict(schema)
        self._table_fields[name] = True  # a table's columns are its JSON keys: only time/diff/op are checked
        self.input(name, list(schema), **options)
        spec = self.inputs[name]
        spec.nullable = True
        if lateness is not None:
            if str(schema.get(spec.time, "")).lower() not in ("timestamp", "timestamp_ntz", "datetime") \
                    and schema.get(spec.time) is not datetime.datetime:
                raise ValueError(f"table {name!r}: lateness needs time= to name a timestamp column of the table, "
                                 f"got time={spec.time!r}")
            spec.lateness = _micros(lateness, f"table {name!r}: lateness")
        return self

    @renamed(max_iterations="maxIterations", max_seconds="maxSeconds", max_records="maxRecords")
    def view(self, name: str, sql: str, *, maxIterations: int | None = None,  # noqa: N803
             maxSeconds: float | None = None, maxRecords: int | None = None) -> "StreamingDataflow":  # noqa: N803
        """A SQL view over the tables, maintained per micro-batch; write it with :meth:`output`::

            .view("totals", "SELECT cust, SUM(amount) AS total FROM orders GROUP BY cust")
            .output("totals", ParquetSink("/data/totals"))

        Its changes are a changelog: the row's named, typed columns (NULL as
        null), then ``time`` and ``diff``.  ``maxIterations``,
        ``maxSeconds`` and ``maxRecords`` bound each ``WITH RECURSIVE``
        fixpoint of the view, as :meth:`ddflow.Dataflow.sql`'s do: past one,
        the batch fails with a ``NonConvergence`` naming the loop.
        """
        self.views[name] = sql
        self._limits[name] = {"max_iterations": maxIterations, "max_seconds": maxSeconds, "max_records": maxRecords}
        return self

    @renamed(max_iterations="maxIterations", max_seconds="maxSeconds", max_records="maxRecords")
    def datalog(self, program: str, hints: bool = True, *, maxIterations: int | None = None,  # noqa: N803
                maxSeconds: float | None = None, maxRecords: int | None = None) -> "StreamingDataflow":  # noqa: N803
        """A Datalog program (Soufflé's dialect) over the tables, maintained per micro-batch; each relation it
        derives is an output name for :meth:`output`::

            .table("edge", {"src": "bigint", "dst": "bigint"}, format="json", time="t", diff="diff")
            .datalog(".decl edge(x: number, y: number) .input edge "
                     ".decl reach(x: number, y: number) reach(x, y) :- edge(x, y). "
                     "reach(x, z) :- reach(x, y), edge(y, z).")
            .output("reach", ParquetSink("/data/reach"))

        Its ``.input`` relations are the tables of the same name; each
        output's changes are a changelog as a view's (the relation's
        attributes, then ``time`` and ``diff``).  A program that cannot
        run is refused when the query opens, with its line and column
        (see :meth:`ddflow.Dataflow.datalog`).  ``maxIterations``,
        ``maxSeconds`` and ``maxRecords`` bound each recursive stratum,
        as :meth:`view`'s do.
        """
        self._limits[len(self.programs)] = {"max_iterations": maxIterations, "max_seconds": maxSeconds,
                                            "max_records": maxRecords}
        self.programs.append((program, hints))
        return self

    def output(self, name: str, sink: Sink, names: Sequence[str] | None = None,
               mode: str = "changelog") -> "StreamingDataflow":
        """Write the changes of output ``name`` (a collection ``build`` returns, or a view) to ``sink`` per batch.

        ``names`` name the record's columns (then ``time`` and ``diff``)::

            .output("reach", ParquetSink("/data/reach"), names=["node", "root"])

        ``mode="final"`` (a view with a window or session over event-time
        tables): each window's row is written once, when the watermark
        passes the window's end, and never retracted, as Spark's append
        mode, for sinks that cannot take deletes; a view whose rows never
        close is refused by name.
        """
        if mode not in ("changelog", "final"):
            raise ValueError(f"output {name!r}: mode must be 'changelog' or 'final', got {mode!r}")
        self.outputs[name] = OutputSpec(name, sink, list(names) if names is not None else None, mode)
        return self

    def deadLetter(self, sink: Sink) -> "StreamingDataflow":  # noqa: N802 - PySpark's naming style
        """Send rows that cannot become updates (unparseable, mistyped, late) to ``sink``, with the reason.

        Without one they are only counted (``metrics.dead_letters``)::

            .deadLetter(JsonLinesSink("/data/dead"))
        """
        self.dead_letter = sink
        return self

    def frontierPolicy(self, policy: str) -> "StreamingDataflow":  # noqa: N802
        """How far each micro-batch advances the frontier.

        ``"after-batch"`` (default): past every data time in the batch, so all of
        them retire now; right when a batch always carries every update of its
        times.  ``"before-max"``: up to the batch's largest time, which retires
        with the next batch; right when one data time's updates may straddle two
        micro-batches (several Kafka records per data time, cut anywhere by
        ``maxOffsetsPerTrigger`` or the end offset).  Either way a later update
        at a retired time is late and goes to the dead letters.

        Example: ``.frontierPolicy("before-max")``.
        """
        if policy not in ("after-batch", "before-max"):
            raise ValueError(f"{self.name}: frontier policy must be 'after-batch' or 'before-max', got {policy!r}")
        self.frontier_policy = policy
        return self

    def maxTimeAhead(self, span: int | None) -> "StreamingDataflow":  # noqa: N802
        """How far past the frontier one record may move time: later records are dead letters.

        One record with a far-future time would otherwise move the frontier
        there and make every later valid record late.  The reference is the
        frontier, or, before the first batch has moved it, the batch's
        earliest time.  Default ``2**40`` (12.7 days of microsecond
        timestamps, a trillion offsets); ``None`` turns the check off::

            .maxTimeAhead(3_600_000_000)        # event times in us: at most an hour ahead
        """
        if span is not None and span < 1:
            raise ValueError(f"maxTimeAhead needs a positive span or None, got {span!r}")
        self.max_time_ahead = span
        return self

    def workers(self, n: int, spark: Any = None, route: bool = True,
                retries: int = 2) -> "StreamingDataflow":
        """Run the dataflow in ``n`` worker processes; with ``spark``, as Spark barrier tasks on its executors.

        Without ``spark`` the workers are forked at the first micro-batch,
        from the process that runs ``foreachBatch`` (the Spark driver's
        Python process), and each batch is collected there.  With
        ``spark`` (a session, ``n > 1``) they run on the executors
        (``ddflow.Dataflow(workers=n, spark=spark)``), holding all the
        cluster's task slots but one, which Spark keeps for the query's
        micro-batches; with ``route=True`` each batch's rows go from the
        executors that read them straight to the workers
        (:mod:`ddflow.streaming.routing`), and the state directory must be
        a path every executor can write.  A worker lost to a fault (its
        executor died, its task was killed, it hung) is replaced: the
        dataflow restarts on new tasks, restores from the input log and
        runs the batch again, at most ``retries`` times per batch (it
        needs a state location).  Example: ``.workers(4, spark=spark)``.
        """
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"{self.name}: workers needs an integer >= 1, got {n!r}")
        if spark is not None and not hasattr(spark, "sparkContext"):
            raise ValueError(f"{self.name}: workers(spark=...) needs a SparkSession, got {type(spark).__name__}")
        self.n_workers = n
        self.spark = spark
        self.route = route and spark is not None and n > 1
        self.retries = retries
        return self

    def serveMetrics(self, port: int = 0, host: str = "127.0.0.1",  # noqa: N802 - PySpark's naming style
                     kafkaBootstrap: str | None = None) -> "StreamingDataflow":  # noqa: N803
        """Serve the query's metrics to Prometheus at ``http://host:port/metrics`` (``metricsUrl``) until ``stop``.

        The dataflow's families (:meth:`ddflow.Dataflow.metrics`: operators,
        inputs, outputs with retractions and freshness, step latency) and
        the query's (:meth:`ddflow.streaming.progress.Progress.families`:
        micro-batches, dead letters by reason, late rows, source lag),
        refreshed after every micro-batch; a scrape never touches the
        running query.  Loopback unless ``host`` says otherwise.
        ``kafkaBootstrap``: the brokers to ask where each partition read
        ends, for ``ddflow_source_lag_offsets``.  Starts serving at once.
        Cost: a thread and a socket, and one ``metrics()`` per micro-batch::

            .serveMetrics(9464, kafkaBootstrap="127.0.0.1:9092")
        """
        if kafkaBootstrap is not None:
            self.progress.lag_probe = kafka_lag_probe(kafkaBootstrap)
        if self._metrics_server is not None:
            self._metrics_server.close()
        published, progress = self._published, self.progress
        self._metrics_server = MetricsServer(lambda: published["families"] + progress.lag_families(), port, host)
        self._publish()
        return self

    @property
    def metricsUrl(self) -> str | None:  # noqa: N802
        """Where ``serveMetrics`` serves (None when it does not): what Prometheus and ``python -m ddflow.top`` read."""
        return self._metrics_server.url if self._metrics_server is not None else None

    @property
    def lastProgress(self) -> dict | None:  # noqa: N802
        """The latest micro-batch's progress record (as Spark's ``StreamingQuery.lastProgress``), or None."""
        return self.progress.recent[-1] if self.progress.recent else None

    @property
    def recentProgress(self) -> list[dict]:  # noqa: N802
        """The last progress records, oldest first (as Spark's ``StreamingQuery.recentProgress``; 100 kept)."""
        return list(self.progress.recent)

    def addListener(self, fn: Callable[[dict], None]) -> "StreamingDataflow":  # noqa: N802
        """Call ``fn(progress)`` with each micro-batch's progress record, after its outputs and state are durable.

        A listener that raises is warned about, never fails the query
        (Spark's ``StreamingQueryListener`` rule)::

            .addListener(lambda p: print(p["batchId"], p["durationMs"]["triggerExecution"]))
        """
        self.progress.listeners.append(fn)
        return self

    def _publish(self, measured: dict | None = None) -> None:
        """What the metrics endpoint serves, from the dataflow (its ``measured`` metrics, or read now while it is
        open) and the query's counters."""
        if measured is None and self._flow is not None and not self._flow.closed:
            measured = self._flow.metrics()
        fams = self.progress.families()
        if measured is not None:
            fams = families(self._named_outputs(measured), self.name) + fams
        self._published["families"] = fams

    def _named_outputs(self, measured: dict) -> dict:
        """``measured`` (a dataflow's metrics) with its outputs under the names the query gave them."""
        names = {cap.name: name for name, cap in self._captures.items()}
        return {**measured, "outputs": {names.get(k, k): v for k, v in measured["outputs"].items()}}

    def stop(self) -> None:
        """Stop the Spark query (if it still runs), release what it left in the driver (its callback thread and
        the Python source's runner, :mod:`ddflow.streaming.release`), close the sinks and the metrics endpoint,
        stop the workers."""
        if self._resources is not None:
            self._resources.release()
        if self._metrics_server is not None:
            self._metrics_server.close()
            self._metrics_server = None
        probe = self.progress.lag_probe
        if probe is not None and hasattr(probe, "close"):
            probe.close()
        for sink in [*(o.sink for o in self.outputs.values()), self.dead_letter]:
            if hasattr(sink, "close"):
                sink.close()
        if self._flow is not None:
            self._flow.close()

    @renamed(snapshot_every="snapshotEvery")
    def stateLocation(self, path: str, snapshotEvery: int = 50) -> "StreamingDataflow":  # noqa: N802, N803
        """Keep the input log (exactly-once state, see ``state``) under ``path``; compact every ``snapshotEvery`` batches.

        Default: ``<checkpointLocation>/ddflow-state``.  Example:
        ``.stateLocation("/data/reach-state", snapshotEvery=100)``.
        """
        self.state_path = path
        self.snapshot_every = snapshotEvery
        return self

    def onBatch(self, fn: Callable[[int, dict], None]) -> "StreamingDataflow":  # noqa: N802
        """Call ``fn(batch_id, stats)`` after each processed micro-batch (progress lines, tests).

        ``stats`` holds timings, counts, the frontier, and the batch's
        ``outputs`` and ``input`` tables::

            .onBatch(lambda b, st: print(b, st["updates"], st["ddflow_s"]))
        """
        self.on_batch = fn
        return self

    def start(self, df: Any, checkpointLocation: str, trigger: Mapping[str, Any] | None = None,  # noqa: N803
              queryName: str | None = None) -> Any:  # noqa: N803
        """Start the Spark query; the dataflow state lives beside Spark's checkpoint unless set.

        ``trigger`` is passed to ``DataStreamWriter.trigger``, e.g.
        ``{"processingTime": "1 second"}`` or ``{"availableNow": True}``.
        Returns the ``StreamingQuery``.
        """
        if self.state_path is None:
            self.state_path = checkpointLocation.rstrip("/") + "/ddflow-state"
        self.checkpoint_location = checkpointLocation
        self.open()
        self._resources = QueryResources()
        w = (df.writeStream.foreachBatch(self._resources.batch_function(self.process_batch))
             .option("checkpointLocation", checkpointLocation))
        if trigger:
            w = w.trigger(**trigger)
        if queryName:
            w = w.queryName(queryName)
        self._resources.query = w.start()
        return self._resources.query

    # -- lifecycle ------------------------------------------------------------------
    @property
    def flow(self) -> ddflow.Dataflow:
        """The dataflow, built (and restored from the input log) on first use."""
        if self._flow is None:
            self.open()
        return self._flow

    def open(self) -> None:
        """Build the dataflow and restore its state from the input log, if any."""
        if self._flow is not None:
            self._flow.close()
        if self.spark is not None and self.n_workers > 1:
            from ddflow.streaming.cluster import SparkLauncher
            from ddflow.workers.remote import RemotePlacement

            flow = ddflow.Dataflow(workers=self.n_workers, name=self.name,
                                   placement=RemotePlacement(SparkLauncher(self.spark, reserve=1)))
        else:
            flow = ddflow.Dataflow(workers=self.n_workers, name=self.name)
        handles: dict[str, ddflow.InputHandle] = {}
        outs: dict[str, ddflow.Collection] = {}
        timed = {n: s for n, s in self.inputs.items() if s.lateness is not None}
        if timed and len(timed) != len(self.inputs):
            raise ValueError(f"{self.name}: inputs {sorted(set(self.inputs) - set(timed))} have no event time "
                             f"beside the event-time tables {sorted(timed)}: all inputs share one clock")
        self._lateness = max((s.lateness for s in timed.values()), default=None)
        for table, schema in self.tables.items():
            event_time = self.inputs[table].time if table in timed else None
            handles[table] = flow.new_collection(table, schema=schema, event_time=event_time)[0]
        finals = {n for n, o in self.outputs.items() if o.mode == "final"}
        for view, query in self.views.items():
            outs[view] = flow.sql(query, mode="final" if view in finals else "changelog", **self._limits.get(view, {}))
        for i, (program, hints) in enumerate(self.programs):
            for rel, coll in flow.datalog(program, hints, **self._limits.get(i, {})).items():
                if rel in outs:
                    raise ValueError(f"{self.name}: the Datalog relation {rel!r} has the name of another output")
                if rel in finals:
                    raise ValueError(f"{self.name}: output {rel!r} has mode='final', which needs a SQL view "
                                     "(.view) with a window over event-time tables")
                outs[rel] = coll
        if self.build is not None:
            more_handles, more_outs = self.build(flow)
            handles, outs = {**handles, **more_handles}, {**outs, **more_outs}
            built = sorted(finals & set(more_outs) - set(self.views))
            if built:
                raise ValueError(f"{self.name}: output {built[0]!r} has mode='final', which needs a SQL view "
                                 "(.view) with a window over event-time tables")
        missing = set(self.inputs) - set(handles)
        if missing:
            raise ValueError(f"{self.name}: inputs {sorted(missing)} are configured but build() did not return them")
        for name in self.outputs:
            if name not in outs:
                raise ValueError(f"{self.name}: output {name!r} is configured but build() did not return it")
        self._captures = {n: outs[n].capture() for n in self.outputs}
        for name in self.inputs:
            handles[name].nonnegative = self._nonnegative.get(name, "dead-letter")
        self._flow, self._handles = flow, handles
        self._guarded = self._guard_functions(flow, handles)
        if self.state_path is not None:
            self._store = StateStore(self.state_path, self.snapshot_every, self._identity(flow, handles))
            self.progress.path = self._store.path
            for sink in [*(o.sink for o in self.outputs.values()), self.dead_letter]:
                if hasattr(sink, "bind"):  # sinks that sign what they write (KafkaSink) take the state key
                    sink.bind(self._store.key)
            if self._fault is not None:
                self._store.fault = self._fault
            m = self._store.manifest
            if self.checkpoint_location is not None:
                check_spark_commits(self.checkpoint_location, self.state_path, m.batch_id)
            self._first_batch = True
            if m.batch_id >= 0:
                logged = self._store.verify()
                if flow.iterates:  # the log holds only applied updates: a negative total is damage
                    refuse_negative(logged, self.state_path)
                for name, t in logged.items():  # final times added up: a rejected update and its cancellation
                    handles[name].update(*as_update(handles[name], consolidated(t, m.frontier)))  # never run
                    if self._lateness is not None and t.num_rows:
                        self._latest = max(self._latest or 0, int(pc.max(t.column("time")).as_py()))
                self._at("restore", m.batch_id)
                flow.advance_to(m.frontier)
                flow.run()
                for cap in self._captures.values():
                    cap.drain_updates()  # delivered before the restart
                self._failed_rows()  # dead letters delivered before the restart, too

    def _identity(self, flow: ddflow.Dataflow, handles: dict) -> dict:
        """What ties a state directory to this query: Spark's query id, the inputs as read, the dataflow's shape."""
        inputs = {name: {"fields": spec.fields, "format": spec.format, "time": spec.time, "diff": spec.diff,
                         "op": [spec.op[0], sorted(map(str, spec.op[1].items()))] if spec.op else None,
                         "topic": spec.topic, "schema": dict(self.tables.get(name, {})) or None}
                  for name, spec in sorted(self.inputs.items())}
        out = {"inputs": json.loads(json.dumps(inputs, default=str)), "dataflow": flow.fingerprint()}
        qid = spark_query_id(self.checkpoint_location)
        if qid is not None:
            out["query_id"] = qid
        return out

    # -- per micro-batch ---------------------------------------------------------------
    def process_batch(self, df: Any, batch_id: int) -> None:
        """The ``foreachBatch`` function: one Spark micro-batch DataFrame (via Arrow, or routed by the executors).

        A :class:`~ddflow.errors.WorkerLost` (a worker's executor died,
        its task was killed, it hung) reopens the dataflow on new workers,
        restored from the input log, and runs the batch again; nothing
        of the batch was written yet, so nothing is lost or duplicated.
        """
        for attempt in range(self.retries + 1):
            try:
                if self.route:
                    self._process_routed(df, batch_id)
                    return
                t0 = time.perf_counter()
                table = df.toArrow() if hasattr(df, "toArrow") else df
                self._to_arrow_s = time.perf_counter() - t0
                self.process_arrow(table, batch_id)
                return
            except ddflow.WorkerLost:
                if self._store is None or attempt == self.retries:
                    raise
                self.metrics.worker_restarts += 1
                self.open()  # new workers, restored from the input log

    def _skip(self, batch_id: int) -> bool:
        """Cross-check the first batch since open with the state; whether this batch is a replay to skip."""
        store = self._store
        if store is not None and self._first_batch:
            check_first_batch(batch_id, store.manifest.batch_id, self.state_path)
            self._first_batch = False
        if store is not None and batch_id <= store.manifest.batch_id:
            self.metrics.skipped_batches += 1  # a replay of a batch whose effects are already durable
            return True
        return False

    def _process_routed(self, df: Any, batch_id: int) -> None:
        """One micro-batch whose rows the executors send straight to the workers (:mod:`~ddflow.streaming.routing`)."""
        from ddflow.streaming.routing import SUMMARY, Router, read_summary

        flow = self.flow
        if self._skip(batch_id):
            return
        t0 = time.perf_counter()
        # The workers start at the first batch (the executors need their addresses); a worker lost since the
        # last batch raises WorkerLost here, so the dataflow reopens before anything is routed to it.
        ingest = flow.ingest({name: self._handles[name] for name in self.inputs})
        router = Router(list(self.inputs.values()), ingest, self.max_time_ahead, batch_id,
                        self._store.path if self._store is not None else None)
        try:
            got = read_summary(df.mapInArrow(router, SUMMARY).toArrow())
        except Exception:
            flow.check_workers()  # the job failed because a worker is gone: WorkerLost, and the batch is retried
            raise
        self._to_arrow_s = time.perf_counter() - t0  # here: the executors' routing job
        for name, kinds in got["kinds"].items():
            h = self._handles[name]
            if h.kinds is None and kinds:
                h.kinds = tuple(kinds)
        self.metrics.updates += got["updates"]
        self.metrics.routed_bytes += got["bytes"]
        n_rows = got["updates"] + sum(t.num_rows for t in got["dead"])
        self._run_and_write(batch_id, got["max_time"], got["dead"], got["updates"], t0, n_rows, {}, got["files"],
                            routed=(batch_id, got["partitions"]))

    def process_arrow(self, table: pa.Table, batch_id: int) -> None:
        """One micro-batch as an Arrow table: parse, run, write the sinks, log the input (tests call it directly)."""
        flow = self.flow
        if self._skip(batch_id):
            return
        t0 = time.perf_counter()
        got = admit_batch(self.inputs.values(), self._handles, table, flow.frontier, self.max_time_ahead, batch_id)
        for name, update in got.updates.items():
            self._handles[name].update(*update)
        self.metrics.updates += got.count
        self._run_and_write(batch_id, got.max_time, got.dead, got.count, t0, table.num_rows, got.logged, None,
                            table=table)

    def _run_and_write(self, batch_id: int, max_time: int | None, dead: list[pa.Table], updates: int, t0: float,
                       n_rows: int, logged: dict[str, pa.Table], written: dict[str, dict] | None,
                       routed: tuple[int, int] | None = None, table: pa.Table | None = None) -> None:
        """Advance past the batch's times, run, write outputs and dead letters, then log the input.

        ``updates``: how many the batch admitted; ``logged``: their rows, or
        (routed) ``written``: the partitions' log files.  ``table``: the
        batch as the driver collected it (None when routed: only the
        executors held it).
        """
        flow, store = self.flow, self._store
        if max_time is not None and self._lateness is not None:  # the watermark: latest event time - lateness
            self._latest = max(self._latest or max_time, max_time)
            if self._latest - self._lateness > flow.frontier:
                flow.advance_to(self._latest - self._lateness)
        elif max_time is not None:
            target = max_time + 1 if self.frontier_policy == "after-batch" else max_time
            if target > flow.frontier:
                flow.advance_to(target)
        flow.run(routed=routed)
        failed = self._failed_rows()
        if failed is not None:
            dead.append(failed)
        if self._rejected and store is not None:
            logged, written = self._applied_log(logged, written)
        outputs = {}
        for name, spec in self.outputs.items():
            cap = self._captures[name]
            u = cap.drain_updates()
            if cap.schema is not None:  # a view or table: named, typed columns with NULLs
                outputs[name] = sql_table(u, cap.schema, flow.interner)
                self.metrics.output_changes += outputs[name].num_rows
                continue
            if not len(u):
                # A capture that has seen nothing yet may not know its columns (with several workers it learns
                # them from the first output): then the output has none.
                kinds = cap.kinds
                u = ddflow.Updates.empty(kinds, 1) if kinds is not None else None
            outputs[name] = u.to_arrow(flow.interner, spec.names) if u is not None else _no_output(spec.names)
            self.metrics.output_changes += outputs[name].num_rows
        t_dd = time.perf_counter() - t0
        t1 = time.perf_counter()
        # Order matters for exactly-once: outputs (idempotent per batch id), then state, then Spark commits.
        self._at("before_output", batch_id)
        for i, (name, spec) in enumerate(self.outputs.items()):
            spec.sink.write(batch_id, outputs[name])
            if i == 0:
                self._at("mid_output", batch_id)
        if dead:
            dl = pa.concat_tables(dead)
            self.metrics.dead_letters += dl.num_rows
            self.progress.count_dead(dl)
            if self.dead_letter is not None:
                self.dead_letter.write(batch_id, dl)
        t_out = time.perf_counter() - t1
        self._at("before_state", batch_id)
        t2 = time.perf_counter()
        if store is not None:
            store.commit(batch_id, flow.frontier, logged, written)
        t_state = time.perf_counter() - t2
        self._at("after_state", batch_id)
        self.metrics.batches += 1
        self.metrics.ddflow_s += t_dd
        measured = flow.metrics()  # one round of the workers' statistics, for the stats and the progress record
        n_dead = sum(t.num_rows for t in dead)
        to_arrow_s = getattr(self, "_to_arrow_s", 0.0)
        stats = {"batch_id": batch_id, "rows": n_rows,
                 "updates": updates, "rejected": sum(len(r) for r in self._rejected.values()),
                 "dead_letters": n_dead, "ddflow_s": t_dd, "sink_s": t_out, "state_s": t_state,
                 "to_arrow_s": to_arrow_s,
                 "output_changes": {n: t.num_rows for n, t in outputs.items()}, "frontier": flow.frontier,
                 "trace_size": sum(op["records"] for op in measured["operators"].values())}
        self.metrics.last = stats
        self.progress.read_offsets(table)
        watermark = (datetime.datetime.fromtimestamp(flow.frontier / 1e6, datetime.timezone.utc).isoformat()
                     if self._lateness is not None else None)
        self.progress.record(batch_id, n_rows, updates, {"toArrow": to_arrow_s, "run": t_dd - to_arrow_s
                                                         if self.route else t_dd, "sink": t_out,
                                                         "stateCommit": t_state},
                             measured, outputs, n_dead, t0, watermark)
        if self._metrics_server is not None:
            self._publish(measured)
        if self.on_batch is not None:
            self.on_batch(batch_id, {**stats, "outputs": outputs, "input": table})

    def _guard_functions(self, flow: ddflow.Dataflow,
                         handles: Mapping[str, ddflow.InputHandle]) -> list[tuple[ddflow.RowFunction, list[str]]]:
        """Set ``onError="dead-letter"`` on the row-wise functions that only such inputs feed.

        Returns each such function with the inputs upstream of it.
        O(inputs x operators), once per open.
        """
        guarded = []
        for fn in flow.row_functions(list(handles.values())):
            names = [name for name, h in handles.items() if any(h is g for g in fn.inputs)]
            if all(n in self.inputs and self.inputs[n].on_error == "dead-letter" for n in names):
                fn.on_error = "dead-letter"
                guarded.append((fn, sorted(names)))
        return guarded

    def _failed_rows(self) -> pa.Table | None:
        """Dead letters for the updates inputs and row-wise functions dropped since the last call (None if none)."""
        rows = []

        def dead(input_name: str, f: dict, error: str, record: Any = None) -> None:
            record = f["record"] if record is None else record
            value = json.dumps({"record": record, "time": f["time"], "diff": f["diff"]}, default=repr)
            rows.append({"input": input_name, "value": value.encode(), "error": error})

        self._rejected = {}
        for name in self.inputs:  # removals of absent records (and overflows), dropped by the input itself
            table = self._handles[name].schema
            for f in self._handles[name].take_rejected():
                self._rejected.setdefault(name, []).append(f)
                # A table's record is its stored row: the dead letter shows the SQL row (a decimal, date or
                # timestamp as its text, NULL as null).
                row = [str(v) if isinstance(v, (decimal.Decimal, datetime.date)) else v
                       for v in table.decode_row(tuple(f["record"]))] if table is not None else None
                dead(name, f, f"input {name!r}: {f['error']}", row)
        for fn, names in self._guarded:
            for f in fn.take_failed():
                dead(",".join(names), f, f"operator {f['operator']!r} raised {f['error']}\n{f['traceback']}")
        if not rows:
            return None
        n = len(rows)
        return pa.table({"input": [r["input"] for r in rows], "error": [r["error"] for r in rows],
                         "topic": pa.nulls(n, pa.string()), "partition": pa.nulls(n, pa.int64()),
                         "offset": pa.nulls(n, pa.int64()), "value": [r["value"] for r in rows]},
                        schema=DEAD_LETTER_SCHEMA)

    def _at(self, point: str, batch_id: int) -> None:
        if self._fault is not None:
            self._fault(point, batch_id)

    def _applied_log(self, logged: dict[str, pa.Table], written: dict[str, dict] | None
                     ) -> tuple[dict[str, pa.Table], dict[str, dict] | None]:
        """The batch's log less the updates the run rejected (:func:`~ddflow.streaming.admission.applied_log`).

        Routed, the batch's rows are in the partitions' files: they are
        read back (:func:`~ddflow.streaming.routing.read_log`), in
        partition order, and their rows, less the rejected ones, logged in
        the driver's own file of the batch in their place (the argument is
        in :mod:`~ddflow.streaming.routing`).  Cost: O(the batch), only for
        a batch with rejections.
        """
        store = self._store
        logged = dict(logged)
        if written:
            from ddflow.streaming.routing import read_log

            for f, checks in written.items():
                for name, t in read_log(store.path, f, checks).items():
                    logged[name] = pa.concat_tables([logged[name], t], promote_options="default") \
                        if name in logged else t
            written = {}
        return applied_log(logged, self._rejected, self._handles, store.verify), written


def _micros(span: str | int, what: str) -> int:
    """A duration as microseconds: an int, or ``"10 seconds"`` / ``"1 minute 30 seconds"``."""
    if isinstance(span, int) and not isinstance(span, bool):
        if span < 0:
            raise ValueError(f"{what} must be >= 0, got {span}")
        return span
    from ddflow.sql.eventtime import duration_text

    try:
        return duration_text(str(span), what)
    except ddflow.SchemaError as e:
        raise ValueError(str(e)) from None


def _no_output(names: list[str] | None) -> pa.Table:
    """The (empty) output of a collection whose column kinds are not known yet."""
    cols = {n: pa.array([], pa.null()) for n in names or []}
    return pa.table({**cols, "time": pa.array([], pa.int64()), "diff": pa.array([], pa.int64())})
