"""Which rows of a micro-batch become input updates: parse them, then divert bad times to dead letters.

The same function runs in the driver (micro-batch collected there) and
on the executors (rows routed straight to the workers,
:mod:`ddflow.streaming.routing`), so both paths admit exactly the same
updates and give the same reasons.
"""
from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa

import ddflow
from ddflow.dataflow import MAX_TIME
from ddflow.streaming.parse import InputSpec, dead_letters, parse_input


def admit(spec: InputSpec, table: pa.Table, kinds: Sequence[str] | None, frontier: int,
          max_time_ahead: int | None, batch_id: int, dead: list[pa.Table]) -> pa.Table:
    """Input ``spec``'s updates in ``table`` (fields, ``time``, ``diff``); every refused row joins ``dead``.

    Refused, each with its reason: messages that do not parse, times past
    the largest data time, times more than ``max_time_ahead`` past the
    frontier (measured from the batch's earliest time while the frontier
    is 0), and times before the frontier (or a
    :class:`~ddflow.errors.FrontierError` with ``late="error"``).
    Cost: O(rows), vectorized.
    """
    rows, bad = parse_input(spec, table, kinds)
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
