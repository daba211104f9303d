"""Coordination hints never change results: every program's outputs are identical with and without its hints.

Random programs (tests/datalog/naive.py) get a random placement for each
derived relation and a random priority order; one dataflow evaluates
the program with its hints and without (``hints=False``) on the same
random fact stream, and every update of every relation must match, at
W = 1 and W = 2, and both must match the naive evaluation.  Then: the
hints do act (a placement skips an exchange that is there without it;
a priority reorders ready strata).
"""
from __future__ import annotations

import collections
import random

import pytest

import ddflow
from tests.datalog.naive import INPUTS, evaluate, generate, random_facts


def _hints(rng: random.Random, p) -> list[str]:
    out = []
    for r in p.derived():
        if rng.random() < 0.7:
            out.append(f'.pragma "ddflow.place" "{r}(a{rng.randrange(p.arity[r])})"')
    order = p.derived()
    rng.shuffle(order)
    out.append(f'.pragma "ddflow.priority" "{", ".join(order[:2])}"')
    return out


def _compare(seed: int, workers: int, n_programs: int):
    rng = random.Random(seed)
    programs = [generate(rng, n_strata=rng.randrange(3, 6)) for _ in range(n_programs)]
    with ddflow.Dataflow(workers=workers) as flow:
        handles = {r: flow.new_collection(r, schema={f"c{i}": "bigint" for i in range(a)})[0]
                   for r, a in INPUTS.items()}
        pairs = []
        for p in programs:
            text = p.text(_hints(rng, p))
            with_h, without = flow.datalog(text), flow.datalog(text, hints=False)
            pairs.append((p, {r: c.capture() for r, c in with_h.items()}, {r: c.capture() for r, c in without.items()}))
        live: collections.Counter = collections.Counter()
        acc: dict = collections.defaultdict(collections.Counter)  # (program, relation) -> contents so far
        for t in range(4):
            for rel, row in random_facts(rng, 8):
                d = -1 if live[(rel, row)] and rng.random() < 0.4 else 1
                live[(rel, row)] += d
                handles[rel].update([row], times=t, diffs=d)
            flow.advance_to(t + 1)
            flow.run()
            facts = {r: {row for (rr, row), m in live.items() if rr == r and m > 0} for r in INPUTS}
            for i, (p, a, b) in enumerate(pairs):
                want = evaluate(p, facts)
                for r in a:
                    got_a, got_b = sorted(a[r].drain()), sorted(b[r].drain())
                    assert got_a == got_b, f"seed {seed}: {r} differs with hints\n{p.text()}"
                    for row, _, diff in got_a:
                        acc[(i, r)][row] += diff
                    now = {k: v for k, v in acc[(i, r)].items() if v}
                    assert now == {row: 1 for row in want[r]}, (seed, t, r)


@pytest.mark.parametrize("seed", range(8))
def test_hints_never_change_results(seed):
    _compare(seed, workers=1, n_programs=2)


def test_hints_never_change_results_on_two_workers():
    _compare(42, workers=2, n_programs=5)


TC = """
.decl edge(x: number, y: number)
.input edge
.decl tc(x: number, y: number)
tc(x, y) :- edge(x, y).
tc(x, z) :- tc(x, y), edge(y, z).
"""


def test_placement_skips_the_exchange_of_the_loop_relation():
    flow = ddflow.Dataflow(workers=2)
    flow.new_collection("edge", schema={"a": "bigint", "b": "bigint"})
    plain = flow.explain(TC)
    placed = flow.explain(TC + '.pragma "ddflow.place" "tc(y)"\n')
    assert "left: by key" in plain  # tc(x, y) is placed by x, joined on y
    assert "left: none, partitioned by its key" in placed
    flow.close()


def test_priority_orders_ready_strata():
    prog = ".decl e(x: number)\n.input e\n.decl a(x: number)\n.decl b(x: number)\na(x) :- e(x).\nb(x) :- e(x).\n"
    flow = ddflow.Dataflow()
    flow.new_collection("e", schema={"x": "bigint"})
    assert flow.explain(prog).splitlines()[0] == "Strata: e ; a ; b"
    assert flow.explain(prog + '.pragma "ddflow.priority" "b"\n').splitlines()[0] == "Strata: e ; b ; a"
    assert list(flow.datalog(prog + '.pragma "ddflow.priority" "b"\n')) == ["b", "a"]
