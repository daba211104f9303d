"""The one feed: how a micro-batch's rows become input updates, and what the input log holds of them.

Both paths a micro-batch takes run these functions: the driver's (the
batch collected there, :meth:`~ddflow.streaming.driver.StreamingDataflow.process_arrow`)
and the executors' (each partition's rows sent straight to the workers,
:mod:`ddflow.streaming.routing`), and so does a restore from the log.
So both admit exactly the same updates, give the same reasons, cast
the same way and log the same rows:

- :func:`admit_batch` parses each input's rows, diverts bad times to the
  dead letters (:func:`admit`), and casts what is left into what
  :meth:`ddflow.InputHandle.update` and :meth:`ddflow.workers.ingest.Ingest.send`
  take (:func:`as_update`: a table's JSON timestamps are integers of
  microseconds; an event-time input's rows carry their own times);
- the admitted rows, before that cast, are what the input log holds;
- :func:`applied_log` makes a batch's log hold only what the inputs
  applied, once the run has said which updates they rejected (removals
  of absent records under ``nonnegative="dead-letter"``, overflows);
- :func:`consolidated` adds a restored log's final times up before it
  is fed again.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import ddflow
from ddflow.base.interner import Interner
from ddflow.dataflow import MAX_TIME
from ddflow.streaming.parse import InputSpec, dead_letters, parse_input


@dataclass
class Admitted:
    """The admitted input of one micro-batch (in the driver) or of one of its partitions (on an executor)."""

    #: input name -> ``(rows, times, diffs)``, as :meth:`ddflow.InputHandle.update` and ``Ingest.send`` take them.
    updates: dict[str, tuple] = field(default_factory=dict)
    #: input name -> the admitted rows (fields, ``time``, ``diff``), as the input log holds them.
    logged: dict[str, pa.Table] = field(default_factory=dict)
    #: Dead letters (``DEAD_LETTER_SCHEMA``): rows that did not parse, or whose times were refused.
    dead: list[pa.Table] = field(default_factory=list)
    #: The largest admitted time, None if nothing was admitted.
    max_time: int | None = None

    @property
    def count(self) -> int:
        """How many updates were admitted."""
        return sum(t.num_rows for t in self.logged.values())


def admit_batch(specs: Iterable[InputSpec], handles: Mapping[str, Any], table: pa.Table | None, frontier: int,
                max_time_ahead: int | None, batch_id: int) -> Admitted:
    """Every input's admitted updates in ``table``, cast for its handle, and what the log holds of them.

    ``handles``: each input's :class:`ddflow.InputHandle` (in the driver)
    or its copy on an executor (``Ingest.input(name)``): its kinds, table
    schema and event time decide the parse and the cast.  Cost: O(rows),
    vectorized (see :func:`ddflow.streaming.parse.parse_input`).

    >>> flow = ddflow.Dataflow()
    >>> h, _ = flow.new_collection("xs", schema=("i",))
    >>> rows = pa.table({"x": [1, 2], "t": [0, 1]})
    >>> a = admit_batch([InputSpec("xs", ["x"], time="t")], {"xs": h}, rows, 0, None, 0)
    >>> a.count, a.max_time, a.logged["xs"].column_names
    (2, 1, ['x', 'time', 'diff'])
    """
    out = Admitted()
    for spec in specs:
        if table is None or not table.num_rows:
            break
        handle = handles[spec.name]
        schema = handle.schema
        kinds = types = None
        if spec.format == "json":  # a table's JSON fields keep its column kinds (the null mask is not a field)
            kinds = schema.kinds[:len(schema)] if schema is not None else handle.kinds
            types = [_type_of(schema, f) or "" for f in spec.fields] if schema is not None else None
        rows = admit(spec, table, kinds, frontier, max_time_ahead, batch_id, out.dead, types)
        if not rows.num_rows:
            continue
        out.logged[spec.name] = rows
        out.updates[spec.name] = as_update(handle, rows)
        mt = int(pc.max(rows.column("time")).as_py())
        out.max_time = mt if out.max_time is None else max(out.max_time, mt)
    return out


def as_update(handle: Any, rows: pa.Table) -> tuple[pa.Table, np.ndarray | None, np.ndarray]:
    """Admitted (or logged) rows as ``handle.update(rows, times, diffs)`` takes them.

    A table's integer column for a ``timestamp`` is microseconds since the
    epoch, for a ``date`` days (how JSON carries them); an event-time
    input's times are None (each row's own event time).  Cost: O(rows), vectorized.

    >>> flow = ddflow.Dataflow()
    >>> h, _ = flow.new_collection("bids", schema={"ts": "timestamp"}, event_time="ts")
    >>> data, times, diffs = as_update(h, pa.table({"ts": [5], "time": [5], "diff": [1]}))
    >>> data.schema.types, times, diffs.tolist()
    ([TimestampType(timestamp[us])], None, [1])
    """
    fields = [c for c in rows.column_names if c not in ("time", "diff")]
    data = rows.select(fields)
    schema = handle.schema
    if schema is not None:
        for i, name in enumerate(fields):
            col = data.column(i)
            typ = _type_of(schema, name) if pa.types.is_integer(col.type) else None
            if typ == "timestamp":
                data = data.set_column(i, name, col.cast(pa.int64()).cast(pa.timestamp("us")))
            elif typ == "date":  # parse checked the range
                data = data.set_column(i, name, col.cast(pa.int32()).cast(pa.date32()))
    times = None if handle.event_time is not None else rows.column("time").to_numpy()
    return data, times, rows.column("diff").to_numpy()


def admit(spec: InputSpec, table: pa.Table, kinds: Sequence[str] | None, frontier: int,
          max_time_ahead: int | None, batch_id: int, dead: list[pa.Table],
          types: Sequence[str] | None = None) -> pa.Table:
    """Input ``spec``'s updates in ``table`` (fields, ``time``, ``diff``); every refused row joins ``dead``.

    Refused, each with its reason: messages that do not parse, times past
    the largest data time, times more than ``max_time_ahead`` past the
    frontier (measured from the batch's earliest time while the frontier
    is 0), and times before the frontier (or a
    :class:`~ddflow.errors.FrontierError` with ``late="error"``).
    ``kinds`` and ``types``: the input's column kinds and a table's SQL
    types (:func:`~ddflow.streaming.parse.parse_input`).
    Cost: O(rows), vectorized.
    """
    rows, bad = parse_input(spec, table, kinds, types)
    if bad is not None and bad.num_rows:
        dead.append(bad)
    if rows.num_rows == 0:
        return rows.select(spec.fields + ["time", "diff"])
    times = rows.column("time").to_numpy()
    rows, times = divert(rows, times, times > MAX_TIME, spec.name, f"time past the largest data time {MAX_TIME}", dead)
    if max_time_ahead is not None and len(times):
        base = frontier if frontier > 0 else int(times.min())
        rows, times = divert(rows, times, times > base + max_time_ahead, spec.name,
                             f"time more than {max_time_ahead} past the frontier {frontier} (maxTimeAhead)", dead)
    late = times < frontier
    if late.any() and spec.late == "error":
        raise ddflow.FrontierError(f"input {spec.name!r}: {int(late.sum())} updates in batch {batch_id} are "
                                   f"before the frontier {frontier}")
    reason = (f"late: event time before the watermark {frontier} (the latest event time seen minus the lateness "
              f"of {spec.lateness} us)" if spec.lateness is not None else f"time before the frontier {frontier}")
    rows, times = divert(rows, times, late, spec.name, reason, dead)
    return rows.select(spec.fields + ["time", "diff"])


def divert(rows: pa.Table, times: Any, bad: Any, name: str, reason: str,
           dead: list[pa.Table]) -> tuple[pa.Table, Any]:
    """``rows`` and their ``times`` without the ``bad`` ones, which join ``dead`` as dead letters with ``reason``."""
    if not bad.any():
        return rows, times
    dead.append(dead_letters(name, reason, rows.filter(pa.array(bad))))
    return rows.filter(pa.array(~bad)), times[~bad]


# -- the input log holds what was applied --------------------------------------------------------------------


def applied_log(batch: Mapping[str, pa.Table], rejected: Mapping[str, list[dict]], handles: Mapping[str, Any],
                earlier: Callable[[], Mapping[str, pa.Table]] | None) -> dict[str, pa.Table]:
    """This batch's log rows (``batch``, per input), made to add up to what the inputs applied.

    ``rejected``: the updates the run's inputs rejected (``take_rejected``:
    stored record, time, diff).  The log must hold only what was applied:
    a replay (or a snapshot, which adds the log up) of a rejected removal
    followed by a re-insert would otherwise give another count than the
    run did.  Each rejected update is one logged row (an input takes
    updates as submitted, one per row, unconsolidated), found by encoding
    the rows as its handle does, so the comparison is the stored record's:

    - a row of this batch is removed;
    - a row an earlier batch logged (a time the frontier passed only in
      this run: the batch's largest time under ``before-max``, an event time
      within the lateness) is in a committed file, which is never
      rewritten: the row is cancelled instead, by the same row with its
      diff negated in this batch's log.  ``earlier()`` gives the live log
      (read only then).  The cancellation is at the row's own time, which
      this run retired: final from this batch on.  Restore adds final
      times up (:func:`consolidated`) before feeding them, and a snapshot
      adds them up too, so a cancelled pair never reaches the dataflow,
      with int64 wrap-around: exact whatever the pair's diffs, since the
      applied sum fits.

    A rejected update found nowhere is a :class:`~ddflow.errors.DataflowError`
    (a log that would restore other counts than the run's), raised before
    any output of the batch is written.  Cost: O(rows of the rejecting
    inputs) Python, only for a batch with rejections; ``earlier()`` reads
    the live log, of which only the rows at the rejected updates' times
    are compared.

    >>> flow = ddflow.Dataflow()
    >>> h, _ = flow.new_collection("xs", schema=("i",), nonnegative="dead-letter")
    >>> rows = pa.table({"x": [1, 2], "time": [0, 0], "diff": [1, -1]})
    >>> h.update(*as_update(h, rows)); flow.advance_to(1); flow.run()
    >>> applied_log({"xs": rows}, {"xs": h.take_rejected()}, {"xs": h}, None)["xs"].to_pylist()
    [{'x': 1, 'time': 0, 'diff': 1}]
    """
    out = dict(batch)
    for name, rej in rejected.items():
        if not rej:
            continue
        handle = handles[name]
        want = Counter(_key(f["record"], f["time"], f["diff"]) for f in rej)
        rows = out.get(name)
        if rows is not None and rows.num_rows:
            keep = [not _take(want, k) for k in _keys(handle, rows)]
            out[name] = rows.filter(pa.array(keep, pa.bool_()))
        if +want and earlier is not None:
            old = earlier().get(name)
            if old is not None and old.num_rows:  # only rows at a rejected update's time can be it
                times = pa.array(sorted({k[1] for k in +want}), pa.int64())
                old = old.filter(pc.is_in(old.column("time"), value_set=times))
            if old is not None and old.num_rows:
                hit = [i for i, k in enumerate(_keys(handle, old)) if _take(want, k)]
                if hit:
                    cancel = old.take(pa.array(hit, pa.int64()))
                    cancel = cancel.set_column(cancel.column_names.index("diff"), "diff",
                                               pc.negate(cancel.column("diff")))  # wraps for -2**63, as sums do
                    got = out.get(name)
                    out[name] = cancel if got is None else pa.concat_tables([got, cancel.select(got.column_names)],
                                                                            promote_options="default")
        if +want:
            (record, time, diff), n = next(iter((+want).items()))
            raise ddflow.DataflowError(
                f"input {name!r}: the rejected update {record!r} at time {time} with diff {diff} ({n} such) is in "
                "no input log of this or an earlier batch; the log would restore other counts than the run gave")
    return out


def consolidated(rows: pa.Table, frontier: int) -> pa.Table:
    """Logged rows as restore feeds them: those at times before ``frontier`` added up per (fields, time), zero
    sums dropped; the later ones (not yet checked by their input) as logged, in order.

    Times before the frontier are final and were applied (the log holds
    nothing else, once added up), so adding them up changes no count,
    with int64 wrap-around (Arrow's ``sum``): a cancelled pair
    (:func:`applied_log`) vanishes exactly whatever its diffs.  Later
    rows are checked when the frontier passes them, update by update,
    and must reach their input as the run that logged them would have
    fed them.  Rows whose columns Arrow cannot group are returned as they
    are.  O(rows), vectorized.

    >>> rows = pa.table({"x": [1, 1, 2, 3, 3], "time": [0, 0, 0, 5, 5], "diff": [1, -1, 1, 1, -1]})
    >>> consolidated(rows, 5).to_pylist()
    [{'x': 2, 'time': 0, 'diff': 1}, {'x': 3, 'time': 5, 'diff': 1}, {'x': 3, 'time': 5, 'diff': -1}]
    """
    keys = [c for c in rows.column_names if c != "diff"]
    final = pc.less(rows.column("time"), frontier)
    try:
        g = rows.filter(final).group_by(keys, use_threads=False).aggregate([("diff", "sum")])
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
        return rows
    g = g.filter(pc.not_equal(g.column("diff_sum"), 0))
    done = pa.table([g.column(k) for k in keys] + [g.column("diff_sum")], names=keys + ["diff"])
    return pa.concat_tables([done, rows.filter(pc.invert(final)).select(keys + ["diff"])], promote_options="default")


def _type_of(schema: Any, name: str) -> str | None:
    """The SQL type of a table's column ``name`` (case-insensitive, as SQL), None if it has none."""
    try:
        return schema.types[schema.index(name)]
    except ddflow.SchemaError:
        return None


def _keys(handle: Any, rows: pa.Table) -> list[tuple]:
    """Each logged row as (stored record, time, diff), encoded as ``handle.update`` encodes it."""
    interner = Interner()
    data, times, diffs = as_update(handle, rows)
    u = handle.encode(data, times, diffs, interner, 0)
    return [_key(r, t, d) for r, t, d in u.to_rows(interner)]


def _key(record: Sequence, time: Any, diff: int) -> tuple:
    """A comparable key for one update: NaN (which equals nothing) as a marker, a one-element time as an int."""
    if isinstance(time, (list, tuple)):  # input times are one integer each
        time = time[0]
    return tuple(("nan",) if isinstance(v, float) and v != v else v for v in record), int(time), int(diff)


def _take(want: Counter, key: tuple) -> bool:
    """Take one ``key`` from ``want`` if it is there."""
    if want.get(key, 0) > 0:
        want[key] -= 1
        return True
    return False
