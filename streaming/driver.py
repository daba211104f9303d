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
Messages that do not parse, and updates behind the frontier, go to the
dead-letter sink with the reason; they never stop the query.
"""
from __future__ import annotations

import io
import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

import ddflow
from ddflow.streaming.sinks import Sink
from ddflow.streaming.state import StateStore
from ddflow.updates import Updates

Build = Callable[[ddflow.Dataflow], tuple[Mapping[str, ddflow.InputHandle], Mapping[str, ddflow.Collection]]]

DEAD_LETTER_SCHEMA = pa.schema([("input", pa.string()), ("error", pa.string()), ("topic", pa.string()),
                                ("partition", pa.int64()), ("offset", pa.int64()), ("value", pa.binary())])


@dataclass
class InputSpec:
    name: str
    fields: list[str]
    format: str = "columns"  # "columns": DataFrame columns; "json": fields of a JSON value column
    # (with "json", a name that is a column of the DataFrame, e.g. "offset" or "timestamp", is that column)
    value_column: str = "value"
    time: str = "offset"
    diff: str | None = None
    op: tuple[str, Mapping[Any, int]] | None = None
    topic: str | None = None  # only rows of this Kafka topic (one query, several inputs)
    late: str = "dead-letter"  # or "error"


@dataclass
class OutputSpec:
    name: str
    sink: Sink
    names: list[str] | None = None


@dataclass
class Metrics:
    batches: int = 0
    skipped_batches: int = 0
    updates: int = 0
    dead_letters: int = 0
    output_changes: int = 0
    ddflow_s: float = 0.0
    last: dict = field(default_factory=dict)


class StreamingDataflow:
    """A ddflow dataflow fed by a Spark Structured Streaming query (builder style)."""

    def __init__(self, build: Build, name: str = "ddflow"):
        self.build = build
        self.name = name
        self.inputs: dict[str, InputSpec] = {}
        self.outputs: dict[str, OutputSpec] = {}
        self.dead_letter: Sink | None = None
        self.state_path: str | None = None
        self.snapshot_every = 50
        self.frontier_policy = "after-batch"
        self.n_workers = 1
        self.metrics = Metrics()
        self.on_batch: Callable[[int, dict], None] | None = None
        self._flow: ddflow.Dataflow | None = None
        self._handles: Mapping[str, ddflow.InputHandle] = {}
        self._captures: dict[str, ddflow.Capture] = {}
        self._store: StateStore | None = None
        # Test hook (crash tests only): ``_fault(point, batch_id)`` is called at "before_output",
        # "before_state" and "after_state" (the end of foreachBatch, before Spark commits) of
        # every processed batch, e.g. to ``os._exit`` there.  None in normal use.
        self._fault: Callable[[str, int], None] | None = None

    # -- builder ------------------------------------------------------------------
    def input(self, name: str, fields: Sequence[str], *, format: str = "columns", time: str = "offset",
              diff: str | None = None, op: tuple[str, Mapping[Any, int]] | None = None, topic: str | None = None,
              value_column: str = "value", late: str = "dead-letter") -> "StreamingDataflow":
        if format not in ("columns", "json"):
            raise ValueError(f"input {name!r}: format must be 'columns' or 'json', got {format!r}")
        if late not in ("dead-letter", "error"):
            raise ValueError(f"input {name!r}: late must be 'dead-letter' or 'error', got {late!r}")
        self.inputs[name] = InputSpec(name, list(fields), format, value_column, time, diff, op, topic, late)
        return self

    def output(self, name: str, sink: Sink, names: Sequence[str] | None = None) -> "StreamingDataflow":
        self.outputs[name] = OutputSpec(name, sink, list(names) if names is not None else None)
        return self

    def deadLetter(self, sink: Sink) -> "StreamingDataflow":  # noqa: N802 - PySpark's naming style
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
        """
        if policy not in ("after-batch", "before-max"):
            raise ValueError(f"{self.name}: frontier policy must be 'after-batch' or 'before-max', got {policy!r}")
        self.frontier_policy = policy
        return self

    def workers(self, n: int) -> "StreamingDataflow":
        """Run the dataflow in ``n`` worker processes (``ddflow.Dataflow(workers=n)``); the Spark side is unchanged.

        The workers are forked at the first micro-batch, from the process that
        runs ``foreachBatch`` (the Spark driver's Python process).
        """
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"{self.name}: workers needs an integer >= 1, got {n!r}")
        self.n_workers = n
        return self

    def stop(self) -> None:
        """Stop the dataflow's worker processes (after the Spark query has stopped)."""
        if self._flow is not None:
            self._flow.shutdown()

    def stateLocation(self, path: str, snapshot_every: int = 50) -> "StreamingDataflow":  # noqa: N802
        self.state_path = path
        self.snapshot_every = snapshot_every
        return self

    def onBatch(self, fn: Callable[[int, dict], None]) -> "StreamingDataflow":  # noqa: N802
        """Call ``fn(batch_id, stats)`` after each processed micro-batch (progress lines, tests)."""
        self.on_batch = fn
        return self

    def start(self, df: Any, checkpointLocation: str, trigger: Mapping[str, Any] | None = None,  # noqa: N803
              queryName: str | None = None) -> Any:  # noqa: N803
        """Start the Spark query; the dataflow state lives beside Spark's checkpoint unless set."""
        if self.state_path is None:
            self.state_path = checkpointLocation.rstrip("/") + "/ddflow-state"
        self.open()
        w = df.writeStream.foreachBatch(self.process_batch).option("checkpointLocation", checkpointLocation)
        if trigger:
            w = w.trigger(**trigger)
        if queryName:
            w = w.queryName(queryName)
        return w.start()

    # -- lifecycle ------------------------------------------------------------------
    @property
    def flow(self) -> ddflow.Dataflow:
        if self._flow is None:
            self.open()
        return self._flow

    def open(self) -> None:
        """Build the dataflow and restore its state from the input log, if any."""
        if self._flow is not None:
            self._flow.shutdown()
        flow = ddflow.Dataflow(workers=self.n_workers)
        handles, outs = self.build(flow)
        missing = set(self.inputs) - set(handles)
        if missing:
            raise ValueError(f"{self.name}: inputs {sorted(missing)} are configured but build() did not return them")
        for name in self.outputs:
            if name not in outs:
                raise ValueError(f"{self.name}: output {name!r} is configured but build() did not return it")
        self._captures = {n: outs[n].capture() for n in self.outputs}
        self._out_nodes = {n: outs[n].node for n in self.outputs}
        self._flow, self._handles = flow, handles
        if self.state_path is not None:
            self._store = StateStore(self.state_path, self.snapshot_every)
            m = self._store.manifest
            if m.batch_id >= 0:
                for name, t in self._store.read_all().items():
                    self._feed(name, t)
                flow.advance_to(m.frontier)
                flow.run()
                for cap in self._captures.values():
                    cap.take()  # delivered before the restart

    # -- per micro-batch ---------------------------------------------------------------
    def process_batch(self, df: Any, batch_id: int) -> None:
        t0 = time.perf_counter()
        table = df.toArrow() if hasattr(df, "toArrow") else df
        self._to_arrow_s = time.perf_counter() - t0
        self.process_arrow(table, batch_id)

    def process_arrow(self, table: pa.Table, batch_id: int) -> None:
        flow = self.flow
        store = self._store
        if store is not None and batch_id <= store.manifest.batch_id:
            self.metrics.skipped_batches += 1  # a replay of a batch whose effects are already durable
            return
        t0 = time.perf_counter()
        dead: list[pa.Table] = []
        logged: dict[str, pa.Table] = {}
        max_time = None
        for spec in self.inputs.values():
            rows, bad = self._parse(spec, table)
            if bad is not None and bad.num_rows:
                dead.append(bad)
            if rows.num_rows == 0:
                continue
            times = rows.column("time").to_numpy()
            late = times < flow.frontier
            if late.any():
                if spec.late == "error":
                    raise ddflow.FrontierError(f"input {spec.name!r}: {int(late.sum())} updates in batch {batch_id} are "
                                               f"before the frontier {flow.frontier}")
                dead.append(_dead(spec.name, f"time before the frontier {flow.frontier}",
                                  rows.filter(pa.array(late)).column("__topic"), rows.filter(pa.array(late)).column("__partition"),
                                  rows.filter(pa.array(late)).column("__offset"), rows.filter(pa.array(late)).column("__value")))
                rows = rows.filter(pa.array(~late))
            rows = rows.select(spec.fields + ["time", "diff"])
            if rows.num_rows:
                self._feed(spec.name, rows)
                logged[spec.name] = rows
                mt = int(pc.max(rows.column("time")).as_py())
                max_time = mt if max_time is None else max(max_time, mt)
                self.metrics.updates += rows.num_rows
        if max_time is not None:
            target = max_time + 1 if self.frontier_policy == "after-batch" else max_time
            if target > flow.frontier:
                flow.advance_to(target)
        flow.run()
        outputs = {}
        for name, spec in self.outputs.items():
            u = self._captures[name].take()
            if not len(u):
                # A capture that has seen nothing yet does not know its columns: ask the collection
                # (with several workers the collection lives in the workers; the capture knows once it saw output).
                kinds = self._captures[name]._node.kinds or self._out_nodes[name].kinds
                u = Updates.empty(kinds, 1) if kinds is not None else None
            outputs[name] = u.to_arrow(flow.interner, spec.names) if u is not None else _no_output(spec.names)
            self.metrics.output_changes += outputs[name].num_rows
        t_dd = time.perf_counter() - t0
        t1 = time.perf_counter()
        # Order matters for exactly-once: outputs (idempotent per batch id), then state, then Spark commits.
        self._at("before_output", batch_id)
        for name, spec in self.outputs.items():
            spec.sink.write(batch_id, outputs[name])
        if dead:
            dl = pa.concat_tables(dead)
            self.metrics.dead_letters += dl.num_rows
            if self.dead_letter is not None:
                self.dead_letter.write(batch_id, dl)
        t_out = time.perf_counter() - t1
        self._at("before_state", batch_id)
        t2 = time.perf_counter()
        if store is not None:
            store.commit(batch_id, flow.frontier, logged)
        t_state = time.perf_counter() - t2
        self._at("after_state", batch_id)
        self.metrics.batches += 1
        self.metrics.ddflow_s += t_dd
        stats = {"batch_id": batch_id, "rows": table.num_rows, "updates": sum(t.num_rows for t in logged.values()),
                 "dead_letters": sum(t.num_rows for t in dead), "ddflow_s": t_dd, "sink_s": t_out, "state_s": t_state,
                 "to_arrow_s": getattr(self, "_to_arrow_s", 0.0),
                 "output_changes": {n: t.num_rows for n, t in outputs.items()}, "frontier": flow.frontier,
                 "trace_size": flow.trace_size()}
        self.metrics.last = stats
        if self.on_batch is not None:
            self.on_batch(batch_id, {**stats, "outputs": outputs, "input": table})

    def _at(self, point: str, batch_id: int) -> None:
        if self._fault is not None:
            self._fault(point, batch_id)

    def _feed(self, name: str, rows: pa.Table) -> None:
        fields = [c for c in rows.column_names if c not in ("time", "diff")]
        self._handles[name].update(rows.select(fields), times=rows.column("time").to_numpy(),
                                   diffs=rows.column("diff").to_numpy())

    # -- parsing ------------------------------------------------------------------
    def _parse(self, spec: InputSpec, table: pa.Table) -> tuple[pa.Table, pa.Table | None]:
        """Rows of one input as fields + time + diff (+ provenance), and dead letters."""
        n = table.num_rows
        if spec.topic is not None and "topic" in table.column_names:
            table = table.filter(pc.equal(table.column("topic"), spec.topic))
            n = table.num_rows
        prov = {
            "__topic": table.column("topic") if "topic" in table.column_names else pa.nulls(n, pa.string()),
            "__partition": table.column("partition").cast(pa.int64()) if "partition" in table.column_names else pa.nulls(n, pa.int64()),
            "__offset": table.column("offset").cast(pa.int64()) if "offset" in table.column_names else pa.nulls(n, pa.int64()),
            "__value": table.column(spec.value_column).cast(pa.binary()) if spec.value_column in table.column_names
            else pa.nulls(n, pa.binary()),
        }
        if spec.format == "json":
            handle_kinds = self._handles[spec.name].kinds
            kinds = dict(zip(spec.fields, handle_kinds)) if handle_kinds and len(handle_kinds) == len(spec.fields) else None
            src, ok, errors = _parse_json(table.column(spec.value_column), spec, n, kinds,
                                          exclude=[c for c in table.column_names if c != spec.value_column])
        else:
            src, ok, errors = table, np.ones(n, dtype=bool), [None] * n
        cols: dict[str, Any] = {}
        try:
            for f in spec.fields:
                cols[f] = _column(src, table, f, spec)
            cols["time"] = _time_column(src, table, spec.time, spec)
            cols["diff"] = _diff_column(src, table, spec)
        except (KeyError, TypeError, ValueError, pa.ArrowInvalid) as e:
            if spec.format == "columns":
                raise TypeError(f"input {spec.name!r}: {e}") from e
            raise
        # Rows whose fields are missing or of the wrong type are dead letters too.
        source_names = {"time": spec.time, "diff": spec.diff or (spec.op[0] if spec.op else "diff")}
        for name, c in cols.items():
            if c.null_count:
                nulls = c.is_null().to_numpy(zero_copy_only=False)
                for i in np.flatnonzero(nulls & ok):
                    errors[i] = f"field {source_names.get(name, name)!r} is missing or null"
                ok &= ~nulls
        out = pa.table({**cols, **prov})
        bad = None
        if not ok.all():
            idx = np.flatnonzero(~ok)
            bad = _dead(spec.name, [errors[i] or "malformed" for i in idx], prov["__topic"].take(idx),
                        prov["__partition"].take(idx), prov["__offset"].take(idx), prov["__value"].take(idx))
            out = out.filter(pa.array(ok))
        return out, bad


