"""The engine's dataflow: inputs, the frontier, and running everything that is complete.

Users get it as ``ddflow.Dataflow``, the facade (:mod:`ddflow.facade`) that
adds the query front ends (``sql``, ``explain``) above this layer; this
module imports nothing above it, not even inside a function.  The class
here is :class:`EngineDataflow`: one public class per name (its old name
``ddflow.dataflow.Dataflow`` still works, with a DeprecationWarning).

Why this module is long: it is the engine's whole user-facing surface in
one place, each method with its contract, cost and example: inputs and
their policies (``InputHandle``), row-wise functions' error policy
(``RowFunction``), building, the frontier, running (in process, forked or
on Spark), the lifecycle (``finish``, ``close``) and the state reports.
"""
from __future__ import annotations

import datetime
import hashlib
import os
import sys
import time
import weakref
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ddflow.base import nullmask
from ddflow.base.interner import Interner
from ddflow.base.metrics import Histogram, families
from ddflow.base.schema import ARROW, KIND, NULL_VALUE, Schema, is_decimal, stored_ints, timestamp_micros
from ddflow.base.updates import Updates, check_diffs, from_arrow, from_rows
from ddflow.collection import Collection
from ddflow.errors import DataflowError, FrontierError, SchemaError, UsageError
from ddflow.graph.context import Context
from ddflow.graph.scope import IterativeScope, Scheduler, Scope, compact, operator_stats, trace_bytes, trace_size
from ddflow.operators.input import InputNode

if TYPE_CHECKING:
    from ddflow.workers.ingest import Ingest

INT64_MAX = np.iinfo(np.int64).max
#: The latest data time an input takes: the frontier past it (time + 1) must still be an int64.
MAX_TIME = INT64_MAX - 1
#: What a closed dataflow says to a run.
_CLOSED = "the dataflow is closed: its workers and task slots are released"


