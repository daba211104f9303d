"""Spark's datetime arithmetic in named units: ``timestampadd``, ``timestampdiff``, and EXTRACT's SECOND with its
fraction (DAYOFWEEK_ISO is :mod:`ddflow.plan.datetimes`' weekday, one up).

Spark reads a timestamp as a local date-time in the session's time zone, which ddflow's SQL takes to be UTC (as
its tests run Spark); a date is a timestamp at midnight.  Semantics are ``java.time``'s, as Spark calls them:

- ``timestampadd(unit, n, ts)``: MICROSECOND to HOUR, DAY, DAYOFYEAR and
  WEEK add that many microseconds; MONTH, QUARTER and YEAR add months and
  clamp the day to the month's end (``plusMonths``), keeping the time of
  day.  A result past the years 1 to 9999 raises (Spark's timestamps
  reach further, and overflow at int64's microseconds).
- ``timestampdiff(unit, start, end)``: the whole units from ``start`` to
  ``end``, truncated toward zero (``ChronoUnit.between``).  For DAY and
  up, the end date moves a day toward the start when its time of day has
  not reached the start's; months compare (month, day) pairs.

The unit is a keyword, so it is known when the query is planned; an unknown one is refused there.  Cost: O(n)
numpy per call.

>>> import numpy as np
>>> from ddflow.plan.expr import Col, Lit, evaluate
>>> from ddflow.plan.functions import typed
>>> day = 86_400_000_000
>>> e = typed("timestampdiff", (Lit("MONTH", "string"), Col(0, "timestamp"), Col(1, "timestamp")))
>>> jan31, feb29 = 18292 * day, 18321 * day  # 2020-01-31, 2020-02-29
>>> evaluate(e, [(np.array([jan31, jan31]), np.array([False, False])),
...              (np.array([feb29, feb29 + day]), np.array([False, False]))])[0].tolist()
[0, 1]
"""
from __future__ import annotations

import numpy as np

from ddflow.errors import SchemaError
from ddflow.plan import datetimes
from ddflow.plan.expr import Lit, filled
from ddflow.plan.functions import _US_PER_DAY, TypeMismatch, _names, add_months, civil, function

#: Microseconds in each unit that is a fixed length; the calendar units count months or days instead.
_FIXED = {"MICROSECOND": 1, "MILLISECOND": 1_000, "SECOND": 1_000_000, "MINUTE": 60_000_000,
          "HOUR": 3_600_000_000}
_ADD_DAYS = {"DAY": 1, "DAYOFYEAR": 1, "WEEK": 7}
_MONTHS = {"MONTH": 1, "QUARTER": 3, "YEAR": 12}
_DIFF_DAYS = {"DAY": 1, "WEEK": 7}
_ADD_UNITS = _FIXED.keys() | _ADD_DAYS.keys() | _MONTHS.keys()
_DIFF_UNITS = _FIXED.keys() | _DIFF_DAYS.keys() | _MONTHS.keys()
#: The timestamps ddflow holds: 0001-01-01 to 9999-12-31 23:59:59.999999.
_TS_RANGE = (-62135596800 * 1_000_000, 253402300800 * 1_000_000 - 1)


def _unit(args, name: str, units) -> str:
    u = args[0]
    if not isinstance(u, Lit) or not isinstance(u.value, str) or u.value.upper() not in units:
        raise TypeMismatch(f"{name}'s unit must be one of {', '.join(sorted(units))}, got ({_names(args)})")
    return u.value.upper()


def _overflow(q: int, unit: str):
    raise SchemaError(f"timestampadd: adding {q} {unit} to a timestamp is past the years 1 to 9999 that ddflow holds")


def _add_typer(args):
    if len(args) != 3 or args[1].type not in ("bigint", "null") or not datetimes.timelike(args[2].type):
        raise TypeMismatch(f"timestampadd(unit, bigint, timestamp), got ({_names(args)})")
    _unit(args, "timestampadd", _ADD_UNITS)
    return "timestamp"


