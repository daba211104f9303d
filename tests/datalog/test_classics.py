"""Classic Datalog programs with known answers: each against a direct Python computation, then after updates.

Transitive closure, same generation, Andersen's points-to analysis,
CSPA and CSDA (Graspan's analyses, seed 000's family, as FlowLog and
wirelog run them), connected components by min label, shortest paths
by min.
"""
from __future__ import annotations

import heapq
import random

import pytest

import ddflow
from tests.datalog.naive import Program, evaluate

TC = """
.decl edge(x: number, y: number)
.input edge
.decl tc(x: number, y: number)
.output tc
tc(x, y) :- edge(x, y).
tc(x, z) :- tc(x, y), edge(y, z).
"""

CSPA = """
.decl assign(a: number, b: number)
.decl dereference(a: number, b: number)
.input assign
.input dereference
.decl valueFlow(a: number, b: number)
.decl valueAlias(a: number, b: number)
.decl memoryAlias(a: number, b: number)
.output valueFlow
.output valueAlias
.output memoryAlias
valueFlow(y, x) :- assign(y, x).
valueFlow(x, y) :- assign(x, z), memoryAlias(z, y).
valueFlow(x, y) :- valueFlow(x, z), valueFlow(z, y).
memoryAlias(x, w) :- dereference(y, x), valueAlias(y, z), dereference(z, w).
valueAlias(x, y) :- valueFlow(z, x), valueFlow(z, y).
valueAlias(x, y) :- valueFlow(z, x), memoryAlias(z, w), valueFlow(w, y).
valueFlow(x, x) :- assign(x, _).
valueFlow(x, x) :- assign(_, x).
memoryAlias(x, x) :- assign(_, x).
memoryAlias(x, x) :- assign(x, _).
"""


def _flow(tables: dict[str, int | dict], workers: int = 1):
    flow = ddflow.Dataflow(workers=workers)
    handles = {}
    for name, cols in tables.items():
        schema = cols if isinstance(cols, dict) else {f"c{i}": "bigint" for i in range(cols)}
        handles[name] = flow.new_collection(name, schema=schema)[0]
    return flow, handles


def _closure(edges: set) -> set:
    out = set(edges)
    while True:
        more = {(x, w) for (x, y) in out for (z, w) in edges if y == z} - out
        if not more:
            return out
        out |= more


def _run(flow, t: int) -> None:
    flow.advance_to(t + 1)
    flow.run()


@pytest.mark.parametrize("workers", [1, 2])
def test_transitive_closure_under_insertions_and_deletions(workers):
    rng = random.Random(workers)
    flow, h = _flow({"edge": 2}, workers)
    with flow:
        cap = flow.datalog(TC)["tc"].capture()
        edges: set = set()
        for t in range(6):
            ins = {(rng.randrange(12), rng.randrange(12)) for _ in range(8)} - edges
            dels = set(rng.sample(sorted(edges), min(len(edges), 3)))
            h["edge"].update(sorted(ins), times=t)
            h["edge"].update(sorted(dels), times=t, diffs=-1)
            edges = (edges | ins) - dels
            _run(flow, t)
            assert cap.contents(t) == {p: 1 for p in _closure(edges)}


def test_same_generation():
    prog = """
    .decl par(c: symbol, p: symbol)
    .input par
    .decl sg(x: symbol, y: symbol)
    sg(x, y) :- par(x, p), par(y, p), x != y.
    sg(x, y) :- par(x, a), sg(a, b), par(y, b).
    """
    par = {("b", "a"), ("c", "a"), ("d", "b"), ("e", "c"), ("f", "d"), ("g", "e"), ("h", "g")}
    flow, h = _flow({"par": {"c": "string", "p": "string"}})
    cap = flow.datalog(prog)["sg"].capture()
    h["par"].update(sorted(par), times=0)
    _run(flow, 0)
    want = {("b", "c"), ("c", "b"), ("d", "e"), ("e", "d"), ("f", "g"), ("g", "f")}
    assert cap.contents(0) == {p: 1 for p in want}
    h["par"].remove(("e", "c"), time=1)  # e leaves: e, g, h lose their generation
    _run(flow, 1)
    assert cap.contents(1) == {("b", "c"): 1, ("c", "b"): 1}


