"""Spark's string functions past the basic ones of :mod:`ddflow.plan.functions`: padding, repetition, case,
translation, Java regular expressions, edit distance, ``format_string``, character codes, byte lengths,
``substring_index``, ``btrim``, ``overlay``, ``mask``, ``elt`` (hashes and encodings: :mod:`ddflow.plan.encodings`;
``get_json_object``: :mod:`ddflow.plan.json_path`).

Each is registered in the one function table (:func:`ddflow.plan.functions.function`), typed and evaluated there;
:mod:`ddflow.sql.library` maps Spark SQL's names to them.  Semantics are Spark 4's: a NULL argument gives NULL,
positions and lengths count characters (code points), not bytes.  Arguments that Spark evaluates once per query
(a pattern, a format, a translation table) must be constants here: a column there is refused when the query is
planned (the typer raises), never when it runs.

Cost: O(total characters) per call, one pass in Python over the column's distinct strings (Arrow has no
kernel for these with Spark's rules); regexp_replace compiles its pattern once per call.

>>> from ddflow.plan.expr import Col, Lit, evaluate
>>> from ddflow.plan.functions import typed
>>> e = typed("lpad", (Col(0, "string"), Lit(5, "bigint"), Lit("xy", "string")))
>>> evaluate(e, [(np.array(["abc", "abcdefg", None], dtype=object), np.array([False, False, True]))])[0].tolist()
['xyabc', 'abcde', None]
"""
from __future__ import annotations

import decimal
import re
from typing import Callable, Sequence

import numpy as np

from ddflow.base.schema import decimal_ps, from_days, from_unscaled, is_decimal
from ddflow.errors import SchemaError
from ddflow.plan.expr import Column, Lit, filled, null_values
from ddflow.plan.functions import TypeMismatch, _double_text, _names, _ts_text, function
from ddflow.plan import java_regex  # read when called: java_regex imports functions, which imports this module


_INT = (-(1 << 31), (1 << 31) - 1)


def _kinds(kinds: str, result: str, name: str, constant: Sequence[int] = (), ints: Sequence[int] = ()) -> Callable:
    """A typer: arguments of kinds ``s`` (string) and ``i`` (bigint), a trailing ``?`` making the last optional;
    ``constant``: the places that must be literals; ``ints``: those Spark casts to int (a constant past it is
    refused here)."""
    full = kinds.rstrip("?")
    need = full[:-1] if kinds.endswith("?") else full

    def typer(args):
        if not len(need) <= len(args) <= len(full):
            count = f"{len(need)} or {len(full)}" if len(need) != len(full) else f"{len(full)}"
            raise TypeMismatch(f"{name} takes {count} arguments, got {len(args)}")
        for a, k in zip(args, full):
            want = "string" if k == "s" else "bigint"
            if a.type not in (want, "null"):
                raise TypeMismatch(f"{name} needs ({', '.join('string' if k == 's' else 'bigint' for k in full)}), "
                                   f"got ({_names(args)})")
        for i in constant:
            if i < len(args) and not isinstance(args[i], Lit):
                raise TypeMismatch(f"{name}'s argument {i + 1} must be a constant")
        for i in ints:
            if i < len(args) and isinstance(args[i], Lit) and args[i].value is not None \
                    and not _INT[0] <= args[i].value <= _INT[1]:
                raise TypeMismatch(f"{name}'s argument {i + 1}, {args[i].value}, is past int (Spark's CAST_OVERFLOW)")
        return result
    return typer


def _ints(args: list[Column], places: Sequence[int], name: str) -> None:
    """Spark casts these bigint arguments to int: a value past int raises (CAST_OVERFLOW), here too."""
    for i in places:
        if i < len(args):
            v, vn = args[i]
            live = np.asarray(v, dtype=np.int64)[~np.asarray(vn, dtype=bool)]
            bad = live[(live < _INT[0]) | (live > _INT[1])]
            if len(bad):
                raise SchemaError(f"{name}: {int(bad[0])} is past int (Spark casts it to int and raises CAST_OVERFLOW)")


