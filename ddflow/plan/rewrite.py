"""Plan rewrites that never change a result: they only move work to where it is cheaper.

:func:`push_filters` moves each conjunct of a filter above a join to the
side it reads, so fewer rows reach the join's arrangements: below an
inner join both ways; below a left (right) join only predicates on the
preserved left (right) side, since a predicate on the NULL-padded side
must still see the padding.  Conjuncts that read both sides stay above.
(Sharing arrangements between operators that need the same rows keyed
the same way is done by :class:`ddflow.plan.lower.Lowering`.)
``tests/plan/test_rewrite.py`` checks every rewrite against the plan
without it on random update streams.

>>> from ddflow.base.schema import Schema
>>> from ddflow.plan.expr import Call, Col, Lit
>>> from ddflow.plan.ir import Filter, Join, Scan, explain
>>> a, b = Scan("a", Schema(("k", "x"), ("bigint", "bigint"))), Scan("b", Schema(("k",), ("bigint",)))
>>> j = Join(a, b, "inner", (Col(0, "bigint", "k"),), (Col(0, "bigint", "k"),))
>>> print(explain(push_filters(Filter(j, Call(">", (Col(1, "bigint", "x"), Lit(2, "bigint")), "boolean")))))
Join inner ON k = k  [arrange both sides by key]
  Filter (x > 2)
    Scan a [k, x]
  Scan b [k]
"""
from __future__ import annotations

import dataclasses

from ddflow.plan.expr import Call, Col, Expr
from ddflow.plan.ir import Filter, Join, Recursive, Rel, Union


def push_filters(rel: Rel) -> Rel:
    """``rel`` with filters moved below the joins they sit on, where that keeps the result.  O(plan size)."""
    rel = _map_inputs(rel, push_filters)
    if isinstance(rel, Filter) and isinstance(rel.input, Filter):
        rel = Filter(rel.input.input, Call("and", (rel.input.predicate, rel.predicate), "boolean"))
    if not (isinstance(rel, Filter) and isinstance(rel.input, Join)):
        return rel
    join = rel.input
    nl = len(join.left.schema)
    left, right, stay = [], [], []
    for c in _conjuncts(rel.predicate):
        cols = c.columns()
        if cols and max(cols) < nl and join.kind in ("inner", "left"):
            left.append(c)
        elif cols and min(cols) >= nl and join.kind in ("inner", "right"):
            right.append(_shifted(c, -nl))
        else:
            stay.append(c)
    if not left and not right:
        return rel
    new_left = push_filters(Filter(join.left, _and(left))) if left else join.left
    new_right = push_filters(Filter(join.right, _and(right))) if right else join.right
    moved = dataclasses.replace(join, left=new_left, right=new_right)
    return Filter(moved, _and(stay)) if stay else moved


def _map_inputs(rel: Rel, fn) -> Rel:
    """``rel`` with ``fn`` applied to each input relation (fields named input, left, right, parts, bodies)."""
    changes = {}
    for f in dataclasses.fields(rel):
        v = getattr(rel, f.name)
        if f.name in ("input", "left", "right") and isinstance(v, Rel):
            changes[f.name] = fn(v)
        elif f.name in ("parts", "bodies") and isinstance(rel, (Union, Recursive)):
            changes[f.name] = tuple(fn(x) for x in v)
    return dataclasses.replace(rel, **changes) if changes else rel


def _conjuncts(e: Expr) -> list[Expr]:
    if isinstance(e, Call) and e.op == "and":
        return _conjuncts(e.args[0]) + _conjuncts(e.args[1])
    return [e]


def _and(parts: list[Expr]) -> Expr:
    out = parts[0]
    for p in parts[1:]:
        out = Call("and", (out, p), "boolean")
    return out


def _shifted(e: Expr, by: int) -> Expr:
    if isinstance(e, Col):
        return Col(e.index + by, e.type, e.name)
    if isinstance(e, Call):
        return Call(e.op, tuple(_shifted(a, by) for a in e.args), e.type)
    return e