def test_andersen_points_to():
    prog = """
    .type Var <: symbol
    .decl addressOf(y: Var, x: Var)   // y = &x
    .decl assign(y: Var, x: Var)      // y = x
    .decl load(y: Var, x: Var)        // y = *x
    .decl store(y: Var, x: Var)       // *y = x
    .input addressOf, assign, load, store
    .decl pointsTo(y: Var, x: Var)
    .output pointsTo
    pointsTo(y, x) :- addressOf(y, x).
    pointsTo(y, x) :- assign(y, z), pointsTo(z, x).
    pointsTo(y, w) :- load(y, x), pointsTo(x, z), pointsTo(z, w).
    pointsTo(z, w) :- store(y, x), pointsTo(y, z), pointsTo(x, w).
    """
    s = {"c0": "string", "c1": "string"}
    flow, h = _flow({"addressOf": s, "assign": s, "load": s, "store": s})
    cap = flow.datalog(prog)["pointsTo"].capture()
    # a = &b; c = &d; p = &a; *p = c; q = *p; r = q
    h["addressOf"].update([("a", "b"), ("c", "d"), ("p", "a")], times=0)
    h["store"].update([("p", "c")], times=0)
    h["load"].update([("q", "p")], times=0)
    h["assign"].update([("r", "q")], times=0)
    _run(flow, 0)
    want = {("a", "b"), ("a", "d"), ("c", "d"), ("p", "a"), ("q", "b"), ("q", "d"), ("r", "b"), ("r", "d")}
    assert cap.contents(0) == {p: 1 for p in want}
    h["store"].remove(("p", "c"), time=1)  # without *p = c, a points to b only
    _run(flow, 1)
    assert cap.contents(1) == {p: 1 for p in want - {("a", "d"), ("q", "d"), ("r", "d")}}


def _cspa_structured() -> Program:
    """CSPA as the naive evaluator's data (tests/datalog/naive.py), an independent oracle."""
    p = Program()
    p.arity = {"assign": 2, "dereference": 2, "valueFlow": 2, "valueAlias": 2, "memoryAlias": 2}
    p.types = {r: ["number", "number"] for r in p.arity}
    p.strata = [["valueFlow", "valueAlias", "memoryAlias"]]
    v = lambda n: ("v", n)  # noqa: E731
    a = lambda r, x, y, neg=False: ("atom", r, [x, y], neg)  # noqa: E731
    w = ("_",)
    p.rules = [
        ("valueFlow", [v("y"), v("x")], [a("assign", v("y"), v("x"))]),
        ("valueFlow", [v("x"), v("y")], [a("assign", v("x"), v("z")), a("memoryAlias", v("z"), v("y"))]),
        ("valueFlow", [v("x"), v("y")], [a("valueFlow", v("x"), v("z")), a("valueFlow", v("z"), v("y"))]),
        ("memoryAlias", [v("x"), v("w")], [a("dereference", v("y"), v("x")), a("valueAlias", v("y"), v("z")),
                                           a("dereference", v("z"), v("w"))]),
        ("valueAlias", [v("x"), v("y")], [a("valueFlow", v("z"), v("x")), a("valueFlow", v("z"), v("y"))]),
        ("valueAlias", [v("x"), v("y")], [a("valueFlow", v("z"), v("x")), a("memoryAlias", v("z"), v("w")),
                                          a("valueFlow", v("w"), v("y"))]),
        ("valueFlow", [v("x"), v("x")], [a("assign", v("x"), w)]),
        ("valueFlow", [v("x"), v("x")], [a("assign", w, v("x"))]),
        ("memoryAlias", [v("x"), v("x")], [a("assign", w, v("x"))]),
        ("memoryAlias", [v("x"), v("x")], [a("assign", v("x"), w)]),
    ]
    return p


