"""Scalar expressions of the plan IR, evaluated over whole columns with SQL NULLs.

A column in evaluation is a pair ``(values, null)``: a numpy array of
values (objects for strings, dates and timestamps) and a bool array that
is True where the value is NULL.  Every operator works on whole arrays:
numpy for numbers and logic, ``pyarrow.compute`` for strings; nothing
loops over rows in Python.  NULL semantics are SQL's: arithmetic and
comparisons with a NULL are NULL, AND/OR/NOT use three-valued logic,
WHERE keeps only TRUE.  Spark's choices where SQL dialects differ:
``/`` always divides as doubles, and a division or modulo by zero is
NULL.  An integer result past int64 is an error, never a wrapped value.

>>> a = Col(0, "bigint", "a")
>>> e = Call("+", (a, Lit(1, "bigint")), "bigint")
>>> vals, null = evaluate(e, [(np.array([1, 0]), np.array([False, True]))])
>>> vals.tolist(), null.tolist()
([2, 0], [False, True])
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ddflow.base.columnar import wrapping_products
from ddflow.base.schema import KIND, NULL_VALUE
from ddflow.errors import SchemaError

Column = tuple[np.ndarray, np.ndarray]


class Expr:
    """A scalar expression; ``type`` is its canonical SQL type ("null" for a bare NULL literal)."""

    type: str

    def children(self) -> tuple["Expr", ...]:
        return ()

    def columns(self) -> set[int]:
        """Input column positions the expression reads."""
        out: set[int] = set()
        for c in self.children():
            out |= c.columns()
        return out


@dataclass(frozen=True)
class Col(Expr):
    """Input column ``index`` (``name`` for plans and errors only)."""

    index: int
    type: str
    name: str = ""

    def columns(self) -> set[int]:
        return {self.index}

    def __str__(self) -> str:
        return self.name or f"#{self.index}"


@dataclass(frozen=True)
class Lit(Expr):
    """A constant; ``None`` is NULL."""

    value: Any
    type: str

    def __str__(self) -> str:
        return "NULL" if self.value is None else repr(self.value)


@dataclass(frozen=True)
class Call(Expr):
    """An operator or function applied to argument expressions (see :data:`OPS`)."""

    op: str
    args: tuple[Expr, ...]
    type: str

    def __post_init__(self):
        if self.op not in OPS:
            raise SchemaError(f"unknown operator {self.op!r}")

    def children(self) -> tuple[Expr, ...]:
        return self.args

    def __str__(self) -> str:
        if self.op in BINARY and len(self.args) == 2:
            return f"({self.args[0]} {self.op} {self.args[1]})"
        return f"{self.op}({', '.join(map(str, self.args))})"


def conjuncts(e: Expr) -> list[Expr]:
    """The parts of a chain of ANDs."""
    if isinstance(e, Call) and e.op == "and":
        return conjuncts(e.args[0]) + conjuncts(e.args[1])
    return [e]


def conjunction(parts: list[Expr]) -> Expr | None:
    """The AND of ``parts`` (None for none)."""
    out = None
    for p in parts:
        out = p if out is None else Call("and", (out, p), "boolean")
    return out


def remapped(e: Expr, m) -> Expr:
    """``e`` reading column ``m[i]`` wherever it read column ``i`` (``m`` a mapping or a function)."""
    if isinstance(e, Col):
        return Col(m(e.index) if callable(m) else m[e.index], e.type, e.name)
    if isinstance(e, Call):
        return Call(e.op, tuple(remapped(a, m) for a in e.args), e.type)
    return e


BINARY = {"+", "-", "*", "/", "%", "=", "<>", "<", "<=", ">", ">=", "and", "or", "like"}
#: Every operator ``evaluate`` knows.
OPS = BINARY | {"neg", "not", "is_null", "is_not_null", "coalesce", "case", "cast", "concat", "lower", "upper",
                "substring", "length", "abs"}


#: The numpy dtype of each SQL type's values in evaluation (any other type: Python objects).
DTYPES = {"bigint": np.int64, "double": np.float64, "boolean": bool}


def as_type(vals: np.ndarray, typ: str) -> np.ndarray:
    """``vals`` as the numpy dtype of SQL type ``typ`` (no copy when it already is)."""
    return vals.astype(DTYPES.get(typ, object), copy=False)


def null_values(typ: str, n: int) -> np.ndarray:
    """``n`` value fields of NULLs of SQL type ``typ``: its canonical value (0, 0.0, False or None)."""
    return np.full(n, NULL_VALUE[KIND[typ]], dtype=DTYPES.get(typ, object))


def filled(vals: np.ndarray, null: np.ndarray, typ: str) -> np.ndarray:
    """``vals`` with every NULL position holding the type's canonical value."""
    if not null.any():
        return vals
    out = vals.copy()
    out[null] = NULL_VALUE[KIND.get(typ, "o")]
    return out