class InputHandle:
    """Feeds updates into one input collection, each at its own data time.

    What :meth:`Dataflow.new_collection` returns beside the collection.
    Times before the dataflow's frontier are final and refused.  The
    dataflow keeps its handles; a handle does not keep its dataflow alive
    (a dataflow nobody references is released at once, see
    :meth:`Dataflow.close`).  A handle pickles without its dataflow: the
    copy only encodes rows (:meth:`encode`, on a Spark executor).
    """

    def __init__(self, flow: "EngineDataflow", node: InputNode, kinds: Sequence[str] | None, table: Schema | None = None,
                 event_time: str | None = None):
        self._flow: "weakref.ref[EngineDataflow] | None" = weakref.ref(flow)
        self.node = node
        self.name = node.name
        #: A table's named, typed columns (None for positional records): rows are SQL rows (None is NULL),
        #: stored with a null mask.  The collection's ``schema`` too.
        self.schema = table
        #: The timestamp column whose value (microseconds since the epoch) is each row's data time, if any.
        self.event_time = event_time
        self._event_index = table.index(event_time) if event_time is not None else None
        if table is not None:
            kinds = table.kinds
        self._kinds: tuple[str, ...] | None = tuple(kinds) if kinds is not None else None
        self._upsert: dict[Any, tuple[tuple, int]] = {}
        self._rejected_taken = 0  # updates refused and already taken (``take_rejected``): ``Dataflow.metrics``

    def __repr__(self) -> str:
        return f"<InputHandle {self.name}>"

    def __getstate__(self) -> dict:
        """Pickled without the dataflow, its node and the upsert memory: what encoding rows elsewhere needs."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_flow", "node", "_upsert")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _flow=None, node=None, _upsert={})

    @property
    def table(self) -> Schema | None:
        """Deprecated: the handle's :attr:`schema` (``table`` means one thing, a named, typed input).  Cost: O(1).

        >>> import warnings
        >>> h, _ = ddflow.Dataflow().new_collection("t", schema={"a": "bigint"})
        >>> with warnings.catch_warnings(record=True) as w:
        ...     warnings.simplefilter("always"); same = h.table is h.schema
        >>> same, w[0].category.__name__
        (True, 'DeprecationWarning')
        """
        import warnings

        warnings.warn("InputHandle.table is now InputHandle.schema; the old name goes in the next release",
                      DeprecationWarning, stacklevel=2)
        return self.schema

    @property
    def flow(self) -> "EngineDataflow":
        """The dataflow this input feeds.

        Raises :class:`~ddflow.errors.DataflowError` when it is gone (nothing
        referenced it, so it was released) or for a pickled copy.  Cost: O(1).

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> edges_in.flow is flow
        True
        """
        flow = self._flow() if self._flow is not None else None
        if flow is None:
            why = "a pickled copy has none" if self._flow is None else "nothing referenced it, so it was released"
            raise DataflowError(f"input {self.name!r}: its dataflow is gone ({why})")
        return flow

    @property
    def kinds(self) -> tuple[str, ...] | None:
        """The column kinds of the records (``"i"``, ``"f"``, ``"b"``, ``"o"``), or None until the first update fixes them.

        Settable while unknown, to what an update elsewhere fixed (the
        streaming driver: rows encoded on executors); a different value once
        known is a :class:`~ddflow.errors.SchemaError`.  Cost: O(1).

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> before = edges_in.kinds; edges_in.insert((1, "a")); before, edges_in.kinds
        (None, ('i', 'o'))
        """
        return self._kinds

    @kinds.setter
    def kinds(self, kinds: Sequence[str]) -> None:
        kinds = tuple(kinds)
        if self._kinds is not None and kinds != self._kinds:
            raise SchemaError(f"input {self.name!r}: its column kinds are {self._kinds}, not {kinds}")
        self._kinds = kinds

    @property
    def nonnegative(self) -> str | None:
        """What happens to an update that would take a record's count below zero (a removal of an absent record).

        ``None``: nothing, the collection is a signed multiset (differential
        dataflow's default); ``"error"``: the run fails naming the input,
        record and time, and nothing of that update is applied (a table's
        default); ``"dead-letter"``: the update is dropped and kept for
        :meth:`take_rejected` (a streaming input's default).  Checked when
        the frontier passes the update's time, against the input's own
        arrangement, vectorized.  Set it before the first ``run``.  Cost of
        the check: one seek of the new records' hashes per run (O(n log n)
        for n updates); the input keeps a compacted trace of its records.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges", nonnegative="dead-letter")
        >>> edges_in.update([(1, 2)], times=0, diffs=-1); flow.advance_to(1); flow.run()
        >>> [(r["record"], r["time"]) for r in edges_in.take_rejected()]
        [((1, 2), [0])]
        """
        return self.node.nonnegative

    @nonnegative.setter
    def nonnegative(self, policy: str | None) -> None:
        from ddflow.operators.input import POLICIES
        if policy not in POLICIES:
            raise UsageError(f"input {self.name!r}: nonnegative is one of {POLICIES}, not {policy!r}")
        if self.flow.ctx.ran:
            raise UsageError(f"input {self.name!r}: set nonnegative before the first run")
        self.node.nonnegative = policy
        self.node.on_error = "dead-letter" if policy == "dead-letter" else "fail"

    def take_rejected(self) -> list[dict]:
        """The updates a ``nonnegative="dead-letter"`` input dropped since the last call: record, time, diff, error.

        Cost: O(rejected).

        >>> flow = ddflow.Dataflow()
        >>> a_in, a = flow.new_collection("a", nonnegative="dead-letter")
        >>> a_in.update([(1,)], times=0); a_in.update([(1,), (2,)], times=1, diffs=-1)
        >>> flow.advance_to(2); flow.run()
        >>> [(r["record"], r["time"]) for r in a_in.take_rejected()], a_in.take_rejected()
        ([((2,), [1])], [])
        """
        out, self.node.failed = self.node.failed, []
        self._rejected_taken += len(out)
        return out

    def insert(self, row: tuple, time: int | None = None) -> None:
        """Add one record at ``time`` (default: the frontier), with diff +1.

        Cost: one one-row batch per call (a fixed overhead of some numpy
        calls): use ``update`` for many records.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> out = edges.capture()
        >>> edges_in.insert((1, 2)); edges_in.insert((2, 3), time=4); flow.advance_to(5); flow.run()
        >>> out.drain()
        [((1, 2), 0, 1), ((2, 3), 4, 1)]
        """
        self.update([row], self.flow.frontier if time is None else time, 1)

    def remove(self, row: tuple, time: int | None = None) -> None:
        """Retract one record at ``time`` (default: the frontier): diff -1.

        Cost: one one-row batch per call, as ``insert``.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> out = edges.capture()
        >>> edges_in.insert((1, 2), time=0); edges_in.remove((1, 2), time=3); flow.advance_to(5); flow.run()
        >>> out.drain()
        [((1, 2), 0, 1), ((1, 2), 3, -1)]
        """
        self.update([row], self.flow.frontier if time is None else time, -1)

    def upsert(self, row: tuple, time: int | None = None) -> None:
        """Set the record for ``row[0]`` to ``row``, retracting the previous one for that key.

        Only earlier ``upsert`` calls count as previous (the handle remembers
        the last row per key; records from ``insert``/``update`` are not
        retracted).  Cost: O(1) per call, a one- or two-row batch, plus one
        remembered row per key.

        >>> flow = ddflow.Dataflow()
        >>> prices_in, prices = flow.new_collection("prices")
        >>> out = prices.capture()
        >>> prices_in.upsert(("a", 1), time=0); prices_in.upsert(("a", 2), time=1); flow.advance_to(2); flow.run()
        >>> out.drain()
        [(('a', 1), 0, 1), (('a', 1), 1, -1), (('a', 2), 1, 1)]
        """
        t = self.flow.frontier if time is None else time
        if not isinstance(row, tuple) or not row:
            raise SchemaError(f"collection {self.name!r}: upsert needs a non-empty tuple, got {row!r}")
        prev = self._upsert.get(row[0])
        if prev is not None and t < prev[1]:
            raise FrontierError(f"collection {self.name!r}: upsert for key {row[0]!r} at time {t} is before its previous upsert at {prev[1]}")
        rows = ([prev[0]] if prev is not None else []) + [row]
        self.update(rows, t, [-1] * (len(rows) - 1) + [1])
        self._upsert[row[0]] = (row, t)

    def update(self, rows: Any, times: Any = None, diffs: Any = 1) -> None:
        """Many updates at once: rows as tuples, an Arrow table/record batch, or a dict of numpy columns.

        ``times``: one time for all, an array, or (Arrow/dict) a column name.
        ``diffs``: +1 by default, an int, an array, or a column name.
        Validated in full before anything is applied.  Cost: O(n) for n
        records; tuples are checked value by value in Python, numeric Arrow
        and numpy columns are converted vectorized (object columns: one
        Python call per distinct value).

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> out = edges.capture()
        >>> edges_in.update([(1, 2), (1, 3)], times=0)
        >>> edges_in.update({"src": np.array([1]), "dst": np.array([2])}, times=[1], diffs=-1)
        >>> flow.advance_to(2); flow.run()
        >>> out.drain()
        [((1, 2), 0, 1), ((1, 3), 0, 1), ((1, 2), 1, -1)]
        """
        flow = self.flow
        if flow.closed or flow.finished:
            raise DataflowError(f"collection {self.name!r}: the dataflow is {'closed' if flow.closed else 'finished'}; "
                                "no more updates")
        u = self.encode(rows, times, diffs, flow.interner, flow.frontier)
        if self.kinds is None and len(u):  # an empty first batch of tuples says nothing about the arity
            self.kinds = u.kinds
        if flow._arrived is None:  # the oldest input the next run takes: where its outputs' freshness starts
            flow._arrived = time.perf_counter()
        self.node.push(0, u)

    def encode(self, rows: Any, times: Any, diffs: Any, interner: Interner, frontier: int) -> Updates:
        """The updates ``update`` would push, validated in full, pushed nowhere: of the dataflow, only
        ``interner`` (for object fields) and ``frontier`` (the earliest time allowed) are used.

        So a pickled copy of this handle encodes rows in another process
        (:class:`ddflow.workers.ingest.Ingest`, on a Spark executor).  Cost:
        as ``update``.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> u = edges_in.encode([(1, 2)], 3, 1, flow.interner, flow.frontier); u.cols[1], u.times[:, 0]
        (array([2]), array([3]))
        """
        where = f"collection {self.name!r}"
        if self.event_time is not None and times is not None:
            raise UsageError(f"{where}: each row's data time is its {self.event_time!r} (event time); "
                             "update takes no times=")
        if times is None and self.event_time is None:
            times = frontier
        u = None
        if isinstance(rows, dict) and self.schema is None and not isinstance(times, str) and not isinstance(diffs, str):
            u = _from_int64_columns(rows, self.kinds, times, diffs, where)  # None unless all int64 numpy columns
        if u is None:
            u = self._encode_general(rows, times, diffs, interner, where)
        if u.depth != 1:
            raise SchemaError(f"{where}: input times are integers (depth 1), got depth {u.depth}")
        if len(u) and int(u.times.max()) > MAX_TIME:
            raise FrontierError(f"{where}: time {int(u.times.max())} is past the largest data time {MAX_TIME} "
                                "(the frontier after it must fit in int64)")
        if len(u) and u.arity == 0:
            raise SchemaError(f"{where}: a record needs at least one field, got the empty tuple")
        if len(u) and int(u.times.min()) < frontier:
            bad = int(u.times.min())
            raise FrontierError(f"{where}: update at time {bad} is before the frontier {frontier}; "
                                "times before the frontier are final")
        return u

    def _encode_general(self, rows: Any, times: Any, diffs: Any, interner: Interner, where: str) -> Updates:
        """``encode`` for what its int64 fast path does not take: Arrow tables (a dict of columns becomes
        one), the rows of a stored table, tuples.  Cost: as ``update``."""
        if isinstance(rows, dict):
            rows = pa.table({str(k): v for k, v in rows.items()})
        if self.schema is not None:
            rows = self._stored(rows, times, diffs, where)
            if self.event_time is not None:
                times = self._event_times(rows, where)
        if isinstance(rows, (pa.Table, pa.RecordBatch)):
            tcol = times if isinstance(times, str) else None
            dcol = diffs if isinstance(diffs, str) else None
            cols = [c for c in rows.schema.names if c not in (tcol, dcol)]
            n = rows.num_rows
            t = times if isinstance(times, str) else _times_for(times, n, where)
            d = diffs if isinstance(diffs, str) else check_diffs(diffs, n, where)
            return from_arrow(rows, interner, cols, t, d, kinds=self.kinds, where=where)
        rows = list(rows)
        return from_rows(rows, _times_for(times, len(rows), where), diffs, interner, kinds=self.kinds, where=where)

    def _event_times(self, stored: Any, where: str) -> np.ndarray:
        """Each stored row's event time (its timestamp column, microseconds): its data time.  O(n), vectorized for Arrow."""
        j = self._event_index
        if isinstance(stored, (pa.Table, pa.RecordBatch)):
            ts = stored.column(self.schema.names[j]).to_numpy(zero_copy_only=False).astype(np.int64)
            masks = [stored.column(c).to_numpy(zero_copy_only=False) for c in nullmask.mask_names(len(self.schema))]
            null = nullmask.null_column(masks, j)
        else:
            n = len(self.schema)
            ts = np.fromiter((r[j] for r in stored), dtype=np.int64, count=len(stored))
            null = np.fromiter((nullmask.row_null(r[n:], j) for r in stored), dtype=bool, count=len(stored))
        if null.any():
            i = int(np.flatnonzero(null)[0])
            raise SchemaError(f"{where}: row {i} has no event time (its {self.event_time!r} is NULL)")
        if len(ts) and int(ts.min()) < 0:
            raise FrontierError(f"{where}: event time {int(ts.min())} is before 1970, outside the data times 0..{MAX_TIME}")
        return ts

    def _stored(self, rows: Any, times: Any, diffs: Any, where: str) -> Any:
        """A table's rows in their stored layout (values, then the null mask's words); types checked per column."""
        table = self.schema
        if not isinstance(rows, (pa.Table, pa.RecordBatch)):
            return [table.encode_row(r, where) for r in rows]
        extra = [c for c in (times, diffs) if isinstance(c, str)]
        missing = [n for n in table.names if n not in rows.schema.names]
        if missing:
            raise SchemaError(f"{where}: the Arrow rows lack columns {missing} (columns: {list(table.names)})")
        cols, nulls = {}, []
        for j, (name, typ) in enumerate(zip(table.names, table.types)):
            col = rows.column(name)
            if typ == "string":
                if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)
                        or pa.types.is_null(col.type)):
                    raise SchemaError(f"{where}: column {name!r} is {typ}, the Arrow column is {col.type}")
                null = col.is_null().to_numpy(zero_copy_only=False).astype(bool)
                cols[name] = col  # NULL stays None: the stored value of a NULL object
            elif typ in ("date", "timestamp") or is_decimal(typ):
                null = col.is_null().to_numpy(zero_copy_only=False).astype(bool)
                cols[name] = pa.array(stored_ints(col, typ, f"{where}: column {name!r}"))
            else:
                try:
                    col = col.cast(ARROW[typ])
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:  # Arrow's error for a cast it lacks
                    raise SchemaError(f"{where}: column {name!r} is {typ}: {err}") from None
                null = col.is_null().to_numpy(zero_copy_only=False).astype(bool)
                filled = col.fill_null(NULL_VALUE[KIND[typ]])
                if typ == "double" and pc.any(pc.is_nan(filled)).as_py():
                    raise SchemaError(f"{where}: column {name!r} got NaN; use None for a missing value")
                cols[name] = filled
            nulls.append(null)
        for name, mask in zip(nullmask.mask_names(len(table)), nullmask.encode(nulls, rows.num_rows)):
            cols[name] = pa.array(mask)
        for c in extra:
            cols[c] = rows.column(c)
        return pa.table(cols)

    @property
    def frontier(self) -> int:
        """The dataflow's input frontier: updates must be at this time or later.

        Cost: O(1).

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> flow.advance_to(3); edges_in.frontier
        3
        """
        return self.flow.frontier


