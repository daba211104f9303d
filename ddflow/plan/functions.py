"""The one table of scalar functions: how each is typed (for the planner) and evaluated (over whole columns).

A SQL front end builds a :class:`~ddflow.plan.expr.Call` through
:func:`typed`, which asks the function's *typer* for the result type (or
a :class:`~ddflow.errors.SchemaError` naming the mismatch); evaluation
(:func:`ddflow.plan.expr.evaluate`) runs the same entry's *kernel*.  So a
function exists in one place, and the planner can never accept a call
the evaluator does not know.

Semantics are Spark 4's with ANSI mode on (its default), where it
differs from legacy mode:

- DECIMAL(p, s) is exact: values are unscaled int64 (``value * 10**s``);
  literals, ``+ - * / %`` and result precision and scale follow Spark's
  ``DecimalPrecision`` with ``allowPrecisionLoss`` (rounding HALF_UP);
  an integer literal in decimal arithmetic takes its minimal precision
  (``spark.sql.legacy.literal.pickMinimumPrecision``).  A result past
  its precision raises.  Inside an expression values are exact to 38
  digits (Python ints where int64 is too small); a result stored past
  int64's 18 digits (ddflow's storage) raises
  (:func:`ddflow.plan.expr.evaluate`).
- Integer overflow, division or remainder by zero, and a string CAST
  that does not parse raise (``try_cast`` and ``try_divide`` give NULL).
- ``/`` of integers is a double division; ``/`` with a decimal is decimal.
- DATE is int days since 1970-01-01, TIMESTAMP int microseconds (UTC):
  ``date +/- INTERVAL``, ``EXTRACT``, ``date_add`` & co. are vectorized
  integer arithmetic.

Every kernel works on whole numpy columns (``pyarrow.compute`` for
strings); only exact decimal results too wide for int64 on the way take
Python integers, for the rows that need them.

>>> from ddflow.plan.expr import Col, Lit, evaluate
>>> x = Col(0, "decimal(15,2)", "x")
>>> e = typed("+", (x, Lit(1, "decimal(1,0)")))
>>> e.type
'decimal(16,2)'
>>> vals, null = evaluate(e, [(np.array([7, 250]), np.array([False, False]))])
>>> vals.tolist()
[107, 350]

Why this module is long: it is *the* table, by design (issue: one table
shared by the planner and the evaluator).  Each of its sixty-odd entries
is a typer and a kernel side by side, grouped by theme under ``# --``
headers (types, decimals, arithmetic, comparisons, strings, dates, CAST,
intervals); splitting it by theme would put the two halves of the rules
that must agree (Spark's decimal typing and its arithmetic) in different
files.
"""
from __future__ import annotations

import datetime
import decimal
import re
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ddflow.base.columnar import wrapping_products
from ddflow.base.schema import (EPOCH, KIND, MAX_PRECISION, NULL_VALUE, decimal_ps, decimal_type, from_days,
                                from_micros, from_unscaled, is_decimal)
from ddflow.errors import SchemaError
from ddflow.plan.expr import KERNELS, Call, Column, Expr, Lit, as_type, dtype_of, filled, null_values, unscaled

Typer = Callable[[Sequence[Expr]], str]
Kernel = Callable[[list[Column], Call, int], Column]

_I64 = np.iinfo(np.int64)
_INTEGRAL = ("bigint",)
_NUMERIC_SIMPLE = ("bigint", "double")
INTERVALS = ("interval_ym", "interval_dt")  # months; microseconds (literals only)
_US_PER_DAY = 86_400_000_000


@dataclass(frozen=True)
class Function:
    """A scalar function: its typer (argument expressions -> result type) and its kernel."""

    name: str
    typer: Typer
    kernel: Kernel


#: Every function by name (operators included: ``+``, ``=``, ``like`` ...).
FUNCTIONS: dict[str, Function] = {}


def function(name: str, typer: Typer):
    """Register ``name``'s kernel (the decorated function) with its typer."""
    def register(kernel: Kernel) -> Kernel:
        FUNCTIONS[name] = Function(name, typer, kernel)
        KERNELS[name] = kernel
        return kernel
    return register


def typed(name: str, args: Sequence[Expr], where: "str | Callable[[], str]" = "") -> Call:
    """The call of ``name`` on ``args`` with its result type; a SchemaError if the types do not fit.

    ``where`` (text, or a function giving it: rendered only for an error,
    so a planner can name the query text without rendering it per call)
    ends the error's message.

    >>> from ddflow.plan.expr import Col
    >>> typed("=", (Col(0, "date"), Lit("1995-03-15", "string"))).args[1]
    Lit(value=9204, type='date')
    """
    fn = FUNCTIONS.get(name)
    if fn is None:
        raise SchemaError(f"SQL: unknown function {name!r}{_where(where)}")
    args = tuple(args)
    try:
        if name in _COMPARISONS or name in ("+", "-"):
            args = _coerced_literals(name, args)
        return Call(name, args, fn.typer(args))
    except TypeMismatch as err:
        raise SchemaError(f"SQL: {err}{_where(where)}") from None


def _where(where: "str | Callable[[], str]") -> str:
    return where() if callable(where) else where


class TypeMismatch(Exception):
    pass


def _names(args: Sequence[Expr]) -> str:
    return ", ".join(a.type for a in args)


# -- types -------------------------------------------------------------------------------------------

def precision_scale(e: Expr) -> tuple[int, int]:
    """``e`` as a decimal's (precision, scale): an integer literal has its minimal precision (Spark)."""
    ps = decimal_ps(e.type)
    if ps is not None:
        return ps
    if isinstance(e, Lit) and isinstance(e.value, int) and e.type == "bigint":
        return max(1, len(str(abs(e.value)))), 0
    if e.type in ("bigint", "null"):
        return 20, 0
    raise TypeMismatch(f"{e.type} is not a decimal")


def bounded(p: int, s: int) -> str:
    """Spark's ``adjustPrecisionScale``: past 38 digits keep the integer digits and at least 6 places."""
    if p <= MAX_PRECISION:
        return decimal_type(p, s)
    int_digits = p - s
    min_scale = min(s, 6)
    s = max(MAX_PRECISION - int_digits, min_scale)
    return decimal_type(MAX_PRECISION, s)


def numeric(t: str) -> bool:
    return t in ("bigint", "double", "null") or is_decimal(t)


def arithmetic_type(op: str, a: Expr, b: Expr) -> str:
    """The result type of ``a op b`` for numbers (Spark's ``DecimalPrecision``)."""
    ta, tb = a.type, b.type
    if not (numeric(ta) and numeric(tb)):
        raise TypeMismatch(f"`{op}` needs numbers, got {ta} and {tb}")
    if op == "/" and not (is_decimal(ta) or is_decimal(tb)):
        return "double"
    if "double" in (ta, tb):
        return "double"
    if not (is_decimal(ta) or is_decimal(tb)):
        return "bigint"
    (p1, s1), (p2, s2) = precision_scale(a), precision_scale(b)
    if op in ("+", "-"):
        s = max(s1, s2)
        return bounded(max(p1 - s1, p2 - s2) + s + 1, s)
    if op == "*":
        return bounded(p1 + p2 + 1, s1 + s2)
    if op == "/":
        s = max(6, s1 + p2 + 1)
        return bounded(p1 - s1 + s2 + s, s)
    s = max(s1, s2)  # %
    return bounded(min(p1 - s1, p2 - s2) + s, s)


def common_type(types: Sequence[str], what: "str | Callable[[], str]") -> str:
    """The type values of ``types`` meet in (CASE branches, COALESCE, UNION columns, IN lists).

    ``what`` names them in the error (text, or a function giving it, called only then).
    """
    ts = [t for t in types if t != "null"]
    if not ts:
        return "null"
    out = ts[0]
    for t in ts[1:]:
        out = _wider(out, t, what)
    return out


def _wider(a: str, b: str, what: "str | Callable[[], str]") -> str:
    if a == b:
        return a
    if {a, b} == {"date", "timestamp"}:
        return "timestamp"
    if numeric(a) and numeric(b):
        if "double" in (a, b):
            return "double"
        (p1, s1), (p2, s2) = [decimal_ps(t) or (20, 0) for t in (a, b)]
        s = max(s1, s2)
        return bounded(max(p1 - s1, p2 - s2) + s, s)
    raise TypeMismatch(f"{_where(what)} mixes {a} and {b}")


def _comparable_types(a: Expr, b: Expr) -> None:
    ta, tb = a.type, b.type
    if "null" in (ta, tb) or ta == tb:
        return
    if numeric(ta) and numeric(tb):
        return
    if {ta, tb} == {"date", "timestamp"}:
        return
    raise TypeMismatch(f"cannot compare {ta} with {tb}")


