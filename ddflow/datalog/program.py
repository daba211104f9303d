"""A parsed Datalog program checked and resolved: relations with types, rules, facts, inputs, outputs.

The checks, each refused with the line and column of what breaks it:

- every type resolves (``.type`` aliases) to one of Soufflé's four:
  ``number``, ``unsigned``, ``float``, ``symbol``;
- a relation is declared once, before or after its use, and every atom
  names a declared relation with its declared arity;
- facts hold constants of their attributes' types;
- every rule is *safe* (Soufflé's "grounded"): each variable of the head,
  of a negated atom, of a comparison and of an arithmetic expression is
  bound by a positive atom of the body, by ``x = expression`` over bound
  variables, or as an aggregate's result; a variable of an aggregate's
  body that also occurs outside it is *injected* (one aggregate per
  binding of it) and must be bound outside.

>>> try:
...     check(parse(".decl e(x: number)\\n.decl r(x: number)\\nr(y) :- e(x)."))
... except DatalogError as err:
...     print(err.pos, err.bare)
3:3 variable y of the head is not bound by a positive atom of the body (it is ungrounded)
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ddflow.datalog.parser import parse  # noqa: F401  (the doctest's)
from ddflow.datalog.scope import lift, scope
from ddflow.datalog.subsume import rewrite as subsumption_rules
from ddflow.datalog.syntax import (IO, Aggregate, Atom, BinOp, Chain, Compare, Const, DatalogError, Functor, Literal,
                                   Pos, Pragma, Rule, Source, Term, Test, Var, Wild)

#: Soufflé's primitive types and the plan IR's type of each.
BASE_TYPES = {"number": "bigint", "unsigned": "bigint", "float": "double", "symbol": "string"}


@dataclass
class Relation:
    """A declared relation: attribute names and Soufflé base types, in order."""

    name: str
    attrs: tuple[str, ...]
    types: tuple[str, ...]  # number / unsigned / float / symbol
    pos: Pos

    @property
    def arity(self) -> int:
        return len(self.attrs)

    @property
    def sql_types(self) -> tuple[str, ...]:
        return tuple(BASE_TYPES[t] for t in self.types)


@dataclass
class Program:
    """A checked program: what the planner (:mod:`ddflow.datalog.planner`) and the CLI read."""

    relations: dict[str, Relation]
    rules: list[Rule]  # rules with a body
    facts: dict[str, list[tuple]]  # relation -> constant rows from the program text
    inputs: dict[str, IO]
    outputs: dict[str, IO]
    printsize: dict[str, IO]
    pragmas: list[Pragma] = field(default_factory=list)
    types: dict[str, str] = field(default_factory=dict)  # every type name (aliases too) -> its base type
    #: Relations the program makes for itself (subsumption's ``r@all``, ``r@dominated``) -> the user's relation.
    hidden: dict[str, str] = field(default_factory=dict)

    def derived(self) -> list[str]:
        """Relations the program computes (rules or facts), in declaration order."""
        heads = {r.head.rel for r in self.rules} | set(self.facts)
        return [n for n in self.relations if (n in heads or n not in self.inputs) and n not in self.hidden]

    def input_of(self, name: str) -> str | None:
        """The ``.input`` relation whose table feeds relation ``name`` (a subsumed relation's ``@all`` reads its
        relation's table, the relation itself none), or None."""
        if name in self.hidden:
            return self.hidden[name] if name.endswith("@all") and self.hidden[name] in self.inputs else None
        return name if name in self.inputs and not any(v == name for v in self.hidden.values()) else None


def check(src: Source) -> Program:
    """The checked program of a syntax tree; a :class:`DatalogError` with line and column for the first problem."""
    types = _resolve_types(src)
    relations: dict[str, Relation] = {}
    for d in src.decls:
        if d.name in relations:
            first = relations[d.name].pos
            raise DatalogError(f"relation {d.name} is declared twice (first at line {first.line}, column {first.col})",
                               d.pos)
        base = []
        for a, t in d.attrs:
            if t not in types:
                raise DatalogError(f"relation {d.name}: attribute {a} has an unknown type {t!r} (types: number, "
                                   "unsigned, float, symbol, or one declared with .type)", d.pos)
            base.append(types[t])
        relations[d.name] = Relation(d.name, tuple(a for a, _ in d.attrs), tuple(base), d.pos)
        if d.eqrel and (len(base) != 2 or base[0] != base[1]):
            raise DatalogError(f"eqrel relation {d.name} must have two attributes of one type", d.pos)
    inputs, outputs, printsize = {}, {}, {}
    for io in src.io:
        if io.rel not in relations:
            raise DatalogError(f".{io.kind} of an unknown relation {io.rel}", io.pos)
        {"input": inputs, "output": outputs, "printsize": printsize}[io.kind][io.rel] = io
    for sub in src.subsumptions:
        for a in (sub.dominated, sub.dominating):
            _check_atom(a, relations)
        for lit in sub.body:
            _check_literal(lit, relations)
    written = list(src.rules) + [r for d in src.decls if d.eqrel for r in equivalence_rules(d.name, d.pos)]
    moved, made, hidden = subsumption_rules(written, src.subsumptions)
    for h, name in hidden.items():
        relations[h] = replace(relations[name], name=h)
    facts: dict[str, list[tuple]] = {}
    rules = []
    for r in moved + made:
        _check_atom(r.head, relations)
        for t in r.head.args:
            _check_term(t, relations)
        r = lift(r)
        if not r.body and all(isinstance(t, Const) for t in r.head.args):
            facts.setdefault(r.head.rel, []).append(_fact_row(r.head, relations[r.head.rel]))
            continue  # (a fact of constant expressions, ``r(1 + 2).``, is a rule of an empty body)
        for lit in r.body:
            _check_literal(lit, relations)
        r = scope(r)
        _check_safe(r)
        rules.append(r)
    return Program(relations, rules, facts, inputs, outputs, printsize, list(src.pragmas), types, hidden)


def equivalence_rules(name: str, pos: Pos) -> list[Rule]:
    """What ``eqrel`` means (Soufflé): the relation is closed under reflexivity (on the values it holds),
    symmetry and transitivity.  Three rules, so the closure is kept incrementally like any recursion.

    >>> equivalence_rules("q", Pos(1, 1))
    [q(x, x) :- q(x, _)., q(y, x) :- q(x, y)., q(x, z) :- q(x, y), q(y, z).]
    """
    x, y, z = (Var(v, pos) for v in "xyz")

    def q(a: Term, b: Term) -> Atom:
        return Atom(name, (a, b), pos)

    return [Rule(q(x, x), (q(x, Wild(pos)),), pos), Rule(q(y, x), (q(x, y),), pos),
            Rule(q(x, z), (q(x, y), q(y, z)), pos)]


def load(text: str) -> Program:
    """Parse and check: the program of a text."""
    return check(parse(text))


def _resolve_types(src: Source) -> dict[str, str]:
    out = {t: t for t in BASE_TYPES}

    def resolve(name: str, seen: tuple[str, ...], pos: Pos) -> str:
        if name in out:
            return out[name]
        if name not in src.types:
            raise DatalogError(f"type {seen[-1] if seen else name} names an unknown type {name!r}", pos)
        if name in seen:
            raise DatalogError(f"type {name} is defined in terms of itself ({' -> '.join(seen + (name,))})", pos)
        target, where = src.types[name]
        bases = {resolve(m, seen + (name,), where) for m in target.split("|")}
        if len(bases) > 1:
            raise DatalogError(f"the union type {name} mixes base types {sorted(bases)}", where)
        out[name] = bases.pop()
        return out[name]

    for name, (_, pos) in src.types.items():
        resolve(name, (), pos)
    return out


def _check_atom(a: Atom, relations: dict[str, Relation]) -> None:
    rel = relations.get(a.rel)
    if rel is None:
        raise DatalogError(f"unknown relation {a.rel} (no .decl {a.rel})", a.pos)
    if len(a.args) != rel.arity:
        raise DatalogError(f"{a.rel} has {rel.arity} attribute{'s' * (rel.arity != 1)} (declared at line "
                           f"{rel.pos.line}), this atom has {len(a.args)}", a.pos)


def _check_literal(lit: Literal, relations: dict[str, Relation], depth: int = 0) -> None:
    if isinstance(lit, Atom):
        _check_atom(lit, relations)
        for t in lit.args:
            _check_term(t, relations, depth)
    elif isinstance(lit, Test):
        for t in lit.args:
            _check_term(t, relations, depth)
    else:
        assert isinstance(lit, Compare)
        _check_term(lit.left, relations, depth)
        _check_term(lit.right, relations, depth)


def _check_term(t: Term, relations: dict[str, Relation], depth: int = 0) -> None:
    """Atoms inside ``t`` name declared relations with their arity; an aggregate inside an aggregate's
    expression (``depth`` > 0) is refused."""
    if isinstance(t, Aggregate):
        if depth:
            raise DatalogError("an aggregate inside an aggregate's expression is not supported (bind it in the "
                               "body: v = ..., then aggregate v)", t.pos)
        for lit in t.body:
            _check_literal(lit, relations)
        if t.expr is not None:
            _check_term(t.expr, relations, depth + 1)
    elif isinstance(t, BinOp):
        _check_term(t.left, relations, depth)
        _check_term(t.right, relations, depth)
    elif isinstance(t, Chain):
        for x in t.operands():
            _check_term(x, relations, depth)
    elif isinstance(t, Functor):
        for a in t.args:
            _check_term(a, relations, depth)


def _fact_row(head: Atom, rel: Relation) -> tuple:
    row = []
    for t, typ, attr in zip(head.args, rel.types, rel.attrs):
        if not isinstance(t, Const):
            raise DatalogError(f"a fact's arguments are constants; {head.rel}.{attr} is {t!r}", t.pos)
        row.append(constant_of(t, typ, f"{head.rel}.{attr}"))
    return tuple(row)


def constant_of(t: Const, typ: str, what: str):
    """The value of literal ``t`` as Soufflé type ``typ`` (a number is a float where a float is expected)."""
    if typ == "symbol":
        if t.kind != "symbol":
            raise DatalogError(f"{what} is a symbol, {t!r} is a number", t.pos)
        return t.value
    if t.kind == "symbol":
        raise DatalogError(f"{what} is a {typ}, {t!r} is a symbol", t.pos)
    if typ == "float":
        return float(t.value)
    if t.kind == "float":
        raise DatalogError(f"{what} is a {typ}, {t!r} is a float", t.pos)
    if typ == "unsigned" and t.value < 0:
        raise DatalogError(f"{what} is unsigned, {t!r} is negative", t.pos)
    return int(t.value)


def _check_safe(rule: Rule) -> None:
    """Every variable that must be bound is (see the module docstring), or a DatalogError naming it."""
    outside = set(rule.head.variables())  # variables outside every aggregate's body
    for lit in rule.body:
        outside |= lit.variables()
    bound = bound_variables(rule.body, set(), outside)
    for t in rule.head.args:
        for v in _vars_in(t):
            if v.name not in bound:
                raise DatalogError(f"variable {v.name} of the head is not bound by a positive atom of the body "
                                   "(it is ungrounded)", v.pos)
        if isinstance(t, Wild):
            raise DatalogError("_ in a rule's head has no value", t.pos)
    _check_literals_bound(rule.body, bound, outside)


def _vars_in(t: Term) -> list[Var]:
    if isinstance(t, Var):
        return [t]
    if isinstance(t, BinOp):
        return _vars_in(t.left) + _vars_in(t.right)
    if isinstance(t, Chain):
        return [v for x in t.operands() for v in _vars_in(x)]
    if isinstance(t, Functor):
        return [v for a in t.args for v in _vars_in(a)]
    return []


def bound_variables(body: tuple[Literal, ...] | list[Literal], start: set[str], outside: set[str]) -> set[str]:
    """Variables bound by ``body`` given ``start``: positive atoms' plain variables, then ``x = e`` over bound
    ``e`` and aggregates whose injected variables (those in ``outside``) are bound, to a fixpoint."""
    bound = set(start)
    for lit in body:
        if isinstance(lit, Atom) and not lit.negated:
            bound |= {t.name for t in lit.args if isinstance(t, Var)}
    changed = True
    while changed:
        changed = False
        for lit in body:
            if not (isinstance(lit, Compare) and lit.op == "="):
                continue
            for a, b in ((lit.left, lit.right), (lit.right, lit.left)):
                if isinstance(a, Var) and a.name not in bound and _ready(b, bound, outside):
                    bound.add(a.name)
                    changed = True
    return bound


def _ready(t: Term, bound: set[str], outside: set[str]) -> bool:
    """``t`` can be computed once ``bound`` is: its variables are bound (an aggregate's injected ones)."""
    if isinstance(t, Aggregate):
        return injected(t, outside) <= bound
    return t.variables() <= bound and not isinstance(t, Wild)


def injected(agg: Aggregate, outside: set[str]) -> set[str]:
    """The rule's variables the aggregate reads: one aggregate value per binding of them.  As Soufflé scopes them
    (:mod:`ddflow.datalog.scope`) once the rule is scoped; before, those of its variables that occur ``outside``."""
    if agg.injected is not None:
        return set(agg.injected)
    return agg.inner_variables() & outside


def _check_literals_bound(body, bound: set[str], outside: set[str]) -> None:
    for lit in body:
        if isinstance(lit, Atom):
            for t in lit.args:
                if isinstance(t, Var) and not lit.negated:
                    continue
                for v in _vars_in(t):
                    if v.name not in bound:
                        what = "a negated atom" if lit.negated else "an expression in an atom"
                        raise DatalogError(f"variable {v.name} of {what} is not bound by a positive atom "
                                           "(it is ungrounded)", v.pos)
        elif isinstance(lit, Test):
            for t in lit.args:
                for v in _vars_in(t):
                    if v.name not in bound:
                        raise DatalogError(f"variable {v.name} of {lit.name} is not bound by a positive atom "
                                           "(it is ungrounded)", v.pos)
                if isinstance(t, (Wild, Aggregate)):
                    raise DatalogError(f"{t!r} in {lit.name} is not supported here", t.pos)
        else:
            for side in (lit.left, lit.right):
                if isinstance(side, Aggregate):
                    _check_aggregate(side, bound, outside)
                    continue
                for v in _vars_in(side):
                    if v.name not in bound:
                        raise DatalogError(f"variable {v.name} of a comparison is not bound by a positive atom "
                                           "(it is ungrounded)", v.pos)
                if isinstance(side, Wild):
                    raise DatalogError("_ in a comparison has no value", side.pos)


def _check_aggregate(agg: Aggregate, bound: set[str], outside: set[str]) -> None:
    inj = injected(agg, outside)
    for name in sorted(inj - bound):
        raise DatalogError(f"variable {name} of the aggregate's body also occurs outside it, where it is not bound "
                           "(it is ungrounded)", agg.pos)
    if agg.func != "count" and agg.expr is None:
        raise DatalogError(f"{agg.func} needs an expression", agg.pos)
    inner_bound = bound_variables(agg.body, inj, set())
    inner_outside = agg.inner_variables()
    _check_literals_bound(agg.body, inner_bound, inner_outside)
    if agg.expr is not None:
        for v in _vars_in(agg.expr):
            if v.name not in inner_bound:
                raise DatalogError(f"variable {v.name} of the aggregated expression is not bound by the aggregate's "
                                   "body (it is ungrounded)", v.pos)
