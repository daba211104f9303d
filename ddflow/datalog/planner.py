"""A checked Datalog program as plan IR: one relation per derived Datalog relation, strata as fixpoints.

Each relation's plan is the distinct union of its parts: the dataflow's
table of that name (``.input``), its facts (a :class:`Values`), and one
plan per rule.  A recursive stratum (:mod:`ddflow.datalog.stratify`)
becomes one :class:`~ddflow.plan.ir.Recursive` over all its relations
(one ``iterate``, a Variable per relation, semi-naive through
differential dataflow itself); the strata are planned in order, and a
later stratum reads an earlier one's plan, shared by value.

A rule body becomes joins of its positive atoms (each joined next to the
bound atom it shares the most variables with), keyed on their shared
variables; comparisons become filters and ``x = e`` a projection as soon
as their variables are bound; ``!atom`` an anti-join on its variables;
an aggregate an :class:`~ddflow.plan.ir.Aggregate` of its body grouped
by its injected variables, joined back on them (a left join for
``count`` and ``sum``, which are 0 over nothing; an inner join for
``min``, ``max``, ``mean``, which have no value over nothing).  An atom
is the relation's plan itself, its constants and repeated variables
filters on it, and its columns named by the relation's attributes, so
two rules joining one relation on one key read one plan node and so one
arrangement (Lowering shares keyed forms by value).

Aggregates count Soufflé's way: one per combination of the body's
matching tuples (``_`` included), which bag semantics gives directly.
``number`` and ``unsigned`` are 64-bit here (Soufflé's default build
has 32): arithmetic that overflows 64 bits raises instead of wrapping.
``/`` of numbers truncates toward zero as in C; by zero it raises.

Physical layout: a relation's columns are stored in declared order,
unless a placement hint (:mod:`ddflow.datalog.hints`) moves an attribute
first: the distinct that ends its plan then places each row on that
attribute's worker, so joins on it skip their exchange.  The relations
handed to the user are projected back to declared order.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from ddflow.base.schema import Schema
from ddflow.datalog.expressions import Expressions, _souffle
from ddflow.datalog.functors import IR_NAMES
from ddflow.datalog.hints import Hints
from ddflow.datalog.program import Program, constant_of, injected
from ddflow.datalog.stratify import Stratum, strata
from ddflow.datalog.syntax import (Aggregate, Atom, Compare, Const, DatalogError, Functor, Literal, Pos, Rule, Term,
                                   Test, Var, Wild)
from ddflow.plan.expr import Call, Col, Expr, Lit, conjunction
from ddflow.plan.functions import cast, typed
from ddflow.plan.ir import (Agg, Distinct, Filter, Join, Project, RecRef, Recursive, Rel, Scan, SemiJoin, Union,
                            Values)
from ddflow.plan.ir import Aggregate as AggregateRel

_UIDS = itertools.count(1 << 20)  # RecRef uids (SQL's start at 0 and stay small)
_AGG_FUNCS = {"count": "count_star", "sum": "sum", "min": "min", "max": "max", "mean": "avg"}
_COMPARE = {"=": "=", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


@dataclass
class Binding:
    """A relation of variable bindings: ``vars[name]`` is the column holding variable ``name``."""

    rel: Rel
    vars: dict[str, int]

    def col(self, name: str) -> Col:
        i = self.vars[name]
        return Col(i, self.rel.schema.types[i], self.rel.schema.names[i])


@dataclass
class Planned:
    """The plan of a program: the user's relations (declared column order) and the evaluation order."""

    relations: dict[str, Rel]
    strata: list[Stratum]


