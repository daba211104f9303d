"""Spark's datetime patterns (``date_format``, ``to_date``, ``to_timestamp``, ``unix_timestamp``,
``from_unixtime``) and the calendar functions (``last_day``, ``next_day``, ``months_between``, ``make_date``,
``unix_date`` and the epoch conversions), with Spark 4's rules in ANSI mode.

A pattern is Spark's (Java's ``DateTimeFormatter`` letters as Spark
allows them: ``G y M L d D Q q E a h K k H m s S z Z X x V O``, quoted
text, ``''`` for a quote) and must be a constant: it is compiled once, at
``flow.sql``, and a letter Spark does not allow, or an optional section
``[...]``, is refused there, by name.  Times are in UTC, the session time
zone ddflow runs Spark with (``spark.sql.session.timeZone``): ``z`` prints
``UTC`` and ``X`` prints ``Z``; an offset in a parsed text is honoured.

A text that does not match its pattern raises at run, as Spark's ANSI
mode does (``CANNOT_PARSE_TIMESTAMP``); so does ``make_date`` of a day that
does not exist.  Cost: O(rows x pattern length) in Python for formatting
and parsing (one compiled regular expression per pattern); the calendar
functions are O(rows) numpy.

>>> from ddflow.plan.expr import Col, Lit, evaluate
>>> from ddflow.plan.functions import typed
>>> e = typed("date_format", (Col(0, "date"), Lit("EEE, d MMM yyyy 'Q'q", "string")))
>>> evaluate(e, [(np.array([19860]), np.array([False]))])[0].tolist()
['Fri, 17 May 2024 Q2']
>>> e = typed("to_timestamp", (Col(0, "string"), Lit("dd/MM/yyyy HH:mm XXX", "string")))
>>> evaluate(e, [(np.array(["16/05/2024 10:30 +02:00"], dtype=object), np.array([False]))])[0].tolist()
[1715848200000000]
"""
from __future__ import annotations

import calendar
import datetime
import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ddflow.errors import SchemaError
from ddflow.plan.expr import Lit, filled
from ddflow.plan.functions import _US_PER_DAY, TypeMismatch, _days_of, _names, civil, function

_US_PER_S = 1_000_000
#: The days ddflow holds: Spark's years 1 to 9999, as days since the epoch.
DAY_RANGE = ((datetime.date(1, 1, 1) - datetime.date(1970, 1, 1)).days,
             (datetime.date(9999, 12, 31) - datetime.date(1970, 1, 1)).days)
_I64 = (-(1 << 63), (1 << 63) - 1)
_MONTHS = [calendar.month_name[i] for i in range(1, 13)]
_DAYS = [calendar.day_name[i] for i in range(7)]  # Monday first
#: What ``to_timestamp`` and ``unix_timestamp`` read when no pattern is given.
DEFAULT_PATTERN = "yyyy-MM-dd HH:mm:ss"
#: Letters Spark allows in a pattern (Spark 3+ refuses the week-based ``Y w W u e c`` and others).
_LETTERS = set("GyMLdDQqEahKkHmsSzZXxVO")
#: Letters a parse may read (the rest are formatting only: Spark cannot parse a day of the week ``E``).
_PARSE_LETTERS = set("yMLdDahKkHmsSXxZG")


@dataclass(frozen=True)
class Pattern:
    """A compiled pattern: fields ``(letter, count)`` and literal texts, in order."""

    text: str
    parts: tuple  # (letter, count) or str

    @property
    def regex(self) -> "re.Pattern":
        return _regex(self)


