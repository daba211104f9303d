"""Plan rewrites that never change a result: they only move work to where it is cheaper.

:func:`push_filters` moves each conjunct of a filter above a join to the
side it reads, so fewer rows reach the join's arrangements: below an
inner join both ways; below a left (right) join only predicates on the
preserved left (right) side, since a predicate on the NULL-padded side
must still see the padding.  Over an inner join, an equality of an
expression of each side becomes a join key (a comma join's ``WHERE a.k =
b.k`` is an equi-join, not a cross product filtered); other conjuncts
that read both sides become its residual.
:func:`prune_columns` cuts each join input to the columns read above it.
(Sharing arrangements between operators that need the same rows keyed
the same way, and skipping exchanges that would move nothing, are done
by :class:`ddflow.plan.lower.Lowering`.)
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

from ddflow.plan.expr import Call, Col, Expr, conjunction, conjuncts, remapped
from ddflow.plan.ir import Aggregate, Filter, Join, Project, Recursive, Rel, Union


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
    for c in conjuncts(rel.predicate):
        cols = c.columns()
        if cols and max(cols) < nl and join.kind in ("inner", "left"):
            left.append(c)
        elif cols and min(cols) >= nl and join.kind in ("inner", "right"):
            right.append(remapped(c, lambda i: i - nl))
        else:
            stay.append(c)
    lkeys, rkeys = list(join.left_keys), list(join.right_keys)
    if join.kind == "inner":
        rest = []
        for c in stay:
            pair = equi_key(c, nl)
            if pair is None:
                rest.append(c)
            else:
                lkeys.append(pair[0])
                rkeys.append(pair[1])
        stay = rest
    if not left and not right and len(lkeys) == len(join.left_keys):
        return rel
    new_left = push_filters(Filter(join.left, conjunction(left))) if left else join.left
    new_right = push_filters(Filter(join.right, conjunction(right))) if right else join.right
    moved = dataclasses.replace(join, left=new_left, right=new_right, left_keys=tuple(lkeys), right_keys=tuple(rkeys))
    if stay and join.kind == "inner":  # the residual of an inner join is a filter of its pairs
        residual = conjunction(([join.residual] if join.residual is not None else []) + stay)
        return dataclasses.replace(moved, residual=residual)
    return Filter(moved, conjunction(stay)) if stay else moved


def keyable(a: str, b: str) -> bool:
    """Values of types ``a`` and ``b`` are equal exactly when their stored keys are (or both are cast to double)."""
    if a == "null" or b == "null":
        return False
    if a == b or {a, b} <= {"bigint", "double"}:
        return True
    scale = lambda t: t[t.index(",") + 1:-1].strip() if t.startswith("decimal(") and "," in t else None  # noqa: E731
    return scale(a) is not None and scale(a) == scale(b)


def equi_key(c: Expr, nl: int) -> tuple[Expr, Expr] | None:
    """``(left key, right key)`` when ``c`` is ``l = r`` with ``l`` reading only columns below ``nl`` and ``r`` only
    columns from ``nl`` on (or the other way round), keys of types that compare as stored; else None."""
    if not (isinstance(c, Call) and c.op == "=" and len(c.args) == 2):
        return None
    a, b = c.args
    ca, cb = a.columns(), b.columns()
    if not ca or not cb or not keyable(a.type, b.type):
        return None
    if max(ca) < nl <= min(cb):
        return a, remapped(b, lambda i: i - nl)
    if max(cb) < nl <= min(ca):
        return b, remapped(a, lambda i: i - nl)
    return None


def prune_columns(rel: Rel) -> Rel:
    """``rel`` with each join input cut to the columns used above it, so arrangements hold less.  O(plan size).

    Projections drop outputs nobody reads; a join side keeps only its
    keys and what the residual and the operators above read.  The
    result's own columns are all kept, in order.
    """
    out, remap = _prune(rel, set(range(len(rel.schema))))
    assert all(remap[i] == i for i in range(len(rel.schema)))
    return out


def _prune(rel: Rel, needed: set[int]) -> tuple[Rel, dict[int, int]]:
    """``(rel', remap)``: ``rel'`` has every needed column of ``rel``, column ``i`` now at ``remap[i]``."""
    if isinstance(rel, Project):
        keep = sorted(needed)
        below, m = _prune(rel.input, set().union(*(rel.exprs[j].columns() for j in keep)) if keep else set())
        exprs = tuple(remapped(rel.exprs[j], m) for j in keep)
        return Project(below, exprs, tuple(rel.names[j] for j in keep)), {j: i for i, j in enumerate(keep)}
    if isinstance(rel, Filter):
        below, m = _prune(rel.input, needed | rel.predicate.columns())
        return Filter(below, remapped(rel.predicate, m)), m
    if isinstance(rel, Join):
        nl = len(rel.left.schema)
        used = set(needed)
        if rel.residual is not None:
            used |= rel.residual.columns()
        lneed = {i for i in used if i < nl}.union(*(k.columns() for k in rel.left_keys))
        rneed = {i - nl for i in used if i >= nl}.union(*(k.columns() for k in rel.right_keys))
        left, ml = _narrowed(*_prune(rel.left, lneed), lneed)
        right, mr = _narrowed(*_prune(rel.right, rneed), rneed)
        nl2 = len(left.schema)
        m = {i: ml[i] for i in lneed}
        m.update({nl + j: nl2 + mr[j] for j in rneed})
        residual = remapped(rel.residual, m) if rel.residual is not None else None
        joined = Join(left, right, rel.kind, tuple(remapped(k, ml) for k in rel.left_keys),
                      tuple(remapped(k, mr) for k in rel.right_keys), residual)
        return joined, m
    if isinstance(rel, Aggregate):
        used = set().union(*(g.columns() for g in rel.group), *(a.arg.columns() for a in rel.aggs if a.arg is not None))
        below, m = _prune(rel.input, used)
        group = tuple(remapped(g, m) for g in rel.group)
        aggs = tuple(dataclasses.replace(a, arg=remapped(a.arg, m)) if a.arg is not None else a for a in rel.aggs)
        return Aggregate(below, group, aggs, rel.names), {i: i for i in range(len(rel.schema))}
    whole = _map_inputs(rel, lambda r: _prune(r, set(range(len(r.schema))))[0])
    return whole, {i: i for i in range(len(rel.schema))}


def _narrowed(rel: Rel, remap: dict[int, int], needed: set[int]) -> tuple[Rel, dict[int, int]]:
    """``rel`` cut to the ``needed`` columns (by a projection) when it has others."""
    if len(rel.schema) == len(needed):
        return rel, remap
    keep = sorted(remap[i] for i in needed)
    at = {c: i for i, c in enumerate(keep)}
    s = rel.schema
    cut = Project(rel, tuple(Col(c, s.types[c], s.names[c]) for c in keep), tuple(s.names[c] for c in keep))
    return cut, {i: at[remap[i]] for i in needed}


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