def _rowwise(fn: Callable, typ: str, name: str = "", ints: Sequence[int] = ()) -> Callable:
    """A kernel applying ``fn`` to each row's argument values (NULL if any is NULL, or where ``fn`` answers None:
    sha2 of an unknown length, regexp_substr without a match), memoized per distinct row; ``ints``: the places
    of arguments Spark takes as int."""
    def kernel(args: list[Column], e, n: int) -> Column:
        _ints(args, ints, name)
        null = np.zeros(n, dtype=bool)
        for _, vn in args:
            null |= np.asarray(vn, dtype=bool)
        cols = [np.asarray(v).tolist() for v, _ in args]
        out = null_values(typ, n) if typ != "string" else np.empty(n, dtype=object)
        memo: dict = {}
        unanswered = []
        for i in np.flatnonzero(~null).tolist():
            key = tuple(c[i] for c in cols)
            if key not in memo:
                memo[key] = fn(*key)
            got = memo[key]
            if got is None:
                unanswered.append(i)
            else:
                out[i] = got
        null[unanswered] = True
        return filled(out, null, typ), null
    return kernel


def _reg(name: str, kinds: str, result: str, constant: Sequence[int] = (), int32: bool = True):
    ints = [i for i, k in enumerate(kinds.rstrip("?")) if k == "i"] if int32 else []

    def register(fn):
        function(name, _kinds(kinds, result, name, constant, ints))(_rowwise(fn, result, name, ints))
        return fn
    return register


# -- padding, repetition, slicing ----------------------------------------------------------------------------

