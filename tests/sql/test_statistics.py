"""var_samp, var_pop, stddev_samp and stddev_pop under inserts and deletes, against exact rationals at every time.

Values near 1e9 with a spread of a few units are where running sums of x and x squared lose every digit: the
view must still equal the exact answer (rounded once), at every complete time.
"""
from __future__ import annotations

import math
import random
from collections import Counter
from fractions import Fraction

import ddflow

QUERY = ("SELECT k, COUNT(x) AS c, var_samp(x) AS vs, var_pop(x) AS vp, stddev_samp(x) AS ss, stddev_pop(x) AS sp "
         "FROM t GROUP BY k")


def _oracle(live: Counter) -> dict:
    groups: dict = {}
    for (k, x), m in live.items():
        g = groups.setdefault(k, [])
        if x is not None:
            g += [Fraction(x)] * m
    out = {}
    for k, xs in groups.items():
        n = len(xs)
        mean = sum(xs) / n if n else None
        m2 = sum((x - mean) ** 2 for x in xs) if n else None
        vs = float(m2 / (n - 1)) if n > 1 else None
        vp = float(m2 / n) if n else None
        out[(k, n, vs, vp, None if vs is None else math.sqrt(vs), None if vp is None else math.sqrt(vp))] = 1
    return out


def test_spread_at_every_time_equals_exact_rationals():
    rng = random.Random(7)
    pool = [(rng.randrange(3), None if rng.random() < 0.1 else 1e9 + rng.randrange(-3, 4) + rng.choice([0, 0.5, 0.25]))
            for _ in range(60)]
    for workers in (1, 2):
        flow = ddflow.Dataflow(workers=workers)
        handle = flow.new_collection("t", schema={"k": "bigint", "x": "double"})[0]
        cap = flow.sql(QUERY).capture()
        live: Counter = Counter()
        t = 0
        for _ in range(4):
            for _ in range(3):
                adds = rng.sample(pool, 5)
                dels = [r for r in live if rng.random() < 0.25]
                handle.update(adds + dels, times=t, diffs=[1] * len(adds) + [-1] * len(dels))
                live.update(adds)
                live.subtract(dels)
                live = +live
                t += 1
            flow.advance_to(t)
            flow.run()
            assert cap.contents(t - 1) == _oracle(live)
        flow.close()