def _no_output(names: list[str] | None) -> pa.Table:
    """The (empty) output of a collection whose column kinds are not known yet."""
    cols = {n: pa.array([], pa.null()) for n in names or []}
    return pa.table({**cols, "time": pa.array([], pa.int64()), "diff": pa.array([], pa.int64())})


def _dead(input_name: str, errors, topic, partition, offset, value) -> pa.Table:
    n = len(value)
    errs = errors if isinstance(errors, list) else [errors] * n
    return pa.table({"input": [input_name] * n, "error": errs, "topic": topic, "partition": partition,
                     "offset": offset, "value": value}, schema=DEAD_LETTER_SCHEMA)


_KIND_TYPES = {"i": pa.int64(), "f": pa.float64(), "b": pa.bool_(), "o": pa.string()}
_KIND_NAMES = {"i": "an integer", "f": "a number", "b": "a boolean", "o": "a string"}


def _json_kind(x: Any) -> str | None:
    """The column kind of a JSON scalar (None for lists, objects and out-of-range integers)."""
    if isinstance(x, bool):
        return "b"
    if isinstance(x, int):
        return "i" if -(1 << 63) <= x < (1 << 63) else None
    if isinstance(x, float):
        return "f"
    if isinstance(x, str):
        return "o"
    return None