class Planner:
    """Plans one checked program over tables with the given schemas (by lower-case name)."""

    def __init__(self, program: Program, tables: dict[str, Schema], hints: Hints | None = None):
        self.p = program
        self.tables = tables
        self.hints = hints or Hints()
        self.perm: dict[str, tuple[int, ...]] = {}
        for name, rel in program.relations.items():
            first = self.hints.placement.get(name)
            order = list(range(rel.arity))
            if first is not None:
                order.remove(first)
                order.insert(0, first)
            self.perm[name] = tuple(order)
        self.plans: dict[str, Rel] = {}  # physical layout
        self.loop: dict[str, RecRef] = {}  # the recursive stratum being planned: its relations' RecRefs
        self._fresh = itertools.count()
        self._in_aggregate = 0
        self._constants: dict[str, Const] = {}  # variables the body being planned sets to a constant
        self.exprs = Expressions(program.types)

    # -- relations -----------------------------------------------------------------
    def schema(self, name: str) -> Schema:
        """The physical schema of relation ``name`` (a nullary relation has one constant column)."""
        rel = self.p.relations[name]
        if rel.arity == 0:
            return Schema(("_",), ("bigint",))
        perm = self.perm[name]
        return Schema(tuple(rel.attrs[i] for i in perm), tuple(rel.sql_types[i] for i in perm))

    def plan(self) -> Planned:
        """Every derived relation's plan, in declared column order.  O(program size)."""
        order = strata(self.p, self.hints.priority)
        for s in order:
            self._stratum(s)
        out = {}
        for name in self.p.derived():
            out[name] = self.user_plan(name)
        return Planned(out, order)

    def user_plan(self, name: str) -> Rel:
        """Relation ``name`` in its declared column order (a nullary one: no columns)."""
        rel = self.p.relations[name]
        plan = self.plans[name]
        if rel.arity == 0:
            return Project(plan, (), ())
        perm = self.perm[name]
        if perm == tuple(range(rel.arity)):
            return plan
        s = plan.schema
        at = {d: i for i, d in enumerate(perm)}
        return Project(plan, tuple(Col(at[d], s.types[at[d]], s.names[at[d]]) for d in range(rel.arity)),
                       rel.attrs)

    def _stratum(self, s: Stratum) -> None:
        if not s.recursive:
            (name,) = s.relations
            self.plans[name] = self._relation(name)
            return
        uid = next(_UIDS)
        self.loop = {n: RecRef(n, self.schema(n), uid, frozenset({0})) for n in s.relations}
        bodies = tuple(self._relation(n) for n in s.relations)
        self.loop = {}
        for i, n in enumerate(s.relations):
            self.plans[n] = Recursive(s.relations, bodies, i)

    def _relation(self, name: str) -> Rel:
        """The distinct union of the relation's input table, facts and rules (physical layout)."""
        schema = self.schema(name)
        parts: list[Rel] = []
        fed_by = self.p.input_of(name)
        if fed_by is not None:
            parts.append(self._input(fed_by, name))
        if name in self.p.facts:
            perm = self.perm[name] or (0,)
            rows = tuple(sorted({tuple(r[i] for i in perm) if r else (0,) for r in self.p.facts[name]}, key=repr))
            parts.append(Values(schema, rows))
        for r in self.p.rules:
            if r.head.rel == name:
                parts.append(self._rule(r))
        if not parts:
            return Values(schema, ())
        if len(parts) == 1 and fed_by == name and self.perm[name] == tuple(range(len(schema))) \
                and name not in self.hints.placement:
            return parts[0]  # an input alone: its rows as they come (read as a set where that matters)
        body = parts[0] if len(parts) == 1 else Union(tuple(parts))
        return Distinct(body)

    def _input(self, name: str, into: str | None = None) -> Rel:
        """The table of ``.input name`` as rows of relation ``into`` (``name`` itself, or its ``@all``)."""
        rel = self.p.relations[name]
        io = self.p.inputs[name]
        into = into or name
        table = self.tables.get(name.lower())
        if table is None:
            raise DatalogError(f".input {name}: the dataflow has no table {name!r} (make one with "
                               f"flow.new_collection({name!r}, schema={{...}}) with {rel.arity} columns)", io.pos)
        if len(table) != max(rel.arity, 0) and not (rel.arity == 0 and len(table) == 1):
            raise DatalogError(f".input {name}: the table {name!r} has {len(table)} columns, the relation "
                               f"{rel.arity}", io.pos)
        scan: Rel = Scan(name, table)
        cols = []
        for j in range(rel.arity):
            want, got = rel.sql_types[j], table.types[j]
            c: Expr = Col(j, got, table.names[j])
            if got != want:
                if want == "double" and got == "bigint":
                    c = cast(c, "double")
                else:
                    raise DatalogError(f".input {name}: attribute {rel.attrs[j]} is a {rel.types[j]}, the table's "
                                       f"column {table.names[j]!r} is {got}", io.pos)
            cols.append(c)
        # A NULL is no Datalog value: rows holding one are not facts.
        nonnull = [Call("is_not_null", (Col(j, table.types[j], table.names[j]),), "boolean")
                   for j in range(len(table))]
        scan = Filter(scan, conjunction(nonnull))
        if rel.arity == 0:
            return Project(scan, (Lit(0, "bigint"),), ("_",))
        perm = self.perm[into]
        s = self.schema(into)
        if perm == tuple(range(rel.arity)) and all(isinstance(c, Col) for c in cols) \
                and table.names == s.names:
            return scan
        return Project(scan, tuple(cols[i] for i in perm), s.names)

    def source(self, name: str) -> Rel:
        """What an atom of ``name`` reads: the fixpoint's RecRef inside its loop, else the relation's plan."""
        if name in self.loop:
            return self.loop[name]
        plan = self.plans[name]
        if self._in_aggregate and not isinstance(plan, (Distinct, Recursive, Values)):
            return Distinct(plan)  # an input table is a multiset; an aggregate counts the relation's set
        return plan

    # -- rules ---------------------------------------------------------------------
    def _rule(self, r: Rule) -> Rel:
        outside = set(r.head.variables())
        for lit in r.body:
            outside |= lit.variables()
        b = self.body(list(r.body), None, outside)
        name = r.head.rel
        rel = self.p.relations[name]
        schema = self.schema(name)
        if rel.arity == 0:
            return Project(b.rel, (Lit(0, "bigint"),), ("_",))
        exprs = []
        for phys, d in enumerate(self.perm[name]):
            t = r.head.args[d]
            e = self.expr(t, b, rel.types[d])
            want = schema.types[phys]
            if e.type != want:
                if want == "double" and e.type == "bigint":
                    e = cast(e, "double")
                else:
                    raise DatalogError(f"{name}.{rel.attrs[d]} is a {rel.types[d]}, the head gives it a "
                                       f"{_souffle(e.type)}", t.pos)
            exprs.append(e)
        return Project(b.rel, tuple(exprs), schema.names)

    def body(self, lits: list[Literal], start: Binding | None, outside: set[str]) -> Binding:
        """The bindings of a conjunction (``start``: bindings it extends, an aggregate's injected variables)."""
        atoms = [lit for lit in lits if isinstance(lit, Atom) and not lit.negated]
        rest = [lit for lit in lits if not (isinstance(lit, Atom) and not lit.negated)]
        saved = self._constants
        self._constants = {**saved, **_constants_of(lits)}
        try:
            return self._body(atoms, rest, start, outside)
        finally:
            self._constants = saved

    def _body(self, atoms: list[Atom], rest: list[Literal], start: Binding | None, outside: set[str]) -> Binding:
        cur = start
        pending = list(rest)
        while atoms:
            if cur is None:
                nxt = atoms[0]
            else:
                nxt = max(atoms, key=lambda a: (len(a.variables() & cur.vars.keys()), -atoms.index(a)))
            atoms.remove(nxt)
            b, extra = self.atom(nxt)
            pending.extend(extra)
            cur = b if cur is None else self.join(cur, b, nxt.pos)
            cur, pending = self._apply_ready(cur, pending, outside, final=False)
        if cur is None:  # no positive atom: one row of no variables
            cur = Binding(Values(Schema(("_",), ("bigint",)), ((0,),)), {})
        cur, pending = self._apply_ready(cur, pending, outside, final=True)
        if pending:
            raise DatalogError(f"cannot order the body: {pending[0]!r} needs variables nothing binds", pending[0].pos)
        return cur

    def _apply_ready(self, cur: Binding, pending: list[Literal], outside: set[str],
                     final: bool) -> tuple[Binding, list[Literal]]:
        """Apply every literal whose variables are bound (repeatedly: an assignment binds more)."""
        progress = True
        while progress:
            progress = False
            for lit in list(pending):
                got = self._literal(cur, lit, outside, final)
                if got is not None:
                    cur = got
                    pending.remove(lit)
                    progress = True
        return cur, pending

    def _literal(self, cur: Binding, lit: Literal, outside: set[str], final: bool) -> Binding | None:
        """``cur`` with ``lit`` applied, or None while it needs variables not yet bound."""
        bound = set(cur.vars)
        if isinstance(lit, Test):
            return self.test(cur, lit) if lit.variables() <= bound else None
        if isinstance(lit, Atom):  # negated
            if not lit.variables() <= bound:
                return None
            return self.negation(cur, lit)
        assert isinstance(lit, Compare)
        left, right = lit.left, lit.right
        if isinstance(right, Aggregate) or (isinstance(left, Var) and left.name not in bound):
            left, right = right, left
        if isinstance(left, Aggregate) or isinstance(right, Aggregate):
            agg = left if isinstance(left, Aggregate) else right
            other = right if agg is left else left
            if not injected(agg, outside) <= bound:
                return None
            if isinstance(other, Var) and other.name not in bound and lit.op == "=":
                return self.aggregate(cur, agg, other.name, outside)
            if not other.variables() <= bound or not final:
                return None
            tmp = f"_agg{next(self._fresh)}"
            cur = self.aggregate(cur, agg, tmp, outside)
            return self.filter(cur, Compare(lit.op, Var(tmp, agg.pos), other, lit.pos) if agg is left
                               else Compare(lit.op, other, Var(tmp, agg.pos), lit.pos))
        for v, f in ((left, right), (right, left)):
            if lit.op == "=" and isinstance(v, Var) and isinstance(f, Functor) and f.name == "range":
                return self.range(cur, v, f)
        if lit.op == "=" and isinstance(right, Var) and right.name not in bound and left.variables() <= bound:
            return self.assign(cur, right.name, left)
        if lit.op == "=" and isinstance(left, Var) and left.name not in bound and right.variables() <= bound:
            return self.assign(cur, left.name, right)
        if lit.variables() <= bound:
            return self.filter(cur, lit)
        return None

    def atom(self, a: Atom) -> tuple[Binding, list[Literal]]:
        """The relation of an atom: its constants and repeated variables as a filter; expressions as literals."""
        src = self.source(a.rel)
        rel = self.p.relations[a.rel]
        s = src.schema
        at = {d: i for i, d in enumerate(self.perm[a.rel])}
        conds: list[Expr] = []
        vars_: dict[str, int] = {}
        extra: list[Literal] = []
        for d, t in enumerate(a.args):
            i = at[d]
            col = Col(i, s.types[i], s.names[i])
            if isinstance(t, Wild):
                continue
            if isinstance(t, Var):
                if t.name in vars_:
                    j = vars_[t.name]
                    conds.append(Call("=", (Col(j, s.types[j], s.names[j]), col), "boolean"))
                else:
                    vars_[t.name] = i
            elif isinstance(t, Const):
                conds.append(typed("=", (col, Lit(constant_of(t, rel.types[d], f"{a.rel}.{rel.attrs[d]}"),
                                                  s.types[i]))))
            else:  # an expression: a fresh variable, and a comparison once its variables are bound
                tmp = f"_arg{next(self._fresh)}"
                vars_[tmp] = i
                extra.append(Compare("=", Var(tmp, t.pos), t, t.pos))
        rel_: Rel = src
        if conds:
            rel_ = Filter(src, conjunction(conds))
        return Binding(rel_, vars_), extra

    def join(self, a: Binding, b: Binding, pos: Pos) -> Binding:
        shared = [v for v in b.vars if v in a.vars]
        for v in shared:
            ta, tb = a.col(v).type, b.col(v).type
            if ta != tb:
                raise DatalogError(f"variable {v} is a {_souffle(ta)} in one atom and a {_souffle(tb)} in another",
                                   pos)
        j = Join(a.rel, b.rel, "inner", tuple(a.col(v) for v in shared), tuple(b.col(v) for v in shared))
        n = len(a.rel.schema)
        vars_ = dict(a.vars)
        for v, i in b.vars.items():
            vars_.setdefault(v, n + i)
        return Binding(j, vars_)

    def filter(self, cur: Binding, c: Compare) -> Binding:
        left, right = self.expr(c.left, cur), self.expr(c.right, cur)
        pred = self._typed(_COMPARE[c.op], (left, right), c.pos)
        return Binding(Filter(cur.rel, pred), cur.vars)

    def assign(self, cur: Binding, name: str, t: Term) -> Binding:
        e = self.expr(t, cur)
        return self.extend(cur, {name: e})

    def extend(self, cur: Binding, new: dict[str, Expr]) -> Binding:
        """``cur`` projected to its variables plus ``new`` ones (computed from it)."""
        names = list(cur.vars)
        exprs = [cur.col(v) for v in names] + list(new.values())
        all_names = names + list(new)
        proj = Project(cur.rel, tuple(exprs), tuple(all_names))
        return Binding(proj, {v: i for i, v in enumerate(all_names)})

    def range(self, cur: Binding, v: Var, f: Functor) -> Binding:
        """``v = range(from, to[, step])``: one binding of ``v`` per value, ``from`` up to ``to`` (excluded) by
        ``step`` (1, or -1 when ``from`` > ``to``), as Soufflé's multi-result functor; joined on ``v`` if it is
        bound.  The arguments must be constants (numbers, or variables the body sets to one), at most
        :data:`RANGE_LIMIT` values."""
        vals = []
        for a in f.args:
            c = self._constants.get(a.name) if isinstance(a, Var) else a
            if not (isinstance(c, Const) and c.kind == "number"):
                raise DatalogError("range with an argument that is not a constant number is not supported "
                                   f"({a!r}); ddflow plans range as a relation of its values", a.pos)
            vals.append(int(c.value))
        lo, hi = vals[0], vals[1]
        step = vals[2] if len(vals) == 3 else (1 if lo <= hi else -1)
        if step == 0:
            raise DatalogError("range with a step of 0 is not supported", f.pos)
        values = range(lo, hi, step)
        if len(values) > RANGE_LIMIT:
            raise DatalogError(f"range of {len(values):,} values; the limit is {RANGE_LIMIT:,}", f.pos)
        gen = Binding(Values(Schema((v.name,), ("bigint",)), tuple((x,) for x in values)), {v.name: 0})
        return self.join(cur, gen, f.pos)

    def test(self, cur: Binding, lit: Test) -> Binding:
        """``contains(sub, s)`` / ``match(pattern, s)`` as a filter (:mod:`ddflow.datalog.functors`); a constant
        pattern RE2 cannot run is refused here, not at run time."""
        first, subject = (self.expr(a, cur) for a in lit.args)
        if lit.name == "match" and isinstance(lit.args[0], Const) and lit.args[0].kind == "symbol":
            pattern = lit.args[0].value
            try:
                pc.match_substring_regex(pa.array([""]), f"^(?:{pattern})$")
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
                raise DatalogError(f"match: the pattern {pattern!r} is not supported ({err})", lit.args[0].pos) \
                    from None
        pred = self._typed(IR_NAMES[lit.name], (first, subject), lit.pos)
        if lit.negated:
            pred = Call("not", (pred,), "boolean")
        return Binding(Filter(cur.rel, pred), cur.vars)

    def negation(self, cur: Binding, a: Atom) -> Binding:
        b, extra = self.atom(Atom(a.rel, a.args, a.pos))
        for lit in extra:  # ``!r(x + 1)``: the expression's value, computed on the bindings, is a key
            cur = self.assign(cur, lit.left.name, lit.right)
        keys = [v for v in b.vars]
        for v in keys:
            if cur.col(v).type != b.col(v).type:
                what = "an expression" if v.startswith("_arg") else f"variable {v}"
                raise DatalogError(f"{what} is a {_souffle(cur.col(v).type)} here and a "
                                   f"{_souffle(b.col(v).type)} in !{a.rel}", a.pos)
        anti = SemiJoin(cur.rel, b.rel, tuple(cur.col(v) for v in keys), tuple(b.col(v) for v in keys), anti=True)
        return Binding(anti, cur.vars)

    def expr(self, t: Term, b: Binding, want: str | None = None) -> Expr:
        """The IR expression of a term over a binding's columns (:mod:`ddflow.datalog.expressions`)."""
        return self.exprs.expr(t, b, want)

    def _typed(self, op: str, args, pos: Pos) -> Expr:
        return self.exprs._typed(op, args, pos)

    def aggregate(self, cur: Binding, agg: Aggregate, name: str, outside: set[str]) -> Binding:
        """``cur`` with variable ``name`` bound to ``agg`` per binding of its injected variables."""
        inj = sorted(injected(agg, outside))
        positive = set()
        for lit in agg.body:
            if isinstance(lit, Atom) and not lit.negated:
                positive |= {t.name for t in lit.args if isinstance(t, Var)}
        needs_seed = not set(inj) <= positive
        start = None
        if needs_seed:  # the injected variables' values seed the body (they are read, not bound, inside it)
            seed = self.extend(Binding(cur.rel, {v: cur.vars[v] for v in inj}), {})
            start = Binding(Distinct(seed.rel), seed.vars)
        self._in_aggregate += 1
        try:
            inner = self.body(list(agg.body), start, agg.inner_variables())
        finally:
            self._in_aggregate -= 1
        func = _AGG_FUNCS[agg.func]
        arg = None
        if agg.expr is not None:
            arg = self.expr(agg.expr, inner)
            if arg.type == "string" and func in ("sum", "avg"):
                raise DatalogError(f"{agg.func} of a symbol", agg.pos)
        group = tuple(inner.col(v) for v in inj)
        a = AggregateRel(inner.rel, group, (Agg(func, arg),), tuple(inj) + (name,))
        out_col = len(inj)
        empty_zero = agg.func in ("count", "sum")
        ar = Col(out_col, a.schema.types[out_col], name)
        if not inj:
            kept = a if empty_zero else Filter(a, Call("is_not_null", (ar,), "boolean"))
            j = Join(cur.rel, kept, "inner", (), ())
        else:
            j = Join(cur.rel, a, "left" if empty_zero else "inner", tuple(cur.col(v) for v in inj),
                     tuple(Col(i, a.schema.types[i], a.schema.names[i]) for i in range(len(inj))))
        n = len(cur.rel.schema)
        joined = Binding(j, dict(cur.vars))
        value: Expr = Col(n + out_col, ar.type, name)
        if empty_zero:
            zero = Lit(0.0 if ar.type == "double" else 0, ar.type)
            value = Call("coalesce", (value, zero), ar.type)
        return self.extend(joined, {name: value})

#: The most values one ``range`` may give (its values are a constant relation of the plan).
RANGE_LIMIT = 1_000_000


def _constants_of(lits) -> dict[str, Const]:
    """Variables a conjunction sets to a number: ``x = 1`` (either side)."""
    out = {}
    for lit in lits:
        if isinstance(lit, Compare) and lit.op == "=":
            for a, b in ((lit.left, lit.right), (lit.right, lit.left)):
                if isinstance(a, Var) and isinstance(b, Const):
                    out[a.name] = b
    return out