def _arrow(vals: np.ndarray, null: np.ndarray) -> pa.Array:
    return pa.array(vals.tolist() if vals.dtype == object else vals, type=pa.string(), mask=null) \
        if vals.dtype == object else pa.array(vals, mask=null)


def _from_arrow(a: pa.Array, typ: str) -> Column:
    null = a.is_null().to_numpy(zero_copy_only=False).astype(bool)
    if typ in ("string", "date", "timestamp"):
        vals = np.array(a.to_pylist(), dtype=object)
    else:
        vals = a.fill_null(NULL_VALUE[KIND[typ]]).to_numpy(zero_copy_only=False)
    return filled(as_type(vals, typ), null, typ), null


def _checked_int(op: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
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


def evaluate(e: Expr, cols: Sequence[Column]) -> Column:
    """``(values, null)`` of ``e`` over columns ``cols`` (all of one length).  O(n) numpy/Arrow calls per node."""
    n = len(cols[0][0]) if cols else 0
    if isinstance(e, Col):
        return cols[e.index]
    if isinstance(e, Lit):
        typ = e.type if e.type != "null" else "bigint"
        if e.value is None:
            return null_values(typ, n), np.ones(n, dtype=bool)
        vals = np.empty(n, dtype=DTYPES.get(typ, object))
        vals[:] = e.value
        return vals, np.zeros(n, dtype=bool)
    assert isinstance(e, Call)
    op = e.op
    if op == "case":  # args: cond1, val1, cond2, val2, ..., else
        *pairs, other = e.args
        vals, null = evaluate(other, cols)
        vals, null = as_type(vals, e.type).copy(), null.copy()
        done = np.zeros(n, dtype=bool)
        for i in range(0, len(pairs), 2):
            cv, cn = evaluate(pairs[i], cols)
            hit = ~done & ~cn & cv.astype(bool)
            v, vn = evaluate(pairs[i + 1], cols)
            vals[hit] = as_type(v, e.type)[hit]
            null[hit] = vn[hit]
            done |= hit
        return filled(vals, null, e.type), null
    if op == "coalesce":
        vals, null = evaluate(e.args[0], cols)
        vals, null = as_type(vals, e.type).copy(), null.copy()
        for a in e.args[1:]:
            v, vn = evaluate(a, cols)
            take = null & ~vn
            vals[take] = as_type(v, e.type)[take]
            null &= vn
        return vals, null
    args = [evaluate(a, cols) for a in e.args]
    if op in ("and", "or"):
        (a, an), (b, bn) = args
        a, b = a.astype(bool) & ~an, b.astype(bool) & ~bn
        if op == "and":
            false = (~an & ~a) | (~bn & ~b)
            null = ~false & (an | bn)
            return a & b, null
        true = a | b
        null = ~true & (an | bn)
        return true, null
    if op == "not":
        (a, an), = args
        return ~a.astype(bool) & ~an, an
    if op == "is_null":
        return args[0][1].copy(), np.zeros(n, dtype=bool)
    if op == "is_not_null":
        return ~args[0][1], np.zeros(n, dtype=bool)
    null = np.zeros(n, dtype=bool)
    for _, an in args:
        null = null | an
    ok = ~null
    if op in ("+", "-", "*", "/", "%", "neg", "abs"):
        if op == "neg":
            (a, _), = args
            a = as_type(a, e.type)
            if e.type == "bigint" and (a[ok] == np.iinfo(np.int64).min).any():
                raise SchemaError("integer overflow in negation: a result does not fit in bigint")
            return filled(-a, null, e.type), null
        if op == "abs":
            (a, _), = args
            a = as_type(a, e.type)
            if e.type == "bigint" and (a[ok] == np.iinfo(np.int64).min).any():
                raise SchemaError("integer overflow in abs: a result does not fit in bigint")
            return filled(np.abs(a), null, e.type), null
        (a, _), (b, _) = args
        if op == "/" or e.type == "double":
            a, b = a.astype(np.float64), b.astype(np.float64)
        else:
            a, b = a.astype(np.int64), b.astype(np.int64)
        if op in ("/", "%"):
            zero = ok & (b == 0)
            null = null | zero
            ok = ~null
            b = np.where(ok, b, 1)
            with np.errstate(all="ignore"):
                r = a / b if op == "/" else np.fmod(a, b)  # SQL's remainder takes the dividend's sign
            return filled(r.astype(np.float64 if op == "/" else r.dtype), null, e.type), null
        if e.type == "bigint":
            r = np.zeros(n, dtype=np.int64)
            r[ok] = _checked_int(op, a[ok], b[ok])
            return r, null
        with np.errstate(all="ignore"):
            r = a + b if op == "+" else (a - b if op == "-" else a * b)
        return filled(r, null, e.type), null
    if op in ("=", "<>", "<", "<=", ">", ">="):
        (a, _), (b, _) = args
        out = np.zeros(n, dtype=bool)
        if ok.any():
            x, y = a[ok], b[ok]
            if x.dtype == object or y.dtype == object:
                x, y = x.astype(object), y.astype(object)
            fn = {"=": np.equal, "<>": np.not_equal, "<": np.less, "<=": np.less_equal,
                  ">": np.greater, ">=": np.greater_equal}[op]
            out[ok] = fn(x, y).astype(bool)
        return out, null
    if op == "cast":
        (a, an), = args
        return _cast(a, an, e.args[0].type, e.type)
    # Strings, through Arrow.
    arrs = [_arrow(as_type(v, a.type) if a.type != "null" else v.astype(object), vn) for (v, vn), a in zip(args, e.args)]
    if op == "concat":
        out = pc.binary_join_element_wise(*arrs, "", null_handling="emit_null")
    elif op == "lower":
        out = pc.utf8_lower(arrs[0])
    elif op == "upper":
        out = pc.utf8_upper(arrs[0])
    elif op == "length":
        out = pc.utf8_length(arrs[0]).cast(pa.int64())
    elif op == "substring":
        return _substring(args, e.args, n)
    elif op == "like":
        return _like(args, e.args, n)
    else:
        raise SchemaError(f"unknown operator {op!r}")
    return _from_arrow(out, e.type)


def _substring(args: list[Column], exprs: Sequence[Expr], n: int) -> Column:
    """SUBSTRING(s, pos[, len]) with SQL's 1-based positions (pos <= 0 counts as Spark does from the end)."""
    if not all(isinstance(x, Lit) for x in exprs[1:]):
        raise SchemaError("substring: the position and length must be constants here")
    pos = int(exprs[1].value)
    length = int(exprs[2].value) if len(exprs) > 2 else None
    s = _arrow(args[0][0].astype(object), args[0][1])
    if pos > 0:
        start = pos - 1
    elif pos < 0:
        start = pos
    else:
        start = 0
    if length is None:
        out = pc.utf8_slice_codeunits(s, start)
    elif length <= 0:
        out = pc.utf8_slice_codeunits(s, 0, 0)
    elif start < 0 and start + length >= 0:
        out = pc.utf8_slice_codeunits(s, start)
    else:
        out = pc.utf8_slice_codeunits(s, start, start + length)
    vals, null = _from_arrow(out, "string")
    null = null | args[1][1] | (args[2][1] if len(args) > 2 else False)
    return vals, null


def _like(args: list[Column], exprs: Sequence[Expr], n: int) -> Column:
    """``s LIKE pattern`` (``%`` any run, ``_`` one character), a constant pattern."""
    if not isinstance(exprs[1], Lit):
        raise SchemaError("LIKE: the pattern must be a constant here")
    (s, sn), _ = args
    if exprs[1].value is None:
        return np.zeros(n, dtype=bool), np.ones(n, dtype=bool)
    regex = "".join(".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in exprs[1].value)
    out = pc.match_substring_regex(_arrow(s.astype(object), sn), f"^{regex}$")
    return out.fill_null(False).to_numpy(zero_copy_only=False).astype(bool), sn.copy()


_INT_TEXT = r"^\s*[+-]?[0-9]+\s*$"
_FLOAT_TEXT = r"^\s*[+-]?([0-9]+\.?[0-9]*([eE][+-]?[0-9]+)?|\.[0-9]+([eE][+-]?[0-9]+)?|(?i:inf|infinity|nan))\s*$"


def _parsed(a: np.ndarray, an: np.ndarray, pattern: str, to: pa.DataType) -> Column:
    """Strings cast through Arrow where they match ``pattern``; the others are NULL (Spark's non-ANSI CAST)."""
    s = _arrow(a.astype(object), an)
    ok = pc.fill_null(pc.match_substring_regex(s, pattern), False)
    try:
        good = pc.cast(pc.utf8_trim_whitespace(pc.if_else(ok, s, pa.scalar("0"))), to)
    except pa.ArrowInvalid as err:
        raise SchemaError(f"CAST to {to}: {err}") from None
    vals = good.to_numpy(zero_copy_only=False)
    null = an | ~ok.to_numpy(zero_copy_only=False).astype(bool)
    return filled(vals, null, "bigint" if pa.types.is_integer(to) else "double"), null


def _cast(a: np.ndarray, an: np.ndarray, src: str, dst: str) -> Column:
    """CAST with Spark's non-ANSI rules: a string that does not parse is NULL; doubles truncate to bigint."""
    n = len(a)
    if src == "null":  # a NULL literal: NULLs of the target type
        return null_values(dst, n), an
    if src == dst:
        return as_type(a, dst), an
    null = an.copy()
    if dst == "string":
        if src == "boolean":
            vals = np.where(a.astype(bool), "true", "false").astype(object)
        elif src in ("date", "timestamp"):
            vals = _from_arrow(pc.cast(pa.array(a.tolist(), mask=an), pa.string()), "string")[0]
        else:
            vals = _from_arrow(pc.cast(pa.array(a, mask=an), pa.string()), "string")[0]
        return filled(vals, null, "string"), null
    if dst == "double":
        if src == "string":
            return _parsed(a, an, _FLOAT_TEXT, pa.float64())
        return filled(a.astype(np.float64), null, "double"), null
    if dst == "bigint":
        if src == "double":
            bad = ~an & ~np.isfinite(a)
            big = ~an & np.isfinite(a) & ((a >= 2.0 ** 63) | (a < -(2.0 ** 63)))
            if big.any():
                raise SchemaError("CAST to bigint: a double does not fit in bigint")
            null |= bad
            return filled(np.trunc(np.where(null, 0, a)).astype(np.int64), null, "bigint"), null
        if src == "string":
            return _parsed(a, an, _INT_TEXT, pa.int64())
        return filled(a.astype(np.int64), null, "bigint"), null
    if dst == "boolean":
        if src == "string":
            low = pc.utf8_lower(pc.utf8_trim_whitespace(_arrow(a.astype(object), an)))
            t = pc.fill_null(pc.is_in(low, pa.array(["true", "t", "yes", "y", "1"])), False).to_numpy(zero_copy_only=False)
            f = pc.fill_null(pc.is_in(low, pa.array(["false", "f", "no", "n", "0"])), False).to_numpy(zero_copy_only=False)
            null |= ~(t | f)
            return t.astype(bool), null
        return filled(a.astype(np.float64) != 0, null, "boolean"), null
    raise SchemaError(f"CAST from {src} to {dst} is not supported")