def _coerced_literals(op: str, args: tuple[Expr, ...]) -> tuple[Expr, ...]:
    """A string literal beside a date or timestamp is that date or timestamp (Spark casts it)."""
    if len(args) != 2:
        return args
    out = list(args)
    for i, j in ((0, 1), (1, 0)):
        other = args[j].type
        if isinstance(args[i], Lit) and args[i].type == "string" and args[i].value is not None \
                and other in ("date", "timestamp"):
            out[i] = Lit(parse_date(args[i].value) if other == "date" else parse_timestamp(args[i].value), other)
    return tuple(out)


# -- decimals ------------------------------------------------------------------------------------------

def _scale_of(t: str) -> int:
    ps = decimal_ps(t)
    return ps[1] if ps is not None else 0


def _exact(vals: np.ndarray) -> np.ndarray:
    """int64 values as Python ints (an object array): exact past int64, for the few rows that need it."""
    return np.array([int(v) for v in vals], dtype=object)


def rescaled(vals: np.ndarray, k: int) -> np.ndarray:
    """Unscaled ``vals`` times ``10**k`` (k >= 0), exact: an object array of Python ints where int64 is too small."""
    if k == 0 or len(vals) == 0:
        return vals
    if k > 18 or vals.dtype == object:
        return _exact(vals) * (10 ** k)
    r, bad = wrapping_products(vals.astype(np.int64), np.full(len(vals), 10 ** k, dtype=np.int64))
    if bad.any():
        return _exact(vals) * (10 ** k)
    return r