def _parse_json(values: pa.ChunkedArray, spec: InputSpec, n: int, kinds: Mapping[str, str] | None = None,
                exclude: Sequence[str] = ()) -> tuple[pa.Table, np.ndarray, list]:
    """Parse JSON object values; one bad message never spoils the rest.

    Each field's values must share one kind: times and diffs are integers;
    a data field has the kind its input already holds (``kinds``) or else the
    most common kind in this batch (an integer is fine where a number is
    expected).  Values of any other kind make their message a dead letter.
    """
    vals = values.to_pylist()
    wanted = list(dict.fromkeys([*spec.fields, spec.time, *([spec.diff] if spec.diff else []),
                                 *([spec.op[0]] if spec.op else [])]))
    # Names of the message's own columns (Kafka's offset, timestamp, ...) come from those columns.
    wanted = [k for k in wanted if k not in exclude]
    fast = _parse_json_arrow(vals, wanted, spec, kinds)
    if fast is not None:
        return fast, np.ones(n, dtype=bool), [None] * n
    records: list[dict] = []
    ok = np.ones(n, dtype=bool)
    errors: list[str | None] = [None] * n
    for i, v in enumerate(vals):
        try:
            if v is None:
                raise ValueError("null value")
            obj = json.loads(v)
            if not isinstance(obj, dict):
                raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
            records.append({k: obj.get(k) for k in wanted})
        except (ValueError, UnicodeDecodeError) as e:
            ok[i] = False
            errors[i] = f"unparseable JSON: {e}"
            records.append({k: None for k in wanted})
    cols = {}
    for k in wanted:
        col = [r[k] for r in records]
        got = [None if x is None else _json_kind(x) for x in col]
        if k == spec.time or k == spec.diff:
            want = "i"
        elif kinds and kinds.get(k) in _KIND_TYPES:
            want = kinds[k]
        else:
            present = [g for g in got if g is not None]
            want = max(set(present), key=present.count) if present else "o"
        arr = []
        for i, (x, g) in enumerate(zip(col, got)):
            if x is not None and g != want and not (want == "f" and g == "i"):
                if ok[i]:
                    ok[i] = False
                    errors[i] = (f"field {k!r} has value {x!r}, outside the 64-bit integer range" if g is None and
                                 isinstance(x, int) else f"field {k!r} has value {x!r} of type {type(x).__name__}, "
                                 f"expected {_KIND_NAMES[want]}")
                x = None
            arr.append(x)
        cols[k] = pa.array(arr, _KIND_TYPES[want])
    return pa.table(cols) if cols else pa.table({"_": pa.nulls(n)}), ok, errors