def _pad(left: bool) -> Callable:
    def pad(s: str, length: int, fill: str = " ") -> str:
        """Spark's UTF8String.lpad/rpad: a length below the string's truncates it; an empty pad never pads."""
        length = max(length, 0)
        spaces = length - len(s)
        if spaces <= 0 or fill == "":
            return s[:length]
        reps = fill * (spaces // len(fill) + 1)
        return reps[:spaces] + s if left else s + reps[:spaces]
    return pad


_reg("lpad", "sis?", "string")(_pad(True))
_reg("rpad", "sis?", "string")(_pad(False))
@_reg("repeat", "si", "string")
def _repeat(s: str, k: int) -> str:
    if k > 0 and len(s.encode()) * k > _INT[1]:  # Spark fails too: a string is at most 2 GiB
        raise SchemaError(f"repeat: {k} copies of a {len(s)}-character string pass 2 GiB")
    return s * max(k, 0)
_reg("left", "si", "string")(lambda s, k: s[:k] if k > 0 else "")
_reg("right", "si", "string")(lambda s, k: s[-k:] if k > 0 else "")


# -- case and characters -------------------------------------------------------------------------------------

@_reg("initcap", "s", "string")
def _initcap(s: str) -> str:
    """Spark's initcap: lower case, then the first character and each after a space title-cased (fully: ß is Ss)."""
    low = s.lower()
    return "".join(c.title() if i == 0 or low[i - 1] == " " else c for i, c in enumerate(low))


@_reg("translate", "sss", "string", constant=(1, 2))
def _translate(s: str, src: str, dst: str) -> str:
    """Each character of ``src`` becomes the one at its place in ``dst``, or goes where ``dst`` is shorter."""
    table: dict[int, str | None] = {}
    for i, c in enumerate(src):
        table.setdefault(ord(c), dst[i] if i < len(dst) else None)
    return s.translate(table)


_reg("ascii", "s", "bigint")(lambda s: ord(s[0]) if s else 0)


@_reg("chr", "i", "string", int32=False)
def _chr(k: int) -> str:
    """Spark's chr: '' below 0, else the character of ``k mod 256`` (Latin-1)."""
    return "" if k < 0 else chr(k & 0xFF)


@_reg("levenshtein", "ssi?", "bigint", constant=(2,))
def _levenshtein(a: str, b: str, threshold: int | None = None) -> int:
    """The edit distance by characters; -1 past ``threshold`` (Spark 4's third argument)."""
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    d = prev[-1]
    return -1 if threshold is not None and d > threshold else d


def _locate(sub: str, s: str, pos: int = 1) -> int:
    """Spark's StringLocate: the 1-based place of ``sub`` in ``s`` from ``pos``; 0 if none or ``pos`` < 1."""
    if pos < 1:
        return 0
    if sub == "":
        return 1  # Spark's UTF8String.indexOf of an empty string is 0, from any start
    return s.find(sub, pos - 1) + 1


_reg("instr", "ss", "bigint")(lambda s, sub: _locate(sub, s))


@function("locate", _kinds("ssi?", "bigint", "locate", ints=[2]))
def _locate_kernel(args, e, n):
    """locate(substr, str[, pos]): NULL if substr or str is NULL, but 0 where pos is NULL (Spark, after Hive)."""
    vals, null = _rowwise(_locate, "bigint", "locate", [2])(args, e, n)
    if len(args) > 2:
        no_pos = np.asarray(args[2][1], dtype=bool)
        null = null & ~no_pos
        vals = np.where(no_pos, 0, vals)
    return vals, null


# -- regexp_replace --------------------------------------------------------------------------------------------

def _regexp_replace_typer(args):
    _kinds("sssi?", "string", "regexp_replace", constant=(1, 2, 3))(args)
    if args[1].value is not None:
        rx = java_regex.compiled(args[1].value)  # Java-only syntax refused here, at planning
        if args[2].value is not None:
            java_regex.python_replacement(args[2].value, rx.groups)
    if len(args) > 3 and args[3].value is not None and args[3].value < 1:
        raise TypeMismatch(f"regexp_replace's position must be at least 1, got {args[3].value}")
    return "string"


@function("regexp_replace", _regexp_replace_typer)
def _regexp_replace(args, e, n):
    """Spark's regexp_replace(str, regexp, rep[, pos]): every match from ``pos`` replaced (Java's ``$1`` groups)."""
    pat, rep = e.args[1].value, e.args[2].value
    pos = e.args[3].value if len(e.args) > 3 else 1
    if pat is None or rep is None or pos is None:
        return null_values("string", n), np.ones(n, dtype=bool)
    rx = java_regex.compiled(pat)
    sub = java_regex.python_replacement(rep, rx.groups)

    def replace(s, *_):
        return s[:pos - 1] + rx.sub(sub, s[pos - 1:]) if pos == 1 or pos - 1 < len(s) else s
    return _rowwise(replace, "string")(args[:1], e, n)


# -- format_string ---------------------------------------------------------------------------------------------

def _format_specs(fmt: str) -> list[tuple[str, int | None]]:
    """The conversions of a Java format string ddflow renders (%s %d %f %.Nf %%); others refused."""
    specs: list[tuple[str, int | None]] = []
    i = 0
    while True:
        j = fmt.find("%", i)
        if j < 0:
            return specs
        m = re.compile(r"%(?:\.(\d+))?([sdf%])").match(fmt, j)
        if m is None or (m.group(1) is not None and m.group(2) != "f"):
            bad = re.compile(r"%[-#+ 0,(<]*\d*(?:\.\d+)?[a-zA-Z%]?").match(fmt, j).group(0)
            raise TypeMismatch(f"format_string's conversion {bad!r} (ddflow renders %s, %d, %f, %.Nf and %%)")
        if m.group(2) != "%":
            specs.append((m.group(2), int(m.group(1)) if m.group(1) is not None else None))
        i = m.end()


def _format_typer(args):
    if not args or args[0].type not in ("string", "null"):
        raise TypeMismatch(f"format_string(format, ...) needs a string format, got ({_names(args)})")
    if not isinstance(args[0], Lit):
        raise TypeMismatch("format_string's format must be a constant")
    if args[0].value is None:
        return "string"
    specs = _format_specs(args[0].value)
    if len(specs) > len(args) - 1:
        raise TypeMismatch(f"format_string's format has {len(specs)} conversions for {len(args) - 1} arguments")
    for (conv, _), a in zip(specs, args[1:]):
        if conv == "d" and a.type not in ("bigint", "null"):
            raise TypeMismatch(f"format_string's %d needs a bigint, got {a.type}")
        if conv == "f" and a.type not in ("double", "null"):  # Spark raises for a decimal too
            raise TypeMismatch(f"format_string's %f needs a double, got {a.type}")
    return "string"


def _as_text(v, typ: str) -> str:
    """A value as Java's String.valueOf prints it for Spark (%s)."""
    if typ == "double":
        return _double_text(v)
    if typ == "boolean":
        return "true" if v else "false"
    if is_decimal(typ):
        return str(from_unscaled(int(v), decimal_ps(typ)[1]))
    if typ == "date":
        return from_days(int(v)).isoformat()
    if typ == "timestamp":
        return _ts_text(int(v))
    return str(v)


def _fixed(v: float, places: int) -> str:
    """Java's %.Nf: the digits of the double's shortest repr rounded HALF_UP (0.15 is 0.2 at one place)."""
    if v != v or v in (float("inf"), float("-inf")):
        return "NaN" if v != v else ("Infinity" if v > 0 else "-Infinity")
    d = decimal.Decimal(repr(float(v)))
    q = d.quantize(decimal.Decimal(1).scaleb(-places), rounding=decimal.ROUND_HALF_UP,
                   context=decimal.Context(prec=400))
    return format(q, "f")


@function("format_string", _format_typer)
def _format_string(args, e, n):
    """Spark's format_string / printf for %s %d %f %.Nf %%: a NULL argument prints ``null``; a NULL format, NULL."""
    fmt = e.args[0].value
    if fmt is None:
        return null_values("string", n), np.ones(n, dtype=bool)
    specs = _format_specs(fmt)
    pieces = re.split(r"%(?:\.\d+)?[sdf%]", fmt)
    cols = [(np.asarray(v).tolist(), np.asarray(vn, dtype=bool).tolist(), x.type)
            for (v, vn), x in zip(args[1:], e.args[1:])]
    convs = re.findall(r"%(?:\.\d+)?[sdf%]", fmt)
    out = np.empty(n, dtype=object)
    for i in range(n):
        parts, k = [pieces[0]], 0
        for conv, piece in zip(convs, pieces[1:]):
            if conv == "%%":
                parts.append("%")
            else:
                (kind, places), (vals, nulls, typ) = specs[k], cols[k]
                k += 1
                v = vals[i]
                if nulls[i]:  # Java prints "null", cut to a %.Nf's precision ("nu" for %.2f)
                    parts.append("null" if places is None else "null"[:places])
                elif kind == "s":
                    parts.append(_as_text(v, typ))
                elif kind == "d":
                    parts.append(str(int(v)))
                else:
                    parts.append(_fixed(v, 6 if places is None else places))
            parts.append(piece)
        out[i] = "".join(parts)
    return out, np.zeros(n, dtype=bool)



# -- lengths, delimiters, trimming -----------------------------------------------------------------------------

_reg("octet_length", "s", "bigint")(lambda s: len(s.encode("utf-8", "surrogatepass")))
_reg("bit_length", "s", "bigint")(lambda s: 8 * len(s.encode("utf-8", "surrogatepass")))
_reg("space", "i", "string")(lambda k: " " * max(k, 0))


@_reg("substring_index", "ssi", "string")
def _substring_index(s: str, delim: str, count: int) -> str:
    """Spark's substring_index: left of the ``count``-th ``delim`` (from the right when ``count`` < 0)."""
    if count == 0 or delim == "":
        return ""
    parts = s.split(delim)
    if abs(count) >= len(parts):
        return s
    return delim.join(parts[:count]) if count > 0 else delim.join(parts[count:])


@_reg("btrim", "ss?", "string")
def _btrim(s: str, chars: str = " ") -> str:
    """Both ends trimmed of the characters in ``chars`` (spaces only by default, as Spark's trim)."""
    return s.strip(chars) if chars else s


def _substring_sql(s: str, pos: int, length: int) -> str:
    """Spark's UTF8String.substringSQL: 1-based, 0 is the first character, a negative position counts from the
    end; code points."""
    start = pos - 1 if pos > 0 else len(s) + pos if pos < 0 else 0
    end = start + length
    start = max(start, 0)
    return "" if start >= end else s[start:end]


@_reg("overlay", "ssii?", "string")
def _overlay(s: str, replace: str, pos: int, length: int = -1) -> str:
    """OVERLAY(s PLACING replace FROM pos [FOR length]): ``s`` with ``length`` characters from ``pos`` (the
    length of ``replace`` when omitted or negative) replaced by ``replace``, as Spark's Overlay."""
    length = length if length >= 0 else len(replace)
    return _substring_sql(s, 1, pos - 1) + replace + _substring_sql(s, pos + length, (1 << 31) - 1)


_reg("trim_leading", "ss", "string")(lambda s, chars: s.lstrip(chars) if chars else s)  # ltrim(chars, s)
_reg("trim_trailing", "ss", "string")(lambda s, chars: s.rstrip(chars) if chars else s)


_MASKS = ("X", "x", "n", None)  # Spark's defaults: upper case, lower case, digit, other (NULL: kept)


def _mask_typer(args):
    if not 1 <= len(args) <= 5 or any(a.type not in ("string", "null") for a in args):
        raise TypeMismatch(f"mask takes a string and up to four replacement characters, got ({_names(args)})")
    for a in args[1:]:
        if not isinstance(a, Lit) or (a.value is not None and len(a.value) != 1):
            raise TypeMismatch(f"mask's replacements must be constant single characters or NULL, got ({_names(args)})")
    return "string"


@function("mask", _mask_typer)
def _mask(args, e, n):
    """mask(s[, upper, lower, digit, other]): each upper-case letter, lower-case letter and decimal digit of ``s``
    replaced (Java's Character classes: Unicode's Lu / Other_Uppercase, Ll / Other_Lowercase, Nd), anything else by
    ``other``; a NULL replacement keeps its class as it is.  O(total characters)."""
    upper, lower, digit, other = (e.args[1 + i].value if 1 + i < len(e.args) else d for i, d in enumerate(_MASKS))

    def one(ch: str) -> str:
        got = upper if ch.isupper() else lower if ch.islower() else digit if ch.isdecimal() else other
        return ch if got is None else got
    return _rowwise(lambda text: "".join(one(ch) for ch in text), "string")(args[:1], e, n)


def _elt_typer(args):
    if len(args) < 2 or args[0].type not in ("bigint", "null") or any(a.type not in ("string", "null")
                                                                       for a in args[1:]):
        raise TypeMismatch(f"elt takes an index and strings, got ({_names(args)})")
    return "string"


@function("elt", _elt_typer)
def _elt(args, e, n):
    """elt(i, s1, s2, ...): the i-th string (1-based); NULL where i is NULL; an i outside 1..k raises, as Spark's
    ANSI mode does (INVALID_ARRAY_INDEX).  O(n)."""
    (idx, inull), strings = args[0], args[1:]
    idx = np.asarray(idx, dtype=np.int64)
    bad = ~inull & ((idx < 1) | (idx > len(strings)))
    if bad.any():
        raise SchemaError(f"elt: the index {int(idx[bad][0])} is out of range 1..{len(strings)} (Spark's ANSI mode "
                          "raises INVALID_ARRAY_INDEX)")
    out = np.empty(n, dtype=object)
    null = np.asarray(inull, dtype=bool).copy()
    for k, (v, vn) in enumerate(strings, start=1):
        rows = ~null & (idx == k)
        out[rows] = np.asarray(v, dtype=object)[rows]
        null[rows] = np.asarray(vn, dtype=bool)[rows]
    return filled(out, null, "string"), null


# -- reverse, find_in_set ----------------------------------------------------------------------------------------

_reg("reverse", "s", "string")(lambda s: s[::-1])  # by code points, as Spark's UTF8String.reverse


@_reg("find_in_set", "ss", "bigint")
def _find_in_set(s: str, items: str) -> int:
    """The 1-based place of ``s`` among the comma-separated ``items``; 0 if absent, or if ``s`` has a comma."""
    if "," in s:
        return 0
    parts = items.split(",")
    return parts.index(s) + 1 if s in parts else 0


# -- regexp_count, regexp_substr, regexp_instr -------------------------------------------------------------------

def _regexp_typer(name: str, kinds: str, result: str) -> Callable:
    """Spark's regexp functions: the pattern (and a group) constant, read as Java's syntax at planning."""
    def typer(args):
        _kinds(kinds, result, name, constant=tuple(range(1, len(kinds.rstrip("?")))))(args)
        if args[1].value is not None:
            rx = java_regex.compiled(args[1].value)  # Java-only syntax refused here, at planning
            if len(args) > 2 and args[2].value is not None and not 0 <= args[2].value <= rx.groups:
                raise TypeMismatch(f"{name}: the pattern has {rx.groups} group(s), asked for group {args[2].value}")
        return result
    return typer


def _java_index(s: str, i: int) -> int:
    """Java's index (UTF-16 code units) of the code point at Python's index ``i``: what Spark's positions count."""
    return len(s[:i].encode("utf-16-le", "surrogatepass")) // 2


def _regexp_kernel(result: str, per_row: Callable) -> Callable:
    """A kernel of ``per_row(regex, s, *rest)`` over the string column (the rest: the call's constants), NULL where
    it answers None or the pattern is NULL; memoized per distinct string."""
    def kernel(args, e, n):
        pat = e.args[1].value
        consts = [a.value for a in e.args[2:]]
        if pat is None or any(c is None for c in consts):
            return null_values(result, n), np.ones(n, dtype=bool)
        rx = java_regex.compiled(pat)
        return _rowwise(lambda v: per_row(rx, v, *consts), result)(args[:1], e, n)
    return kernel


function("regexp_count", _regexp_typer("regexp_count", "ss", "bigint"))(_regexp_kernel(
    "bigint", lambda rx, v: sum(1 for _ in rx.finditer(v))))
function("regexp_substr", _regexp_typer("regexp_substr", "ss", "string"))(_regexp_kernel(
    "string", lambda rx, v: (m.group(0) if (m := rx.search(v)) is not None else None)))
# Spark's position is the whole match's, whatever its group argument (which must exist in the pattern).
function("regexp_instr", _regexp_typer("regexp_instr", "ssi?", "bigint"))(_regexp_kernel(
    "bigint", lambda rx, v, group=0: 0 if (m := rx.search(v)) is None else _java_index(v, m.start()) + 1))


# -- width_bucket ----------------------------------------------------------------------------------------------

def _width_bucket_typer(args):
    if len(args) != 4 or any(not (a.type in ("bigint", "double", "null") or is_decimal(a.type)) for a in args[:3]) \
            or args[3].type not in ("bigint", "null"):
        raise TypeMismatch(f"width_bucket takes (number, number, number, bigint), got ({_names(args)})")
    return "bigint"


def _width_bucket(v: float, lo: float, hi: float, buckets: int) -> int | None:
    """Spark's WidthBucket: NULL for no buckets, equal or non-finite bounds, or a NaN value; 0 below the range
    and ``buckets + 1`` past it (a descending range counts from the top)."""
    if buckets <= 0 or buckets == (1 << 63) - 1 or v != v or lo == hi or not all(map(_finite, (lo, hi))):
        return None
    lower, upper = min(lo, hi), max(lo, hi)
    if lo < hi:
        if v < lower:
            return 0
        return buckets + 1 if v >= upper else int(float(buckets) * (v - lower) / (upper - lower)) + 1
    if v > upper:
        return 0
    return buckets + 1 if v <= lower else int(float(buckets) * (upper - v) / (upper - lower)) + 1


def _finite(x: float) -> bool:
    return x == x and x not in (float("inf"), float("-inf"))


@function("width_bucket", _width_bucket_typer)
def _width_bucket_kernel(args, e, n):
    """width_bucket(value, min, max, buckets) in doubles, as Spark casts its first three arguments."""
    cols = []
    for (v, vn), a in zip(args[:3], e.args[:3]):
        ps = decimal_ps(a.type)
        x = np.asarray(v, dtype=np.float64) / (10 ** ps[1]) if ps else np.asarray(v, dtype=np.float64)
        cols.append((x, vn))
    return _rowwise(_width_bucket, "bigint")(cols + [args[3]], e, n)

# The functions built on this module's helpers register when it is whole (so any of these modules may be
# imported first).
from ddflow.plan import encodings, json_path  # noqa: E402,F401

__all__: list[str] = []