@lru_cache(maxsize=256)
def compile_pattern(text: str, parsing: bool = False) -> Pattern:
    """``text`` as fields and literals; a SchemaError naming what Spark does not allow.  O(len(text)).

    >>> compile_pattern("yyyy-MM-dd 'at' HH").parts
    (('y', 4), '-', ('M', 2), '-', ('d', 2), ' at ', ('H', 2))
    """
    parts: list = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "'":
            j = i + 1
            lit = []
            while True:
                if j >= n:
                    raise SchemaError(f"SQL: the datetime pattern {text!r} has an unclosed quote")
                if text[j] == "'":
                    if j + 1 < n and text[j + 1] == "'":
                        lit.append("'")
                        j += 2
                        continue
                    break
                lit.append(text[j])
                j += 1
            parts.append("'" if j == i + 1 else "".join(lit))
            i = j + 1
        elif c.isascii() and c.isalpha():
            j = i
            while j < n and text[j] == c:
                j += 1
            count = j - i
            if c not in _LETTERS:
                raise SchemaError(f"SQL: the datetime pattern letter {c!r} (in {text!r}) is not one Spark allows "
                                  "(week-based fields Y w W u e c are not supported by Spark 3+)")
            if parsing and c not in _PARSE_LETTERS:
                raise SchemaError(f"SQL: the datetime pattern letter {c!r} (in {text!r}) cannot be parsed here")
            if count > {"y": 19, "S": 9, "D": 3, "E": 5, "M": 5, "L": 5}.get(c, 4 if c in "zZXxQqO" else 2):
                raise SchemaError(f"SQL: the datetime pattern {c * count!r} (in {text!r}) has too many letters")
            parts.append((c, count))
            i = j
        elif c in "[]{}#":
            raise SchemaError(f"SQL: the datetime pattern {text!r}: {c!r} (optional sections and reserved "
                              "characters) is not supported")
        else:
            parts.append(c)
            i += 1
    merged: list = []
    for p in parts:
        if isinstance(p, str) and merged and isinstance(merged[-1], str):
            merged[-1] += p
        else:
            merged.append(p)
    return Pattern(text, tuple(merged))


# -- formatting --------------------------------------------------------------------------------------------

def _pad(v: int, width: int) -> str:
    return str(v).rjust(width, "0")


def _field(letter: str, count: int, y, mo, d, doy, dow, hh, mi, ss, us) -> str:
    if letter == "y":
        if count == 2:
            return _pad(y % 100, 2)
        s = _pad(y, count)
        return "+" + s if count >= 4 and len(str(y)) > count else s
    if letter in "ML":
        if count <= 2:
            return _pad(mo, count)
        name = _MONTHS[mo - 1]
        return {3: name[:3], 4: name, 5: name[0]}[count]
    if letter == "d":
        return _pad(d, count)
    if letter == "D":
        return _pad(doy, count)
    if letter in "Qq":
        q = (mo - 1) // 3 + 1
        return {1: str(q), 2: _pad(q, 2), 3: f"Q{q}", 4: f"{q}{('st', 'nd', 'rd', 'th')[q - 1]} quarter"}[count]
    if letter == "E":
        name = _DAYS[dow]
        return name if count == 4 else name[0] if count == 5 else name[:3]
    if letter == "a":
        return "AM" if hh < 12 else "PM"
    if letter in "hHkK":
        v = {"H": hh, "h": (hh % 12) or 12, "k": hh or 24, "K": hh % 12}[letter]
        return _pad(v, count)
    if letter == "m":
        return _pad(mi, count)
    if letter == "s":
        return _pad(ss, count)
    if letter == "S":
        return _pad(us, 6).ljust(9, "0")[:count]
    if letter == "G":
        return "AD" if count <= 3 else "Anno Domini" if count == 4 else "A"
    if letter == "z":
        return "Coordinated Universal Time" if count == 4 else "UTC"
    if letter == "V":
        return "UTC"
    if letter == "O":
        return "GMT"
    if letter == "Z":
        return {4: "GMT", 5: "Z"}.get(count, "+0000")
    if letter == "X":
        return "Z"
    return {1: "+00", 2: "+0000", 3: "+00:00", 4: "+0000"}[count]  # x


def format_micros(us: np.ndarray, null: np.ndarray, pattern: Pattern) -> np.ndarray:
    """Timestamps (µs since the epoch, UTC) as strings in ``pattern``; None where NULL.  O(n x parts)."""
    us = np.asarray(us, dtype=np.int64)
    days = np.floor_divide(us, _US_PER_DAY)
    tod = us - days * _US_PER_DAY
    y, mo, d = civil(days)
    start = (np.asarray(days).astype("datetime64[D]").astype("datetime64[Y]").astype("datetime64[D]")
             .astype(np.int64))
    doy = days - start + 1
    dow = (days + 3) % 7  # 1970-01-01 was a Thursday; Monday is 0
    hh, rest = np.divmod(tod, 3_600 * _US_PER_S)
    mi, rest = np.divmod(rest, 60 * _US_PER_S)
    ss, frac = np.divmod(rest, _US_PER_S)
    cols = [a.tolist() for a in (y, mo, d, doy, dow, hh, mi, ss, frac)]
    out = np.empty(len(us), dtype=object)
    for i in range(len(us)):
        if null[i]:
            continue
        row = [c[i] for c in cols]
        out[i] = "".join(p if isinstance(p, str) else _field(p[0], p[1], *row) for p in pattern.parts)
    return out