def _parse_json_arrow(vals: list, wanted: list[str], spec: InputSpec,
                      kinds: Mapping[str, str] | None) -> pa.Table | None:
    """All messages at once with Arrow's JSON reader, or None if any message needs a closer look.

    The common batch (every message a JSON object with every field, of the
    right kind) never touches Python per message; anything else falls back
    to the per-message parser, which finds the culprits for the dead letters.
    """
    if not vals or any(v is None or b"\n" in v for v in vals):
        return None
    buf = b"\n".join(vals)
    try:
        t = pa_json.read_json(io.BytesIO(buf), read_options=pa_json.ReadOptions(
            use_threads=False, block_size=max(len(buf) + 1, 1 << 16)))
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    if t.num_rows != len(vals):
        return None
    cols = {}
    for k in wanted:
        if k not in t.column_names:
            return None
        c = t.column(k)
        if c.null_count:
            return None
        typ = c.type
        kind = ("b" if pa.types.is_boolean(typ) else "i" if pa.types.is_integer(typ) else
                "f" if pa.types.is_floating(typ) else "o" if pa.types.is_string(typ) else None)
        if kind is None:
            return None
        if k == spec.time or k == spec.diff:
            want = "i"
        elif kinds and kinds.get(k) in _KIND_TYPES:
            want = kinds[k]
        else:
            want = kind
        if kind != want and not (want == "f" and kind == "i"):
            return None
        cols[k] = c.cast(_KIND_TYPES[want])
    return pa.table(cols)


