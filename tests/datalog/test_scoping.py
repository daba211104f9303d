"""Aggregates where Soufflé allows them (any term: a head, an atom's argument, arithmetic) and scoped as Soufflé
scopes their variables (injected, witness, local; see ddflow.datalog.scope), against the naive evaluator.

The random programs mix strata of those forms (tests/datalog/naive.py, ``agg2``) with joins and recursion, on
random insert/delete streams; the fixed programs are Soufflé's own evaluation tests (aggregates, aggregates2).
"""
from __future__ import annotations

import random

import pytest

import ddflow
from ddflow.datalog.program import load
from ddflow.datalog.syntax import DatalogError
from tests.datalog.naive import generate
from tests.datalog.test_oracle import _check

KINDS = ("agg2", "agg2", "agg2", "join", "rec", "neg")


@pytest.mark.parametrize("seed", range(300, 330))
def test_scoped_aggregates_match_naive_evaluation(seed):
    rng = random.Random(seed)
    _check([generate(rng, n_strata=rng.randrange(2, 5), kinds=KINDS)], seed, workers=1)


def test_scoped_aggregates_on_two_workers():
    rng = random.Random(330)
    _check([generate(rng, n_strata=3, kinds=KINDS) for _ in range(3)], 330, workers=2, steps=3)


def _run(program: str, tables: dict[str, list[tuple]]) -> dict[str, list[tuple]]:
    flow = ddflow.Dataflow()
    handles = {n: flow.new_collection(n, schema={f"c{i}": "bigint" for i in range(len(rows[0]))})[0]
               for n, rows in tables.items()}
    caps = {n: c.capture() for n, c in flow.datalog(program).items()}
    for n, rows in tables.items():
        handles[n].update(rows, times=0)
    flow.advance_to(1)
    flow.run()
    return {n: sorted(c.contents(0)) for n, c in caps.items()}


AGGREGATES2 = """
.decl A(n:number,d:number) input
.decl B(n:number,s:number) input
.decl C1(n:number,id:number) output
C1(n,id) :- A(n,id), B(id,max  s : {A(n,d), B(d,s)}).
.decl C2(n:number,id:number,s:number) output
C2(n,id,Y) :- A(n,id), B(id,Y), Y = max  s : {A(n,d), B(d,s)}.
.decl C3(n:number,id:number) output
C3(n,id) :- A(n,id), B(id,Y), 2 * Y + 1 =  2 * max  s : {A(n,d), B(d,s)} + 1.
.decl C4(n:number,id:number) output
C4(n,id) :- A(n,id), B(id,Y), Y =  max  s : {A(n,d), B(d,s)} .
"""


def test_soufflé_aggregates2_an_aggregate_as_an_atom_argument():
    a = [(1, 2), (1, 3), (2, 3), (2, 4)]
    b = [(2, 5), (3, 7), (3, 5), (2, 7), (4, 1)]
    got = _run(AGGREGATES2, {"A": a, "B": b})
    best = {n: max(s for m, d in a if m == n for dd, s in b if dd == d) for n, _ in a}
    want = sorted({(n, i) for n, i in a for d, s in b if d == i and s == best[n]})
    assert got["C1"] == got["C3"] == got["C4"] == want == [(1, 2), (1, 3), (2, 3)]
    assert got["C2"] == sorted((n, i, best[n]) for n, i in want)


def test_soufflé_aggregates_the_expression_names_its_own_variables():
    got = _run("""
    .decl a(n:symbol,x:number)
    a("A",3). a("A",4). a("A",5). a("A",6). a("B",2). a("B",3). a("B",4). a("D",4).
    .decl res(n:symbol,x:number) output
    res("minAB+",Y) :- Y = min Z+Y : { a(A,Z), a(B,Y), A!=B }.
    res("maxAB+",Y) :- Y = max Z+Y : { a(A,Z), a(B,Y), A!=B }.
    res("min",Y)  :- Y = min Z : a(_,Z).
    res("countNotA",Y) :- Y = count : { a(X,_), X != "A" }.
    .decl res3(n:symbol,x:number) output
    res3(X,Y) :- a(X,_), Y = min Z : a(X,Z), Y = max Z : a(X,Z).
    """, {})
    assert got["res"] == [("count" "NotA", 4), ("maxAB+", 10), ("min", 2), ("minAB+", 5)]
    assert got["res3"] == [("D", 4)]


