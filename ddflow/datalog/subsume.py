"""Subsumption (Soufflé's ``<=`` rules) as ordinary rules: a tuple another tuple dominates is not in the relation.

``r(t1) <= r(t2) :- body.`` says a tuple ``t1`` of ``r`` is deleted when
a *different* tuple ``t2`` of ``r`` dominates it (the body holding of
the two).  For a relation whose rules do not read it back (no recursion
through it) that is a set difference, which :func:`rewrite` writes as
rules over two relations the user never sees::

    r@all(...)       the rules, facts and input of r, as written
    r@dominated(t1) :- r@all(t1), r@all(t2), body, t1 != t2.
    r(x...)         :- r@all(x...), !r@dominated(x...).

(``t1 != t2``: one rule per attribute, the two tuples differing there;
``r`` in the body reads ``r@all``, another subsumed relation what is left
of it.)  Every tuple some other tuple dominates is deleted: for the
partial order Soufflé asks the body to be, the same as deleting those a
remaining tuple dominates.  So a change to ``r``'s inputs costs
what it touches, as any negation does.  A relation on a recursive cycle
is refused: Soufflé deletes dominated tuples while the fixpoint runs,
so what they derive first depends on its order.

>>> from ddflow.datalog.parser import parse
>>> src = parse(".decl m(s: number)\\nm(1). m(2).\\nm(x) <= m(y) :- x > y.")
>>> moved, new, hidden = rewrite(src.rules, src.subsumptions)
>>> moved
[m@all(1)., m@all(2).]
>>> new
[m(a0) :- m@all(a0), !m@dominated(a0)., m@dominated(x) :- m@all(x), m@all(y), x > y, x != y.]
>>> hidden
{'m@all': 'm', 'm@dominated': 'm'}
"""
from __future__ import annotations

from dataclasses import replace

from ddflow.datalog.syntax import (Aggregate, Atom, BinOp, Chain, Compare, DatalogError, Functor, Literal, Rule,
                                   Subsumption, Term, Test, Var)

ALL, DOMINATED = "@all", "@dominated"


def rewrite(rules: list[Rule], subsumptions: list[Subsumption]) -> tuple[list[Rule], list[Rule], dict[str, str]]:
    """``rules`` with each subsumed relation's rules moved to its ``@all`` relation; the new rules above; and
    ``{hidden relation: the relation it belongs to}``.  Refused when a subsumed relation is recursive.
    O(rules + subsumptions x arity)."""
    if not subsumptions:
        return rules, [], {}
    subsumed = {s.dominated.rel for s in subsumptions}
    moved = [replace(r, head=replace(r.head, rel=r.head.rel + ALL)) if r.head.rel in subsumed else r for r in rules]
    new: list[Rule] = []
    for name in sorted(subsumed):
        s0 = next(s for s in subsumptions if s.dominated.rel == name)
        xs = tuple(Var(f"a{i}", s0.pos) for i in range(len(s0.dominated.args)))
        new.append(Rule(Atom(name, xs, s0.pos), (Atom(name + ALL, xs, s0.pos),
                                                 Atom(name + DOMINATED, xs, s0.pos, negated=True)), s0.pos))
    for s in subsumptions:
        name = s.dominated.rel
        body = [_reading_all(lit, {name}) for lit in s.body]  # r itself: all its tuples; others: as they end
        for a, b in zip(s.dominated.args, s.dominating.args):
            if a == b:
                continue  # the two tuples never differ here
            new.append(Rule(Atom(name + DOMINATED, s.dominated.args, s.pos),
                            (Atom(name + ALL, s.dominated.args, s.pos), Atom(name + ALL, s.dominating.args, s.pos),
                             *body, Compare("!=", a, b, s.pos)), s.pos))
    _refuse_recursion(moved + new, subsumptions)
    hidden = {}
    for name in sorted(subsumed):
        hidden[name + ALL] = hidden[name + DOMINATED] = name
    return moved, new, hidden


def _reading_all(lit: Literal, subsumed: set[str]) -> Literal:
    """A body literal with atoms of subsumed relations reading their ``@all`` relation (aggregates' too)."""
    if isinstance(lit, Atom):
        return replace(lit, rel=lit.rel + ALL if lit.rel in subsumed else lit.rel,
                       args=tuple(_term_reading_all(t, subsumed) for t in lit.args))
    if isinstance(lit, Compare):
        return replace(lit, left=_term_reading_all(lit.left, subsumed), right=_term_reading_all(lit.right, subsumed))
    return lit


def _term_reading_all(t: Term, subsumed: set[str]) -> Term:
    if isinstance(t, Aggregate):
        return replace(t, body=tuple(_reading_all(x, subsumed) for x in t.body))
    if isinstance(t, BinOp):
        return replace(t, left=_term_reading_all(t.left, subsumed), right=_term_reading_all(t.right, subsumed))
    if isinstance(t, Chain):
        return replace(t, first=_term_reading_all(t.first, subsumed),
                       rest=tuple((op, _term_reading_all(x, subsumed)) for op, x in t.rest))
    if isinstance(t, Functor):
        return replace(t, args=tuple(_term_reading_all(a, subsumed) for a in t.args))
    return t


def _refuse_recursion(rules: list[Rule], subsumptions: list[Subsumption]) -> None:
    """A DatalogError if a subsumed relation is read back by what it is made of (its ``@all`` relation's rules
    or its subsumptive bodies)."""
    reads: dict[str, set[str]] = {}
    for r in rules:
        reads.setdefault(r.head.rel, set()).update(_relations(r.body))
    for s in subsumptions:
        name = s.dominated.rel
        seen: set[str] = set()
        stack = [name + ALL, name + DOMINATED]
        while stack:
            x = stack.pop()
            if x in seen:
                continue
            seen.add(x)
            for y in reads.get(x, ()):
                if y == name:
                    raise DatalogError(f"subsumption of {name}, which its own rules read back (a recursive "
                                       "relation), is not supported: Soufflé deletes dominated tuples while the "
                                       "fixpoint runs, so what they derive depends on the order of evaluation", s.pos)
                stack.append(y)


def _relations(body) -> set[str]:
    """Every relation a body reads (inside aggregates and terms too)."""
    out: set[str] = set()

    def term(t: Term) -> None:
        if isinstance(t, Aggregate):
            out.update(_relations(t.body))
            if t.expr is not None:
                term(t.expr)
        elif isinstance(t, BinOp):
            term(t.left)
            term(t.right)
        elif isinstance(t, Chain):
            for x in t.operands():
                term(x)
        elif isinstance(t, Functor):
            for a in t.args:
                term(a)

    for lit in body:
        if isinstance(lit, Atom):
            out.add(lit.rel)
            for a in lit.args:
                term(a)
        elif isinstance(lit, Compare):
            term(lit.left)
            term(lit.right)
        elif isinstance(lit, Test):
            for a in lit.args:
                term(a)
    return out