class RowFunction:
    """A row-wise function of a dataflow (``map``, ``filter``, ``flat_map``): what it does when it raises,
    and the updates it dropped.

    What :meth:`Dataflow.row_functions` returns; it holds the operator,
    not the dataflow.
    """

    def __init__(self, node: Any, inputs: list[InputHandle]):
        self._node = node
        #: The operator's name (as errors and dead letters name it).
        self.name: str = node.name
        #: The inputs upstream of it, among those :meth:`Dataflow.row_functions` was asked about.
        self.inputs = inputs

    def __repr__(self) -> str:
        return f"<RowFunction {self.name}>"

    @property
    def on_error(self) -> str:
        """What the function does when it raises on a row: ``"fail"`` (the default) or ``"dead-letter"``.

        ``"fail"``: the run fails with the error, naming the operator.
        ``"dead-letter"``: the update whose row made it raise is dropped and
        kept for :meth:`take_failed` (record, time, diff, operator, error,
        traceback); a deterministic function drops the same updates on every
        replay.  Set it before the first ``run``.  Cost: O(1); a guarded
        function calls itself row by row, as an unguarded one does.

        >>> flow = ddflow.Dataflow()
        >>> nums_in, nums = flow.new_collection("nums")
        >>> _ = nums.map(lambda r: (1 // r[0],), name="inverse").capture()
        >>> f, = flow.row_functions(); f.on_error = "dead-letter"; f.on_error
        'dead-letter'
        """
        return self._node.on_error

    @on_error.setter
    def on_error(self, policy: str) -> None:
        if policy not in ("fail", "dead-letter"):
            raise UsageError(f"operator {self.name!r}: on_error is 'fail' or 'dead-letter', not {policy!r}")
        if self._node.ctx.ran:
            raise UsageError(f"operator {self.name!r}: set on_error before the first run")
        self._node.on_error = policy

    def take_failed(self) -> list[dict]:
        """The updates this function dropped (``on_error="dead-letter"``) since the last call.

        Each: ``record``, ``time``, ``diff``, ``operator``, ``error``,
        ``traceback``; in worker order with several workers.  Cost: O(dropped).

        >>> flow = ddflow.Dataflow()
        >>> nums_in, nums = flow.new_collection("nums")
        >>> out = nums.map(lambda r: (1 // r[0],), name="inverse").capture()
        >>> f, = flow.row_functions(); f.on_error = "dead-letter"
        >>> nums_in.update([(0,), (1,)], times=0); flow.advance_to(1); flow.run()
        >>> [(d["record"], d["error"]) for d in f.take_failed()], out.drain(), f.take_failed()
        ([((0,), 'ZeroDivisionError: integer division or modulo by zero')], [((1,), 0, 1)], [])
        """
        out, self._node.failed = self._node.failed, []
        return out


