"""Strata (seed 001): the relations' dependency graph, its strongly connected components, in evaluation order.

An edge runs from a rule's head to each relation its body reads; an
edge through ``!`` is a *negation* edge, one through an aggregate's
body an *aggregation* edge.  Each strongly connected component (SCC) is
evaluated together: a recursive one as one fixpoint (one ``iterate``,
mutual recursion through Variables), after every SCC it reads.  A
negation or aggregation edge inside an SCC would make a relation depend
non-monotonically on itself: such a program has no stratification and
is refused, the error naming the cycle and where its edge is written.

>>> from ddflow.datalog.program import load
>>> p = load(".decl a(x: number)\\n.decl b(x: number)\\na(x) :- b(x).\\nb(x) :- a(x), !a(x).\\n")
>>> try:
...     strata(p)
... except DatalogError as err:
...     print(err.pos, err.bare)
4:15 the program cannot be stratified: b depends on a through negation (!a) on the cycle b -> !a -> b
"""
from __future__ import annotations

from dataclasses import dataclass

from ddflow.datalog.program import Program
from ddflow.datalog.syntax import Atom, Compare, DatalogError, Literal, Pos


@dataclass(frozen=True)
class Edge:
    """``head`` reads ``body`` (``kind``: ``positive``, ``negation`` or ``aggregation``) at ``pos``."""

    head: str
    body: str
    kind: str
    pos: Pos


@dataclass(frozen=True)
class Stratum:
    """One SCC: its relations (declaration order) and whether it is recursive (a loop)."""

    relations: tuple[str, ...]
    recursive: bool


def edges(p: Program) -> list[Edge]:
    """Every dependency of the program's rules, with its kind and where it is written."""
    out: list[Edge] = []
    for r in p.rules:
        for lit in r.body:
            out.extend(_edges_of(r.head.rel, lit, "positive"))
    return out


def _edges_of(head: str, lit: Literal, kind: str) -> list[Edge]:
    if isinstance(lit, Atom):
        return [Edge(head, lit.rel, "negation" if lit.negated else kind, lit.pos)]
    out = []
    if not isinstance(lit, Compare):  # contains / match read no relation
        return out
    for agg in lit.aggregates():
        for inner in agg.body:
            for e in _edges_of(head, inner, "aggregation"):
                out.append(Edge(head, e.body, "negation" if e.kind == "negation" else "aggregation", e.pos))
    return out


def strata(p: Program, priority: dict[str, int] | None = None) -> list[Stratum]:
    """The SCCs in an evaluation order (each after those it reads); refused when not stratifiable.

    ``priority`` (a hint, :mod:`ddflow.datalog.hints`): among SCCs that are
    ready at the same point, those holding a relation of higher priority
    come first; otherwise declaration order.  Any such order gives the
    same results.  O(relations + edges).
    """
    names = list(p.relations)
    order = {n: i for i, n in enumerate(names)}
    es = edges(p)
    succ: dict[str, set[str]] = {n: set() for n in names}
    for e in es:
        succ[e.head].add(e.body)
    comp = _tarjan(names, succ)
    members: dict[int, list[str]] = {}
    for n in names:
        members.setdefault(comp[n], []).append(n)
    for e in es:
        if e.kind != "positive" and comp[e.head] == comp[e.body]:
            cycle = _cycle(e, succ, comp)
            mark = "!" if e.kind == "negation" else "an aggregate over "
            shown = " -> ".join([cycle[0], f"{mark}{cycle[1]}", *cycle[2:]])
            raise DatalogError(f"the program cannot be stratified: {e.head} depends on {e.body} through "
                               f"{e.kind} ({mark}{e.body}) on the cycle {shown}", e.pos)
    # Topological order of the SCC graph: a component after every component it reads.
    deps: dict[int, set[int]] = {c: set() for c in members}
    for e in es:
        if comp[e.head] != comp[e.body]:
            deps[comp[e.head]].add(comp[e.body])
    prio = priority or {}

    def rank(c: int) -> tuple:
        return (-max(prio.get(n, 0) for n in members[c]), min(order[n] for n in members[c]))

    done: set[int] = set()
    out: list[Stratum] = []
    pending = sorted(members, key=rank)
    while pending:
        ready = [c for c in pending if deps[c] <= done]
        c = min(ready, key=rank)
        pending.remove(c)
        done.add(c)
        rels = tuple(members[c])
        recursive = len(rels) > 1 or any(e.head == e.body == rels[0] for e in es)
        out.append(Stratum(rels, recursive))
    return out


def _tarjan(names: list[str], succ: dict[str, set[str]]) -> dict[str, int]:
    """Each relation's SCC number (iterative Tarjan: no recursion limit on long chains)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    comp: dict[str, int] = {}
    counter = 0
    for root in names:
        if root in index:
            continue
        work = [(root, iter(sorted(succ[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(succ[nxt]))))
                elif nxt in on:
                    low[v] = min(low[v], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp[w] = index[v]
                    if w == v:
                        break
    return comp


def _cycle(e: Edge, succ: dict[str, set[str]], comp: dict[str, int]) -> list[str]:
    """``[head, body, ..., head]``: the edge, then a shortest path back inside its SCC (breadth first)."""
    start, goal = e.body, e.head
    prev: dict[str, str | None] = {start: None}
    frontier = [start]
    while frontier and goal not in prev:
        nxt = []
        for v in frontier:
            for w in sorted(succ[v]):
                if comp[w] == comp[start] and w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    if e.head == e.body:
        return [e.head, e.head]
    path = [goal]
    v = prev.get(goal)
    while v is not None:
        path.append(v)
        v = prev[v]
    return [e.head] + list(reversed(path))
