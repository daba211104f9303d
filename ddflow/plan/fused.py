"""A long run of filters and projections lowered as one filter and one map.

Stateless operators hand their output on by calling the next one, so a
plan with hundreds of them in a row (subqueries nested hundreds deep,
each a projection) would recurse that deep at run time, past Python's
limit.  :meth:`ddflow.plan.lower.Lowering.lower` gives a run of
:data:`FUSE_AT` or more of them here, a block of at most
:data:`FUSED_STAGES` at a time: the plan (and ``explain``) keeps every
node, the dataflow gets two operators per block.  Shorter runs, the usual
``SELECT ... WHERE ...``, keep an operator each.

>>> import ddflow
>>> flow = ddflow.Dataflow()
>>> t_in, _ = flow.new_collection("t", schema={"a": "bigint"})
>>> q = "SELECT a FROM " + "(SELECT a + 1 AS a FROM " * 40 + "t" + ") q" * 40 + " WHERE a > 41"
>>> cap = flow.sql(q).capture()
>>> t_in.update([(1,), (2,)], times=0); flow.advance_to(1); flow.run()
>>> cap.contents(0)
{(42,): 1}
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ddflow.collection import Collection
from ddflow.plan.expr import evaluate
from ddflow.plan.ir import Filter, Project, Rel
from ddflow.plan.lower import columns_of, stored

if TYPE_CHECKING:
    from ddflow.plan.lower import Lowering

#: A run of this many filters and projections or more is fused; shorter runs get an operator each.
FUSE_AT = 16
#: The most stages one fused block takes (a longer run is several blocks, each two operators).
FUSED_STAGES = 64


def run_below(rel: Rel) -> tuple[list[Rel], Rel] | None:
    """``(stages bottom first, the relation under them)`` when ``rel`` heads a run long enough to fuse, else None."""
    chain: list[Rel] = []
    x = rel
    while isinstance(x, (Filter, Project)) and len(chain) < FUSED_STAGES:
        chain.append(x)
        x = x.input
    return (chain[::-1], x) if len(chain) >= FUSE_AT else None


def lower_run(lowering: "Lowering", stages: list[Rel], base: Rel) -> Collection:
    """The filters and projections ``stages`` over ``base`` (bottom first) as one filter and one map.

    The filter evaluates the stages in order, each filter on the rows
    the ones before it kept (no row is evaluated that the run of
    operators would not evaluate); the map then evaluates the
    projections on the rows kept.  Between stages values are stored and
    read back as between operators.  Cost: the projections before the
    last filter are evaluated twice.
    """
    src = base.schema

    def staged(cols, filters: bool):
        cur, schema, idx = columns_of(cols, src), src, np.arange(len(cols[0]))
        for st in stages:
            if isinstance(st, Filter):
                if filters:
                    vals, null = evaluate(st.predicate, cur)
                    ok = vals.astype(bool) & ~null
                    idx, cur = idx[ok], [(v[ok], vn[ok]) for v, vn in cur]
                continue
            out = st.schema
            cur = columns_of(stored([evaluate(e, cur) for e in st.exprs], out.types, len(idx)), out)
            schema = out
        return cur, schema, idx

    def keep(*cols):
        mask = np.zeros(len(cols[0]), dtype=bool)
        mask[staged(cols, True)[2]] = True
        return mask

    def project(*cols):
        cur, schema, _ = staged(cols, False)
        return stored(cur, schema.types, len(cols[0]))

    coll = lowering.lower(base)
    if any(isinstance(st, Filter) for st in stages):
        coll = coll.filter_columns(keep)
    if any(isinstance(st, Project) for st in stages):
        coll = coll.map_columns(project)
    return coll
