"""Random stratified programs on random fact streams, against a naive bottom-up evaluation (tests/datalog/naive.py).

Each stream inserts and removes input facts at several data times per
frontier advance (duplicates included: an input table is a multiset, a
Datalog relation a set); at every completed time every derived relation
must equal the oracle's on the facts accumulated by then.  W = 1 runs
many programs; W = 2 runs several programs in one dataflow (one fork).
"""
from __future__ import annotations

import collections
import random

import pytest

import ddflow
from tests.datalog.naive import INPUTS, evaluate, generate, random_facts


def _stream(rng: random.Random, steps: int, per_step: int):
    """``[(frontier, [(relation, row, time, diff)])]``: removals only of present facts."""
    live: collections.Counter = collections.Counter()
    out, t = [], 0
    for _ in range(steps):
        ups = []
        for _ in range(rng.randrange(1, 4)):  # several data times per advance
            for rel, row in random_facts(rng, per_step):
                if live[(rel, row)] and rng.random() < 0.45:
                    live[(rel, row)] -= 1
                    ups.append((rel, row, t, -1))
                else:
                    live[(rel, row)] += 1
                    ups.append((rel, row, t, 1))
            t += 1
        out.append((t, ups))
    return out


def _check(programs, seed: int, workers: int, steps: int = 4, per_step: int = 6):
    rng = random.Random(seed)
    with ddflow.Dataflow(workers=workers) as flow:
        handles = {r: flow.new_collection(r, schema={f"c{i}": "bigint" for i in range(a)})[0]
                   for r, a in INPUTS.items()}
        caps = []
        for p in programs:
            rels = flow.datalog(p.text())
            assert sorted(rels) == sorted(p.derived())
            caps.append({r: c.capture() for r, c in rels.items()})
        acc: collections.Counter = collections.Counter()
        start = 0
        for frontier, ups in _stream(rng, steps, per_step):
            for rel, row, t, d in ups:
                handles[rel].update([row], times=t, diffs=d)
            flow.advance_to(frontier)
            flow.run()
            by_time = collections.defaultdict(list)
            for rel, row, t, d in ups:
                by_time[t].append((rel, row, d))
            for t in range(start, frontier):
                for rel, row, d in by_time[t]:
                    acc[(rel, row)] += d
                facts = {r: {row for (rr, row), m in acc.items() if rr == r and m > 0} for r in INPUTS}
                for p, cap in zip(programs, caps):
                    want = evaluate(p, facts)
                    for r, c in cap.items():
                        got = c.contents(t)
                        exp = {row: 1 for row in want[r]}
                        assert got == exp, (f"seed {seed}, time {t}, relation {r}\n{p.text()}\n"
                                            f"missing {set(exp) - set(got)}, extra {set(got) - set(exp)}, "
                                            f"counts {[(k, v) for k, v in got.items() if v != 1]}")
            start = frontier


@pytest.mark.parametrize("seed", range(50))
def test_random_programs_match_naive_evaluation(seed):
    rng = random.Random(seed)
    _check([generate(rng, n_strata=rng.randrange(2, 6))], seed, workers=1)


@pytest.mark.parametrize("seed", [100, 101, 102])
def test_random_programs_on_two_workers(seed):
    rng = random.Random(seed)
    _check([generate(rng, n_strata=rng.randrange(3, 6)) for _ in range(4)], seed, workers=2, steps=3)