# -- parsing -----------------------------------------------------------------------------------------------

def _alternatives(names) -> str:
    return "(" + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)) + ")"


def _field_regex(letter: str, count: int) -> str:
    if letter == "y":
        return r"(\d{2})" if count == 2 else rf"(\d{{{count},9}})"
    if letter in "ML":
        if count >= 3:
            return _alternatives([m[:3] for m in _MONTHS] if count == 3 else _MONTHS)
        return r"(\d{1,2})" if count == 1 else r"(\d{2})"
    if letter == "D":
        return {1: r"(\d{1,3})", 2: r"(\d{2,3})", 3: r"(\d{3})"}[count]
    if letter in "dHhKkms":
        return r"(\d{1,2})" if count == 1 else r"(\d{2})"
    if letter == "S":
        return rf"(\d{{1,{count}}})"
    if letter == "E":
        return _alternatives(_DAYS if count == 4 else [n[:3] for n in _DAYS])
    if letter == "a":
        return "(AM|PM)"
    if letter == "G":
        return "(AD)"
    return r"(Z|[+-]\d{2}(?::?\d{2})?)"  # X x Z: an offset


@lru_cache(maxsize=256)
def _regex(pattern: Pattern) -> "re.Pattern":
    return re.compile("".join(re.escape(p) if isinstance(p, str) else _field_regex(*p) for p in pattern.parts),
                      re.IGNORECASE)


def _offset_us(text: str) -> int:
    if text.upper() == "Z":
        return 0
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    return sign * (int(digits[:2]) * 3600 + int(digits[2:4] or 0) * 60) * _US_PER_S


def parse_micros(text: str, pattern: Pattern, what: str) -> int:
    """``text`` read by ``pattern`` as µs since the epoch (UTC); a SchemaError (Spark's ANSI error) if it does not
    match or names a time that does not exist.  Fields the pattern lacks are 1970-01-01 00:00:00."""
    m = pattern.regex.fullmatch(text)
    if m is None:
        raise SchemaError(f"{what}: {text!r} does not match the pattern {pattern.text!r} "
                          "(Spark's ANSI mode raises; try_to_timestamp gives NULL)")
    y, mo, d, doy = 1970, 1, 1, None
    hh, mi, ss, us, pm, hour12, offset, dow = 0, 0, 0, 0, None, False, 0, None
    fields = [p for p in pattern.parts if not isinstance(p, str)]
    for (letter, count), got in zip(fields, m.groups()):
        if letter == "y":
            y = 2000 + int(got) if count == 2 else int(got)
        elif letter in "ML":
            mo = int(got) if count <= 2 else 1 + [n[:len(got)].lower() for n in _MONTHS].index(got.lower())
        elif letter == "d":
            d = int(got)
        elif letter == "D":
            doy = int(got)
        elif letter == "E":
            dow = [n[:len(got)].lower() for n in _DAYS].index(got.lower())
        elif letter == "a":
            pm = got.upper() == "PM"
        elif letter in "Hk":
            hh = int(got) % 24 if letter == "k" and int(got) == 24 else int(got)
        elif letter in "hK":
            hh, hour12 = int(got), letter
        elif letter == "m":
            mi = int(got)
        elif letter == "s":
            ss = int(got)
        elif letter == "S":
            us = int(got.ljust(6, "0")[:6])
        elif letter in "XxZ":
            offset = _offset_us(got)
    try:
        if hour12:
            if not ((1 <= hh <= 12) if hour12 == "h" else (0 <= hh <= 11)):
                raise ValueError(f"{hh} is not an hour of am/pm for {hour12!r}")
            hh = hh % 12 + (12 if pm else 0)
        if doy is not None:
            day = datetime.date(y, 1, 1) + datetime.timedelta(days=doy - 1)
            if day.year != y:
                raise ValueError("day of year")
        else:
            day = datetime.date(y, mo, d)
        if dow is not None and day.weekday() != dow:
            raise ValueError("day of week")
        t = datetime.datetime(day.year, day.month, day.day, hh, mi, ss, us)
    except ValueError as err:
        raise SchemaError(f"{what}: {text!r} in the pattern {pattern.text!r} is not a valid time ({err}; "
                          "Spark's ANSI mode raises)") from None
    delta = t - datetime.datetime(1970, 1, 1)
    return (delta.days * 86_400 + delta.seconds) * _US_PER_S + delta.microseconds - offset


