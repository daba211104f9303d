"""The forms of :mod:`ddflow.plan.expr` that evaluate their arguments on fewer rows than they are given: CASE,
``switch`` (CASE x WHEN), COALESCE, AND and OR, an arithmetic ``chain``, BETWEEN and IN.

Each is a generator (:func:`form`) that the evaluator's explicit stack drives: it yields ``(expression,
columns)`` for each value it needs and is sent the value back, so an argument is computed only on the rows that
reach it (Spark's short-circuits: ``CASE WHEN x = 0 THEN 0 ELSE 1 / x END`` never divides by zero) and nothing
recurses, however deep the expression.  Cost: O(n) numpy calls per argument, each over the rows it needs.

>>> import numpy as np
>>> from ddflow.plan.expr import Call, Col, Lit, evaluate
>>> a = Col(0, "bigint", "a")
>>> e = Call("coalesce", (a, Lit(7, "bigint")), "bigint")
>>> evaluate(e, [(np.array([1, 0]), np.array([False, True]))])[0].tolist()
[1, 7]
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ddflow.plan import functions
from ddflow.plan.expr import Call, Column, Held, ValueSet, _apply, _put, as_type, dtype_of, filled


def form(e: Call, cols: Sequence[Column], n: int):
    """The evaluation of one call, as a generator: it yields ``(expression, columns)`` for each value it needs
    and is sent that value back; it returns its own.  Each form evaluates an argument only on the rows that
    reach it (Spark's short-circuits), never more."""
    op = e.op
    if op in ("case", "switch"):
        # case: cond1, val1, ..., else.  switch: subject, step1, val1, ..., else (``subject = x`` steps).
        subject = (yield e.args[0], cols) if op == "switch" else None
        *pairs, other = e.args[1:] if op == "switch" else e.args
        vals, null = np.empty(n, dtype=dtype_of(e.type)), np.zeros(n, dtype=bool)
        if vals.dtype != object:
            vals[:] = 0
        left = np.ones(n, dtype=bool)  # rows no branch has taken yet
        for i in range(0, len(pairs), 2):
            idx = np.flatnonzero(left)
            if not len(idx):
                break
            cond = pairs[i]
            if subject is None:
                cv, cn = yield cond, _rows(cols, idx, n)
            else:
                w = yield cond.args[1], _rows(cols, idx, n)
                cv, cn = _apply(cond, [(subject[0][idx], subject[1][idx]), w], len(idx))
            hit = idx[~cn & cv.astype(bool)]
            if len(hit):
                v, vn = yield pairs[i + 1], _rows(cols, hit, n)
                vals = _put(vals, hit, as_type(v, e.type))
                null[hit] = vn
                left[hit] = False
        idx = np.flatnonzero(left)
        if len(idx):
            v, vn = yield other, _rows(cols, idx, n)
            vals = _put(vals, idx, as_type(v, e.type))
            null[idx] = vn
        return filled(vals, null, e.type), null
    if op == "coalesce":  # each argument only on the rows still NULL
        vals, null = yield e.args[0], cols
        vals, null = as_type(vals, e.type).copy(), null.copy()
        for a in e.args[1:]:
            idx = np.flatnonzero(null)
            if not len(idx):
                break
            v, vn = yield a, _rows(cols, idx, n)
            vals = _put(vals, idx, as_type(v, e.type))
            null[idx] = vn
        return filled(vals, null, e.type), null
    if op in ("and", "or"):  # each argument only where those before it do not decide (Spark short-circuits)
        true = np.zeros(n, dtype=bool)  # a TRUE seen (or), a FALSE seen (and): decided
        unknown = np.zeros(n, dtype=bool)  # a NULL seen
        for k, a in enumerate(e.args):
            idx = np.flatnonzero(~true) if k else None
            if idx is not None and not len(idx):
                break
            v, vn = yield a, (cols if idx is None else _rows(cols, idx, n))
            v = v.astype(bool)
            hit = (~vn & v) if op == "or" else (~vn & ~v)
            if idx is None:
                true, unknown = hit.copy(), vn.copy()
            else:
                true[idx] |= hit
                unknown[idx] |= vn
        null = ~true & unknown
        return (true if op == "or" else ~true & ~null), null
    if op == "chain":  # a left-to-right chain of arithmetic: the first value, then each step on the value so far
        acc = yield e.args[0], cols
        for step in e.args[1:]:
            x = yield step.args[1], cols
            acc = _apply(step, [acc, x], n)
        return acc
    if op == "between":  # (a, ``>= lo`` step, ``<= hi`` step): hi only where a >= lo is not FALSE
        a = yield e.args[0], cols
        ge_step, le_step = e.args[1], e.args[2]
        lo = yield ge_step.args[1], cols
        gv, gn = _apply(ge_step, [a, lo], n)
        gv = gv.astype(bool)
        idx = np.flatnonzero(gn | gv)
        lv, ln = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        if len(idx):
            hi = yield le_step.args[1], _rows(cols, idx, n)
            v, vn = _apply(le_step, [(a[0][idx], a[1][idx]), hi], len(idx))
            lv[idx], ln[idx] = v.astype(bool), vn
        false = (~gn & ~gv) | (~ln & ~lv)
        null = ~false & (gn | ln)
        return gv & lv & ~null, null
    if op == "in":
        return (yield from _in(e, cols, n))
    args = []
    for a in e.args:
        args.append((yield a, cols))
    return _apply(e, args, n)


def _in(e: Call, cols: Sequence[Column], n: int):
    """``x IN (...)``, Spark's rules: NULL when x is NULL; TRUE at the first element equal to x; else NULL if an
    element was NULL, FALSE if none was.  Arguments: x, then the list in written order as value sets (runs of
    constants, one vectorized ``searchsorted`` each) and ``= y`` steps (other expressions, each evaluated only
    on the rows no earlier element matched)."""
    xv, xn = yield e.args[0], cols
    true = np.zeros(n, dtype=bool)
    unknown = np.zeros(n, dtype=bool)
    open_ = ~xn  # rows still looking for a match
    for part in e.args[1:]:
        idx = np.flatnonzero(open_)
        if not len(idx):
            break
        if isinstance(part, ValueSet):
            if part.values:
                keys = functions.comparable_values([(xv[idx], xn[idx]), (xv[idx], xn[idx])],
                                                   (e.args[0], Held(part.type)))[0]
                hit = _member(keys, part.array())
                true[idx[hit]] = True
                open_[idx[hit]] = False
            if part.has_null:
                unknown[idx] = True
            continue
        y = yield part.args[1], _rows(cols, idx, n)
        v, vn = _apply(part, [(xv[idx], xn[idx]), y], len(idx))
        hit = ~vn & v.astype(bool)
        true[idx[hit]] = True
        open_[idx[hit]] = False
        unknown[idx] |= y[1]
    null = xn | (~true & unknown)
    return true & ~null, null


def _member(keys: np.ndarray, sorted_values: np.ndarray) -> np.ndarray:
    """Which of ``keys`` are among ``sorted_values``: one binary search per key, O(k log m)."""
    if keys.dtype == object or sorted_values.dtype == object:
        keys, sorted_values = keys.astype(object), sorted_values.astype(object)
    at = np.searchsorted(sorted_values, keys)
    at[at == len(sorted_values)] = 0
    return sorted_values[at] == keys if len(sorted_values) else np.zeros(len(keys), dtype=bool)


def _rows(cols: Sequence[Column], idx: np.ndarray, n: int) -> list[Column]:
    """The columns at rows ``idx`` (with no columns: a dummy one, so constants get their length)."""
    if not cols:
        return [(np.zeros(len(idx), dtype=np.int64), np.zeros(len(idx), dtype=bool))]
    return [(v[idx], vn[idx]) for v, vn in cols]


__all__ = ["form"]
