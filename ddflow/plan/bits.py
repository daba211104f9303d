"""Spark's bitwise operators and functions on bigints: ``&``, ``|``, ``^``, ``~``, ``shiftleft``,
``shiftright``, ``shiftrightunsigned``, ``bit_count`` and ``getbit``, as Java's ``long`` computes them (two's
complement; a shift count is taken modulo 64; a bit position outside 0..63 raises).  NULL in, NULL out.

Cost: O(n) numpy operations per call.  An ``int`` column is a bigint here, so a shift of one wraps at 64
bits where Spark's ``int`` wraps at 32 (docs/sql.md: the stated int difference).

>>> from ddflow.plan.expr import Col, Lit, evaluate
>>> from ddflow.plan.functions import typed
>>> e = typed("shiftrightunsigned", (Col(0, "bigint"), Lit(60, "bigint")))
>>> evaluate(e, [(np.array([-1, 16]), np.array([False, False]))])[0].tolist()
[15, 0]
"""
from __future__ import annotations

import numpy as np

from ddflow.errors import SchemaError
from ddflow.plan.expr import filled
from ddflow.plan.functions import TypeMismatch, _names, function


def int64_typer(arity: int, name: str, noun: str = "integer"):
    """The typer of a function of ``arity`` bigints to a bigint (``noun`` names them in its refusal)."""
    def typer(args):
        if len(args) != arity or any(a.type not in ("bigint", "null") for a in args):
            raise TypeMismatch(f"{name} takes {arity} {noun}{'s' * (arity > 1)}, got ({_names(args)})")
        return "bigint"
    return typer


def int64_kernel(fn):
    """The kernel of ``fn`` over int64 columns (numpy's wrapping arithmetic), NULL where any argument is."""
    def kernel(args, e, n):
        null = np.zeros(n, dtype=bool)
        xs = []
        for v, vn in args:
            null = null | vn
            xs.append(np.asarray(v, dtype=np.int64))
        with np.errstate(all="ignore"):
            out = np.asarray(fn(*xs), dtype=np.int64)
        return filled(out, null, "bigint"), null
    return kernel


def _popcount(x: np.ndarray) -> np.ndarray:
    """Set bits of each int64 (Java's ``Long.bitCount``: of the two's complement)."""
    u = x.view(np.uint64)
    return np.unpackbits(u.view(np.uint8).reshape(-1, 8), axis=1).sum(axis=1).astype(np.int64) if len(u) else \
        np.zeros(0, dtype=np.int64)


_BINARY = {
    "bitand": lambda x, y: x & y,
    "bitor": lambda x, y: x | y,
    "bitxor": lambda x, y: x ^ y,
    "shiftleft": lambda x, y: x << (y & 63),
    "shiftright": lambda x, y: x >> (y & 63),
    "shiftrightunsigned": lambda x, y: (x.view(np.uint64) >> (y & 63).astype(np.uint64)).view(np.int64),
}
for _name, _fn in _BINARY.items():
    function(_name, int64_typer(2, _name))(int64_kernel(_fn))
function("bitnot", int64_typer(1, "~"))(int64_kernel(lambda x: ~x))
function("bit_count", int64_typer(1, "bit_count"))(int64_kernel(_popcount))


@function("getbit", int64_typer(2, "getbit"))
def _getbit(args, e, n):
    """getbit(x, pos) (bit_get): bit ``pos`` of ``x``, 0 the lowest; a position outside 0..63 raises, as Spark's
    INVALID_PARAMETER_VALUE.BIT_POSITION_RANGE does.  O(n)."""
    (x, xn), (p, pn) = args
    null = xn | pn
    pos = np.where(null, 0, np.asarray(p, dtype=np.int64))
    bad = (pos < 0) | (pos > 63)
    if bad.any():
        raise SchemaError(f"getbit: the bit position {int(pos[bad][0])} is outside 0..63 (Spark's "
                          "INVALID_PARAMETER_VALUE.BIT_POSITION_RANGE)")
    out = (np.asarray(x, dtype=np.int64) >> pos) & 1
    return filled(out, null, "bigint"), null

