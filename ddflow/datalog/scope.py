"""Soufflé's scoping of aggregates: where an aggregate may stand, and which of its variables are the rule's.

An aggregate is a term, so it may stand wherever a term can: in a
head, as an atom's argument, inside arithmetic, on either side of a
comparison.  :func:`lift` gives each aggregate that is not already
``v = aggregate`` a variable of its own, bound by a new literal
``v = aggregate``, so the rest of the front end sees one form::

    B(id, max s : {A(n, d), B(d, s)}) :- A(n, id).
    ==>  B(id, m) :- A(n, id), m = max s : {A(n, d), B(d, s)}.

:func:`scope` then sorts an aggregate's variables as Soufflé does
(``ast/analysis/Aggregate.cpp``: injected, witness, local):

- **injected**: a variable of the aggregate (body or expression) that is
  *grounded* in the rule outside it (by a positive atom, or by ``x = t``
  of grounded ``t``; the aggregate itself grounds nothing, other
  aggregates ground their results) and does **not** occur in the
  aggregated expression.  The aggregate has one value per binding of
  the injected variables.
- **witness**: a variable of the aggregate's body that occurs outside it
  ungrounded there (every aggregate's result counted as grounded) and is
  grounded by the aggregate's body.  ``youngest(p, n) :- n = min x :
  family(p, x).`` names the ``p`` of the youngest.  Soufflé grounds a
  witness by adding the aggregate's body to the rule with its expression
  equal to the result; so does ddflow, for ``min`` and ``max``.  For
  ``count``, ``sum`` and ``mean`` no tuple witnesses the value: refused.
- an aggregate inside an aggregate's body takes, the same way, what the
  body around it grounds and what was injected into that body; the outer
  aggregate takes from the rule what the inner one needs (:func:`free`).
- **local**: every other variable of the aggregate, its own whatever
  the rule outside calls by that name.  So in
  ``Y = min Z+Y : { a(A,Z), a(B,Y), A!=B }`` the inner ``Y`` (in the
  expression, so never injected) is the aggregate's own.

>>> from ddflow.datalog.parser import parse
>>> r = scope(lift(parse("r(x, max s : {e(x, s)}) :- u(x).").rules[0]))
>>> r
r(x, max@1:6) :- u(x), max@1:6 = max s : { e(x, s) }.
>>> sorted(r.body[1].right.injected)
['x']
"""
from __future__ import annotations

import itertools
from dataclasses import replace

from ddflow.datalog.syntax import (Aggregate, Atom, BinOp, Chain, Compare, DatalogError, Functor, Literal, Rule,
                                   Term, Test, Var, Wild)


def lift(rule: Rule) -> Rule:
    """``rule`` with every aggregate not already ``v = aggregate`` bound to a variable of its own (inside
    aggregates' bodies too).  O(rule size).

    The variable is named for the aggregate and where it is written (``max@3:9``): no program can write that name.
    """
    extra: list[Literal] = []
    head = replace(rule.head, args=tuple(_sub(a, extra) for a in rule.head.args))
    body = _lift_body(rule.body, extra)
    if not extra and head == rule.head and tuple(body) == rule.body:
        return rule
    return Rule(head, tuple(body) + tuple(extra), rule.pos)


def _lift_body(lits, extra: list[Literal]) -> list[Literal]:
    """``lits`` with their aggregates lifted: the new ``v = aggregate`` literals go to ``extra``."""
    body: list[Literal] = []
    for lit in lits:
        if isinstance(lit, Atom):
            body.append(replace(lit, args=tuple(_sub(a, extra) for a in lit.args)))
        elif isinstance(lit, Compare) and lit.op == "=" and (
                (isinstance(lit.left, Var) and isinstance(lit.right, Aggregate))
                or (isinstance(lit.right, Var) and isinstance(lit.left, Aggregate))):
            v, agg = (lit.left, lit.right) if isinstance(lit.right, Aggregate) else (lit.right, lit.left)
            body.append(Compare("=", v, _lift_aggregate(agg), lit.pos))
        elif isinstance(lit, Test):
            body.append(replace(lit, args=tuple(_sub(a, extra) for a in lit.args)))
        else:
            assert isinstance(lit, Compare)
            body.append(replace(lit, left=_sub(lit.left, extra), right=_sub(lit.right, extra)))
    return body


