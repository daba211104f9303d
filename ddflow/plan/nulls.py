"""NULL-aware operators of Spark SQL: null-safe equality ``<=>`` and the ``try_`` arithmetic (NULL instead of
ANSI mode's overflow or division-by-zero error).

Registered in the one function table (:mod:`ddflow.plan.functions`); ``nvl``, ``ifnull`` and ``nvl2`` need no
kernel of their own (COALESCE and CASE, planned by :mod:`ddflow.sql.library`).

Cost: ``<=>`` is one vectorized comparison.  ``try_add`` & co. run the ANSI kernel over the whole column, O(n);
only when it raises (some row overflows) they run it row by row, O(n) Python calls, to NULL exactly those rows.

>>> from ddflow.plan.expr import Col, Lit, evaluate
>>> from ddflow.plan.functions import typed
>>> e = typed("try_add", (Col(0, "bigint"), Lit(1, "bigint")))
>>> evaluate(e, [(np.array([1, 2**63 - 1]), np.array([False, False]))])[1].tolist()
[False, True]
"""
from __future__ import annotations

import numpy as np

from ddflow.errors import SchemaError
from ddflow.plan.expr import KERNELS, Call, Column, filled, null_values
from ddflow.plan.functions import FUNCTIONS, TypeMismatch, _compare_typer, _names, function, numeric


@function("<=>", _compare_typer)
def _null_safe_eq(args, e, n):
    """``a <=> b``: ``a = b`` where both are non-NULL, TRUE where both are NULL, FALSE where one is; never NULL."""
    (_, an), (_, bn) = args
    eq, eqn = KERNELS["="](args, Call("=", e.args, "boolean"), n)
    out = np.where(an & bn, True, np.where(an | bn, False, np.asarray(eq, dtype=bool) & ~eqn))
    return out, np.zeros(n, dtype=bool)


def _rows(args: list[Column], idx: int) -> list[Column]:
    return [(np.asarray(v)[idx:idx + 1], np.asarray(vn, dtype=bool)[idx:idx + 1]) for v, vn in args]


def _spark_error(err: SchemaError) -> bool:
    """An error Spark raises too (overflow, division by zero), not ddflow's own limit (decimals past int64)."""
    return "ddflow stores" not in str(err)


def nulling(kernel, typ: str):
    """``kernel`` with NULL instead of its error on the rows that raise (whole column first, rows only if needed).

    An error of ddflow's own (a decimal result Spark holds but int64 cannot) still raises: NULL there would be a
    wrong answer."""
    def safe(args: list[Column], e, n: int) -> Column:
        try:
            return kernel(args, e, n)
        except SchemaError as err:
            if not _spark_error(err):
                raise
        vals, null = [], np.zeros(n, dtype=bool)
        for i in range(n):
            try:
                v, vn = kernel(_rows(args, i), e, 1)
                vals.append(v[0])
                null[i] = bool(vn[0])
            except SchemaError as err:
                if not _spark_error(err):
                    raise
                vals.append(None)
                null[i] = True
        out = null_values(typ, n)
        for i, v in enumerate(vals):
            if not null[i]:
                out[i] = v
        return filled(out, null, typ), null
    return safe


def _try_typer(op: str, name: str):
    base = FUNCTIONS[op].typer

    def typer(args):
        if any(not numeric(a.type) for a in args):
            raise TypeMismatch(f"{name} takes numbers here (bigint, double, decimal), got ({_names(args)})")
        return base(args)
    return typer


for _name, _op in (("try_add", "+"), ("try_subtract", "-"), ("try_multiply", "*")):
    function(_name, _try_typer(_op, _name))(
        (lambda op: lambda args, e, n: nulling(KERNELS[op], e.type)(args, Call(op, e.args, e.type), n))(_op))

_divide = FUNCTIONS["try_divide"]
# try_divide's division by zero is NULL in functions.py; a decimal quotient past its precision is NULL too (Spark).
function("try_divide", _divide.typer)(lambda args, e, n: nulling(_divide.kernel, e.type)(args, e, n))

__all__ = ["nulling"]