def div_half_up(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a / b`` rounded half away from zero, exact for int64 or Python-int object arrays (b != 0)."""
    if a.dtype == object or b.dtype == object:
        out = np.empty(len(a), dtype=object)
        for i, (x, y) in enumerate(zip(a.tolist(), b.tolist())):
            q, r = divmod(abs(x), abs(y))
            if 2 * r >= abs(y):
                q += 1
            out[i] = q if (x >= 0) == (y >= 0) else -q
        return out
    a, b = a.astype(np.int64), b.astype(np.int64)
    with np.errstate(all="ignore"):
        q = np.abs(a) // np.abs(b)
        r = np.abs(a) - q * np.abs(b)
    q = q + (r >= np.abs(b) - r)  # 2r >= |b| without overflowing
    return np.where((a >= 0) == (b >= 0), q, -q)


def fitted(vals: np.ndarray, ok: np.ndarray, typ: str, what: str) -> np.ndarray:
    """Exact unscaled results checked to fit ``typ``'s precision (ANSI: overflow raises).

    int64 when every value fits it; else, only for a wide type (more than
    18 digits), Python ints (an object array): an intermediate value, exact
    for the expression above it (a ROUND, a comparison, a CAST), which a
    stored column takes only if it fits int64 (:func:`ddflow.plan.expr.stored_unscaled`).
    NULL rows hold 0.
    """
    p, s = decimal_ps(typ)
    if vals.dtype == object:
        vals = np.where(ok, vals, 0)
        limit = 10 ** p
        if any(abs(v) >= limit for v in vals.tolist()):
            raise SchemaError(f"decimal overflow in {what}: a result does not fit {typ}")
        return unscaled(vals)
    vals = vals.astype(np.int64)
    if p < 19 and (np.abs(vals[ok]) >= 10 ** p).any():
        raise SchemaError(f"decimal overflow in {what}: a result does not fit {typ}")
    return np.where(ok, vals, 0)


def to_scale(vals: np.ndarray, s_from: int, s_to: int) -> np.ndarray:
    """Unscaled values moved from scale ``s_from`` to ``s_to`` (HALF_UP when places are dropped); exact."""
    if s_to >= s_from:
        return rescaled(vals, s_to - s_from)
    d = 10 ** (s_from - s_to)
    return div_half_up(vals, np.full(len(vals), d, dtype=object if vals.dtype == object or d > _I64.max else np.int64))


def as_decimal(vals: np.ndarray, src: str, s: int) -> np.ndarray:
    """Values of a bigint or decimal type as unscaled values at scale ``s`` (exact, maybe Python ints)."""
    if src in ("bigint", "null"):
        return rescaled(np.asarray(vals, dtype=np.int64), s)
    return to_scale(np.asarray(vals), _scale_of(src), s)


def decimal_to_float(vals: np.ndarray, typ: str) -> np.ndarray:
    return np.asarray(vals, dtype=np.float64) / (10.0 ** _scale_of(typ))


# -- arithmetic -------------------------------------------------------------------------------------

def _arith_typer(op: str) -> Typer:
    def typer(args):
        a, b = args
        for x, y in ((a, b), (b, a)):
            if x.type in ("date", "timestamp") and op in ("+", "-") and (y.type in INTERVALS or y.type == "bigint"):
                if op == "-" and x is b:
                    break
                if x.type == "date" and (y.type == "interval_dt" and isinstance(y, Lit) and y.value % _US_PER_DAY):
                    return "timestamp"  # a date plus hours is a timestamp (Spark)
                return x.type
        if a.type in INTERVALS or b.type in INTERVALS:
            raise TypeMismatch(f"`{op}` of {a.type} and {b.type} (intervals add to dates and timestamps)")
        if "string" in (a.type, b.type):  # ANSI Spark would cast the string to a double; ddflow asks for a CAST
            raise TypeMismatch(f"`{op}` needs numbers, got {a.type} and {b.type} (CAST the string)")
        return arithmetic_type(op, a, b)
    return typer


def _datetime_arith(op: str, args: list[Column], e: Call) -> Column:
    """date/timestamp +/- interval or days (the interval a literal, or a bigint of days)."""
    (a, an), (b, bn) = args
    x, y = e.args
    if x.type not in ("date", "timestamp"):
        (a, an), (b, bn), x, y = (b, bn), (a, an), y, x
    null = an | bn
    sign = -1 if op == "-" else 1
    a = np.asarray(a, dtype=np.int64)
    if y.type == "interval_ym":
        days = a if x.type == "date" else np.floor_divide(a, _US_PER_DAY)
        moved = add_months(days, sign * np.asarray(b, dtype=np.int64))
        out = moved if x.type == "date" else moved * _US_PER_DAY + (a - days * _US_PER_DAY)
        return filled(out, null, e.type), null
    if y.type == "interval_dt":
        us = np.asarray(b, dtype=np.int64) * sign
        if x.type == "date" and e.type == "date":
            return filled(a + us // _US_PER_DAY, null, "date"), null
        base = a * _US_PER_DAY if x.type == "date" else a
        return filled(base + us, null, e.type), null
    n = np.asarray(b, dtype=np.int64) * sign  # date + int: days (Spark's date_add)
    if x.type == "timestamp":
        raise SchemaError("timestamp + a number is not supported (add an INTERVAL)")
    return filled(a + n, null, "date"), null


def _arith_kernel(op: str) -> Kernel:
    def kernel(args: list[Column], e: Call, n: int) -> Column:
        if e.type in ("date", "timestamp"):
            return _datetime_arith(op, args, e)
        (a, an), (b, bn) = args
        null = an | bn
        ok = ~null
        x, y = e.args
        if e.type == "double":
            a = decimal_to_float(a, x.type) if is_decimal(x.type) else np.asarray(a, dtype=np.float64)
            b = decimal_to_float(b, y.type) if is_decimal(y.type) else np.asarray(b, dtype=np.float64)
            if op in ("/", "%"):
                _no_zero(b, ok, op)
                b = np.where(ok, b, 1.0)
            with np.errstate(all="ignore"):
                r = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide, "%": np.fmod}[op](a, b)
            return filled(r, null, "double"), null
        if e.type == "bigint":
            a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
            if op == "%":
                _no_zero(b, ok, op)
                b = np.where(ok, b, 1)
                return filled(np.fmod(a, b), null, "bigint"), null
            r = np.zeros(n, dtype=np.int64)
            r[ok] = checked_int(op, a[ok], b[ok])
            return r, null
        # Decimal: exact on unscaled integers, then fitted to the result type.
        p, s = decimal_ps(e.type)
        s1, s2 = precision_scale(x)[1], precision_scale(y)[1]
        a, b = unscaled(np.where(ok, a, 0)), unscaled(np.where(ok, b, 0))
        if op in ("+", "-"):
            sc = max(s1, s2)
            xa, xb = as_decimal(a, x.type, sc), as_decimal(b, y.type, sc)
            r = _exact_op(op, xa, xb)
            r = to_scale(r, sc, s)
        elif op == "*":
            r = to_scale(_exact_op("*", a, b), s1 + s2, s)
        elif op == "/":
            _no_zero(b, ok, op)
            b = np.where(ok, b, 1)
            # a / b at scale s: (a * 10**(s - s1 + s2)) / b, rounded HALF_UP.
            k = s - s1 + s2
            num = rescaled(a, k) if k >= 0 else to_scale(a, -k, 0)
            r = div_half_up(num, b if num.dtype != object else _exact(b))
        else:  # %: sign of the dividend
            _no_zero(b, ok, op)
            b = np.where(ok, b, 1)
            sc = max(s1, s2)
            xa, xb = as_decimal(a, x.type, sc), as_decimal(b, y.type, sc)
            if xa.dtype == object or xb.dtype == object:
                r = np.array([int(np.sign(u)) * (abs(u) % abs(v)) for u, v in zip(xa.tolist(), xb.tolist())],
                             dtype=object)
            else:
                r = np.fmod(xa, xb)
            r = to_scale(r, sc, s)
        return fitted(r, ok, e.type, f"`{e}`"), null
    return kernel


def _exact_op(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a op b`` for + - * on int64 or Python-int arrays: exact, Python ints where int64 overflows."""
    if a.dtype != object and b.dtype != object:
        with np.errstate(over="ignore"):
            if op == "*":
                r, bad = wrapping_products(a, b)
            else:
                r = a + b if op == "+" else a - b
                bad = ((a >= 0) == ((b >= 0) if op == "+" else (b < 0))) & ((r >= 0) != (a >= 0))
        if not bad.any():
            return r
        a, b = _exact(a), _exact(b)
    elif a.dtype != object:
        a = _exact(a)
    elif b.dtype != object:
        b = _exact(b)
    return a * b if op == "*" else (a + b if op == "+" else a - b)


def _no_zero(b: np.ndarray, ok: np.ndarray, op: str) -> None:
    if (np.asarray(b)[ok] == 0).any():
        raise SchemaError(f"division by zero in `{op}` (Spark's ANSI mode raises; try_divide gives NULL)")


def checked_int(op: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x op y`` on int64 with overflow reported.  O(n), vectorized."""
    with np.errstate(over="ignore"):
        if op == "+":
            r = x + y
            bad = ((x > 0) & (y > 0) & (r < 0)) | ((x < 0) & (y < 0) & (r >= 0))
        elif op == "-":
            r = x - y
            bad = ((x >= 0) & (y < 0) & (r < 0)) | ((x < 0) & (y > 0) & (r >= 0))
        else:
            r, bad = wrapping_products(x, y)
    if bad.any():
        raise SchemaError(f"integer overflow in {op}: a result does not fit in bigint")
    return r


for _op in ("+", "-", "*", "/", "%"):
    function(_op, _arith_typer(_op))(_arith_kernel(_op))


def _unary_numeric(args):
    (a,) = args
    if not numeric(a.type):
        raise TypeMismatch(f"needs a number, got {a.type}")
    return a.type if a.type != "null" else "bigint"


def _negate(vals: np.ndarray, null: np.ndarray, typ: str, what: str) -> np.ndarray:
    if typ == "double":
        return -np.asarray(vals, dtype=np.float64)
    if vals.dtype == object:  # a wide decimal's Python ints: no overflow
        return -vals
    v = np.asarray(vals, dtype=np.int64)
    if (v[~null] == _I64.min).any():
        raise SchemaError(f"integer overflow in {what}: a result does not fit in bigint")
    return -v


@function("neg", _unary_numeric)
def _neg(args, e, n):
    (a, an), = args
    return filled(_negate(a, an, e.type, "negation"), an, e.type), an


@function("abs", _unary_numeric)
def _abs(args, e, n):
    (a, an), = args
    v = a if a.dtype == object and is_decimal(e.type) else np.asarray(a, dtype=np.float64 if e.type == "double"
                                                                          else np.int64)
    return filled(np.where(v < 0, _negate(v, an, e.type, "abs"), v), an, e.type), an


def _div_typer(args):
    a, b = args
    if not all(numeric(x.type) and x.type != "double" for x in (a, b)):
        raise TypeMismatch(f"DIV needs integers or decimals, got {a.type} and {b.type}")
    return "bigint"


@function("div", _div_typer)
def _div(args, e, n):
    """``a DIV b``: the quotient truncated toward zero (decimals at their common scale); by zero raises (ANSI)."""
    (a, an), (b, bn) = args
    null = an | bn
    ok = ~null
    x, y = e.args
    sc = max(precision_scale(x)[1], precision_scale(y)[1])
    xa = as_decimal(unscaled(np.where(ok, a, 0)), x.type, sc)
    xb = as_decimal(unscaled(np.where(ok, b, 1)), y.type, sc)
    _no_zero(np.asarray(xb), ok, "div")
    if xa.dtype == object or xb.dtype == object:
        q = np.array([(abs(u) // abs(v)) * (1 if (u >= 0) == (v >= 0) else -1) for u, v in zip(xa.tolist(), xb.tolist())],
                     dtype=object)
        return fitted(q, ok, "decimal(18,0)", "div"), null
    q = np.abs(xa) // np.abs(xb)
    q = np.where((xa >= 0) == (xb >= 0), q, -q)
    if (ok & (xa == _I64.min) & (xb == -1)).any():
        raise SchemaError("integer overflow in div: a result does not fit in bigint")
    return filled(q.astype(np.int64), null, "bigint"), null


def _nonzero_divisor(op: str) -> Kernel:
    """``op`` (``/`` or ``%``) NULL where the divisor is zero: try_divide's and try_mod's rule."""
    def kernel(args, e, n):
        (a, an), (b, bn) = args
        zero = ~(an | bn) & (np.asarray(b) == 0)
        one = np.ones(n, dtype=np.asarray(b).dtype)
        if is_decimal(e.args[1].type):
            one = one * (10 ** _scale_of(e.args[1].type))
        return KERNELS[op]([(a, an | zero), (np.where(zero, one, b), bn | zero)], Call(op, e.args, e.type), n)
    return kernel


function("try_divide", lambda args: arithmetic_type("/", *args))(_nonzero_divisor("/"))
function("try_mod", lambda args: arithmetic_type("%", *args))(_nonzero_divisor("%"))


# -- comparisons ---------------------------------------------------------------------------------------

_COMPARISONS = {"=": np.equal, "<>": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater,
                ">=": np.greater_equal}


def _compare_typer(args):
    _comparable_types(*args)
    return "boolean"


def comparable_values(args: list[Column], exprs: Sequence[Expr]) -> tuple[np.ndarray, np.ndarray]:
    """Two columns' values in one comparable representation (decimals at one scale, dates as timestamps)."""
    (a, _), (b, _) = args
    ta, tb = exprs[0].type, exprs[1].type
    return compared_as(a, ta, tb), compared_as(b, tb, ta)


def compared_as(vals: np.ndarray, typ: str, other: str) -> np.ndarray:
    """Values of type ``typ`` in the representation they are compared in beside values of type ``other``."""
    if typ == other and not is_decimal(typ):
        return vals
    if "double" in (typ, other):
        return decimal_to_float(vals, typ) if is_decimal(typ) else np.asarray(vals, dtype=np.float64)
    if is_decimal(typ) or is_decimal(other):
        return as_decimal(vals, typ, max(_scale_of(typ), _scale_of(other)))
    if {typ, other} == {"date", "timestamp"}:
        return np.asarray(vals, dtype=np.int64) * (_US_PER_DAY if typ == "date" else 1)
    return vals


def in_list(x: Expr, items: Sequence[Expr], where: "str | Callable[[], str]" = "") -> Call:
    """``x IN (items)`` as one ``in`` call: runs of constants become value sets (one sorted array each, tested
    by binary search), other items ``= item`` steps.  O(k log k) for k items, one vectorized cast per type.

    Typed as Spark's ``In``: the constants meet in their common type (a
    string constant beside a date or timestamp is that date or timestamp),
    which must compare with ``x``.  Evaluation: :func:`ddflow.plan.expr.evaluate`.

    >>> from ddflow.plan.expr import Col, evaluate
    >>> e = in_list(Col(0, "bigint"), [Lit(2, "bigint"), Lit(1.5, "double"), Lit(None, "null")])
    >>> vals, null = evaluate(e, [(np.array([2, 3, 0]), np.array([False, False, True]))])
    >>> vals.tolist(), null.tolist()
    ([True, False, False], [False, True, True])
    """
    from ddflow.plan.expr import Held
    parts: list[Expr] = []
    run: list[Lit] = []

    def flush() -> None:
        if run:
            parts.append(_value_set(x, run, where))
            run.clear()

    for it in items:
        if isinstance(it, Lit):
            run.append(it)
            continue
        flush()
        parts.append(typed("=", (Held(x.type), it), where))
    flush()
    return Call("in", (x, *parts), "boolean")


def _value_set(x: Expr, lits: list[Lit], where) -> Expr:
    """Constants of an IN list as one :class:`~ddflow.plan.expr.ValueSet`, in their comparison form beside ``x``."""
    from ddflow.plan.expr import Held, ValueSet
    lits = [Lit(parse_date(v.value) if x.type == "date" else parse_timestamp(v.value), x.type)
            if v.type == "string" and v.value is not None and x.type in ("date", "timestamp") else v for v in lits]
    has_null = any(v.value is None for v in lits)
    live = [v for v in lits if v.value is not None]
    try:
        typ = common_type([v.type for v in live], "an IN list") if live else "null"
        _comparable_types(x, Held(typ))
    except TypeMismatch as err:
        raise SchemaError(f"SQL: {err}{_where(where)}") from None
    if not live:
        return ValueSet((), typ, has_null)
    by_type: dict[str, list] = {}
    for v in live:
        by_type.setdefault(v.type, []).append(v.value)
    chunks = []
    for src, values in by_type.items():
        raw = np.array(values, dtype=dtype_of(src))
        vals, _ = cast_values(raw, np.zeros(len(raw), dtype=bool), src, typ)
        chunks.append(compared_as(vals, typ, x.type))
    allv = np.concatenate(chunks) if len(chunks) > 1 else chunks[0]
    if allv.dtype == object:
        uniq = sorted(set(allv.tolist()))
    else:
        uniq = np.unique(allv).tolist()
    return ValueSet(tuple(uniq), typ, has_null)


def _compare_kernel(op: str) -> Kernel:
    fn = _COMPARISONS[op]

    def kernel(args, e, n):
        null = args[0][1] | args[1][1]
        ok = ~null
        out = np.zeros(n, dtype=bool)
        if ok.any():
            a, b = comparable_values(args, e.args)
            x, y = a[ok], b[ok]
            if x.dtype == object or y.dtype == object:
                x, y = x.astype(object), y.astype(object)
            out[ok] = _nan_ordered(op, x, y) if x.dtype.kind == "f" or y.dtype.kind == "f" else fn(x, y).astype(bool)
        return out, null
    return kernel


def _nan_ordered(op: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x op y`` of doubles as Spark compares them: NaN equals NaN and is above every other value."""
    xn, yn = np.isnan(x), np.isnan(y)
    with np.errstate(invalid="ignore"):
        lt = (x < y) | (~xn & yn)
        eq = (x == y) | (xn & yn)
    return {"=": eq, "<>": ~eq, "<": lt, "<=": lt | eq, ">": ~(lt | eq), ">=": ~lt}[op]


for _op in _COMPARISONS:
    function(_op, _compare_typer)(_compare_kernel(_op))


def _same_type_typer(name: str) -> Typer:
    def typer(args):
        if len(args) < 2:
            raise TypeMismatch(f"{name} takes at least 2 arguments, got {len(args)}")
        typ = common_type([a.type for a in args], f"`{name}`")
        if any(a.type not in (typ, "null") for a in args):
            raise TypeMismatch(f"{name}'s arguments must be cast to their common type {typ} first")
        return typ if typ != "null" else "bigint"
    return typer


def _extreme_kernel(op: str) -> Kernel:
    """greatest / least: the largest (smallest) non-NULL argument, NULL only if all are (Spark).  O(k n)."""
    fn = _COMPARISONS[op]

    def kernel(args, e, n):
        best, bn = args[0]
        best, bn = as_type(best, e.type).copy(), bn.copy()
        for v, vn in args[1:]:
            v = as_type(v, e.type)
            take = ~vn & bn
            both = ~vn & ~bn
            if both.any():
                x, y = v[both], best[both]
                if x.dtype == object or y.dtype == object:
                    x, y = x.astype(object), y.astype(object)
                take[both] = fn(x, y).astype(bool)
            best[take], bn[take] = v[take], False
        return filled(best, bn, e.type), bn
    return kernel


function("greatest", _same_type_typer("greatest"))(_extreme_kernel(">"))
function("least", _same_type_typer("least"))(_extreme_kernel("<"))


def _nullif_typer(args):
    a, b = args
    _comparable_types(a, b)
    return a.type


@function("nullif", _nullif_typer)
def _nullif(args, e, n):
    """``nullif(a, b)``: NULL where ``a = b`` is TRUE, else ``a`` (both evaluated on every row, as ``a = b`` is)."""
    (a, an), (b, bn) = args
    eq, eqn = KERNELS["="](args, Call("=", e.args, "boolean"), n)
    null = an | (eq.astype(bool) & ~eqn)
    return filled(as_type(a, e.type), null, e.type), null


# -- strings ---------------------------------------------------------------------------------------------

def _arrow(vals: np.ndarray, null: np.ndarray) -> pa.Array:
    return pa.array(np.asarray(vals, dtype=object).tolist(), type=pa.string(), mask=np.asarray(null, dtype=bool))


def _from_arrow(a: pa.Array, typ: str) -> Column:
    null = a.is_null().to_numpy(zero_copy_only=False).astype(bool)
    if typ == "string":
        vals = np.array(a.to_pylist(), dtype=object)
    else:
        vals = a.fill_null(NULL_VALUE[KIND[typ]]).to_numpy(zero_copy_only=False)
    return filled(as_type(vals, typ), null, typ), null


def _strings(kinds: str, result: str) -> Typer:
    """A typer for arguments of kinds ``s`` (string) and ``i`` (bigint)."""
    def typer(args):
        if len(args) != len(kinds):
            raise TypeMismatch(f"takes {len(kinds)} arguments, got {len(args)}")
        for a, k in zip(args, kinds):
            want = "string" if k == "s" else "bigint"
            if a.type not in (want, "null"):
                raise TypeMismatch(f"needs ({', '.join('string' if k == 's' else 'bigint' for k in kinds)}), "
                                    f"got ({_names(args)})")
        return result
    return typer


def _string_kernel(fn: Callable[..., pa.Array], typ: str) -> Kernel:
    def kernel(args, e, n):
        arrs = [_arrow(v, vn) for v, vn in args]
        return _from_arrow(fn(*arrs), typ)
    return kernel


def _const(e: Call, i: int, what: str):
    arg = e.args[i]
    if not isinstance(arg, Lit):
        raise SchemaError(f"{what}: argument {i + 1} must be a constant here")
    return arg.value


_INT32 = (-(1 << 31), (1 << 31) - 1)


def _constant_or_rows(fast: Kernel, row: Callable, typ: str, places: tuple[int, ...]) -> Kernel:
    """``fast`` (vectorized) when the arguments at ``places`` are constants, else ``row`` of each row's values
    (NULL where one is NULL; O(n) Python): a column there is read row by row, never refused at run."""
    def kernel(args, e, n):
        if all(isinstance(e.args[i], Lit) for i in places if i < len(e.args)):
            return fast(args, e, n)
        null = np.zeros(n, dtype=bool)
        for _, vn in args:
            null |= np.asarray(vn, dtype=bool)
        cols = [np.asarray(v).tolist() for v, _ in args]
        out = np.empty(n, dtype=object) if typ == "string" else null_values(typ, n)
        for i in np.flatnonzero(~null).tolist():
            out[i] = row(*(c[i] for c in cols))
        return filled(out, null, typ), null
    return kernel


def _as_int(v: int, what: str) -> int:
    """A bigint Spark casts to int: past int raises (CAST_OVERFLOW in ANSI mode)."""
    if not _INT32[0] <= v <= _INT32[1]:
        raise SchemaError(f"{what}: {v} is past int (Spark casts it to int and raises CAST_OVERFLOW)")
    return v


def _substring_row(s: str, pos: int, length: int = _INT32[1]) -> str:
    """Spark's UTF8String.substringSQL: 1-based; 0 is the start; negative counts from the end."""
    pos, length = _as_int(pos, "substring"), _as_int(length, "substring")
    start = pos - 1 if pos > 0 else len(s) + pos if pos < 0 else 0
    end = min(start + length, _INT32[1])
    start = max(start, 0)
    return "" if start >= end else s[start:end]


def _split_part_row(s: str, delim: str, k: int) -> str:
    if k == 0:
        raise SchemaError("split_part: the part index must not be 0 (Spark's INVALID_INDEX_OF_ZERO)")
    parts = s.split(delim) if delim else [s]
    i = k - 1 if k > 0 else len(parts) + k
    return parts[i] if 0 <= i < len(parts) else ""


def _concat_typer(args):
    for a in args:
        if a.type not in ("string", "null"):
            raise TypeMismatch(f"concat takes strings (CAST the others), got {a.type}")
    return "string"


function("concat", _concat_typer)(
    _string_kernel(lambda *a: pc.binary_join_element_wise(*a, "", null_handling="emit_null"), "string"))
function("lower", _strings("s", "string"))(_string_kernel(pc.utf8_lower, "string"))
function("upper", _strings("s", "string"))(_string_kernel(pc.utf8_upper, "string"))
function("length", _strings("s", "bigint"))(_string_kernel(lambda a: pc.utf8_length(a).cast(pa.int64()), "bigint"))
function("trim", _strings("s", "string"))(_string_kernel(lambda a: pc.utf8_trim(a, " "), "string"))
function("ltrim", _strings("s", "string"))(_string_kernel(lambda a: pc.utf8_ltrim(a, " "), "string"))
function("rtrim", _strings("s", "string"))(_string_kernel(lambda a: pc.utf8_rtrim(a, " "), "string"))
function("reverse", _strings("s", "string"))(_string_kernel(pc.utf8_reverse, "string"))


@function("concat_ws", _concat_typer)
def _concat_ws(args, e, n):
    """concat_ws(sep, s1, ...): the non-NULL strings joined by sep, NULLs skipped (Spark's rule); NULL where sep is.

    Joined row by row: Arrow's binary_join_element_wise with null_handling="skip" drops the rows whose strings
    are all NULL (pyarrow 26), so it cannot serve.
    """
    (sep, sep_null), *parts = args
    cols = [(np.asarray(v, dtype=object), np.asarray(vn, dtype=bool)) for v, vn in parts]
    null = np.asarray(sep_null, dtype=bool).copy()
    vals = np.empty(n, dtype=object)
    for i in range(n):
        if not null[i]:
            vals[i] = sep[i].join([v[i] for v, vn in cols if not vn[i]])
    return filled(as_type(vals, "string"), null, "string"), null


def _replace(args, e, n):
    (s, sn), _, _ = args
    old, new = _const(e, 1, "replace"), _const(e, 2, "replace")
    if old is None or new is None:
        return null_values("string", n), np.ones(n, dtype=bool)
    if old == "":
        return s, sn
    return _from_arrow(pc.replace_substring(_arrow(s, sn), old, new), "string")


def _per_string(fn: Callable[[str], str]) -> Callable[[np.ndarray, np.ndarray, int], Column]:
    """``fn`` over the non-NULL strings of a column, once per distinct value."""
    def run(s: np.ndarray, sn: np.ndarray, n: int) -> Column:
        memo: dict[str, str] = {}
        vals = np.empty(n, dtype=object)
        for i, v in enumerate(s.tolist()):
            if not sn[i]:
                out = memo.get(v)
                if out is None:
                    out = memo[v] = fn(v)
                vals[i] = out
        return filled(vals, sn.copy(), "string"), sn.copy()
    return run


def _split_part_typer(args):
    out = _strings("ssi", "string")(args)
    if isinstance(args[2], Lit) and args[2].value == 0:
        raise TypeMismatch("the part index must not be 0 (Spark's INVALID_INDEX_OF_ZERO)")
    return out


def _split_part(args, e, n):
    """Spark's ``split_part(str, delimiter, k)``: the k-th part (1-based; negative from the end), '' past the end."""
    (s, sn), _, _ = args
    delim, k = _const(e, 1, "split_part"), _const(e, 2, "split_part")
    if delim is None or k is None:
        return null_values("string", n), np.ones(n, dtype=bool)
    if k == 0:
        raise SchemaError("split_part: the part index must not be 0 (Spark's INVALID_INDEX_OF_ZERO)")

    def part(v: str) -> str:
        parts = v.split(delim) if delim else [v]
        i = k - 1 if k > 0 else len(parts) + k
        return parts[i] if 0 <= i < len(parts) else ""

    return _per_string(part)(s, sn, n)


def _regexp_extract_typer(args):
    out = _strings("ssi", "string")(args)
    if not (isinstance(args[1], Lit) and isinstance(args[2], Lit)):
        raise TypeMismatch("regexp_extract's pattern and group must be constants")
    if args[1].value is not None:
        from ddflow.plan.java_regex import compiled
        rx = compiled(args[1].value)  # Java's syntax: what Python reads differently is translated or refused
        if args[2].value is not None and not 0 <= args[2].value <= rx.groups:
            raise TypeMismatch(f"regexp_extract: the pattern has {rx.groups} group(s), asked for group {args[2].value}")
    return out


@function("regexp_extract", _regexp_extract_typer)
def _regexp_extract(args, e, n):
    """Spark's ``regexp_extract(str, regexp, idx)``: group ``idx`` of the first match, '' when none."""
    from ddflow.plan.java_regex import compiled
    (s, sn), _, _ = args
    pat, idx = _const(e, 1, "regexp_extract"), _const(e, 2, "regexp_extract")
    if pat is None or idx is None:
        return null_values("string", n), np.ones(n, dtype=bool)
    rx = compiled(pat)
    if not 0 <= idx <= rx.groups:
        raise SchemaError(f"regexp_extract: the pattern has {rx.groups} group(s), asked for group {idx}")

    def extract(v: str) -> str:
        m = rx.search(v)
        return (m.group(idx) or "") if m is not None else ""

    return _per_string(extract)(s, sn, n)


def _pattern_test(name: str, test: Callable[[pa.Array, str], pa.Array]) -> Kernel:
    def kernel(args, e, n):
        (s, sn), _ = args
        pat = _const(e, 1, name)
        if pat is None:
            return np.zeros(n, dtype=bool), np.ones(n, dtype=bool)
        out = test(_arrow(s, sn), pat)
        return out.fill_null(False).to_numpy(zero_copy_only=False).astype(bool), sn.copy()
    return kernel


function("starts_with", _strings("ss", "boolean"))(_constant_or_rows(
    _pattern_test("starts_with", lambda a, p: pc.starts_with(a, p)), str.startswith, "boolean", (1,)))
function("ends_with", _strings("ss", "boolean"))(_constant_or_rows(
    _pattern_test("ends_with", lambda a, p: pc.ends_with(a, p)), str.endswith, "boolean", (1,)))
function("contains", _strings("ss", "boolean"))(_constant_or_rows(
    _pattern_test("contains", lambda a, p: pc.match_substring(a, p)), lambda v, p: p in v, "boolean", (1,)))


def _position(args, e, n):
    """position(substr, str): 1-based index of the first occurrence, 0 if none (Spark's locate)."""
    _, (s, sn) = args
    sub = _const(e, 0, "position")
    if sub is None:
        return np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool)
    idx = pc.find_substring(_arrow(s, sn), sub)
    vals, null = _from_arrow(idx.cast(pa.int64()), "bigint")
    # Arrow counts bytes; Spark counts characters: count the characters before a byte offset.
    if any(ord(c) > 127 for c in sub) or any(isinstance(x, str) and not x.isascii() for x in s.tolist()):
        vals = np.array([(x.find(sub) + 1) if isinstance(x, str) else 0 for x in s.tolist()], dtype=np.int64)
        return filled(vals, null, "bigint"), null
    return filled(vals + 1, null, "bigint"), null


def _substring_typer(args):
    if len(args) not in (2, 3) or args[0].type not in ("string", "null") or \
            any(a.type not in ("bigint", "null") for a in args[1:]):
        raise TypeMismatch(f"substring(string, bigint[, bigint]), got ({_names(args)})")
    return "string"


def _substring(args, e, n):
    """SUBSTRING(s, pos[, len]) with SQL's 1-based positions (pos <= 0 counts as Spark does from the end)."""
    pos = _const(e, 1, "substring")
    length = _const(e, 2, "substring") if len(e.args) > 2 else None
    if pos is None or (len(e.args) > 2 and length is None):
        return null_values("string", n), np.ones(n, dtype=bool)
    s = _arrow(*args[0])
    start = pos - 1 if pos > 0 else pos
    if length is None:
        out = pc.utf8_slice_codeunits(s, start)
    elif length <= 0:
        out = pc.utf8_slice_codeunits(s, 0, 0)
    elif start < 0 and start + length >= 0:
        out = pc.utf8_slice_codeunits(s, start)
    else:
        out = pc.utf8_slice_codeunits(s, start, start + length)
    return _from_arrow(out, "string")


function("replace", _strings("sss", "string"))(_constant_or_rows(
    _replace, lambda v, old, new: v.replace(old, new) if old else v, "string", (1, 2)))
function("split_part", _split_part_typer)(_constant_or_rows(_split_part, _split_part_row, "string", (1, 2)))
function("position", _strings("ss", "bigint"))(_constant_or_rows(
    _position, lambda sub, v: v.find(sub) + 1, "bigint", (0,)))
function("substring", _substring_typer)(_constant_or_rows(_substring, _substring_row, "string", (1, 2)))


def like_regex(pattern: str, escape: str | None = "\\") -> str:
    """A SQL LIKE pattern as an anchored regular expression (``%`` any run, ``_`` one character).

    >>> like_regex("a%b_c"), like_regex("100\\\\%")
    ('(?s)^a.*b.c$', '(?s)^100%$')
    """
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if escape and ch == escape:
            if i + 1 >= len(pattern):
                raise SchemaError(f"LIKE pattern {pattern!r} ends with the escape character")
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    return "(?s)^" + "".join(out) + "$"  # (?s): a wildcard matches a newline too


def _like_typer(args):
    if any(a.type not in ("string", "null") for a in args[:2]):
        raise TypeMismatch(f"LIKE needs strings, got ({_names(args[:2])})")
    return "boolean"


def _like_kernel(case_insensitive: bool) -> Kernel:
    def kernel(args, e, n):
        (s, sn) = args[0]
        pat = _const(e, 1, "LIKE")
        esc = _const(e, 2, "LIKE") if len(e.args) > 2 else "\\"
        if pat is None:
            return np.zeros(n, dtype=bool), np.ones(n, dtype=bool)
        out = pc.match_substring_regex(_arrow(s, sn), like_regex(pat, esc), ignore_case=case_insensitive)
        return out.fill_null(False).to_numpy(zero_copy_only=False).astype(bool), sn.copy()
    return kernel


function("like", _like_typer)(_like_kernel(False))
function("ilike", _like_typer)(_like_kernel(True))


def _rlike_typer(args):
    out = _like_typer(args)
    if isinstance(args[1], Lit) and args[1].value is not None:
        from ddflow.plan.java_regex import compiled
        compiled(args[1].value)  # Java's syntax: what Python reads differently is translated or refused here
    return out


def _java_search(pattern: str, text: str) -> bool:
    """``text`` RLIKE ``pattern`` for a pattern read per row: one Spark refuses to compile raises, naming it."""
    from ddflow.plan.java_regex import compiled
    try:
        rx = compiled(pattern)
    except TypeMismatch as err:
        raise SchemaError(f"RLIKE: {err}") from None
    return rx.search(text) is not None


def _rlike_constant(args, e, n):
    from ddflow.plan.java_regex import compiled
    (s, sn), _ = args
    pat = e.args[1].value
    if pat is None:
        return np.zeros(n, dtype=bool), np.ones(n, dtype=bool)
    rx = compiled(pat)
    memo: dict[str, bool] = {}
    out = np.zeros(n, dtype=bool)
    for i, v in enumerate(s.tolist()):
        if not sn[i]:
            hit = memo.get(v)
            if hit is None:
                hit = memo[v] = rx.search(v) is not None
            out[i] = hit
    return out, sn.copy()


#: RLIKE reads Java's syntax through ddflow.plan.java_regex (Python's re), never RE2: their ``.`` and ``$`` differ.
#: Cost: one search per distinct string (a pattern read per row: one per row, compiled once per distinct pattern).
function("rlike", _rlike_typer)(_constant_or_rows(_rlike_constant, lambda v, p: _java_search(p, v), "boolean", (1,)))


# -- dates and timestamps ---------------------------------------------------------------------------------

_DATE_TEXT = re.compile(r"^\s*([+-]?\d{4,})(?:-(\d{1,2})(?:-(\d{1,2}))?)?\s*$")
_TS_TEXT = re.compile(r"^\s*([+-]?\d{4,})-(\d{1,2})-(\d{1,2})(?:[ T](\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d{1,6})\d*)?)?)?"
                      r"\s*(Z|UTC)?\s*$", re.I)


def parse_date(text: str) -> int:
    """Days since the epoch of a date string (Spark's forms: yyyy, yyyy-[m]m, yyyy-[m]m-[d]d)."""
    got = _date_or_none(text)
    if got is None:
        raise SchemaError(f"CAST: {text!r} is not a date (Spark's ANSI mode raises; try_cast gives NULL)")
    return got


def _date_or_none(text: str) -> int | None:
    m = _DATE_TEXT.match(text)
    if not m:
        m2 = _TS_TEXT.match(text)
        if not m2:
            return None
        m = m2
    try:
        d = datetime.date(int(m.group(1)), int(m.group(2) or 1), int(m.group(3) or 1))
    except ValueError:
        return None
    return (d - EPOCH).days


def parse_timestamp(text: str) -> int:
    got = _timestamp_or_none(text)
    if got is None:
        raise SchemaError(f"CAST: {text!r} is not a timestamp (Spark's ANSI mode raises; try_cast gives NULL)")
    return got


def _timestamp_or_none(text: str) -> int | None:
    m = _TS_TEXT.match(text)
    if not m:
        d = _date_or_none(text) if _DATE_TEXT.match(text) else None
        return None if d is None else d * _US_PER_DAY
    try:
        frac = (m.group(7) or "").ljust(6, "0")
        t = datetime.datetime(int(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(4) or 0),
                              int(m.group(5) or 0), int(m.group(6) or 0), int(frac or 0))
    except ValueError:
        return None
    delta = t - datetime.datetime(1970, 1, 1)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def civil(days: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(year, month, day) of int days since the epoch.  O(n), vectorized."""
    d = np.asarray(days, dtype=np.int64).astype("datetime64[D]")
    y = d.astype("datetime64[Y]")
    m = d.astype("datetime64[M]")
    return (y.astype(np.int64) + 1970, (m.astype(np.int64) % 12) + 1,
            (d - m.astype("datetime64[D]")).astype(np.int64) + 1)


def add_months(days: np.ndarray, months: np.ndarray) -> np.ndarray:
    """Spark's add_months: the same day of the month, clamped to the month's last day."""
    d = np.asarray(days, dtype=np.int64).astype("datetime64[D]")
    m = d.astype("datetime64[M]")
    day = (d - m.astype("datetime64[D]")).astype(np.int64)
    target = m + np.asarray(months, dtype=np.int64).astype("timedelta64[M]")
    last = ((target + np.timedelta64(1, "M")).astype("datetime64[D]") - target.astype("datetime64[D]")).astype(np.int64)
    return target.astype("datetime64[D]").astype(np.int64) + np.minimum(day, last - 1)


def _days_of(vals: np.ndarray, typ: str) -> np.ndarray:
    v = np.asarray(vals, dtype=np.int64)
    return v if typ == "date" else np.floor_divide(v, _US_PER_DAY)


_FIELDS = ("year", "quarter", "month", "week", "day", "dayofweek", "dayofyear", "hour", "minute", "second")


def _field_typer(field: str) -> Typer:
    def typer(args):
        (a,) = args
        if a.type not in ("date", "timestamp", "null"):
            raise TypeMismatch(f"{field}() needs a date or timestamp, got {a.type}")
        if field in ("hour", "minute", "second") and a.type == "date":
            raise TypeMismatch(f"{field}() needs a timestamp, got a date")
        return "bigint"
    return typer


def _field_kernel(field: str) -> Kernel:
    def kernel(args, e, n):
        (a, an), = args
        t = e.args[0].type
        days = _days_of(a, t)
        if field in ("hour", "minute", "second"):
            us = np.asarray(a, dtype=np.int64) - days * _US_PER_DAY
            secs = us // 1_000_000
            out = {"hour": secs // 3600, "minute": (secs // 60) % 60, "second": secs % 60}[field]
        elif field == "dayofweek":  # Spark: 1 = Sunday .. 7 = Saturday; 1970-01-01 was a Thursday
            out = (days + 4) % 7 + 1
        elif field == "dayofyear":
            y = days.astype("datetime64[D]").astype("datetime64[Y]").astype("datetime64[D]").astype(np.int64)
            out = days - y + 1
        elif field == "week":  # ISO week number: the week of that week's Thursday, counted in its year
            wd = (days + 3) % 7  # Monday = 0
            thursday = (days - wd + 3)
            ty = thursday.astype("datetime64[D]").astype("datetime64[Y]").astype("datetime64[D]").astype(np.int64)
            out = (thursday - ty) // 7 + 1
        else:
            y, m, dd = civil(days)
            out = {"year": y, "quarter": (m - 1) // 3 + 1, "month": m, "day": dd}[field]
        return filled(np.asarray(out, dtype=np.int64), an, "bigint"), an
    return kernel


for _f in _FIELDS:
    function(_f, _field_typer(_f))(_field_kernel(_f))


def _date_int_typer(args):
    a, b = args
    if a.type not in ("date", "timestamp", "null") or b.type not in ("bigint", "null"):
        raise TypeMismatch(f"needs (date, int), got ({_names(args)})")
    return "date"


def _date_shift(sign: int, months: bool) -> Kernel:
    def kernel(args, e, n):
        (a, an), (b, bn) = args
        null = an | bn
        days = _days_of(a, e.args[0].type)
        k = np.asarray(b, dtype=np.int64) * sign
        out = add_months(days, k) if months else days + k
        return filled(out, null, "date"), null
    return kernel


function("date_add", _date_int_typer)(_date_shift(1, False))
function("date_sub", _date_int_typer)(_date_shift(-1, False))
function("add_months", _date_int_typer)(_date_shift(1, True))


def _datediff_typer(args):
    if any(a.type not in ("date", "timestamp", "null") for a in args):
        raise TypeMismatch(f"datediff(date, date), got ({_names(args)})")
    return "bigint"


@function("datediff", _datediff_typer)
def _datediff(args, e, n):
    (a, an), (b, bn) = args
    null = an | bn
    return filled(_days_of(a, e.args[0].type) - _days_of(b, e.args[1].type), null, "bigint"), null


#: date_trunc's units, as Spark spells them (``'Q'`` is not one: Spark gives NULL for a unit it does not know).
_TRUNC_UNITS = {"year": "Y", "yyyy": "Y", "yy": "Y", "quarter": "Q", "month": "M", "mon": "M", "mm": "M",
                "week": "W", "day": "D", "dd": "D", "hour": "h", "minute": "m", "second": "s",
                "millisecond": "ms", "microsecond": "us"}
#: trunc's units (a date's: Spark's trunc knows no day or finer unit).
_DATE_TRUNC_UNITS = ("year", "yyyy", "yy", "quarter", "month", "mon", "mm", "week")


def _unit(arg) -> str | None:
    """A constant unit, lower-case; None for the NULL literal (either way the caller checks it is a constant)."""
    return None if arg.value is None else str(arg.value).lower()


def _date_trunc_typer(args):
    unit, ts = args
    if unit.type not in ("string", "null") or ts.type not in ("date", "timestamp", "null"):
        raise TypeMismatch(f"date_trunc(unit, timestamp), got ({_names(args)})")
    if not isinstance(unit, Lit):
        raise TypeMismatch("date_trunc's unit as a constant")
    return "timestamp"


def truncate_micros(us: np.ndarray, unit: str) -> np.ndarray:
    """Timestamps (µs) truncated to ``unit`` (Y, Q, M, W, D, h, m, s, ms, us)."""
    us = np.asarray(us, dtype=np.int64)
    days = np.floor_divide(us, _US_PER_DAY)
    if unit in ("h", "m", "s", "ms", "us"):
        step = {"h": 3_600_000_000, "m": 60_000_000, "s": 1_000_000, "ms": 1_000, "us": 1}[unit]
        return us - np.mod(us, step)
    if unit == "D":
        return days * _US_PER_DAY
    if unit == "W":  # Monday
        return (days - (days + 3) % 7) * _US_PER_DAY
    y, m, _ = civil(days)
    if unit == "Q":
        m = (m - 1) // 3 * 3 + 1
    elif unit == "Y":
        m = np.ones_like(m)
    first = ((y - 1970) * 12 + (m - 1)).astype("datetime64[M]").astype("datetime64[D]").astype(np.int64)
    return first * _US_PER_DAY


def _all_null(n: int, typ: str):
    null = np.ones(n, dtype=bool)
    return filled(np.zeros(n, dtype=np.int64), null, typ), null


@function("date_trunc", _date_trunc_typer)
def _date_trunc(args, e, n):
    """A unit Spark does not know (or NULL) gives NULL, as in Spark."""
    _, (a, an) = args
    unit = _TRUNC_UNITS.get(_unit(e.args[0]))
    if unit is None:
        return _all_null(n, "timestamp")
    us = np.asarray(a, dtype=np.int64) * (_US_PER_DAY if e.args[1].type == "date" else 1)
    return filled(truncate_micros(us, unit), an, "timestamp"), an


def _trunc_typer(args):
    d, unit = args
    if d.type not in ("date", "timestamp", "null") or unit.type not in ("string", "null") or not isinstance(unit, Lit):
        raise TypeMismatch("trunc(date, unit) with the unit a constant ('year', 'quarter', 'month' or 'week')")
    return "date"


@function("trunc", _trunc_typer)
def _trunc(args, e, n):
    """A unit Spark's trunc does not know (``'Q'``, ``'day'``, NULL) gives NULL, as in Spark."""
    (a, an), _ = args
    unit = _unit(e.args[1])
    if unit not in _DATE_TRUNC_UNITS:
        return _all_null(n, "date")
    days = _days_of(a, e.args[0].type)
    out = truncate_micros(days * _US_PER_DAY, _TRUNC_UNITS[unit]) // _US_PER_DAY
    return filled(out, an, "date"), an


# -- CAST -------------------------------------------------------------------------------------------------------

_INT_TEXT = r"^\s*[+-]?[0-9]+\s*$"
_FLOAT_TEXT = r"^\s*[+-]?([0-9]+\.?[0-9]*([eE][+-]?[0-9]+)?|\.[0-9]+([eE][+-]?[0-9]+)?|(?i:inf|infinity|nan))\s*$"
_DEC_TEXT = re.compile(r"^\s*([+-]?)([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]+))?\s*$")


def _cast_typer(args):
    raise TypeMismatch("a CAST's type is its target: build it with functions.cast")


def cast(arg: Expr, to: str, safe: bool = False) -> Call:
    """``CAST(arg AS to)`` (``safe``: ``try_cast``, NULL where CAST raises); a cast Spark refuses is refused."""
    src = arg.type
    ok = (src == "null" or src == to or to == "string" or (numeric(src) and numeric(to))
          or (src == "string" and to in ("bigint", "double", "boolean", "date", "timestamp") or
              (src == "string" and is_decimal(to)))
          or (src == "boolean" and (numeric(to)))
          or (numeric(src) and to == "boolean")
          or ({src, to} <= {"date", "timestamp"}))
    if not ok:
        raise SchemaError(f"SQL: CAST from {src} to {to} is not supported")
    if isinstance(arg, Lit) and src == "string" and arg.value is not None and to in ("date", "timestamp"):
        got = _date_or_none(arg.value) if to == "date" else _timestamp_or_none(arg.value)
        if got is None and not safe:
            raise SchemaError(f"SQL: CAST({arg.value!r} AS {to}): not a {to}")
        return Call("try_cast" if safe else "cast", (Lit(got, to),), to)
    return Call("try_cast" if safe else "cast", (arg,), to)


def _cast_kernel(safe: bool) -> Kernel:
    def kernel(args, e, n):
        (a, an), = args
        return cast_values(a, an, e.args[0].type, e.type, safe)
    return kernel


function("cast", _cast_typer)(_cast_kernel(False))
function("try_cast", _cast_typer)(_cast_kernel(True))


def _bad(bad: np.ndarray, a: np.ndarray, src: str, dst: str, safe: bool, null: np.ndarray) -> np.ndarray:
    """Rows a CAST cannot convert: NULL for try_cast, an error for CAST (ANSI)."""
    if bad.any():
        if not safe:
            example = a[np.flatnonzero(bad)[0]]
            raise SchemaError(f"CAST from {src} to {dst}: {example!r} does not convert "
                              "(Spark's ANSI mode raises; try_cast gives NULL)")
        null = null | bad
    return null


def _parsed(a: np.ndarray, an: np.ndarray, pattern: str, to: pa.DataType, safe: bool, dst: str) -> Column:
    s = _arrow(a, an)
    ok = pc.fill_null(pc.match_substring_regex(s, pattern), False).to_numpy(zero_copy_only=False).astype(bool)
    null = _bad(~an & ~ok, a, "string", dst, safe, an.copy())
    try:
        good = pc.cast(pc.utf8_trim_whitespace(pc.if_else(pa.array(ok), s, pa.scalar("0"))), to)
    except pa.ArrowInvalid as err:  # an integer past int64
        if not safe:
            raise SchemaError(f"CAST to {dst}: {err}") from None
        vals = np.array([_int_or_none(x) for x in a.tolist()], dtype=object)
        null = null | np.array([v is None for v in vals.tolist()])
        return filled(np.array([v or 0 for v in vals.tolist()], dtype=np.int64), null, dst), null
    return filled(good.to_numpy(zero_copy_only=False), null, dst), null


def _int_or_none(x):
    try:
        v = int(str(x).strip())
    except ValueError:
        return None
    return v if -(1 << 63) <= v < (1 << 63) else None


def _decimal_text(x: str, s: int) -> int | None:
    """The unscaled value of decimal text at scale ``s`` (HALF_UP), None if it does not parse."""
    m = _DEC_TEXT.match(x) if isinstance(x, str) else None
    if not m or not (m.group(2) or m.group(3)):
        return None
    digits = (m.group(2) or "") + (m.group(3) or "")
    exp = int(m.group(4) or 0) - len(m.group(3) or "")
    v = int(digits or "0")
    shift = exp + s
    if shift >= 0:
        v *= 10 ** shift
    else:
        d = 10 ** (-shift)
        q, r = divmod(v, d)
        v = q + (1 if 2 * r >= d else 0)
    return -v if m.group(1) == "-" else v


def cast_values(a: np.ndarray, an: np.ndarray, src: str, dst: str, safe: bool = False) -> Column:
    """CAST over a column, with Spark 4's ANSI rules (``safe``: try_cast's NULLs instead of errors)."""
    n = len(a)
    if src == "null":
        return null_values(dst, n), an
    if src == dst:
        return as_type(a, dst), an
    null = an.copy()
    ok = ~an
    if dst == "string":
        return _to_string(a, an, src), null
    if is_decimal(dst):
        p, s = decimal_ps(dst)
        if src == "string":
            vals = np.array([_decimal_text(x, s) if good else 0 for x, good in zip(a.tolist(), ok.tolist())],
                            dtype=object)
            bad = np.array([v is None for v in vals.tolist()], dtype=bool) & ok
            null = _bad(bad, a, src, dst, safe, null)
            vals = np.array([0 if v is None else v for v in vals.tolist()], dtype=object)
        elif src == "double":
            f = np.asarray(a, dtype=np.float64)
            bad = ok & ~np.isfinite(f)
            null = _bad(bad, a, src, dst, safe, null)
            vals = np.array([_decimal_text(repr(float(x)), s) if good and not b else 0
                             for x, good, b in zip(f.tolist(), ok.tolist(), bad.tolist())], dtype=object)
        elif src == "boolean":
            vals = rescaled(np.asarray(a, dtype=np.int64), s)
        else:
            vals = as_decimal(np.where(ok, a, 0), src, s)
        live = ~null
        if safe:  # out of range: NULL
            limit = 10 ** p
            over = np.array([abs(int(v)) >= limit for v in vals.tolist()], dtype=bool) & live
            null = null | over
            live = ~null
        return fitted(np.asarray(vals), live, dst, f"CAST to {dst}"), null
    if dst == "double":
        if src == "string":
            return _parsed(a, an, _FLOAT_TEXT, pa.float64(), safe, "double")
        if is_decimal(src):
            return filled(decimal_to_float(a, src), null, "double"), null
        return filled(np.asarray(a, dtype=np.float64), null, "double"), null
    if dst == "bigint":
        if src == "double":
            f = np.asarray(a, dtype=np.float64)
            bad = ok & (~np.isfinite(f) | (f >= 2.0 ** 63) | (f < -(2.0 ** 63)))
            null = _bad(bad, a, src, dst, safe, null)
            return filled(np.trunc(np.where(null, 0, f)).astype(np.int64), null, "bigint"), null
        if src == "string":
            return _parsed(a, an, _INT_TEXT, pa.int64(), safe, "bigint")
        if is_decimal(src):  # truncates toward zero
            d = 10 ** _scale_of(src)
            v = unscaled(np.where(ok, a, 0))
            q = np.sign(v) * (np.abs(v) // d)
            if q.dtype == object:  # a wide decimal's Python ints
                q = unscaled(q)
                if q.dtype == object:
                    over = np.array([not _I64.min <= u <= _I64.max for u in q.tolist()], dtype=bool)
                    null = _bad(over, a, src, dst, safe, null)
                    q = np.where(over, 0, q).astype(np.int64)
            return filled(q, null, "bigint"), null
        if src in ("date", "timestamp"):
            raise SchemaError(f"CAST from {src} to bigint is not supported (use unix_date / EXTRACT)")
        return filled(np.asarray(a, dtype=np.int64), null, "bigint"), null
    if dst == "boolean":
        if src == "string":
            low = pc.utf8_lower(pc.utf8_trim_whitespace(_arrow(a, an)))
            t = pc.fill_null(pc.is_in(low, pa.array(["true", "t", "yes", "y", "1"])), False).to_numpy(
                zero_copy_only=False)
            f = pc.fill_null(pc.is_in(low, pa.array(["false", "f", "no", "n", "0"])), False).to_numpy(
                zero_copy_only=False)
            null = _bad(ok & ~(t | f), a, src, dst, safe, null)
            return t.astype(bool) & ~null, null
        return filled(np.asarray(a, dtype=np.float64) != 0, null, "boolean"), null
    if dst in ("date", "timestamp"):
        if src == "string":
            parse = _date_or_none if dst == "date" else _timestamp_or_none
            vals = [parse(x) if good else 0 for x, good in zip(a.tolist(), ok.tolist())]
            bad = np.array([v is None for v in vals], dtype=bool)
            null = _bad(bad, a, src, dst, safe, null)
            return filled(np.array([v or 0 for v in vals], dtype=np.int64), null, dst), null
        v = np.asarray(a, dtype=np.int64)
        out = v * _US_PER_DAY if dst == "timestamp" else np.floor_divide(v, _US_PER_DAY)
        return filled(out, null, dst), null
    raise SchemaError(f"CAST from {src} to {dst} is not supported")


def _to_string(a: np.ndarray, an: np.ndarray, src: str) -> np.ndarray:
    if src == "boolean":
        vals = np.where(np.asarray(a, dtype=bool), "true", "false").astype(object)
    elif is_decimal(src):
        s = _scale_of(src)
        vals = np.array([format(from_unscaled(int(v), s), "f") for v in a.tolist()], dtype=object)
    elif src == "date":
        vals = np.array([from_days(v).isoformat() for v in a.tolist()], dtype=object)
    elif src == "timestamp":
        vals = np.array([_ts_text(v) for v in a.tolist()], dtype=object)
    elif src == "double":
        vals = np.array([_double_text(v) for v in a.tolist()], dtype=object)
    else:
        vals = np.array([str(int(v)) for v in a.tolist()], dtype=object)
    return filled(vals, an, "string")


def _ts_text(us: int) -> str:
    t = from_micros(us)
    text = t.strftime("%Y-%m-%d %H:%M:%S")
    if t.microsecond:
        text += f".{t.microsecond:06d}".rstrip("0")
    return text


def _double_text(v: float) -> str:
    """Spark's text of a double: ``1.0``, ``1.0E10`` past 1e7, ``NaN``, ``Infinity``."""
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "Infinity" if v > 0 else "-Infinity"
    if v == 0 or 1e-3 <= abs(v) < 1e7:
        r = repr(float(v))
        return r if "e" not in r else format(v, "f")
    sign, digits, exp = decimal.Decimal(repr(float(v))).normalize().as_tuple()  # the shortest repr's digits
    text = "".join(map(str, digits))
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{len(digits) - 1 + exp}"


# -- intervals -------------------------------------------------------------------------------------------------

_UNITS_US = {"microsecond": 1, "millisecond": 1000, "second": 1_000_000, "minute": 60_000_000,
             "hour": 3_600_000_000, "day": _US_PER_DAY, "week": 7 * _US_PER_DAY}
_UNITS_MONTHS = {"month": 1, "year": 12}


def interval(amount: str | int, unit: str) -> Lit:
    """An INTERVAL literal: months (year-month) or microseconds (day-time).

    >>> interval("90", "DAY"), interval(3, "months")
    (Lit(value=7776000000000, type='interval_dt'), Lit(value=3, type='interval_ym'))
    """
    u = unit.lower().rstrip("s") if unit.lower() not in ("ms",) else "millisecond"
    try:
        k = int(str(amount).strip())
    except ValueError:
        raise SchemaError(f"SQL: INTERVAL {amount!r} {unit}: the amount must be a whole number") from None
    if u in _UNITS_MONTHS:
        return Lit(k * _UNITS_MONTHS[u], "interval_ym")
    if u in _UNITS_US:
        return Lit(k * _UNITS_US[u], "interval_dt")
    raise SchemaError(f"SQL: INTERVAL unit {unit!r} is not supported (year, month, week, day, hour, minute, "
                      "second, millisecond, microsecond)")


# The rest of the table lives in modules of their own, which register their entries into it on import.
from ddflow.plan import bits, datetimes, maths, nulls, strings, units, zones  # noqa: E402,F401