def _from_int64_columns(rows: dict, kinds: tuple[str, ...] | None, times: Any, diffs: Any,
                        where: str) -> Updates | None:
    """The updates of ``rows`` when every column is a 1-D int64 numpy array and every field of the collection (if
    known) is an int; else None, and the Arrow path decides.

    What one update from numpy costs without building an Arrow table for it.  O(n): the columns are copied, so
    the caller may reuse its arrays.
    """
    cols = list(rows.values())
    if not cols or not all(type(c) is np.ndarray and c.dtype == np.int64 and c.ndim == 1 for c in cols):
        return None
    if kinds is not None and (len(kinds) != len(cols) or any(k != "i" for k in kinds)):
        return None
    n = len(cols[0])
    for name, c in rows.items():
        if len(c) != n:
            raise SchemaError(f"{where}: column {str(name)!r} has {len(c)} values, the first column {n}")
    t = _times_for(times, n, where)
    if t.ndim != 1 or len(t) != n:
        raise SchemaError(f"{where}: {t.shape} times for {n} rows (one time each)")
    d = check_diffs(diffs, n, where)
    return Updates(tuple(c.copy() for c in cols), t.reshape(n, 1), d.copy() if d is diffs else d, ("i",) * len(cols))


def _times_for(times: Any, n: int, where: str = "collection") -> np.ndarray:
    """Times as int64; integers past int64 (or below 0) are a FrontierError, never wrapped."""
    t = np.asarray(times)
    # Python ints (a list, or numpy's object array for those past int64) are checked before numpy converts them.
    plain = list(times) if isinstance(times, (list, tuple)) else (t.ravel().tolist() if t.dtype == object else [])
    if all(isinstance(v, int) and not isinstance(v, bool) for v in plain):
        bad = [v for v in plain if not 0 <= v <= MAX_TIME]
        if bad:
            raise FrontierError(f"{where}: time {bad[0]} is outside the data times 0..{MAX_TIME}")
    if t.dtype.kind not in "iu" and not (t.size == 0 and t.dtype == np.float64):  # numpy reads [] as float64
        raise SchemaError(f"{where}: times must be integers, got {t.dtype}")
    if t.dtype.kind == "u" and t.size and int(t.max()) > MAX_TIME:
        raise FrontierError(f"{where}: time {int(t.max())} is outside the data times 0..{MAX_TIME}")
    return np.full(n, int(t), dtype=np.int64) if t.ndim == 0 else t.astype(np.int64)


def _summed_operators(per_worker: list[dict]) -> list[dict]:
    """Every worker's ``operators`` statistics summed per operator (its name and kind kept), in first-seen order."""
    summed: dict[str, dict] = {}
    for w in per_worker:
        for s in w["operators"]:
            m = summed.setdefault(s["operator"], dict(s, records=0, bytes=0, queued=0, updates_in=0, updates_out=0,
                                                      busy_s=0.0))
            for k in ("records", "bytes", "queued", "updates_in", "updates_out", "busy_s"):
                m[k] += s[k]
    return list(summed.values())