def test_cspa_matches_an_independent_evaluation_under_updates():
    import tests.datalog.naive as naive

    rng = random.Random(5)
    flow, h = _flow({"assign": 2, "dereference": 2})
    rels = flow.datalog(CSPA)
    caps = {n: rels[n].capture() for n in ("valueFlow", "valueAlias", "memoryAlias")}
    facts = {"assign": set(), "dereference": set()}
    saved = naive.INPUTS
    naive.INPUTS = {"assign": 2, "dereference": 2}
    try:
        for t in range(4):
            for rel in facts:
                ins = {(rng.randrange(10), rng.randrange(10)) for _ in range(5)} - facts[rel]
                dels = set(rng.sample(sorted(facts[rel]), min(2, len(facts[rel]))))
                h[rel].update(sorted(ins), times=t)
                h[rel].update(sorted(dels), times=t, diffs=-1)
                facts[rel] = (facts[rel] | ins) - dels
            _run(flow, t)
            want = evaluate(_cspa_structured(), facts)
            for n, c in caps.items():
                assert c.contents(t) == {r: 1 for r in want[n]}, (t, n)
    finally:
        naive.INPUTS = saved


def test_csda_null_propagation():
    prog = """
    .decl nullEdge(a: number, b: number)
    .decl arc(a: number, b: number)
    .input nullEdge, arc
    .decl null(a: number, b: number)
    null(x, y) :- nullEdge(x, y).
    null(x, y) :- null(x, w), arc(w, y).
    """
    flow, h = _flow({"nullEdge": 2, "arc": 2})
    cap = flow.datalog(prog)["null"].capture()
    h["nullEdge"].update([(0, 1), (5, 6)], times=0)
    h["arc"].update([(1, 2), (2, 3), (6, 7), (3, 1)], times=0)
    _run(flow, 0)
    assert cap.contents(0) == {(0, 1): 1, (0, 2): 1, (0, 3): 1, (5, 6): 1, (5, 7): 1}


def _components(nodes: set, edges: set) -> dict:
    parent = {n: n for n in nodes}

    def find(n):
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    comp: dict = {}
    for n in nodes:
        comp.setdefault(find(n), []).append(n)
    return {n: min(members) for members in comp.values() for n in members}


def test_connected_components_by_min_label():
    prog = """
    .decl edge(x: number, y: number)
    .input edge
    .decl node(x: number)
    node(x) :- edge(x, _).
    node(y) :- edge(_, y).
    .decl link(x: number, y: number)
    link(x, y) :- edge(x, y).
    link(y, x) :- edge(x, y).
    link(x, x) :- node(x).
    .decl reach(x: number, y: number)
    reach(x, y) :- link(x, y).
    reach(x, z) :- reach(x, y), link(y, z).
    .decl cc(x: number, label: number)
    cc(x, m) :- node(x), m = min y : reach(x, y).
    """
    rng = random.Random(3)
    flow, h = _flow({"edge": 2})
    cap = flow.datalog(prog)["cc"].capture()
    edges: set = set()
    for t in range(4):
        ins = {(rng.randrange(20), rng.randrange(20)) for _ in range(6)} - edges
        dels = set(rng.sample(sorted(edges), min(3, len(edges))))
        h["edge"].update(sorted(ins), times=t)
        h["edge"].update(sorted(dels), times=t, diffs=-1)
        edges = (edges | ins) - dels
        _run(flow, t)
        nodes = {n for e in edges for n in e}
        assert cap.contents(t) == {(n, m): 1 for n, m in _components(nodes, edges).items()}


def test_shortest_paths_by_min():
    prog = """
    .decl edge(x: number, y: number, w: number)
    .input edge
    .decl path(x: number, y: number, d: number)
    path(x, y, w) :- edge(x, y, w).
    path(x, z, d + w) :- path(x, y, d), edge(y, z, w), d + w <= 40.
    .decl sp(x: number, y: number, d: number)
    sp(x, y, d) :- path(x, y, _), d = min e : { path(x, y, e) }.
    """
    rng = random.Random(4)
    flow, h = _flow({"edge": 3})
    cap = flow.datalog(prog)["sp"].capture()
    edges = {(rng.randrange(8), rng.randrange(8), rng.randrange(1, 5)) for _ in range(14)}
    h["edge"].update(sorted(edges), times=0)
    _run(flow, 0)
    want = {}
    for src in range(8):
        dist: dict = {}
        heap = [(w, y) for (x, y, w) in edges if x == src]
        heapq.heapify(heap)
        while heap:
            d, n = heapq.heappop(heap)
            if n in dist:
                continue
            dist[n] = d
            for (x, y, w) in edges:
                if x == n and y not in dist:
                    heapq.heappush(heap, (d + w, y))
        want.update({(src, n, d): 1 for n, d in dist.items()})
    assert cap.contents(0) == want