# -- the functions -------------------------------------------------------------------------------------------

def _pattern_arg(args, i: int, name: str, parsing: bool) -> Pattern | None:
    """The constant pattern at ``args[i]`` (None: the NULL literal); refused here if not a constant string."""
    if i >= len(args):
        return compile_pattern(DEFAULT_PATTERN, parsing)
    a = args[i]
    if not isinstance(a, Lit) or a.type not in ("string", "null"):
        raise TypeMismatch(f"{name}'s pattern must be a constant string, got ({_names(args)})")
    return None if a.value is None else compile_pattern(str(a.value), parsing)


def micros(vals: np.ndarray, typ: str) -> np.ndarray:
    v = np.asarray(vals, dtype=np.int64)
    return v * _US_PER_DAY if typ == "date" else v


def timelike(t: str) -> bool:
    return t in ("date", "timestamp", "null")


def _all_null(n: int, typ: str):
    null = np.ones(n, dtype=bool)
    return filled(np.zeros(n, dtype=object if typ == "string" else np.int64), null, typ), null


def _date_format_typer(args):
    if len(args) != 2 or not timelike(args[0].type):
        raise TypeMismatch(f"date_format(timestamp, pattern), got ({_names(args)})")
    _pattern_arg(args, 1, "date_format", False)
    return "string"


@function("date_format", _date_format_typer)
def _date_format(args, e, n):
    (a, an), _ = args
    pattern = _pattern_arg(e.args, 1, "date_format", False)
    if pattern is None:
        return _all_null(n, "string")
    return format_micros(micros(a, e.args[0].type), an, pattern), an


def _from_unixtime_typer(args):
    if len(args) not in (1, 2) or args[0].type not in ("bigint", "null"):
        raise TypeMismatch(f"from_unixtime(seconds[, pattern]), got ({_names(args)})")
    _pattern_arg(args, 1, "from_unixtime", False)
    return "string"


