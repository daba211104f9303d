"""ORDER BY ... LIMIT and ROW_NUMBER(), RANK(), DENSE_RANK() <= k: the compiled top_k walk against the reduce it replaces.

Random queries (partitions of none, one, two or three columns, numbers
only or strings among them; the number read or not; ties sharing a RANK or DENSE_RANK; sort keys of every type, ascending and descending, NULLs first and
last; limits 1-3) over random update streams with NULLs, removals and
ties, several data times per advance, at one and two workers.  The
reference is the same plan lowered through the per-partition reduce
(``lower.TOPK_REDUCE``), which ``tests/sql`` checks against DuckDB; ties
break the same way in both (by the whole row), so the outputs are equal
at every time, not only up to ties.
"""
from __future__ import annotations

import random

import numpy as np
import pytest

import ddflow
from ddflow.operators.reduce.node import ReduceNode
from ddflow.operators.reduce.walk import WalkTactic
from ddflow.plan import lower
from ddflow.sql.frontend import SqlFrontend

T = {"p": "bigint", "q": "string", "x": "bigint", "y": "double", "s": "string"}
SORTS = ["x", "y", "s", "p"]


def _query(rng: random.Random) -> str:
    orders = []
    for col in rng.sample(SORTS, rng.randint(1, 3)):
        desc = rng.random() < 0.5
        orders.append(f"{col}{' DESC' if desc else ''} NULLS {rng.choice(['FIRST', 'LAST'])}")
    k = rng.randint(1, 3)
    if rng.random() < 0.3:
        return f"SELECT p, q, x, y, s FROM t ORDER BY {', '.join(orders)} LIMIT {k}"
    # Numbers only (the first column the key, the rest leading the value), or strings among them (one key field).
    parts = rng.choice([["p"], ["q"], ["p", "q"], ["q", "p"], ["p", "x"], ["y"], ["x", "p", "y"]])
    shown = rng.choice(["p, q, x, y, s", "s, rn, p", "rn"])  # the number read, or not
    fn = rng.choice(["ROW_NUMBER", "RANK", "DENSE_RANK"])
    return (f"SELECT {shown} FROM (SELECT *, {fn}() OVER (PARTITION BY {', '.join(parts)} "
            f"ORDER BY {', '.join(orders)}) AS rn FROM t) WHERE rn {rng.choice(['<=', '<'])} {k + 1}")


def _row(rng: random.Random) -> tuple:
    return (rng.choice([0, 1, None]), rng.choice(["a", "b", None]), rng.choice([-2, 0, 3, None]),
            rng.choice([-0.5, 0.0, 1.5, None]), rng.choice(["u", "v", "w", None]))


def _walks(flow) -> int:
    return sum(isinstance(n, ReduceNode) and isinstance(n.tactic, WalkTactic) for n in flow.top.all_nodes())


@pytest.mark.parametrize("seed,workers", [(s, 1) for s in range(14)] + [(14, 2), (15, 2)])
def test_top_k_walk_equals_the_reduce(seed, workers):
    _check(seed, workers)


def test_partitions_whose_hashes_collide_stay_apart(monkeypatch):
    """A partition of numbers is keyed by a hash of its columns: with every hash equal, the walk still ranks
    each partition on its own (its columns lead the value)."""
    from ddflow.plan import ranking

    monkeypatch.setattr(ranking, "row_hashes", lambda cols: np.zeros(len(cols[0]), dtype=np.int64))
    for seed in (20, 21, 22):
        _check(seed, 1)


def _check(seed: int, workers: int) -> None:
    rng = random.Random(seed)
    queries = [_query(rng) for _ in range(4)]
    with ddflow.Dataflow(workers=workers) as flow:
        t_in, _ = flow.new_collection("t", schema=T)
        walks = [flow.sql(q) for q in queries]
        assert _walks(flow) == len(queries)  # each query took the walk
        old, lower.TOPK_REDUCE = lower.TOPK_REDUCE, True
        try:
            ref = SqlFrontend(flow)  # its own lowering: flow.sql would hand back the walks it built
            refs = [ref.sql(q) for q in queries]
        finally:
            lower.TOPK_REDUCE = old
        assert _walks(flow) == len(queries)  # and the reference did not
        caps = [(w.capture(), r.capture()) for w, r in zip(walks, refs)]
        live: list = []
        t = 0
        for _ in range(6):
            for _ in range(rng.randint(1, 10)):
                t += rng.randint(0, 1)
                if live and rng.random() < 0.3:
                    t_in.update([live.pop(rng.randrange(len(live)))], t, -1)
                else:
                    r = _row(rng)
                    live.append(r)
                    t_in.update([r], t, 1)
            t += 1
            flow.advance_to(t)
            flow.run()
        for q, (a, b) in zip(queries, caps):
            for time in range(t):
                assert a.contents(time) == b.contents(time), f"time {time}: {q}"
