"""Soufflé's components (``.comp``, ``.init``, ``.override``) expanded into plain relations and rules.

A component is a template of declarations, rules, facts and I/O; each
``.init inst = Comp<Types>`` stamps out a copy whose relations are named
``inst.rel`` (nested instances ``inst.sub.rel``).  Inside a component a
relation it declares (itself or through a base it inherits, ``: Base``)
is the instance's own, ``sub.rel`` of a nested ``.init sub`` is that
instance's, and any other name is the program's.  Type parameters are
replaced by the instance's types; types declared inside a component are
the instance's too.  ``.override rel`` drops the rules a base gives
``rel``.  The expansion happens once, before the checks, so the rest of
the front end sees a program without components.

>>> from ddflow.datalog.parser import parse
>>> src = parse(".comp G<N> { .decl e(a: N, b: N) .decl r(a: N, b: N) r(x, y) :- e(x, y). }\\n"
...             ".init g = G<number>\\ng.e(1, 2).")
>>> [(d.name, d.attrs) for d in src.decls]
[('g.e', (('a', 'number'), ('b', 'number'))), ('g.r', (('a', 'number'), ('b', 'number')))]
>>> src.rules
[g.e(1, 2)., g.r(x, y) :- g.e(x, y).]
"""
from __future__ import annotations

from dataclasses import replace

from ddflow.datalog.syntax import (Aggregate, Atom, BinOp, Chain, Compare, Component, DatalogError, Functor, Init,
                                   Literal, Rule, Source, Subsumption, Term, Test)

#: How deep instances may nest (a component that instantiates itself is refused before this).
DEPTH_LIMIT = 64


def expand(src: Source) -> Source:
    """``src`` with every top-level ``.init`` expanded (its relations, rules, facts, I/O and types added, named
    for the instance).  O(size of the expansion)."""
    if not src.components and not src.inits:
        if src.overrides:
            name, pos = src.overrides[0]
            raise DatalogError(f".override {name} outside a component", pos)
        return src
    out = Source(decls=list(src.decls), types=dict(src.types), rules=list(src.rules), io=list(src.io),
                 pragmas=list(src.pragmas), subsumptions=list(src.subsumptions))
    for init in src.inits:
        _instantiate(src.components, init, "", {}, out, ())
    return out


def _instantiate(comps: dict[str, Component], init: Init, prefix: str, outer: dict[str, str], out: Source,
                 stack: tuple[str, ...]) -> None:
    """Add instance ``init`` (inside instance ``prefix``; ``outer``: the type names in scope there) to ``out``."""
    comp = comps.get(init.comp)
    if comp is None:
        raise DatalogError(f".init {init.name}: unknown component {init.comp!r}", init.pos)
    if init.comp in stack or len(stack) >= DEPTH_LIMIT:
        raise DatalogError(f".init {init.name}: component {init.comp} instantiates itself "
                           f"({' -> '.join(stack + (init.comp,))})", init.pos)
    name = f"{prefix}{init.name}"
    args = tuple(outer.get(a, a) for a in init.args)
    items = _items(comps, comp, args, init.pos, stack + (init.comp,))
    own = {d.name for d in items.decls} | {n for n in items.types}
    instances = {i.name for i in items.inits}

    def rel(r: str) -> str:
        head = r.split(".")[0]
        return f"{name}.{r}" if r in own or (head in instances and "." in r) else r

    types = {t: f"{name}.{t}" for t in items.types}
    for t, (target, pos) in items.types.items():
        out.types[f"{name}.{t}"] = ("|".join(types.get(m, m) for m in target.split("|")), pos)
    for d in items.decls:
        out.decls.append(replace(d, name=rel(d.name), attrs=tuple((a, types.get(t, t)) for a, t in d.attrs)))
    out.rules.extend(_rename_rule(r, rel) for r in items.rules)
    out.io.extend(replace(io, rel=rel(io.rel)) for io in items.io)
    out.pragmas.extend(items.pragmas)
    out.subsumptions.extend(Subsumption(_atom(s.dominated, rel), _atom(s.dominating, rel),
                                        tuple(_literal(x, rel) for x in s.body), s.pos) for s in items.subsumptions)
    scope = {**outer, **types}
    for sub in items.inits:
        _instantiate(comps, sub, f"{name}.", scope, out, stack + (init.comp,))