def test_a_name_of_the_expression_bound_outside_is_still_the_aggregates_own():
    # y of `sum y` is the aggregate's: the sum over all of e(x, _), not one per y of the rule.
    got = _run(".decl e(x: number, y: number)\n.input e\n.decl r(x: number, y: number, n: number)\n"
               "r(x, y, n) :- e(x, y), n = sum y : { e(x, y) }.\n"
               ".decl s(x: number, y: number, n: number)\n"
               "s(x, y, n) :- e(x, y), n = count : { e(x, z), z < y }.", {"e": [(1, 2), (1, 5), (2, 7)]})
    assert got["r"] == [(1, 2, 7), (1, 5, 7), (2, 7, 7)]
    assert got["s"] == [(1, 2, 0), (1, 5, 1), (2, 7, 0)]


def test_a_witness_of_min_is_the_tuple_that_attains_it():
    got = _run(".decl family(name: number, age: number)\n.input family\n.decl youngest(name: number, age: number)\n"
               "youngest(p, n) :- n = min x : family(p, x).", {"family": [(1, 10), (2, 46), (3, 10), (4, 50)]})
    assert got["youngest"] == [(1, 10), (3, 10)]


def test_several_relations_of_one_signature():
    p = load(".decl A, B(x: number) input\n.decl C, D(x: number, y: symbol)\nC(1, \"a\"). D(x, y) :- C(x, y).")
    assert [(r.name, r.types) for r in p.relations.values()] == [("A", ("number",)), ("B", ("number",)),
                                                                 ("C", ("number", "symbol")),
                                                                 ("D", ("number", "symbol"))]
    assert sorted(p.inputs) == ["A", "B"]
    got = _run(".decl A, B(x: number)\n.input A\n.output B\nB(x) :- A(x), x > 1.", {"A": [(1,), (2,), (3,)]})
    assert got["B"] == [(2,), (3,)]


@pytest.mark.parametrize("rule, fragment", [
    ("r(n) :- n = count : { e(x, _) }, e(x, 1).", None),  # x injected: fine
    ("r(x) :- x = sum y : { e(x, y) }.", None),  # the inner x is the aggregate's own (the outer is its value)
    ("r(x) :- n = sum y : { e(x, y) }, n > 0.", "variable x of the rule is bound only inside the sum aggregate"),
    ("r(y) :- n = min y : e(_, y), n > 0.", "of the aggregated expression also occurs outside the aggregate, "
                                            "unbound there: ambiguous"),
    ("r(n) :- n = max y : { e(_, y), y < count : e(_, _) }.", None),  # nested: built
    ("r(n) :- n = max (y + count : e(_, _)) : { e(_, y) }.", "an aggregate inside an aggregate's expression"),
    ("r(n) :- n = max y : { e(_, y), y < min z : e(x, z) }, e(x, _).", None),  # x: the rule's, through both
    ("r(x) :- e(_, y), n = max y : { e(y, z), z < min w : e(x, w) }, n > 0.",
     "variable x of the head is not bound"),
    ("r(n) :- n = max y : { e(_, y), k < 5, m = min w : e(k, w), y > m }.",
     "variable k bound only inside an aggregate within an aggregate \\(a witness\\) is not supported"),
])
def test_scoping_refusals(rule, fragment):
    text = ".decl e(x: number, y: number)\n.decl r(x: number)\n" + rule
    if fragment is None:
        load(text)
        return
    with pytest.raises(DatalogError, match=fragment) as err:
        load(text)
    assert err.value.pos is not None and err.value.pos.line == 3