@function("from_unixtime", _from_unixtime_typer)
def _from_unixtime(args, e, n):
    (a, an) = args[0]
    pattern = _pattern_arg(e.args, 1, "from_unixtime", False)
    if pattern is None:
        return _all_null(n, "string")
    secs = np.asarray(a, dtype=np.int64)
    bad = ~an & (np.abs(secs) > (1 << 63) // _US_PER_S - 1)
    if bad.any():
        raise SchemaError(f"from_unixtime: {int(secs[np.argmax(bad)])} seconds is past a timestamp's range")
    return format_micros(np.where(an, 0, secs) * _US_PER_S, an, pattern), an


def _parser(name: str, result: str, nulling: bool = False):
    """to_date / to_timestamp / unix_timestamp: a string read by its pattern, or a date or timestamp as is;
    ``nulling`` (try_to_date, try_to_timestamp): NULL where the text does not match, instead of the error."""
    def typer(args):
        if not 1 <= len(args) <= 2 or args[0].type not in ("string", "date", "timestamp", "null"):
            raise TypeMismatch(f"{name}(text[, pattern]), got ({_names(args)})")
        if len(args) == 1 and name != "unix_timestamp":
            raise TypeMismatch(f"{name} here takes a pattern (without one it is a CAST)")
        _pattern_arg(args, 1, name, True)
        return result

    def kernel(args, e, n):
        (a, an) = args[0]
        src = e.args[0].type
        pattern = _pattern_arg(e.args, 1, name, True)
        if pattern is None:
            return _all_null(n, result)
        if src in ("date", "timestamp"):
            us = micros(a, src)
        else:
            us = np.zeros(n, dtype=np.int64)
            an = np.array(an, dtype=bool)
            for i in np.flatnonzero(~an).tolist():
                try:
                    us[i] = parse_micros(a[i], pattern, name)
                except SchemaError:
                    if not nulling:
                        raise
                    an[i] = True
        if result == "date":
            out = np.floor_divide(us, _US_PER_DAY)
        elif result == "bigint":  # Spark divides toward zero here (unix_seconds floors)
            out = np.sign(us) * (np.abs(us) // _US_PER_S)
        else:
            out = us
        return filled(out, an, result), an
    return typer, kernel


for _name, _result in (("to_date", "date"), ("to_timestamp", "timestamp"), ("unix_timestamp", "bigint"),
                       ("try_to_date", "date"), ("try_to_timestamp", "timestamp")):
    _t, _k = _parser(_name, _result, nulling=_name.startswith("try_"))
    function(_name, _t)(_k)


def _one_date_typer(name: str, result: str, src: tuple = ("date", "timestamp", "null")):
    def typer(args):
        if len(args) != 1 or args[0].type not in src:
            raise TypeMismatch(f"{name}({' or '.join(t for t in src if t != 'null')}), got ({_names(args)})")
        return result
    return typer


def _month_ends(days: np.ndarray) -> np.ndarray:
    """The last day of each day's month: the first of the next month, less a day.  O(n)."""
    months = np.asarray(days, dtype=np.int64).astype("datetime64[D]").astype("datetime64[M]")
    return (months + 1).astype("datetime64[D]").astype(np.int64) - 1


@function("last_day", _one_date_typer("last_day", "date"))
def _last_day(args, e, n):
    ((a, an),) = args
    return filled(_month_ends(_days_of(a, e.args[0].type)), an, "date"), an


_WEEKDAYS = {k: i for i, name in enumerate(_DAYS) for k in (name[:2].lower(), name[:3].lower(), name.lower())}


def _next_day_typer(args):
    if len(args) != 2 or args[0].type not in ("date", "timestamp", "null") or args[1].type not in ("string", "null"):
        raise TypeMismatch(f"next_day(date, day of week), got ({_names(args)})")
    if not isinstance(args[1], Lit):
        raise TypeMismatch("next_day's day of week must be a constant")
    if args[1].value is not None and str(args[1].value).strip().lower() not in _WEEKDAYS:
        raise TypeMismatch(f"next_day: {args[1].value!r} is not a day of the week (Spark's ANSI mode raises "
                           "ILLEGAL_DAY_OF_WEEK; 'MO', 'Mon' or 'Monday')")
    return "date"


@function("next_day", _next_day_typer)
def _next_day(args, e, n):
    """The first date after ``d`` that falls on the given day of the week."""
    (a, an), _ = args
    if e.args[1].value is None:
        return _all_null(n, "date")
    want = _WEEKDAYS[str(e.args[1].value).strip().lower()]
    days = _days_of(a, e.args[0].type)
    dow = (days + 3) % 7
    ahead = (want - dow - 1) % 7 + 1
    return filled(days + ahead, an, "date"), an


def _months_between_typer(args):
    if len(args) not in (2, 3) or not all(timelike(a.type) for a in args[:2]) or \
            (len(args) == 3 and (args[2].type not in ("boolean", "null") or not isinstance(args[2], Lit))):
        raise TypeMismatch(f"months_between(timestamp, timestamp[, a constant roundOff]), got ({_names(args)})")
    return "double"


@function("months_between", _months_between_typer)
def _months_between(args, e, n):
    """Whole months when the days of month agree or both are month ends; else the day and time difference over
    31 days, rounded to 8 places unless ``roundOff`` is false (Spark's DateTimeUtils.monthsBetween)."""
    (a, an), (b, bn) = args[0], args[1]
    round_off = len(e.args) < 3 or e.args[2].value is not False
    null = an | bn
    ua, ub = micros(a, e.args[0].type), micros(b, e.args[1].type)
    da, db = np.floor_divide(ua, _US_PER_DAY), np.floor_divide(ub, _US_PER_DAY)
    ya, ma, dda = civil(da)
    yb, mb, ddb = civil(db)
    month_diff = ((ya - yb) * 12 + ma - mb).astype(np.float64)
    whole = (dda == ddb) | ((_month_ends(da) == da) & (_month_ends(db) == db))
    secs_a = (ua - da * _US_PER_DAY) // _US_PER_S
    secs_b = (ub - db * _US_PER_DAY) // _US_PER_S
    secs = (dda - ddb) * 86_400 + secs_a - secs_b
    diff = month_diff + secs / float(31 * 86_400)
    if round_off:
        diff = np.floor(diff * 1e8 + 0.5) / 1e8  # Java's Math.round, then back to a double
    out = np.where(whole, month_diff, diff)
    return filled(out, null, "double"), null


def _make_date_typer(args):
    if len(args) != 3 or any(a.type not in ("bigint", "null") for a in args):
        raise TypeMismatch(f"make_date(year, month, day) of bigints, got ({_names(args)})")
    return "date"


@function("make_date", _make_date_typer)
def _make_date(args, e, n):
    """The date of year, month, day; a day that does not exist raises (ANSI)."""
    null = args[0][1] | args[1][1] | args[2][1]
    out = np.zeros(n, dtype=np.int64)
    epoch = datetime.date(1970, 1, 1)
    for i in np.flatnonzero(~null).tolist():
        y, m, d = (int(args[k][0][i]) for k in range(3))
        try:
            out[i] = (datetime.date(y, m, d) - epoch).days
        except (ValueError, OverflowError):  # also past the years 1 to 9999 (Spark's are wider)
            raise SchemaError(f"make_date({y}, {m}, {d}): not a date (Spark's ANSI mode raises; "
                              "try_make_date gives NULL)") from None
    return out, null


def _epoch_in(name: str, src: str, scale: int):
    """unix_date / unix_seconds / unix_millis / unix_micros: a date or timestamp as a count since the epoch."""
    @function(name, _one_date_typer(name, "bigint", (src, "null")))
    def kernel(args, e, n):
        ((a, an),) = args
        v = np.asarray(a, dtype=np.int64)
        return filled(v if scale == 1 else np.floor_divide(v, scale), an, "bigint"), an
    return kernel


def _epoch_out(name: str, dst: str, scale: int):
    """date_from_unix_date / timestamp_seconds / _millis / _micros: a count since the epoch as a date or time."""
    lo, hi = DAY_RANGE[0] * (_US_PER_DAY // scale if dst == "timestamp" else 1), \
        (DAY_RANGE[1] + 1) * (_US_PER_DAY // scale if dst == "timestamp" else 1) - 1

    @function(name, _one_date_typer(name, dst, ("bigint", "null")))
    def kernel(args, e, n):
        ((a, an),) = args
        v = np.asarray(a, dtype=np.int64)
        bad = ~an & ((v < lo) | (v > hi))
        if bad.any():
            raise SchemaError(f"{name}({int(v[np.argmax(bad)])}): past the years 1 to 9999 that ddflow holds")
        return filled(np.where(an, 0, v) * scale, an, dst), an
    return kernel


_epoch_in("unix_date", "date", 1)
_epoch_in("unix_seconds", "timestamp", _US_PER_S)
_epoch_in("unix_millis", "timestamp", 1_000)
_epoch_in("unix_micros", "timestamp", 1)
_epoch_out("date_from_unix_date", "date", 1)
_epoch_out("timestamp_seconds", "timestamp", _US_PER_S)
_epoch_out("timestamp_millis", "timestamp", 1_000)
_epoch_out("timestamp_micros", "timestamp", 1)

#: The functions of this module, by name: the planner calls them with their arguments as written.


_DAY_NAMES = np.array(["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"], dtype=object)
_MONTH_NAMES = np.array(["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"],
                        dtype=object)


def _calendar_typer(name: str, result: str):
    def typer(args):
        if len(args) != 1 or not timelike(args[0].type):
            raise TypeMismatch(f"{name} takes a date or timestamp, got ({_names(args)})")
        return result
    return typer


def _calendar_kernel(part: str):
    """weekday (0 = Monday), dayofweek_iso (EXTRACT's DAYOFWEEK_ISO: 1 = Monday), dayname (``'Mon'``) and
    monthname (``'Jan'``) of a date or timestamp.  O(n)."""
    def kernel(args, e, n):
        (v, vn), = args
        days = np.floor_divide(micros(np.where(vn, 0, v), e.args[0].type), _US_PER_DAY)
        if part == "monthname":
            return filled(_MONTH_NAMES[civil(days)[1] - 1], vn, "string"), vn
        wd = (days + 3) % 7  # 1970-01-01 was a Thursday
        if part == "dayname":
            return filled(_DAY_NAMES[wd], vn, "string"), vn
        return filled(wd + (part == "dayofweek_iso"), vn, "bigint"), vn
    return kernel


for _part, _result in (("weekday", "bigint"), ("dayofweek_iso", "bigint"), ("dayname", "string"),
                       ("monthname", "string")):
    function(_part, _calendar_typer(_part, _result))(_calendar_kernel(_part))


NAMES = ("date_format", "from_unixtime", "to_date", "to_timestamp", "unix_timestamp", "last_day", "next_day",
         "months_between", "make_date", "unix_date", "unix_seconds", "unix_millis", "unix_micros",
         "date_from_unix_date", "timestamp_seconds", "timestamp_millis", "timestamp_micros", "try_to_date",
         "try_to_timestamp")

__all__ = ["NAMES", "Pattern", "compile_pattern", "format_micros", "parse_micros"]