def _column(src: pa.Table, table: pa.Table, name: str, spec: InputSpec) -> pa.ChunkedArray | pa.Array:
    if name in src.column_names:
        return src.column(name)
    if name in table.column_names:
        return table.column(name)
    raise KeyError(f"input {spec.name!r}: no field {name!r} (columns: {table.column_names})")


def _time_column(src: pa.Table, table: pa.Table, name: str, spec: InputSpec) -> pa.Array:
    c = _column(src, table, name, spec)
    if pa.types.is_timestamp(c.type):
        # Data times in microseconds since the epoch, whatever the timestamp unit.
        c = c.cast(pa.timestamp("us")).cast(pa.int64())
    elif not pa.types.is_integer(c.type):
        if pa.types.is_null(c.type):
            return pa.nulls(len(c), pa.int64())
        raise TypeError(f"input {spec.name!r}: time field {name!r} has type {c.type}, expected integers or timestamps")
    return c.cast(pa.int64())


def _diff_column(src: pa.Table, table: pa.Table, spec: InputSpec) -> pa.Array:
    n = src.num_rows
    if spec.op is not None:
        field_name, mapping = spec.op
        raw = _column(src, table, field_name, spec).to_pylist()
        return pa.array([mapping.get(v) for v in raw], pa.int64())
    if spec.diff is not None:
        c = _column(src, table, spec.diff, spec)
        if not pa.types.is_integer(c.type) and not pa.types.is_null(c.type):
            raise TypeError(f"input {spec.name!r}: diff field {spec.diff!r} has type {c.type}, expected integers")
        return c.cast(pa.int64())
    return pa.array(np.ones(n, dtype=np.int64))