def _items(comps: dict[str, Component], comp: Component, args: tuple[str, ...], pos, stack) -> Source:
    """A component's items with its type parameters replaced, its bases' items first (less what it overrides)."""
    if len(args) != len(comp.params):
        raise DatalogError(f"component {comp.name} takes {len(comp.params)} type argument"
                           f"{'s' * (len(comp.params) != 1)}, got {len(args)}", pos)
    subst = dict(zip(comp.params, args))
    out = Source()
    for base, base_args, bpos in comp.bases:
        b = comps.get(base)
        if b is None:
            raise DatalogError(f"component {comp.name}: unknown base component {base!r}", bpos)
        if base in stack:
            raise DatalogError(f"component {comp.name} inherits itself ({' -> '.join(stack + (base,))})", bpos)
        inherited = _items(comps, b, tuple(subst.get(a, a) for a in base_args), bpos, stack + (base,))
        _merge(out, inherited)
    overridden = {n for n, _ in comp.body.overrides}
    for n, opos in comp.body.overrides:
        if not any(d.name == n for d in out.decls):
            raise DatalogError(f".override {n}: no base of {comp.name} declares {n}", opos)
    out.rules = [r for r in out.rules if r.head.rel not in overridden]
    own = comp.body
    body = Source(decls=[replace(d, attrs=tuple((a, subst.get(t, t)) for a, t in d.attrs)) for d in own.decls],
                  types={t: ("|".join(subst.get(m, m) for m in target.split("|")), p)
                         for t, (target, p) in own.types.items()},
                  rules=list(own.rules), io=list(own.io), pragmas=list(own.pragmas),
                  subsumptions=list(own.subsumptions),
                  inits=[replace(i, args=tuple(subst.get(a, a) for a in i.args)) for i in own.inits])
    _merge(out, body)
    return out


def _merge(into: Source, more: Source) -> None:
    into.decls.extend(more.decls)
    into.types.update(more.types)
    into.rules.extend(more.rules)
    into.io.extend(more.io)
    into.pragmas.extend(more.pragmas)
    into.subsumptions.extend(more.subsumptions)
    into.inits.extend(more.inits)


def _rename_rule(r: Rule, rel) -> Rule:
    return Rule(_atom(r.head, rel), tuple(_literal(x, rel) for x in r.body), r.pos)


def _atom(a: Atom, rel) -> Atom:
    return replace(a, rel=rel(a.rel), args=tuple(_term(t, rel) for t in a.args))


def _literal(lit: Literal, rel) -> Literal:
    if isinstance(lit, Atom):
        return _atom(lit, rel)
    if isinstance(lit, Test):
        return replace(lit, args=tuple(_term(t, rel) for t in lit.args))
    assert isinstance(lit, Compare)
    return replace(lit, left=_term(lit.left, rel), right=_term(lit.right, rel))


def _term(t: Term, rel) -> Term:
    if isinstance(t, Aggregate):
        return replace(t, body=tuple(_literal(x, rel) for x in t.body),
                       expr=_term(t.expr, rel) if t.expr is not None else None)
    if isinstance(t, BinOp):
        return replace(t, left=_term(t.left, rel), right=_term(t.right, rel))
    if isinstance(t, Chain):
        return replace(t, first=_term(t.first, rel), rest=tuple((op, _term(x, rel)) for op, x in t.rest))
    if isinstance(t, Functor):
        return replace(t, args=tuple(_term(a, rel) for a in t.args))
    return t
