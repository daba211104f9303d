"""Scalar expressions of the plan IR, evaluated over whole columns with SQL NULLs.

A column in evaluation is a pair ``(values, null)``: a numpy array of
values (int64 for bigint, decimal (unscaled), date (days) and timestamp
(microseconds); float64; bool; objects for strings) and a bool array
that is True where the value is NULL.  Every operator works on whole
arrays.  NULL semantics are SQL's: arithmetic and comparisons with a
NULL are NULL, AND/OR/NOT use three-valued logic, WHERE keeps only TRUE.
The logical forms (AND, OR, NOT, IS NULL, CASE, COALESCE) live here;
every other operator and function is one entry of
:mod:`ddflow.plan.functions`, its typing and its kernel together.

>>> a = Col(0, "bigint", "a")
>>> e = Call("+", (a, Lit(1, "bigint")), "bigint")
>>> vals, null = evaluate(e, [(np.array([1, 0]), np.array([False, True]))])
>>> vals.tolist(), null.tolist()
([2, 0], [False, True])
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

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
        if self.value is None:
            return "NULL"
        if self.type in ("date", "timestamp") or self.type.startswith("decimal("):
            from ddflow.base.schema import decode_value
            v = decode_value(self.value, self.type)
            return f"{self.type.split('(')[0].upper()} '{v}'"
        if self.type.startswith("interval"):
            return f"INTERVAL {self.value} {'MONTHS' if self.type == 'interval_ym' else 'MICROSECONDS'}"
        return repr(self.value)


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


BINARY = {"+", "-", "*", "/", "%", "=", "<>", "<", "<=", ">", ">=", "and", "or", "like", "ilike", "rlike"}
#: The logical forms :func:`evaluate` handles itself (their arguments are not all evaluated alike).
FORMS = {"and", "or", "not", "is_null", "is_not_null", "coalesce", "case"}
#: Kernels of every other operator, by name: filled by :mod:`ddflow.plan.functions`, the one table.
KERNELS: dict = {}


class _Ops:
    """Every operator ``evaluate`` knows (the forms and the function table's names)."""

    def __contains__(self, op) -> bool:
        return op in FORMS or op in KERNELS

    def __iter__(self):
        return iter(sorted(FORMS | set(KERNELS)))


OPS = _Ops()

#: The numpy dtype of each SQL type's values in evaluation (any other type: Python objects).
DTYPES = {"bigint": np.int64, "double": np.float64, "boolean": bool, "date": np.int64, "timestamp": np.int64,
          "interval_ym": np.int64, "interval_dt": np.int64}


def dtype_of(typ: str):
    return np.int64 if typ.startswith("decimal(") else DTYPES.get(typ, object)


def as_type(vals: np.ndarray, typ: str) -> np.ndarray:
    """``vals`` as the numpy dtype of SQL type ``typ`` (no copy when it already is)."""
    return vals.astype(dtype_of(typ), copy=False)


def null_values(typ: str, n: int) -> np.ndarray:
    """``n`` value fields of NULLs of SQL type ``typ``: its canonical value (0, 0.0, False or None)."""
    return np.full(n, NULL_VALUE[KIND.get(typ, "i")], dtype=dtype_of(typ))


def filled(vals: np.ndarray, null: np.ndarray, typ: str) -> np.ndarray:
    """``vals`` with every NULL position holding the type's canonical value."""
    if not null.any():
        return vals
    out = vals.copy()
    out[null] = NULL_VALUE[KIND.get(typ, "i")]
    return out


def evaluate(e: Expr, cols: Sequence[Column]) -> Column:
    """``(values, null)`` of ``e`` over columns ``cols`` (all of one length).  O(n) numpy/Arrow calls per node."""
    n = len(cols[0][0]) if cols else 0
    if isinstance(e, Col):
        return cols[e.index]
    if isinstance(e, Lit):
        typ = e.type if e.type != "null" else "bigint"
        if e.value is None:
            return null_values(typ, n), np.ones(n, dtype=bool)
        vals = np.empty(n, dtype=dtype_of(typ))
        vals[:] = e.value
        return vals, np.zeros(n, dtype=bool)
    assert isinstance(e, Call)
    op = e.op
    if op == "case":  # args: cond1, val1, cond2, val2, ..., else; each value only on the rows that take it
        *pairs, other = e.args
        vals, null = np.empty(n, dtype=dtype_of(e.type)), np.zeros(n, dtype=bool)
        if vals.dtype != object:
            vals[:] = 0
        left = np.ones(n, dtype=bool)  # rows no branch has taken yet
        for i in range(0, len(pairs), 2):
            idx = np.flatnonzero(left)
            cv, cn = evaluate(pairs[i], _rows(cols, idx, n))
            hit = idx[~cn & cv.astype(bool)]
            if len(hit):
                v, vn = evaluate(pairs[i + 1], _rows(cols, hit, n))
                vals[hit], null[hit] = as_type(v, e.type), vn
                left[hit] = False
        idx = np.flatnonzero(left)
        if len(idx):
            v, vn = evaluate(other, _rows(cols, idx, n))
            vals[idx], null[idx] = as_type(v, e.type), vn
        return filled(vals, null, e.type), null
    if op == "coalesce":  # each argument only on the rows still NULL
        vals, null = evaluate(e.args[0], cols)
        vals, null = as_type(vals, e.type).copy(), null.copy()
        for a in e.args[1:]:
            idx = np.flatnonzero(null)
            if not len(idx):
                break
            v, vn = evaluate(a, _rows(cols, idx, n))
            vals[idx], null[idx] = as_type(v, e.type), vn
        return filled(vals, null, e.type), null
    if op in ("and", "or"):  # the right side only where the left does not decide (Spark short-circuits)
        a, an = evaluate(e.args[0], cols)
        a = a.astype(bool) & ~an
        decided = (~an & ~a) if op == "and" else a
        b, bn = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        idx = np.flatnonzero(~decided)
        if len(idx):
            bv, bnv = evaluate(e.args[1], _rows(cols, idx, n))
            b[idx], bn[idx] = bv.astype(bool) & ~bnv, bnv
        if op == "and":
            false = (~an & ~a) | (~bn & ~b)
            return a & b, ~false & (an | bn)
        true = a | b
        return true, ~true & (an | bn)
    args = [evaluate(a, cols) for a in e.args]
    if op == "not":
        (a, an), = args
        return ~a.astype(bool) & ~an, an
    if op == "is_null":
        return args[0][1].copy(), np.zeros(n, dtype=bool)
    if op == "is_not_null":
        return ~args[0][1], np.zeros(n, dtype=bool)
    kernel = KERNELS.get(op)
    if kernel is None:
        raise SchemaError(f"unknown operator {op!r}")
    return kernel(args, e, n)


def _rows(cols: Sequence[Column], idx: np.ndarray, n: int) -> list[Column]:
    """The columns at rows ``idx`` (with no columns: a dummy one, so constants get their length)."""
    if not cols:
        return [(np.zeros(len(idx), dtype=np.int64), np.zeros(len(idx), dtype=bool))]
    return [(v[idx], vn[idx]) for v, vn in cols]


from ddflow.plan import functions  # noqa: E402,F401  (fills KERNELS: the function table)