def _lift_aggregate(agg: Aggregate) -> Aggregate:
    inner: list[Literal] = []
    body = _lift_body(agg.body, inner)
    return replace(agg, body=tuple(body) + tuple(inner)) if inner or tuple(body) != agg.body else agg


def _sub(t: Term, extra: list[Literal]) -> Term:
    if isinstance(t, Aggregate):
        v = Var(f"{t.func}@{t.pos}", t.pos)
        extra.append(Compare("=", v, _lift_aggregate(t), t.pos))
        return v
    if isinstance(t, BinOp):
        return replace(t, left=_sub(t.left, extra), right=_sub(t.right, extra))
    if isinstance(t, Chain):
        return replace(t, first=_sub(t.first, extra), rest=tuple((op, _sub(x, extra)) for op, x in t.rest))
    if isinstance(t, Functor):
        return replace(t, args=tuple(_sub(a, extra) for a in t.args))
    return t


def aggregates_of(rule: Rule) -> list[tuple[int, Aggregate]]:
    """``(index of its literal, aggregate)`` for each aggregate of a lifted rule (``v = aggregate``)."""
    return [(i, lit.right) for i, lit in enumerate(rule.body)
            if isinstance(lit, Compare) and isinstance(lit.right, Aggregate)]


def scope(rule: Rule) -> Rule:
    """A lifted rule with each aggregate's injected variables set and its witnesses grounded (see above).

    Cost: O(aggregates x rule size) per pass of the grounding fixpoint.
    """
    aggs = aggregates_of(rule)
    if not aggs:
        return rule
    body = list(rule.body)
    outer = set().union(*(lit.variables() for lit in rule.body)) | rule.head.variables()
    grounded_all = grounded(rule.body, None)
    extra: list[Literal] = []
    fresh = itertools.count()
    for i, agg in aggs:
        inner = agg.inner_variables()
        target = agg.expr.variables() if agg.expr is not None else set()
        inj = free(agg) & grounded(rule.body, agg)
        body_vars = set().union(*(lit.variables() for lit in agg.body)) if agg.body else set()
        witnesses = {v for v in (body_vars & outer) - grounded_all - inj if v in grounded(agg.body, None)}
        lit = body[i]
        body[i] = replace(lit, right=_scope_inner(replace(agg, injected=frozenset(inj))))
        if not witnesses:
            continue
        shown = ", ".join(sorted(witnesses))
        if _nested(agg):
            raise DatalogError(f"variable{'s' * (len(witnesses) > 1)} {shown} of the rule "
                               f"{'are' if len(witnesses) > 1 else 'is'} bound only inside an aggregate that holds "
                               "another (a witness): not supported", agg.pos)
        if agg.func not in ("min", "max"):
            raise DatalogError(f"variable{'s' * (len(witnesses) > 1)} {shown} of the rule "
                               f"{'are' if len(witnesses) > 1 else 'is'} bound only inside the {agg.func} aggregate "
                               f"(a witness); only min and max have a witness, the tuple that attains the value",
                               agg.pos)
        if witnesses & target:
            raise DatalogError(f"variable{'s' * (len(witnesses) > 1)} {shown} of the aggregated expression "
                               "also occur" + "s" * (len(witnesses) == 1) + " outside the aggregate, unbound there: "
                               "ambiguous (a witness of its own value); name the value and the witness apart",
                               agg.pos)
        # The witness's tuples: the aggregate's body with its expression equal to the result, its local
        # variables renamed apart from the rule's, its injected and witness variables the rule's own.
        result = lit.left
        k = next(fresh)
        local = inner - inj - witnesses
        names = {v: f"{v}#w{k}" for v in local}
        copy = [_rename(x, names) for x in agg.body]
        copy.append(Compare("=", result, _rename_term(agg.expr, names), agg.pos))
        extra.extend(copy)
    return Rule(rule.head, tuple(body) + tuple(extra), rule.pos)


