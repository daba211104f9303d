"""Spark's time-zone functions: ``from_utc_timestamp``, ``to_utc_timestamp`` and ``convert_timezone``.

ddflow's timestamps are wall times in UTC, Spark's session time zone as ddflow's SQL reads it.  A zone is read as
Spark reads it (``DateTimeUtils.getZoneId``, then ``java.time.ZoneId.of`` with its short IDs): a region of the
tz database (``'America/New_York'``), an offset (``'+05:30'``, ``'-8'``, ``'Z'``, ``'UTC+8'``, ``'GMT-03:00'``,
Spark's ``'+8:00'``), ``'UTC'``, ``'GMT'``, or one of Java's three-letter IDs (``'PST'``: America/Los_Angeles).
A constant zone Spark cannot read is refused when the query is planned; one in a column raises when it is met,
as Spark's INVALID_TIMEZONE does.

- ``from_utc_timestamp(ts, zone)``: the wall time in ``zone`` at the UTC instant ``ts``.
- ``to_utc_timestamp(ts, zone)``: the UTC instant of the wall time ``ts`` in ``zone``.  A wall time in a gap
  (clocks moved forward) is read at the offset before it, one in an overlap at the earlier offset: the same
  instants as ``java.time``'s ``ZonedDateTime.ofLocal``.
- ``convert_timezone([source,] target, ts)``: the wall time ``ts`` in ``source`` (UTC when omitted) as a
  wall time in ``target``.

Cost: O(n) numpy plus one Python ``datetime`` conversion per distinct (value, zone) pair; zones are read once.

>>> import numpy as np
>>> from ddflow.plan.expr import Col, Lit, evaluate
>>> from ddflow.plan.functions import typed
>>> e = typed("from_utc_timestamp", (Col(0, "timestamp"), Lit("Asia/Kolkata", "string")))
>>> evaluate(e, [(np.array([0]), np.array([False]))])[0].tolist()  # 1970-01-01 05:30 in Kolkata
[19800000000]
"""
from __future__ import annotations

import datetime
import re
import zoneinfo
from functools import lru_cache

import numpy as np

from ddflow.errors import SchemaError
from ddflow.plan import datetimes
from ddflow.plan.expr import Lit, filled
from ddflow.plan.functions import TypeMismatch, _names, function

#: java.time's ZoneId.SHORT_IDS, which Spark passes to ZoneId.of.
_SHORT_IDS = {
    "ACT": "Australia/Darwin", "AET": "Australia/Sydney", "AGT": "America/Argentina/Buenos_Aires",
    "ART": "Africa/Cairo", "AST": "America/Anchorage", "BET": "America/Sao_Paulo", "BST": "Asia/Dhaka",
    "CAT": "Africa/Harare", "CNT": "America/St_Johns", "CST": "America/Chicago", "CTT": "Asia/Shanghai",
    "EAT": "Africa/Addis_Ababa", "ECT": "Europe/Paris", "IET": "America/Indiana/Indianapolis", "IST": "Asia/Kolkata",
    "JST": "Asia/Tokyo", "MIT": "Pacific/Apia", "NET": "Asia/Yerevan", "NST": "Pacific/Auckland",
    "PLT": "Asia/Karachi", "PNT": "America/Phoenix", "PRT": "America/Puerto_Rico", "PST": "America/Los_Angeles",
    "SST": "Pacific/Guadalcanal", "VST": "Asia/Ho_Chi_Minh", "EST": "-05:00", "MST": "-07:00", "HST": "-10:00"}
#: ZoneOffset.of's forms: +h, +hh, +hh:mm, +hhmm, +hh:mm:ss, +hhmmss.
_OFFSET = re.compile(r"([+-])(\d{1,2})(?:(:?)(\d\d)(?:\3(\d\d))?)?")
_REGION = re.compile(r"[A-Za-z][A-Za-z0-9~/._+-]+")
_EPOCH = datetime.datetime(1970, 1, 1)
_UTC = datetime.timezone.utc
#: The wall times ddflow holds: the years 1 to 9999.
_RANGE = (-62135596800 * 1_000_000, 253402300800 * 1_000_000 - 1)


def _offset(text: str) -> datetime.tzinfo | None:
    if text == "Z":
        return _UTC
    m = _OFFSET.fullmatch(text)
    if m is None or (len(m.group(2)) == 1 and m.group(4) is not None):
        return None
    h, mi, s = int(m.group(2)), int(m.group(4) or 0), int(m.group(5) or 0)
    if h > 18 or mi > 59 or s > 59 or (h == 18 and (mi or s)):
        return None
    sign = -1 if m.group(1) == "-" else 1
    return datetime.timezone(sign * datetime.timedelta(hours=h, minutes=mi, seconds=s))