@function("timestampadd", _add_typer)
def _timestampadd(args, e, n):
    unit = _unit(e.args, "timestampadd", _ADD_UNITS)
    _, (q, qn), (ts, tn) = args
    null = qn | tn
    q = np.where(null, 0, np.asarray(q, dtype=np.int64))
    ts = np.where(null, 0, datetimes.micros(ts, e.args[2].type))
    if unit in _MONTHS:
        months = q.astype(object) * _MONTHS[unit]
        far = np.flatnonzero(np.abs(months) > 12 * 10_000)  # past any year a timestamp holds, and past int64
        if len(far):
            _overflow(int(q[far[0]]), unit)
        days = np.floor_divide(ts, _US_PER_DAY)
        out = add_months(days, months.astype(np.int64)).astype(object) * _US_PER_DAY + (ts - days * _US_PER_DAY)
    else:
        out = ts.astype(object) + q.astype(object) * (_FIXED.get(unit) or _ADD_DAYS[unit] * _US_PER_DAY)
    lo, hi = _TS_RANGE
    for i, v in enumerate(out.tolist()):
        if not null[i] and not lo <= v <= hi:
            _overflow(int(q[i]), unit)
    return filled(np.where(null, 0, out).astype(np.int64), null, "timestamp"), null


def _diff_typer(args):
    if len(args) != 3 or not (datetimes.timelike(args[1].type) and datetimes.timelike(args[2].type)):
        raise TypeMismatch(f"timestampdiff(unit, timestamp, timestamp), got ({_names(args)})")
    _unit(args, "timestampdiff", _DIFF_UNITS)
    return "bigint"


def _toward_zero(a: np.ndarray, b: int) -> np.ndarray:
    return np.sign(a) * (np.abs(a) // b)


@function("timestampdiff", _diff_typer)
def _timestampdiff(args, e, n):
    unit = _unit(e.args, "timestampdiff", _DIFF_UNITS)
    _, (s, sn), (t, tn) = args
    null = sn | tn
    s = np.where(null, 0, datetimes.micros(s, e.args[1].type))
    t = np.where(null, 0, datetimes.micros(t, e.args[2].type))
    if unit in _FIXED:
        out = _toward_zero(t - s, _FIXED[unit])
    else:
        d1, d2 = np.floor_divide(s, _US_PER_DAY), np.floor_divide(t, _US_PER_DAY)
        t1, t2 = s - d1 * _US_PER_DAY, t - d2 * _US_PER_DAY
        d2 = d2 - ((d2 > d1) & (t2 < t1)) + ((d2 < d1) & (t2 > t1))  # java.time: the end date's time of day
        if unit in _DIFF_DAYS:
            out = _toward_zero(d2 - d1, _DIFF_DAYS[unit])
        else:
            (y1, m1, dd1), (y2, m2, dd2) = civil(d1), civil(d2)
            packed = ((y2 * 12 + m2) * 32 + dd2) - ((y1 * 12 + m1) * 32 + dd1)
            out = _toward_zero(_toward_zero(packed, 32), _MONTHS[unit])
    return filled(np.asarray(out, dtype=np.int64), null, "bigint"), null


def _second_typer(args):
    if len(args) != 1 or args[0].type not in ("timestamp", "null"):
        raise TypeMismatch(f"EXTRACT(SECOND) needs a timestamp, got ({_names(args)})")
    return "decimal(8,6)"


@function("second_of_minute", _second_typer)
def _second_of_minute(args, e, n):
    """EXTRACT(SECOND FROM ts): the seconds with their microseconds, DECIMAL(8,6) as in Spark (unscaled: the
    microseconds into the minute)."""
    (ts, tn), = args
    out = np.mod(np.asarray(ts, dtype=np.int64), 60_000_000)
    return filled(out, tn, "decimal(8,6)"), tn


__all__: list[str] = []