def _nested(agg: Aggregate) -> list[tuple[int, Aggregate]]:
    """``(index, aggregate)`` of each ``v = aggregate`` literal of a lifted aggregate's body."""
    return [(i, lit.right) for i, lit in enumerate(agg.body)
            if isinstance(lit, Compare) and isinstance(lit.right, Aggregate)]


def free(agg: Aggregate) -> set[str]:
    """The variables an aggregate may take from where it stands: those of its body and of the aggregates
    inside it (theirs, less their own expressions'), less those of its own expression (which are its own)."""
    out = agg.inner_variables()
    for _, n in _nested(agg):
        out |= free(n)
    return out - (agg.expr.variables() if agg.expr is not None else set())


def _scope_inner(agg: Aggregate) -> Aggregate:
    """An aggregate (its injected variables set) with those of the aggregates inside its body set: what they
    take from the body around them (its grounded variables and those injected into it)."""
    nested = _nested(agg)
    if not nested:
        return agg
    body = list(agg.body)
    visible = set(agg.injected or ())
    around = set().union(*(lit.variables() for lit in agg.body)) | visible
    all_grounded = grounded(agg.body, None) | visible
    for i, n in nested:
        inj = free(n) & (grounded(agg.body, n) | visible)
        n_body = set().union(*(lit.variables() for lit in n.body)) if n.body else set()
        witnesses = {v for v in (n_body & around) - all_grounded - inj if v in grounded(n.body, None)}
        if witnesses:
            raise DatalogError(f"variable{'s' * (len(witnesses) > 1)} {', '.join(sorted(witnesses))} bound only "
                               "inside an aggregate within an aggregate (a witness) is not supported", n.pos)
        body[i] = replace(body[i], right=_scope_inner(replace(n, injected=frozenset(inj))))
    return replace(agg, body=tuple(body))


def grounded(body, target: Aggregate | None) -> set[str]:
    """Variables grounded by ``body`` (Soufflé's grounding): positive atoms' variables, then ``x = t`` both ways
    where ``t`` is grounded, to a fixpoint.  Every aggregate's result is grounded but ``target``'s, and no
    aggregate's body grounds anything outside it."""
    out: set[str] = set()
    for lit in body:
        if isinstance(lit, Atom) and not lit.negated:
            out |= {t.name for t in lit.args if isinstance(t, Var)}
    eqs = [lit for lit in body if isinstance(lit, Compare) and lit.op == "="]
    changed = True
    while changed:
        changed = False
        for lit in eqs:
            for a, b in ((lit.left, lit.right), (lit.right, lit.left)):
                if isinstance(a, Var) and a.name not in out and _ground_term(b, out, target):
                    out.add(a.name)
                    changed = True
    return out


def _ground_term(t: Term, out: set[str], target: Aggregate | None) -> bool:
    if isinstance(t, Aggregate):
        return t is not target
    if isinstance(t, Wild):
        return False
    return t.variables() <= out


def _rename_term(t: Term, names: dict[str, str]) -> Term:
    if isinstance(t, Var):
        return Var(names[t.name], t.pos) if t.name in names else t
    if isinstance(t, BinOp):
        return replace(t, left=_rename_term(t.left, names), right=_rename_term(t.right, names))
    if isinstance(t, Chain):
        return replace(t, first=_rename_term(t.first, names),
                       rest=tuple((op, _rename_term(x, names)) for op, x in t.rest))
    if isinstance(t, Functor):
        return replace(t, args=tuple(_rename_term(a, names) for a in t.args))
    return t


def _rename(lit: Literal, names: dict[str, str]) -> Literal:
    if isinstance(lit, Atom):
        return replace(lit, args=tuple(_rename_term(a, names) for a in lit.args))
    if isinstance(lit, Test):
        return replace(lit, args=tuple(_rename_term(a, names) for a in lit.args))
    assert isinstance(lit, Compare)
    return replace(lit, left=_rename_term(lit.left, names), right=_rename_term(lit.right, names))
