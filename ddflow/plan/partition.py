"""Which columns say where a relation's rows live, so an exchange that would not move them is skipped.

With several workers every arrangement is preceded by an exchange that
sends each row to the worker owning its key.  A row that leaves an
operator keyed by ``k`` stays on ``k``'s worker, so if the next
arrangement keys it by a column holding that same value, its exchange
would move nothing (seed 004's partitioning: a join and a GROUP BY on
the same key chain without reshuffling).  ``partitioned_by(rel)`` is the
set of column positions whose stored value decides the worker of every
row of ``rel``:

- an inner join on one plain column per side, of one type: both key
  columns (they are equal and never NULL in its output);
- an aggregate: its first group column (the reduce's key);
- a distinct, a ranking: the first column, the first partition column;
- a filter: its input's; a projection: the input's columns it passes on
  unchanged;
- a fixpoint: its body's; inside it, a relation being defined: the
  columns its :class:`~ddflow.plan.ir.RecRef` claims (``placed``, which
  lowering checks against the body).

>>> from ddflow.base.schema import Schema
>>> from ddflow.plan.expr import Col
>>> from ddflow.plan.ir import Join, Scan
>>> a, b = Scan("a", Schema(("k", "x"), ("bigint", "bigint"))), Scan("b", Schema(("k",), ("bigint",)))
>>> sorted(partitioned_by(Join(a, b, "inner", (Col(0, "bigint"),), (Col(0, "bigint"),))))
[0, 2]
"""
from __future__ import annotations

from ddflow.plan.expr import Col
from ddflow.plan.ir import (Aggregate, Distinct, Filter, Join, Project, RecRef, Recursive, Rel, SemiJoin, SetOp, TopK,
                            Union)


def partitioned_by(rel: Rel) -> frozenset[int]:
    """Column positions whose value decides the worker every row of ``rel`` is on.  O(plan size)."""
    if isinstance(rel, Filter):
        return partitioned_by(rel.input)
    if isinstance(rel, Project):
        below = partitioned_by(rel.input)
        return frozenset(j for j, e in enumerate(rel.exprs) if isinstance(e, Col) and e.index in below)
    if isinstance(rel, Join):
        if rel.kind != "inner" or len(rel.left_keys) != 1:
            return frozenset()
        a, b = rel.left_keys[0], rel.right_keys[0]
        if isinstance(a, Col) and isinstance(b, Col) and a.type == b.type:
            return frozenset({a.index, len(rel.left.schema) + b.index})
        return frozenset()
    if isinstance(rel, Aggregate):
        return frozenset({0}) if rel.group else frozenset()
    if isinstance(rel, Distinct):
        return frozenset({0})
    if isinstance(rel, TopK):
        p = rel.partition
        return frozenset({p[0].index}) if p and isinstance(p[0], Col) else frozenset()
    if isinstance(rel, Recursive):
        return partitioned_by(rel.bodies[rel.index])
    if isinstance(rel, RecRef):
        return frozenset(rel.placed)
    return frozenset()


def exchange_note(rel: Rel) -> str:
    """What ``rel`` exchanges between workers before it arranges (for ``explain``): where, or why not."""
    if isinstance(rel, Join):
        sides = []
        for side, keys in (("left", rel.left_keys), ("right", rel.right_keys)):
            src = rel.left if side == "left" else rel.right
            skip = len(keys) == 1 and isinstance(keys[0], Col) and keys[0].index in partitioned_by(src)
            sides.append(f"{side}: none, partitioned by its key" if skip else f"{side}: by key")
        return "[exchange " + "; ".join(sides) + "]"
    if isinstance(rel, Aggregate):
        if not rel.group:
            return "[exchange: all rows to one worker]"
        g = rel.group[0]
        skip = isinstance(g, Col) and g.index in partitioned_by(rel.input)
        return "[exchange: none, partitioned by the group key]" if skip else "[exchange by group key]"
    if isinstance(rel, TopK):
        p = rel.partition
        skip = bool(p) and isinstance(p[0], Col) and p[0].index in partitioned_by(rel.input)
        return "[exchange: none, partitioned]" if skip else "[exchange by partition]"
    if isinstance(rel, SemiJoin):
        return "[exchange both sides by key]"
    if isinstance(rel, (Distinct, SetOp)) or (isinstance(rel, Union) and not rel.all):
        return "[exchange by row]"
    return ""