def _creation_site() -> str:
    """``file.py:line`` of the first caller outside ddflow: where the user created the dataflow."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] == "ddflow":
        frame = frame.f_back
    if frame is None:
        return "an unknown place"
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


class EngineDataflow:
    """A dataflow: build it with collections, then feed, advance and run.

    ``workers=W`` runs it in W worker processes, forked at the first
    ``run()`` (see :mod:`ddflow.workers`): the code that builds and feeds the
    dataflow is the same for every W, and so are the outputs.  ``W=1`` runs
    in this process with no exchange machinery at all.

    Lifecycle, as Python's files and sockets: :meth:`close` (or leaving a
    ``with`` block) releases everything the dataflow holds outside this
    process's memory (worker processes, sockets, Spark task slots); a
    dataflow nobody references is closed at once.  :meth:`finish` is the
    other end, "no more input": it runs to the end of time.

    ``heartbeat_timeout`` (seconds, default 30; ``None`` turns it off):
    with ``workers > 1`` each worker stamps a heartbeat twice a second from
    a thread of its own, and a worker silent for longer than this (stopped,
    or stuck in C code holding the GIL) fails ``run()`` with a
    :class:`~ddflow.errors.DataflowError` naming it and its pid, instead of
    blocking forever.  Generous by default: a worker inside one long C call
    that holds the GIL (a sort of a huge object column) cannot beat either,
    and a loaded machine can delay a beat by seconds.  After a worker fails,
    every later call that needs the workers raises that error again.

    ``transport``: how the driver and the workers are connected, one
    socket per pair: ``"socketpair"`` (Unix sockets, the fastest on one
    machine) or ``"tcp"`` (loopback TCP with ``TCP_NODELAY``: the same
    framing and protocol as workers on several machines, to test and
    measure that path; see ``bench/README.md``).

    ``spark``: a ``SparkSession``.  With ``workers > 1`` the workers run
    as the tasks of one Spark barrier stage on its executors, connected
    by TCP, started at the first ``run()`` and kept while the dataflow
    lives (see ``docs/workers.md``, "On a Spark cluster").  The same code, the
    same outputs; with ``workers=1`` it runs here, as without Spark.
    ``placement``: where the workers run, for what ``transport`` and
    ``spark`` do not say (a :class:`ddflow.workers.pool.Placement`).
    ``name``: what Spark's UI and the errors call this dataflow (default:
    where it was created, ``file.py:line``).

    >>> with ddflow.Dataflow() as flow:
    ...     edges_in, edges = flow.new_collection("edges")
    ...     out = edges.project(1, 0).capture()
    ...     edges_in.update([(1, 2)], times=0); flow.advance_to(1); flow.run()
    >>> out.drain()
    [((2, 1), 0, 1)]
    """

    def __init__(self, workers: int = 1, heartbeat_timeout: float | None = 30.0, transport: str = "socketpair",
                 spark: Any = None, placement: Any = None, name: str | None = None):
        if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
            raise UsageError(f"Dataflow(workers=W) needs an integer W >= 1, got {workers!r}")
        if heartbeat_timeout is not None and (not isinstance(heartbeat_timeout, (int, float))
                                              or isinstance(heartbeat_timeout, bool) or not heartbeat_timeout > 0):
            raise UsageError(f"Dataflow(heartbeat_timeout=...) needs seconds > 0 or None, got {heartbeat_timeout!r}")
        if transport not in ("socketpair", "tcp"):
            raise UsageError(f"Dataflow(transport=...) is 'socketpair' or 'tcp', got {transport!r}")
        self.workers = workers
        self.heartbeat_timeout = heartbeat_timeout
        self.transport = transport
        if spark is not None and not hasattr(spark, "sparkContext"):
            raise UsageError(f"Dataflow(spark=...) needs a SparkSession, got {type(spark).__name__}")
        self.spark = spark
        self.placement = placement
        self.ctx = Context(workers)
        self.top = Scope(self.ctx)
        self.inputs: list[InputHandle] = []
        #: Tables (inputs with named columns) by lower-case name, what the query front ends read.
        self.tables: dict[str, Collection] = {}
        self.frontier = 0
        #: ``close`` was called: the workers are released; no more runs or updates.
        self.closed = False
        #: ``finish`` was called: everything ran to the end of time; no more updates.
        self.finished = False
        #: What Spark's UI and the errors call this dataflow, beside where it was created.
        self.name = name
        self._site = _creation_site()
        self._scheduler = Scheduler()
        self._pool = None
        self._release: weakref.finalize | None = None
        #: What ``metrics`` reports beyond the operators' own counters: runs, their latency, input arrival.
        self._runs = 0
        self._step_seconds = Histogram()
        self._arrived: float | None = None
        self._servers: list = []  # metrics endpoints (serve_metrics), closed with the dataflow
        self._published: dict[str, Any] = {"families": [], "at": 0.0}
        self._publish_every = float("inf")

    @property
    def interner(self) -> Interner:
        """Codes of object field values (strings, tuples, ...) in this dataflow's columns.

        Needed to decode raw :class:`ddflow.Updates` (``Capture.updates``).  Cost: O(1).

        >>> flow = ddflow.Dataflow()
        >>> names_in, names = flow.new_collection("names")
        >>> out = names.capture()
        >>> names_in.insert(("ada",), time=0); flow.advance_to(1); flow.run()
        >>> out.updates().to_rows(flow.interner)
        [(('ada',), 0, 1)]
        """
        return self.ctx.interner

    @property
    def completed(self) -> int:
        """Every time before this is complete: its output is final.

        Set by ``run`` to the frontier it ran to.  Cost: O(1).

        >>> flow = ddflow.Dataflow()
        >>> flow.advance_to(5); flow.completed
        0
        >>> flow.run(); flow.completed
        5
        """
        return self.ctx.completed

    # -- building ----------------------------------------------------------------

    def new_collection(self, name: str | None = None,
                       schema: Mapping[str, Any] | Sequence[str] | None = None,
                       nonnegative: str | None | bool = True,
                       event_time: str | None = None) -> tuple[InputHandle, Collection]:
        """An input: its handle for updates and the collection it feeds.

        ``schema``: a dict of column name to SQL type (``bigint``, ``int``,
        ``double``, ``string``, ``boolean``, ``date``, ``timestamp``, or the
        Python types ``int``, ``float``, ``str``, ``bool``) makes a *table*:
        named, typed columns that may be NULL (``None``), usable in
        ``sql`` (:meth:`ddflow.facade.Dataflow.sql`); or a list of column kinds (``"i"`` int, ``"f"`` float,
        ``"b"`` bool, ``"o"`` any hashable object) for positional records;
        otherwise the kinds are fixed by the first update.
        ``nonnegative``: what a removal of a record that is not there does
        (see :attr:`InputHandle.nonnegative`); the default is ``"error"``
        for a table and ``None`` (a signed multiset) otherwise.
        ``event_time``: a table's ``timestamp`` column whose value (in
        microseconds since the epoch) is each row's data time, so
        ``update`` takes no ``times=``, and the frontier
        (``advance_to``, a datetime or microseconds) is event time: the
        clock that windows (``window``, ``session_window``) and temporal
        filters (``now()``) in ``sql`` run on.  All inputs share one clock.
        Cost: O(1); call it before the first ``run``.

        >>> flow = ddflow.Dataflow()
        >>> people_in, people = flow.new_collection("people", schema=["o", "i"])
        >>> people_in, people
        (<InputHandle people>, <Collection people depth=1>)
        >>> orders_in, orders = flow.new_collection("orders", schema={"o_id": "bigint", "cust": str})
        >>> orders.columns
        ['o_id', 'cust']
        >>> bids_in, bids = flow.new_collection("bids", schema={"auction": "bigint", "ts": "timestamp"}, event_time="ts")
        >>> bids_in.event_time
        'ts'
        """
        table = None
        if isinstance(schema, Mapping):
            if name is None:
                raise UsageError("a table (new_collection with a schema dict) needs a name")
            if name.lower() in self.tables:
                raise UsageError(f"there is already a table {name!r}")
            table, schema = Schema.of(schema, f"table {name!r}"), None
        if nonnegative is True:
            nonnegative = "error" if table is not None else None
        if event_time is not None:
            if table is None:
                raise UsageError(f"new_collection({name!r}, event_time={event_time!r}) needs a table: a schema dict")
            if table.types[table.index(event_time)] != "timestamp":
                raise UsageError(f"table {name!r}: the event time column {event_time!r} must be a timestamp, "
                                 f"not {table.types[table.index(event_time)]}")
            event_time = table.names[table.index(event_time)]
            table = Schema(table.names, table.types, event_time)
        node = InputNode(self.top, name or self.ctx.fresh("input"), nonnegative)
        node.one_time_per_record = event_time is not None
        handle = InputHandle(self, node, schema, table, event_time)
        self.inputs.append(handle)
        coll = Collection(node)
        if table is not None:
            coll.schema = table
            self.tables[name.lower()] = coll
        return handle, coll

    def constant(self, rows: Sequence[tuple], kinds: Sequence[str] | None = None,
                 name: str | None = None) -> Collection:
        """A collection of fixed rows at time 0: not an input (no handle), emitted once and never changed.

        See :meth:`Collection.constant`.  Cost: O(rows) to build and once
        at the first run past time 0; nothing after.

        >>> flow = ddflow.Dataflow()
        >>> out = flow.constant([("a", 1), ("b", 2)]).capture()
        >>> flow.advance_to(1); flow.run()
        >>> out.drain(), len(flow.inputs)
        ([(('a', 1), 0, 1), (('b', 2), 0, 1)], 0)
        """
        return Collection.constant(self.top, rows, kinds, name)

    def iterative(self, name: str | None = None, max_iterations: int | None = None,
                  max_seconds: float | None = None, max_records: int | None = None) -> IterativeScope:
        """A top-level loop scope for ``Variable``s (mutual recursion); bounds as ``Collection.iterate``.

        Cost: O(1); running the loop costs as ``Collection.iterate``.

        >>> flow = ddflow.Dataflow()
        >>> nums_in, nums = flow.new_collection("nums")
        >>> v = ddflow.Variable(flow.iterative("halve"), nums)
        >>> _ = v.set(v.map(lambda r: (r[0] // 2,)).concat(nums).distinct())
        >>> out = v.result.leave().capture()
        >>> nums_in.insert((8,), time=0); flow.advance_to(1); flow.run()
        >>> [r for r, _, _ in out.drain()]
        [(0,), (1,), (2,), (4,), (8,)]
        """
        return IterativeScope(self.top, name or self.ctx.fresh("iterative"), max_iterations, max_seconds,
                             max_records)

    # -- running ------------------------------------------------------------------
    def advance_to(self, time: "int | datetime.datetime") -> None:
        """No further updates at times before ``time`` on any input.

        ``time``: an integer, or a ``datetime`` (event time: microseconds
        since the epoch; a naive datetime is UTC, as Spark's
        ``TIMESTAMP_NTZ``).  The frontier never moves back.  Nothing runs
        until ``run``.  Cost: O(1).

        >>> flow = ddflow.Dataflow()
        >>> flow.advance_to(3); flow.frontier
        3
        >>> flow.advance_to(datetime.datetime(1970, 1, 1, 0, 0, 1)); flow.frontier
        1000000
        """
        if isinstance(time, datetime.datetime):
            time = timestamp_micros(time)
        elif isinstance(time, datetime.date):
            raise UsageError(f"advance_to needs an integer time or a datetime, got the date {time!r}")
        time = int(time)
        if time > INT64_MAX:
            raise FrontierError(f"advance_to({time}): a frontier is an int64, at most {INT64_MAX}")
        if time < self.frontier:
            raise FrontierError(f"advance_to({time}) would move the frontier backwards from {self.frontier}")
        self.frontier = time

    def run(self, *, routed: tuple[int, int] | None = None) -> None:
        """Process everything before the frontier; returns when all of it is final everywhere.

        Cost: each operator's cost on the updates submitted since the last
        run only (never the whole collection), then traces are compacted
        to the new frontier.  ``routed=(batch, partitions)`` (the streaming
        driver, workers on executors): the run also takes what the
        executors sent the workers directly for that micro-batch.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> out = edges.project(0).count().capture()
        >>> edges_in.update([(1, 2), (1, 3)], times=0); flow.advance_to(1); flow.run()
        >>> edges_in.remove((1, 3), time=1); flow.advance_to(2); flow.run()
        >>> out.drain()
        [((1, 2), 0, 1), ((1, 1), 1, 1), ((1, 2), 1, -1)]
        """
        ctx = self.ctx
        if self.closed:
            raise DataflowError(_CLOSED)
        if ctx.failed is not None:
            raise DataflowError(f"the dataflow failed earlier: {ctx.failed}")
        ctx.ran = True
        t0 = time.perf_counter()
        outputs = self._outputs()
        before = [n.delivered for n in outputs]
        try:
            if self.workers > 1:
                self._workers().run([h.node for h in self.inputs], self.frontier, routed,
                                    [h.kinds for h in self.inputs])
            elif routed is not None:
                raise UsageError("routed input needs workers on executors (workers > 1 and spark=...)")
            else:
                self._scheduler.step_scope(self.top, np.array([self.frontier], dtype=np.int64))
        except BaseException as e:
            ctx.failed = e
            if self._pool is not None:
                self._pool.shutdown()
            raise
        ctx.completed = self.frontier
        if self.workers == 1:
            compact(self.top, self.frontier)
        done = time.perf_counter()
        self._runs += 1
        self._step_seconds.observe(done - t0)
        arrived = self._arrived if self._arrived is not None else t0
        self._arrived = None
        for n, b in zip(outputs, before):
            if n.delivered != b:
                n.freshness.observe(done - arrived)
        if self._servers:
            self._publish()

    def _outputs(self) -> list:
        """The dataflow's outputs (captures and subscriptions), kept until the graph changes.  O(1) amortized."""
        cached = self.__dict__.get("_outputs_at")
        if cached is None or cached[0] != self.ctx.graph_version:
            cached = self._outputs_at = (self.ctx.graph_version, [n for n in self.top.all_nodes() if n.is_output])
        return cached[1]

    def _placement(self):
        """Where the workers run: forked here, or (``spark=``) as barrier tasks on the Spark cluster.

        The Spark launcher lives with the rest of Spark in ``ddflow.streaming``,
        which registers it (:func:`ddflow.workers.remote.find_launcher`): the
        engine never imports the layers above it.
        """
        if self.placement is not None:
            return self.placement
        if self.spark is not None:
            from ddflow.workers.remote import RemotePlacement, find_launcher

            return RemotePlacement(find_launcher("spark", self.spark))
        from ddflow.workers.forked import ForkedPlacement

        return ForkedPlacement(self.transport)

    def _workers(self):
        """The worker pool (W > 1), started on first use; ``close`` (or the collector) releases it."""
        if self.closed:
            raise DataflowError(_CLOSED)
        if self._pool is None:
            from ddflow.workers.pool import WorkerPool

            placement = self._placement()
            placement.label = (f"ddflow dataflow {self.name!r} (created at {self._site})" if self.name
                               else f"ddflow dataflow created at {self._site}")
            pool = self._pool = WorkerPool(self.top, self.ctx, self.heartbeat_timeout, placement)
            # The finalizer holds the pool, never the dataflow, and nothing of ddflow's making refers back to
            # the dataflow (handles and the SQL front end hold it weakly): the last reference dropped releases
            # the workers at once, without waiting for the cyclic collector.
            self._release = weakref.finalize(self, pool.shutdown)
        return self._pool

    def check_workers(self) -> None:
        """Raise now if a worker is lost: ended, raised, or stopped beating (a :class:`~ddflow.errors.WorkerLost`
        naming it), or if the dataflow failed earlier or is closed.

        For a caller about to depend on the workers between runs (executors
        sending them input, :meth:`ingest`).  With one worker, or before the
        workers started, only the dataflow's own state is checked.  Cost:
        one poll of the workers' sockets, no wait.

        >>> flow = ddflow.Dataflow()
        >>> flow.check_workers(); flow.close(); flow.check_workers()
        Traceback (most recent call last):
        ...
        ddflow.errors.DataflowError: the dataflow is closed: its workers and task slots are released
        """
        if self.closed:
            raise DataflowError(_CLOSED)
        if self.ctx.failed is not None:
            raise DataflowError(f"the dataflow failed earlier: {self.ctx.failed}") from self.ctx.failed
        if self._pool is not None:
            self._pool.check_alive()

    def ingest(self, inputs: "Mapping[str, InputHandle] | None" = None) -> "Ingest":
        """What executors need to send input straight to this dataflow's workers, as its handles would: an
        :class:`~ddflow.workers.ingest.Ingest`.

        Only with workers on executors (``workers > 1`` and ``spark=``).
        ``inputs`` names the handles (default: each by its own name).
        Starts the workers if they have not started, and checks them
        (:meth:`check_workers`).  What is sent through it for micro-batch
        ``b`` from ``p`` partitions runs in ``run(routed=(b, p))``.  Cost:
        the workers' start the first time, then O(inputs).

        >>> flow = ddflow.Dataflow()
        >>> flow.ingest()
        Traceback (most recent call last):
        ...
        ddflow.errors.UsageError: ingest needs workers on executors (workers > 1 and spark=...)
        """
        refusal = "ingest needs workers on executors (workers > 1 and spark=...)"
        if self.workers == 1 or (self.spark is None and self.placement is None):
            raise UsageError(refusal)
        pool = self._workers()
        self.check_workers()
        if getattr(pool.placement, "ingest", None) is None:
            raise UsageError(refusal)
        handles = {h.name: h for h in self.inputs} if inputs is None else dict(inputs)
        from ddflow.workers.ingest import Ingest

        index = {id(n): i for i, n in enumerate(pool.nodes)}
        return Ingest({name: (index[id(h.node)], h) for name, h in handles.items()}, self.frontier,
                      pool.placement.ingest, getattr(pool.placement, "credentials", None))

    def row_functions(self, inputs: "Sequence[InputHandle] | None" = None) -> "list[RowFunction]":
        """The row-wise functions (``map``, ``filter``, ``flat_map``) downstream of ``inputs`` (default: every
        input), each with the inputs upstream of it; in the order a walk from the inputs meets them.

        Each one's :attr:`RowFunction.on_error` says what it does when it
        raises, and :meth:`RowFunction.take_failed` takes what it dropped.
        Cost: O(inputs x operators).

        >>> flow = ddflow.Dataflow()
        >>> nums_in, nums = flow.new_collection("nums")
        >>> _ = nums.map(lambda r: (1 // r[0],), name="inverse").capture()
        >>> [(f.name, [h.name for h in f.inputs]) for f in flow.row_functions()]
        [('inverse', ['nums'])]
        """
        from ddflow.operators.stateless import RowNode

        upstream: dict[int, tuple[RowNode, list[InputHandle]]] = {}
        handles: list[InputHandle] = []
        for h in self.inputs if inputs is None else inputs:
            if not any(h is g for g in handles):
                handles.append(h)
        for h in handles:
            seen, todo = set(), [h.node]
            while todo:
                n = todo.pop()
                if id(n) in seen:
                    continue
                seen.add(id(n))
                if isinstance(n, RowNode):
                    upstream.setdefault(id(n), (n, []))[1].append(h)
                todo.extend(t for t, _ in n.targets)
        return [RowFunction(n, hs) for n, hs in upstream.values()]

    @property
    def iterates(self) -> bool:
        """Whether the dataflow has a loop (``iterate``, ``iterative``); one fed negative counts may never converge.

        Cost: O(top-level operators).

        >>> flow = ddflow.Dataflow()
        >>> nums_in, nums = flow.new_collection("nums")
        >>> before = flow.iterates; _ = nums.iterate(lambda x: x.distinct()); before, flow.iterates
        (False, True)
        """
        return any(isinstance(m, IterativeScope) for m in self.top.nodes)

    def __enter__(self) -> "EngineDataflow":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def worker_stats(self) -> list[dict]:
        """Per worker: trace sizes, rounds run, time busy, waiting and idle, coordination time per round, messages.

        ``busy_s`` is time in operator steps, ``wait_s`` time waiting on
        peers within a run, ``idle_s`` time between the driver's commands.

        Empty for one worker (or before the first run).  Cost: one request
        and reply per worker.

        >>> ddflow.Dataflow().worker_stats()
        []
        """
        if self.workers == 1 or self._pool is None:
            return []
        return self._pool.stats()

    def finish(self) -> None:
        """No more input: run everything to the end of time, so every output is final, and refuse further updates.

        The workers stay, so outputs and statistics stay readable;
        :meth:`close` releases them.  Idempotent.  Cost: one ``run`` to the
        end of time.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> out = edges.capture()
        >>> edges_in.insert((1, 2), time=7); flow.finish()
        >>> out.drain(), flow.finished, flow.closed
        ([((1, 2), 7, 1)], True, False)
        """
        if self.finished:
            return
        self.advance_to(INT64_MAX)
        self.run()
        self.finished = True

    def close(self) -> None:
        """Release everything the dataflow holds outside this process's memory; no more runs or updates after it.

        That is the worker processes and their sockets, and with ``spark=``
        the barrier tasks: when ``close`` returns, their task slots are
        free for the next ``Dataflow(workers=W, spark=spark)``.  Idempotent;
        leaving a ``with`` block calls it, and so does dropping the last
        reference to the dataflow (at once, not at the next cyclic garbage
        collection).  Outputs already captured stay readable.  Input not yet
        run is dropped: :meth:`finish` first runs everything to the end of
        time.  Cost: with workers, a message to each and waiting for it to
        exit (a second at most for all of them; on Spark, until the job has
        ended); O(1) otherwise.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> out = edges.capture()
        >>> edges_in.insert((1, 2), time=0); flow.advance_to(1); flow.run()
        >>> flow.close(); flow.close(); out.drain(), flow.closed
        ([((1, 2), 0, 1)], True)
        >>> flow.run()
        Traceback (most recent call last):
        ...
        ddflow.errors.DataflowError: the dataflow is closed: its workers and task slots are released
        """
        self.closed = True
        for server in self._servers:
            server.close()
        self._servers = []
        if self._release is not None:
            self._release()  # runs the pool's shutdown at most once

    # -- state ------------------------------------------------------------------
    def fingerprint(self) -> str:
        """A digest of the dataflow's shape: every operator (kind and name) and its connections, and the inputs.

        Two dataflows built by the same code over the same inputs have the
        same fingerprint; state saved by one is refused by another (the
        streaming driver's state store).  Cost: O(operators).

        >>> a, b = ddflow.Dataflow(), ddflow.Dataflow()
        >>> for f in (a, b):
        ...     _ = f.new_collection("edges")[1].count()
        >>> a.fingerprint() == b.fingerprint()
        True
        """
        nodes = list(self.top.all_nodes())
        index = {id(n): i for i, n in enumerate(nodes)}
        shape = [(type(n).__name__, n.name, sorted((index.get(id(t), -1), p) for t, p in n.targets)) for n in nodes]
        inputs = [(h.name, list(h.schema.names) if h.schema is not None else None,
                   list(h.schema.types) if h.schema is not None else None) for h in self.inputs]
        return hashlib.sha256(repr((shape, inputs)).encode()).hexdigest()[:32]

    def trace_size(self) -> int:
        """Updates held in all traces (arrangements and reduce outputs), over all workers.

        Cost: O(operators + trace batches); with ``workers > 1`` a
        ``worker_stats`` round.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> arr = edges.arrange()
        >>> edges_in.update([(1, 2), (1, 3)], times=0); flow.advance_to(1); flow.run()
        >>> flow.trace_size()
        2
        """
        if self.workers > 1:
            return sum(s["trace_size"] for s in self.worker_stats())
        return trace_size(self.top)

    def stats(self) -> list[dict]:
        """Per operator: ``operator`` (name), ``kind``, ``records`` and ``bytes`` held as state, ``queued``
        updates, ``updates_in`` and ``updates_out`` so far, and ``busy_s`` (seconds in its steps); summed over
        the workers.

        What makes bounded state visible: a windowed query's operators hold
        only the windows still open.  Cost: O(operators + trace batches);
        with ``workers > 1`` a ``worker_stats`` round.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> counts = edges.count(name="per_edge")
        >>> edges_in.update([(1, 2), (1, 2)], times=0); flow.advance_to(1); flow.run()
        >>> [(s["kind"], s["records"], s["updates_in"]) for s in flow.stats() if s["records"]]
        [('ArrangeNode', 1, 2)]
        """
        if self.workers == 1 or self._pool is None:
            return operator_stats(self.top)
        return _summed_operators(self.worker_stats())

    def metrics(self) -> dict:
        """Everything the dataflow counts, as one dict: what a monitoring stack scrapes (:meth:`serve_metrics`).

        - ``operators``: per operator name, its ``kind``, ``records`` and
          ``bytes`` held as state, ``queued`` updates, ``updates_in``,
          ``updates_out`` and ``busy_s`` (seconds in its steps; with
          several workers, their sums; operators inside a loop are timed
          as part of the loop);
        - ``inputs``: per input, ``updates`` fed and ``rejected``
          (refused by its ``nonnegative`` policy or a sum past int64);
        - ``outputs``: per capture or subscription, ``updates``
          delivered, ``retractions`` among them (negative diffs: rows
          taken back), and ``freshness_seconds``, a histogram of the
          time from the oldest input of a run arriving (its ``update``)
          to the run delivering this output's changes;
        - ``frontier``, ``completed``, ``runs``, and ``step_seconds``: a
          histogram of each run's time (count, sum, p50, p90, p99 and
          cumulative buckets);
        - ``workers``: per worker (``workers > 1``), its ``records``,
          ``bytes``, ``busy_s``, ``wait_s``, ``idle_s`` and ``rounds``.

        The engine keeps counters only (a few adds and two clock reads per
        operator step); this builds the dict.  Cost: O(operators + trace
        batches); with ``workers > 1`` a ``worker_stats`` round.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> out = edges.distinct(name="uniq").capture()
        >>> edges_in.update([(1, 2), (1, 2), (2, 3)], times=0); edges_in.remove((2, 3), time=1)
        >>> flow.advance_to(2); flow.run()
        >>> m = flow.metrics()
        >>> m["inputs"]["edges"], m["outputs"][out.name]["retractions"], m["runs"], m["step_seconds"]["count"]
        ({'updates': 4, 'rejected': 0}, 1, 1, 1)
        """
        per_worker = self.worker_stats()  # one round of the workers' statistics, or none
        stats = _summed_operators(per_worker) if per_worker else operator_stats(self.top)
        ops = {s["operator"]: {k: v for k, v in s.items() if k != "operator"} for s in stats}
        workers = [{"worker": w["worker"], "records": w["trace_size"], "bytes": w["trace_bytes"], "busy_s": w["busy_s"],
                    "wait_s": w["wait_s"], "idle_s": w["idle_s"], "rounds": w["rounds"]} for w in per_worker]
        inputs = {h.name: {"updates": h.node.updates_in,
                           "rejected": h._rejected_taken + len(h.node.failed)} for h in self.inputs}
        outputs = {n.name: {"updates": n.delivered, "retractions": n.retractions,
                            "freshness_seconds": n.freshness.as_dict()} for n in self._outputs()}
        return {"frontier": self.frontier, "completed": self.completed, "runs": self._runs,
                "step_seconds": self._step_seconds.as_dict(), "operators": ops, "inputs": inputs,
                "outputs": outputs, "workers": workers}

    def serve_metrics(self, port: int = 0, host: str = "127.0.0.1", every: float = 1.0) -> Any:
        """Serve :meth:`metrics` to Prometheus at ``http://host:port/metrics`` until the dataflow closes.

        Returns the :class:`~ddflow.base.endpoint.MetricsServer` (its
        ``url``; ``close()`` stops it earlier).  Loopback unless ``host``
        says otherwise; ``port=0`` takes a free port.  A scrape reads what
        the last run published (runs publish at most every ``every``
        seconds, and the first run after that), never the dataflow itself, so
        the server's thread never touches the workers or a running step.
        Names: :func:`ddflow.base.metrics.families`, labelled with the
        dataflow's ``name``.  Needs the ``prometheus-client`` package.
        Cost: a thread and a socket; :meth:`metrics` once a publication.

        >>> flow = ddflow.Dataflow(name="edges")
        >>> edges_in, edges = flow.new_collection("edges")
        >>> server = flow.serve_metrics()
        >>> server.url.startswith("http://127.0.0.1:")
        True
        >>> flow.close(); server.closed
        True
        """
        from ddflow.base.endpoint import MetricsServer

        if self.closed:
            raise DataflowError(_CLOSED)
        # The server reads only this dict (never the dataflow: a reference to it would keep it alive).
        published = self._published
        self._publish_every = min(self._publish_every, every)
        self._publish(force=True)
        server = MetricsServer(lambda: published["families"], port, host)
        self._servers.append(server)
        weakref.finalize(self, server.close)  # a dataflow nobody references releases its endpoint too
        return server

    def _publish(self, force: bool = False) -> None:
        """Refresh what the metrics servers serve, at most every ``_publish_every`` seconds unless ``force``."""
        now = time.monotonic()
        if force or now - self._published["at"] >= self._publish_every:
            self._published["families"] = families(self.metrics(), self.name or self._site)
            self._published["at"] = now

    def trace_bytes(self) -> int:
        """Bytes of numpy arrays held in all traces, over all workers.

        Cost: as ``trace_size``.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> arr = edges.arrange()
        >>> edges_in.update([(1, 2), (1, 3)], times=0); flow.advance_to(1); flow.run()
        >>> flow.trace_bytes() > 0
        True
        """
        if self.workers > 1:
            return sum(s["trace_bytes"] for s in self.worker_stats())
        return trace_bytes(self.top)


def __getattr__(name: str) -> Any:
    """``ddflow.dataflow.Dataflow``, the engine's old name: deprecated (one public class per name)."""
    if name == "Dataflow":
        import warnings

        warnings.warn("ddflow.dataflow.Dataflow is now ddflow.dataflow.EngineDataflow (users want ddflow.Dataflow, "
                      "the facade with SQL); the old name goes in the next release", DeprecationWarning, stacklevel=2)
        return EngineDataflow
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