@lru_cache(maxsize=1024)
def zone(text: str) -> datetime.tzinfo | None:
    """The zone Spark reads ``text`` as, or None where Spark raises INVALID_TIMEZONE.

    >>> zone("+8:00"), zone("UTC-3"), zone("PST"), zone("Mars/Base")
    (datetime.timezone(datetime.timedelta(seconds=28800)), datetime.timezone(datetime.timedelta(days=-1, seconds=75600)), zoneinfo.ZoneInfo(key='America/Los_Angeles'), None)
    """
    t = re.sub(r"([+-])(\d):", r"\g<1>0\2:", text, count=1)  # Spark's getZoneId: one-digit hours and minutes
    t = re.sub(r"([+-])(\d\d):(\d)$", r"\1\2:0\3", t, count=1)
    t = _SHORT_IDS.get(t, t)
    if len(t) <= 1 or t[0] in "+-":
        return _offset(t)
    for prefix in ("UTC", "GMT", "UT"):
        if t.startswith(prefix):
            rest = t[len(prefix):]
            if not rest:
                return _UTC
            if rest[0] in "+-":
                return _offset(rest)
            break
    if not _REGION.fullmatch(t):
        return None
    try:
        return zoneinfo.ZoneInfo(t)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        return None


def _zone_of(text: str, name: str) -> datetime.tzinfo:
    z = zone(text)
    if z is None:
        raise SchemaError(f"{name}: the time zone {text!r} is not one Spark reads (a region such as "
                          "'America/Los_Angeles', or an offset such as '+05:30'; Spark's INVALID_TIMEZONE)")
    return z


def _wall_to_utc(us: int, z: datetime.tzinfo) -> int:
    """The UTC instant of wall time ``us`` in ``z`` (PEP 495's fold=0: java.time's choice in gaps and overlaps)."""
    local = _EPOCH + datetime.timedelta(microseconds=us)
    return us - _total_us(local.replace(tzinfo=z).utcoffset())


def _utc_to_wall(us: int, z: datetime.tzinfo) -> int:
    """The wall time in ``z`` at the UTC instant ``us``."""
    instant = (_EPOCH + datetime.timedelta(microseconds=us)).replace(tzinfo=_UTC)
    return us + _total_us(instant.astimezone(z).utcoffset())


def _total_us(d: datetime.timedelta) -> int:
    return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds


#: Each function's arguments: where its timestamp is, and its conversions (each with the argument of its zone).
_FORMS = {"from_utc_timestamp": (0, [(_utc_to_wall, 1)]), "to_utc_timestamp": (0, [(_wall_to_utc, 1)]),
          "convert_timezone": (2, [(_wall_to_utc, 0), (_utc_to_wall, 1)])}


def _typer(name: str):
    at, steps = _FORMS[name]

    def typer(args):
        zones = [args[k] for _, k in steps if k < len(args)]
        if len(args) != len(steps) + 1 or not all(a.type in ("string", "null") for a in zones) \
                or args[at].type not in ("date", "timestamp", "null"):
            want = "(source zone, target zone, timestamp)" if name == "convert_timezone" else "(timestamp, zone)"
            raise TypeMismatch(f"{name}{want}, got ({_names(args)})")
        for a in zones:
            if isinstance(a, Lit) and a.value is not None and zone(str(a.value)) is None:
                raise TypeMismatch(f"{name}: the time zone {a.value!r} is not one Spark reads (a region such as "
                                   "'America/Los_Angeles', or an offset such as '+05:30')")
        return "timestamp"
    return typer


def _kernel(name: str):
    """Each distinct (timestamp, zones) row converted once, in Python's datetime."""
    at, steps = _FORMS[name]
    lo, hi = _RANGE

    def kernel(args, e, n):
        null = np.zeros(n, dtype=bool)
        for _, an in args:
            null = null | an
        ts = np.where(null, 0, datetimes.micros(args[at][0], e.args[at].type))
        zones = [args[k][0] for _, k in steps]
        out = np.zeros(n, dtype=np.int64)
        memo: dict = {}
        for i in np.flatnonzero(~null).tolist():
            key = (int(ts[i]),) + tuple(str(z[i]) for z in zones)
            got = memo.get(key)
            if got is None:
                got = key[0]
                try:
                    for j, (convert, _) in enumerate(steps):
                        got = convert(got, _zone_of(key[1 + j], name))
                except OverflowError:
                    got = hi + 1
                if not lo <= got <= hi:
                    raise SchemaError(f"{name}: the result for {_EPOCH + datetime.timedelta(microseconds=key[0])} "
                                      "is past the years 1 to 9999 that ddflow holds")
                memo[key] = got
            out[i] = got
        return filled(out, null, "timestamp"), null
    return kernel


for _name in _FORMS:
    function(_name, _typer(_name))(_kernel(_name))

__all__ = ["zone"]
