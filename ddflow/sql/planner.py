"""Spark SQL text to the plan IR, through sqlglot.

The query is parsed in sqlglot's Spark dialect and qualified against the
dataflow's tables (every column gets its table, ``*`` is expanded,
unnamed select items get names), then translated node by node into
:mod:`ddflow.plan.ir`.  A construct outside what is supported is a
:class:`~ddflow.errors.SchemaError` that names it and quotes it.

Why this module is long: it is one translator, a method per SQL construct
(FROM and joins, WHERE with its subqueries, GROUP BY, windows, LIMIT,
set operations, WITH RECURSIVE, and every expression form), each a few
lines that read sqlglot's node and build the IR; splitting it would
scatter one recursive descent over several files.

>>> from ddflow.base.schema import Schema
>>> rel = plan_sql("SELECT cust, SUM(amount) AS total FROM orders GROUP BY cust",
...                {"orders": Schema.of({"cust": "string", "amount": "bigint"})})
>>> rel.schema.names, rel.schema.types
(('cust', 'total'), ('string', 'bigint'))
"""
from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass
from typing import Mapping

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.qualify import qualify

from ddflow.base.schema import Schema, decimal_ps
from ddflow.errors import SchemaError
from ddflow.plan.functions import TypeMismatch, numeric
from ddflow.plan.functions import common_type as common_types
from ddflow.plan.expr import Call, Col, Expr, Lit, conjunction, conjuncts, remapped
from ddflow.plan.ir import (Agg, Aggregate, Distinct, Filter, Join, OneRow, Order, Project, RecRef, Recursive, Rel,
                            Scan, SemiJoin, SetOp, TopK, Union)
from ddflow.plan.rewrite import factor_or, key_pair, keyable, ranks_kept
from ddflow.plan.deep import on_deep_stack
from ddflow.sql import clauses, constants, eventtime, pivot, using
from ddflow.sql.nesting import balanced, chain_parts, check_tree, parsed, set_aside, union_link
from ddflow.sql.scalars import AGGREGATES as _AGGS
from ddflow.sql.scalars import Expressions, construct, retyped_expr
from ddflow.sql.scalars import comparable as _comparable
from ddflow.sql.scalars import unsupported as _unsupported
from ddflow.sql.windows import WindowPlanning, has_grouping_sets, window_operands



@dataclass(frozen=True)
class _Field:
    """A column visible in a scope: its qualifier (table alias), name, position and type."""

    table: str
    name: str
    index: int
    type: str


class _Scope:
    def __init__(self, fields: list[_Field]):
        self.fields = fields

    @classmethod
    def of(cls, rel: Rel, alias: str, names: tuple[str, ...] | None = None) -> "_Scope":
        """``rel``'s columns under ``alias``, by ``names`` if given (as the query wrote them: two may be alike)."""
        s = rel.schema
        names = names or s.names
        return cls([_Field(alias.lower(), n.lower(), i, t) for i, (n, t) in enumerate(zip(names, s.types))])

    def then(self, other: "_Scope") -> "_Scope":
        """This scope's columns, then ``other``'s (a join's output)."""
        n = len(self.fields)
        return _Scope(self.fields + [_Field(f.table, f.name, f.index + n, f.type) for f in other.fields])

    def resolve(self, col: exp.Column) -> Col:
        table, name = col.table.lower(), col.name.lower()
        hits = [f for f in self.fields if f.name == name and (not table or f.table == table)]
        if not hits:
            raise SchemaError(f"SQL: unknown column `{col.sql(dialect='spark')}`")
        if len(hits) > 1:
            raise SchemaError(f"SQL: column `{col.sql(dialect='spark')}` is ambiguous")
        f = hits[0]
        return Col(f.index, f.type, f.name)


def plan_sql(sql: str, tables: Mapping[str, Schema]) -> Rel:
    """The plan of one SQL query over ``tables`` (name -> schema), planned on a deep stack (:mod:`ddflow.plan.deep`)."""
    return on_deep_stack(_plan_sql, sql, tables)


def _plan_sql(sql: str, tables: Mapping[str, Schema]) -> Rel:
    stmts = parsed(sql)
    if len(stmts) != 1:
        raise SchemaError(f"SQL: expected one statement, got {len(stmts)}")
    return plan_query(stmts[0], tables)


def plan_query(tree: exp.Expression, tables: Mapping[str, Schema], views: Mapping[str, Rel] | None = None) -> Rel:
    """The plan of one parsed query over ``tables`` (name -> schema) and ``views`` (name -> plan, read inline)."""
    if isinstance(tree, exp.Values):  # a bare VALUES list is a query of its rows
        tree = exp.select("*").from_(tree)
    if not isinstance(tree, exp.Query):
        raise SchemaError(f"SQL: expected a query (SELECT, WITH or a set operation), got `{tree.sql(dialect='spark')[:80]}`")
    tree = clauses.rewritten(tree)  # QUALIFY, LIMIT ALL
    views = {k.lower(): v for k, v in (views or {}).items()}
    lowered = {k.lower(): v for k, v in tables.items()}
    ranges = constants.named_ranges(tree)  # range(...) in FROM: a constant table the qualifier can read
    every = {**lowered, **{k: v.schema for k, v in views.items()}, **{k: v.schema for k, v in ranges.items()}}
    schema = {name: {c: _glot_type(t) for c, t in zip(s.names, s.types)} for name, s in every.items()}
    check_tree(tree)
    _check_tables(tree, {**lowered, **ranges}, views)
    using.check_stars(tree, schema)  # SELECT * after a JOIN ... USING: the qualifier would drop a column
    aside = set_aside(tree)
    tree = balanced(eventtime.prepare(tree))
    try:
        tree = qualify(tree, schema=schema, dialect="spark", quote_identifiers=False, validate_qualify_columns=True)
    except SqlglotError as err:
        raise SchemaError(f"SQL: {err}") from None
    return _Planner(lowered, {**views, **ranges}, aside).query(tree, {})


def _glot_type(t: str) -> str:
    """The type name sqlglot's qualifier reads."""
    return t.upper()


class _Planner(Expressions, eventtime.EventTime, WindowPlanning):
    def __init__(self, tables: dict[str, Schema], views: dict[str, Rel] | None = None,
                 aside: list[list[exp.Expression]] | None = None):
        self.tables = tables
        self.views = views or {}
        self.aside = aside  # long IN lists of constants, out of the tree while sqlglot qualified it
        self._uids = itertools.count()
        #: The column names a query wrote, by id of its plan, where two are alike (its schema's are made unique).
        self._written: dict[int, tuple[Rel, tuple[str, ...]]] = {}

    def named(self, rel: Rel, names: tuple[str, ...]) -> Rel:
        """``rel``, remembered as having columns written ``names``, when they are not its schema's."""
        if tuple(n.lower() for n in names) != tuple(n.lower() for n in rel.schema.names):
            self._written[id(rel)] = (rel, names)
        return rel

    def written(self, rel: Rel) -> tuple[str, ...]:
        """The column names ``rel``'s query wrote (:meth:`named`), else its schema's."""
        hit = self._written.get(id(rel))
        return hit[1] if hit is not None and hit[0] is rel else rel.schema.names

    def scope_of(self, rel: Rel, alias: str) -> _Scope:
        """A FROM item's scope: a name its query wrote twice is ambiguous there, as in Spark."""
        return _Scope.of(rel, alias, self.written(rel))

    # -- relations ------------------------------------------------------------------------------
    def query(self, node: exp.Expression, ctes: dict[str, Rel]) -> Rel:
        with_ = node.args.get("with_") or node.args.get("with")
        if with_ is not None:
            ctes = dict(ctes)
            if with_.args.get("recursive"):
                ctes.update(self.recursive(with_.expressions, ctes))
            else:
                for cte in with_.expressions:
                    ctes[cte.alias.lower()] = self.query(cte.this, ctes)
        if isinstance(node, exp.Union):
            # A chain of UNIONs of one kind is one n-ary union (a generated query may have thousands).
            rights, cur, up = [node.right], node.left, node
            while isinstance(cur, exp.Union) and union_link(cur, up):
                rights.append(cur.right)
                up, cur = cur, cur.left
            rels = [self.query(p, ctes) for p in [cur, *reversed(rights)]]
            out = self.limited(Union(_aligned(rels, node), all=not node.args.get("distinct")), node)
            return self.named(out, self.written(rels[0]))
        if isinstance(node, (exp.Except, exp.Intersect)):
            name = type(node).__name__.lower()
            first = self.query(node.left, ctes)
            left, right = _aligned([first, self.query(node.right, ctes)], node)
            out = self.limited(SetOp(name, left, right, all=not node.args.get("distinct")), node)
            return self.named(out, self.written(first))
        if isinstance(node, exp.Subquery):
            return self.query(node.this, ctes)
        if isinstance(node, exp.Values):  # IN (VALUES ...), a set operation's VALUES branch
            return self.source(node, ctes)[0]
        if not isinstance(node, exp.Select):
            raise _unsupported(node)
        return self.select(node, ctes)

    def recursive(self, defs: list[exp.CTE], ctes: dict[str, Rel]) -> dict[str, Rel]:
        """WITH RECURSIVE: the definitions that read one another become one fixpoint, the others plain views.

        Each recursive definition is a UNION (not UNION ALL: the view is the
        least fixpoint of a set) of parts; those that read no definition of
        the group give its column types.
        """
        names = [d.alias.lower() for d in defs]
        out: dict[str, Rel] = {}
        group = [d for d in defs if _reads(d.this, names)]
        for d in defs:
            if d not in group:
                out[d.alias.lower()] = self.query(d.this, {**ctes, **out})
        if not group:
            return out
        gnames = [d.alias.lower() for d in group]
        uid = next(self._uids)
        refs, parts_of = {}, {}
        for d in group:
            parts = _union_parts(d.this)
            base = [p for p in parts if not _reads(p, gnames)]
            if not base:
                raise _unsupported(d, f"a recursive definition of {d.alias!r} with no part that does not recurse")
            first = self.query(base[0], {**ctes, **out})
            cols = [c.name for c in (d.args["alias"].columns if d.args.get("alias") is not None else [])]
            names_ = tuple(cols) if cols else first.schema.names
            if len(names_) != len(first.schema):
                raise SchemaError(f"SQL: {d.alias!r} names {len(names_)} columns, its query has {len(first.schema)}")
            refs[d.alias.lower()] = RecRef(d.alias.lower(), Schema(names_, first.schema.types), uid)
            parts_of[d.alias.lower()] = parts
        scope = {**ctes, **out, **refs}
        bodies = []
        for name in gnames:
            schema = refs[name].schema
            rels = []
            for p in parts_of[name]:
                r = self.query(p, scope)
                _check_union(r, _Empty(schema), p)
                r = _retyped_to(r, tuple(u if t == "null" else common_types([t, u], "a set operation")
                                         for t, u in zip(_typed(r), schema.types)))
                rels.append(Project(r, tuple(Col(i, t, n) for i, (n, t) in enumerate(zip(r.schema.names, schema.types))),
                                    schema.names))
            bodies.append(Union(tuple(rels), all=False))
        for i, name in enumerate(gnames):
            out[name] = Recursive(tuple(gnames), tuple(bodies), i)
        return out

    def source(self, node: exp.Expression, ctes: dict[str, Rel]) -> tuple[Rel, _Scope]:
        pivots = node.args.get("pivots")
        if pivots:  # PIVOT / UNPIVOT: the query they mean, over the source's columns (ddflow.sql.pivot)
            if len(pivots) > 1:
                raise _unsupported(pivots[1], "more than one PIVOT or UNPIVOT on one source")
            bare = node.copy()
            bare.set("pivots", None)
            rel, _ = self.source(bare, ctes)
            return self.source(pivot.rewritten(node, pivots[0], rel.schema.names), ctes)
        if isinstance(node, exp.Table):
            name = node.name.lower()
            if name in ctes:
                rel = ctes[name]
            elif name in self.views:
                rel = self.views[name]
            elif name in self.tables:
                rel = Scan(name, self.tables[name])
            else:
                raise _unknown_table(node, self.tables, self.views)
            return rel, self.scope_of(rel, node.alias_or_name)
        if isinstance(node, exp.Subquery):
            rel = self.query(node.this, ctes)
            return rel, self.scope_of(rel, node.alias_or_name)
        if isinstance(node, exp.Values):
            rel = constants.values_rel(node, lambda x: self.expr(x, _Scope([])), _aligned)
            return rel, self.scope_of(rel, node.alias_or_name)
        raise _unsupported(node, f"{construct(node)} in FROM")

    def select(self, node: exp.Select, ctes: dict[str, Rel]) -> Rel:
        for lateral in node.args.get("laterals") or ():
            fn = lateral.this
            name = (fn.name if isinstance(fn, exp.Anonymous) else fn.sql_name()).lower() if isinstance(fn, exp.Func) \
                else "a function"
            raise _unsupported(lateral, f"LATERAL VIEW {name} needs ARRAY columns")
        for key in ("qualify", "pivots"):
            if node.args.get(key):
                raise _unsupported(node.args[key] if isinstance(node.args[key], exp.Expression) else node,
                                   key.upper())
        self.refuse_misplaced_windows(node, [a for item in node.expressions for a in _aggregates(item)])
        where = node.args.get("where")
        conds = _conjuncts(where.this) if where is not None else []
        timed = [c for c in conds if eventtime.mentions_now(c)]
        group = node.args.get("group")
        having = node.args.get("having")
        having_conds = _conjuncts(having.this) if having is not None else []
        having_timed = [c for c in having_conds if eventtime.mentions_now(c)]
        eventtime.refuse_other_nows(node, timed + having_timed)
        rel, scope = self.body(node, ctes, [c for c in conds if not any(c is t for t in timed)])
        rel = self.temporal_filters(rel, scope, timed)
        items = node.expressions
        aggs = [a for item in items for a in _aggregates(item)]
        if having is not None:
            aggs += _aggregates(having.this)
        order = node.args.get("order") if node.args.get("limit") is not None or node.args.get("offset") else None
        if order is not None:  # ORDER BY SUM(x) LIMIT k: an aggregate of the query, though not selected
            aggs += [a for o in order.expressions for a in _aggregates(o.this)]
        if group is not None or aggs:
            sets = None
            if has_grouping_sets(group):
                sets = self.grouping_sets(rel, scope, group, items + ([having.this] if having is not None else [])
                                          + ([o.this for o in order.expressions] if order is not None else []))
            rel, scope, replace = self.aggregate(rel, scope, group.expressions if group else [], aggs, sets)
            if having is not None:
                plain = [c for c in having_conds if not any(c is t for t in having_timed)]
                flagged = [f for c in plain for f in _flag_subqueries(c)]
                for f in flagged:
                    if isinstance(f, exp.Exists) and _outer_refs(f.this, f.this):
                        raise _unsupported(f, "a correlated EXISTS in HAVING")
                rel, scope, replace = self.flags(rel, scope, flagged, ctes, replace)
                rel, scope, replace = self.scalars(rel, scope, [s for c in plain for s in _scalar_subqueries(c)],
                                                   ctes, replace)
                if plain:
                    rel = Filter(rel, conjunction([self.predicate(c, scope, replace) for c in plain]))
                rel = self.temporal_filters(rel, scope, having_timed, replace)
        else:
            replace = {}
        if not replace:  # EXISTS / IN (subquery) as a value of each row (not after GROUP BY)
            rel, scope, replace = self.flags(rel, scope, [f for item in items for f in _flag_subqueries(item)],
                                             ctes, replace)
        rel, scope, replace = self.scalars(rel, scope, [s for item in items for s in _scalar_subqueries(item)],
                                           ctes, replace)
        rel, added, replace = self.windows(rel, scope, items, node.args.get("windows") or [], replace)
        if added and scope.fields:
            scope = _Scope(scope.fields + [_Field("", f"#w{i}", i, t) for i, t in added])
        exprs, names = self.items(items, scope, replace)
        if order is not None:
            return self.named(self.sorted_select(rel, scope, replace, exprs, names, node), names)
        rel = Project(rel, exprs, _distinct_names(names))
        if node.args.get("distinct"):
            rel = Distinct(rel)
        return self.named(self.limited(rel, node), names)

    def items(self, items: list[exp.Expression], scope: _Scope, replace: dict) -> tuple[tuple, tuple]:
        """The SELECT list's expressions and names; a ``*`` the qualifier left (a FROM item with two columns of
        one name) is every column of the scope (``t.*``: of ``t``), in order."""
        exprs, names = [], []
        for item in items:
            star = isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star))
            if star and scope.fields:
                table = item.table.lower() if isinstance(item, exp.Column) else ""
                for f in scope.fields:
                    if not f.name.startswith("#") and (not table or f.table == table):
                        exprs.append(Col(f.index, f.type, f.name))
                        names.append(f.name)
                continue
            exprs.append(self.expr(item.this if isinstance(item, exp.Alias) else item, scope, replace))
            names.append(eventtime.output_name(item))
        return tuple(exprs), tuple(names)

    def sorted_select(self, rel: Rel, scope: _Scope, replace: dict, exprs: tuple, names: tuple,
                      node: exp.Select) -> Rel:
        """A SELECT's ORDER BY ... LIMIT / OFFSET: each key an output column's expression (an alias, ``a + b`` of
        aliases) or, as Spark resolves it next, one over the FROM's columns and the aggregates (``t.a``,
        ``a + b`` not selected, ``SUM(x)``), ranked on a hidden column projected away after the top-k."""
        out = _Scope([_Field("", n.lower(), i, e.type if e.type != "null" else "bigint")
                      for i, (n, e) in enumerate(zip(names, exprs))])
        extra: list[Expr] = []
        keys = []
        for o in node.args["order"].expressions:
            try:
                e = self.expr(o.this, out)
            except SchemaError:
                e = None
            if e is None:
                try:
                    below = self.expr(o.this, scope, replace)
                except SchemaError:  # a name of the SELECT list inside an expression: its item, as Spark reads it
                    below = self.expr(_through_aliases(o.this, node.expressions), scope, replace)
                hit = next((i for i, x in enumerate(exprs) if x == below), None)
                if hit is not None:
                    e = Col(hit, out.fields[hit].type, names[hit])
                elif node.args.get("distinct"):
                    raise _unsupported(o, "ORDER BY an expression not in the SELECT list of a SELECT DISTINCT")
                else:
                    e = Col(len(exprs) + len(extra), below.type if below.type != "null" else "bigint", f"_order{len(extra)}")
                    extra.append(below)
            keys.append(Order(e, bool(o.args.get("desc")), _nulls_first(o)))
        hidden = tuple(f"_order{i}" for i in range(len(extra)))
        rel = Project(rel, exprs + tuple(extra), _distinct_names(names + hidden))
        if node.args.get("distinct"):
            rel = Distinct(rel)
        rel = _top(rel, tuple(keys), *self.bounds(node))
        if extra:
            s = rel.schema
            rel = Project(rel, tuple(Col(i, s.types[i], s.names[i]) for i in range(len(exprs))), s.names[:len(exprs)])
        return rel

    def bounds(self, node: exp.Expression) -> tuple[int | None, int]:
        """LIMIT k (None: none) and OFFSET m (0: none), whole-number constants."""
        limit, offset = node.args.get("limit"), node.args.get("offset")
        return (self.count(limit, "LIMIT") if limit is not None else None,
                self.count(offset, "OFFSET") if offset is not None else 0)

    def count(self, node: exp.Expression, what: str) -> int:
        """A LIMIT's or OFFSET's count: a whole-number constant, or a constant expression of one (``2 + 1``)."""
        k = node.expression
        if isinstance(k, exp.Literal) and not k.is_string and k.this.isdigit():
            return int(k.this)
        if k.find(exp.Column, exp.Select, exp.Subquery) is None:
            try:
                e = self.expr(k, _Scope([]))
            except SchemaError:
                e = None
            if isinstance(e, Lit) and isinstance(e.value, int) and not isinstance(e.value, bool) \
                    and e.type in ("bigint", "int", "smallint", "tinyint"):
                if e.value < 0:
                    raise SchemaError(f"SQL: {what} must be at least 0, not {e.value} (in `{node.sql(dialect='spark')}`)")
                return e.value
        raise _unsupported(node, f"{what} other than a whole number")

    def limited(self, rel: Rel, node: exp.Expression) -> Rel:
        """ORDER BY ... LIMIT k [OFFSET m] as a top-k over the query's output (ORDER BY alone orders nothing: a
        view is a bag)."""
        if node.args.get("limit") is None and node.args.get("offset") is None:
            return rel
        out = _Scope.of(rel, "")
        order = node.args.get("order")
        keys = []
        for o in (order.expressions if order is not None else []):
            try:
                e = self.expr(o.this, out)
            except SchemaError:
                raise _unsupported(o, "ORDER BY an expression not in the SELECT list, with LIMIT") from None
            keys.append(Order(e, bool(o.args.get("desc")), _nulls_first(o)))
        return _top(rel, tuple(keys), *self.bounds(node))

    def body(self, node: exp.Select, ctes: dict[str, Rel], conds: list[exp.Expression]) -> tuple[Rel, _Scope]:
        """FROM and its joins, filtered by ``conds`` (WHERE's conjuncts): those without a subquery also pick the joins' keys."""
        plain = [c for c in conds if not _has_subquery(c)]
        rel, scope = self.from_(node, ctes, plain)
        rest = [c for c in conds if _has_subquery(c)]
        return self.where(rel, scope, rest, ctes) if rest else (rel, scope)

    def from_(self, node: exp.Select, ctes: dict[str, Rel], conds: list[exp.Expression]) -> tuple[Rel, _Scope]:
        """FROM's relations joined and filtered by ``conds``.

        With only inner joins (``JOIN ... ON``, ``CROSS JOIN``, commas) the
        ON and WHERE conjuncts are pooled and the relations joined in a
        greedy order (:meth:`reorder`); an outer join keeps the written
        order, the WHERE conjuncts filter above it and
        :func:`ddflow.plan.rewrite.push_filters` moves them down.
        """
        from_ = node.args.get("from_") or node.args.get("from")
        if from_ is None:  # one row of no columns
            scope = _Scope([])
            preds = [self.predicate(c, scope) for c in conds]
            return (Filter(constants.ONE, conjunction(preds)) if preds else constants.ONE), scope
        joins = node.args.get("joins") or []
        for j in joins:
            _check_join(j)
        if any((j.side or "") or (j.kind or "").upper() in ("SEMI", "ANTI") for j in joins):
            rel, scope = self.source(from_.this, ctes)
            for j in joins:
                rel, scope = self.join(rel, scope, j, ctes)
            if conds:
                preds = [self.predicate(c, scope) for c in conds]
                for p in preds:
                    rel = _limit_ranks(rel, p)
                rel = Filter(rel, conjunction(preds))
            return rel, scope
        sources = [self.source(from_.this, ctes)] + [self.source(j.this, ctes) for j in joins]
        on = [c for j in joins if j.args.get("on") is not None for c in _conjuncts(j.args["on"])]
        return self.reorder(sources, on + list(conds))

    def reorder(self, sources: list[tuple[Rel, _Scope]], conds: list[exp.Expression]) -> tuple[Rel, _Scope]:
        """Inner joins of ``sources`` under the conjuncts ``conds``, in a greedy order that avoids cross products.

        A conjunct reading one relation filters it before any join.  From
        the first relation on, the next one joined is the first (in written
        order) tied to those joined so far by an equality of an expression
        of each (``a.k = b.k``): all such equalities are the join's keys.
        Only when none is tied comes a cross product (a join on no key).
        Every other conjunct is the residual of the first join that sees
        all it reads.  A conjunct common to every branch of an OR is
        factored out first (:func:`ddflow.plan.rewrite.factor_or`), so
        ``(a.k = b.k AND ...) OR (a.k = b.k AND ...)`` ties ``a`` and ``b``
        (TPC-H Q19).  The scope keeps the written order's names, at the
        positions the chosen order gives them.  O(relations² x conjuncts).
        """
        scope = sources[0][1]
        for _, s in sources[1:]:
            scope = scope.then(s)
        starts = list(itertools.accumulate([0] + [len(s.fields) for _, s in sources]))
        preds = [q for c in conds for q in conjuncts(factor_or(self.predicate(c, scope)))]

        def rels_of(e: Expr) -> frozenset[int]:
            return frozenset(bisect.bisect_right(starts, i) - 1 for i in e.columns())

        def local(e: Expr, i: int) -> Expr:
            return remapped(e, lambda c: c - starts[i])

        single: dict[int, list[Expr]] = {i: [] for i in range(len(sources))}
        pending, const = [], []
        for p in preds:
            r = rels_of(p)
            if not r:
                const.append(p)
            elif len(r) == 1:
                single[next(iter(r))].append(p)
            else:
                pending.append(p)
        rels = []
        for i, (rel, _) in enumerate(sources):
            ps = [local(p, i) for p in single[i]]
            for p in ps:
                rel = _limit_ranks(rel, p)
            rels.append(Filter(rel, conjunction(ps)) if ps else rel)

        def key_of(p: Expr, done: set[int], i: int) -> tuple[Expr, Expr] | None:
            if not (isinstance(p, Call) and p.op == "=" and len(p.args) == 2):
                return None
            a, b = p.args
            ra, rb = rels_of(a), rels_of(b)
            pair = key_pair(a, b) if ra and rb else None
            if pair is None:
                return None
            a, b = pair
            if ra <= done and rb == {i}:
                return a, b
            if rb <= done and ra == {i}:
                return b, a
            return None

        pos = {c: c for c in range(starts[0], starts[1])}
        done, cur = {0}, rels[0]
        while len(done) < len(sources):
            todo = [i for i in range(len(sources)) if i not in done]
            nxt, keys = todo[0], []
            for i in todo:
                keys = [(p, k) for p in pending if (k := key_of(p, done, i)) is not None]
                if keys:
                    nxt = i
                    break
            used = {id(p) for p, _ in keys}
            lkeys = tuple(remapped(a, pos) for _, (a, _) in keys)
            rkeys = tuple(local(b, nxt) for _, (_, b) in keys)
            n = len(cur.schema)
            pos.update({c: n + c - starts[nxt] for c in range(starts[nxt], starts[nxt + 1])})
            done.add(nxt)
            covered = [p for p in pending if id(p) not in used and rels_of(p) <= done]
            gone = used | {id(p) for p in covered}
            pending = [p for p in pending if id(p) not in gone]
            residual = conjunction([remapped(p, pos) for p in covered]) if covered else None
            cur = Join(cur, rels[nxt], "inner", lkeys, rkeys, residual)
        if const:
            cur = Filter(cur, conjunction(const))
        return cur, _Scope([_Field(f.table, f.name, pos[f.index], f.type) for f in scope.fields])

    def where(self, rel: Rel, scope: _Scope, conds: list[exp.Expression], ctes: dict[str, Rel]) -> tuple[Rel, _Scope]:
        """WHERE's conjuncts with subqueries: ``[NOT] IN (subquery)`` and ``[NOT] EXISTS`` become semi and anti
        joins; scalar subqueries are joined in (:meth:`scalars`) for the other conjuncts, which filter."""
        plain = []
        for conj in conds:
            negated = isinstance(conj, exp.Not)
            inner = conj.this if negated else conj
            if isinstance(inner, exp.In) and inner.args.get("query") is not None:
                q = inner.args["query"]
                q = q.this if isinstance(q, exp.Subquery) else q
                if _outer_refs(q, q):
                    exists = None if negated else _in_as_exists(inner, q)
                    if exists is None:
                        raise _unsupported(inner, "NOT IN with a correlated subquery" if negated else
                                           "IN with a correlated subquery over anything but a plain SELECT ... "
                                           "FROM ... WHERE (write it as EXISTS)")
                    sub, inner_keys, outer_keys, residual = self.correlated(exists.this, scope, ctes)
                    rel = SemiJoin(rel, sub, outer_keys, inner_keys, residual=residual)
                    continue
                if _has_subquery(inner.this):
                    raise _unsupported(inner, "a subquery left of IN")
                sub = self.query(q, ctes)
                if len(sub.schema) != 1:
                    raise _unsupported(inner, "IN with a subquery of several columns")
                key, got = self.expr(inner.this, scope), Col(0, sub.schema.types[0], sub.schema.names[0])
                _comparable(inner, key, got)
                if not keyable(key.type, got.type):  # decimals of two scales: compared at their common type
                    typ = common_types([key.type, got.type], f"`{inner.sql(dialect='spark')}`")
                    key, got = retyped_expr(key, typ), retyped_expr(got, typ)
                rel = SemiJoin(rel, sub, (key,), (got,), anti=negated, null_aware=negated)
            elif isinstance(inner, exp.Exists):
                sub, inner_keys, outer_keys, residual = self.correlated(inner.this, scope, ctes)
                rel = SemiJoin(rel, sub, outer_keys, inner_keys, anti=negated, residual=residual)
            else:
                plain.append(conj)
        if plain:
            subs = [s for c in plain for s in _scalar_subqueries(c)]
            rel, scope, replace = self.flags(rel, scope, [f for c in plain for f in _flag_subqueries(c)], ctes, {})
            rel, scope, replace = self.scalars(rel, scope, subs, ctes, replace)
            rel = Filter(rel, conjunction([self.predicate(c, scope, replace) for c in plain]))
        return rel, scope

    def flags(self, rel: Rel, scope: _Scope, nodes: list[exp.Expression], ctes: dict[str, Rel],
              replace: dict) -> tuple[Rel, _Scope, dict]:
        """``EXISTS (...)`` and ``x IN (subquery)`` that are not a conjunct of their own (under OR, NOT, CASE) as a
        value per row, read through ``replace``: the rows left-joined to the subquery's distinct keys (at most one
        match each, so no row is repeated) with a flag column; IN also to the subquery's row and non-NULL counts
        (one row), for SQL's NULL rules: TRUE on a match, else FALSE over no rows, else NULL if ``x`` is NULL or
        the subquery has a NULL, else FALSE.  Cost: a join and a distinct (and a global count) per subquery; as
        for a scalar subquery, a change of that count re-joins every row."""
        true = Lit(True, "boolean")
        for node in nodes:
            key = node.sql(dialect="spark")
            if key in replace:
                continue
            n = len(rel.schema)
            if isinstance(node, exp.Exists):
                sub, inner_keys, outer_keys, residual = self.correlated(node.this, scope, ctes)
                if residual is not None:
                    raise _unsupported(node, "EXISTS with a correlated condition other than inner = outer, "
                                             "beside OR or NOT")
                if not inner_keys:
                    counted = Aggregate(sub, (), (Agg("count_star", None),), ("_n",))
                    rel = Join(rel, counted, "left", (), ())
                    value = Call(">", (Col(n, "bigint", "_n"), Lit(0, "bigint")), "boolean")
                    added = counted.schema.types
                else:
                    k = len(inner_keys)
                    hits = Distinct(Project(sub, inner_keys + (true,), tuple(f"_k{i}" for i in range(k)) + ("_hit",)))
                    rel = Join(rel, hits, "left", outer_keys, tuple(Col(i, e.type, f"_k{i}") for i, e in
                                                                    enumerate(inner_keys)))
                    value = Call("is_not_null", (Col(n + k, "boolean", "_hit"),), "boolean")
                    added = hits.schema.types
            else:
                q = node.args["query"]
                q = q.this if isinstance(q, exp.Subquery) else q
                if _outer_refs(q, q):
                    raise _unsupported(node, "IN with a correlated subquery (write it as EXISTS)")
                if _has_subquery(node.this):
                    raise _unsupported(node, "a subquery left of IN")
                sub = self.query(q, ctes)
                if len(sub.schema) != 1:
                    raise _unsupported(node, "IN with a subquery of several columns")
                x, got = self.expr(node.this, scope, replace), Col(0, sub.schema.types[0], sub.schema.names[0])
                _comparable(node, x, got)
                if not keyable(x.type, got.type):
                    typ = common_types([x.type, got.type], f"`{node.sql(dialect='spark')}`")
                    x, got = retyped_expr(x, typ), retyped_expr(got, typ)
                hits = Distinct(Project(sub, (got, true), ("_k", "_hit")))
                counts = Aggregate(sub, (), (Agg("count_star", None), Agg("count", got)), ("_n", "_nonnull"))
                rel = Join(Join(rel, hits, "left", (x,), (Col(0, got.type, "_k"),)), counts, "left", (), ())
                cnt, nonnull = Col(n + 2, "bigint", "_n"), Col(n + 3, "bigint", "_nonnull")
                unknown = Call("or", (Call("is_null", (x,), "boolean"), Call(">", (cnt, nonnull), "boolean")),
                               "boolean")
                value = Call("case", (Call("is_not_null", (Col(n + 1, "boolean", "_hit"),), "boolean"), true,
                                      Call("=", (cnt, Lit(0, "bigint")), "boolean"), Lit(False, "boolean"),
                                      unknown, Lit(None, "boolean"), Lit(False, "boolean")), "boolean")
                added = hits.schema.types + counts.schema.types
            if scope.fields:
                scope = _Scope(scope.fields + [_Field("", f"#{n + i}", n + i, t) for i, t in enumerate(added)])
            replace = {**replace, key: value}
        return rel, scope, replace

    def correlated(self, node: exp.Expression, outer: _Scope, ctes: dict[str, Rel]):
        """An EXISTS subquery as a relation, and what ties it to the outer row (decorrelation).

        Its conjuncts that read only its own tables filter it; a correlated
        ``inner = outer`` equality is a key pair; any other correlated
        conjunct is a residual over the outer row's columns then the
        subquery's (TPC-H Q21's ``l2.l_suppkey <> l1.l_suppkey``).  No key
        at all: every outer row sees every row of the subquery.
        """
        if isinstance(node, exp.Subquery):
            node = node.this
        if not isinstance(node, exp.Select) or node.args.get("group") or node.args.get("having") \
                or node.args.get("limit") or any(_aggregates(x) for x in node.expressions):
            raise _unsupported(node, "EXISTS over anything but a plain SELECT ... FROM ... WHERE")
        rel, scope, correlated = self._correlated_body(node, ctes, outer)
        inner_keys, outer_keys, rest = [], [], []
        for conj, pair in correlated:
            if pair is None:
                if _has_subquery(conj):
                    raise _unsupported(conj, "a correlated condition with a subquery")
                rest.append(conj)
            else:
                inner_keys.append(pair[0])
                outer_keys.append(pair[1])
        residual = None
        if rest:
            both = outer.then(scope)
            residual = conjunction([self.predicate(c, both) for c in rest])
        return rel, tuple(inner_keys), tuple(outer_keys), residual

    def _correlated_body(self, q: exp.Select, ctes: dict[str, Rel], outer: _Scope):
        """A correlated subquery's FROM planned with its own WHERE conditions, and each condition that reads
        the outer row with its ``(inner key, outer key)`` pair (None: not an equality of the two)."""
        where = q.args.get("where")
        conds = [f for c in (_conjuncts(where.this) if where is not None else []) for f in _common_equalities(c)]
        own = [c for c in conds if not _outer_refs(c, q)]
        rel, scope = self.body(q, ctes, own)
        correlated = [(c, self._correlation(c, q, scope, outer)) for c in conds if not any(c is o for o in own)]
        return rel, scope, correlated

    def _correlation(self, conj: exp.Expression, top: exp.Select, inner: _Scope,
                     outer: _Scope) -> tuple[Expr, Expr] | None:
        """``(inner key, outer key)`` when ``conj`` is ``inner = outer`` (each side reading one of them), else None."""
        if not isinstance(conj, exp.EQ):
            return None
        for a, b in ((conj.left, conj.right), (conj.right, conj.left)):
            if _outer_refs(a, top) or _has_subquery(a) or _has_subquery(b) or not a.find(exp.Column):
                continue
            cols = list(b.find_all(exp.Column))
            if not cols or len(_outer_refs(b, top)) != len(cols):
                continue
            ia, ob = self.expr(a, inner), self.expr(b, outer)
            _comparable(conj, ia, ob)
            pair = key_pair(ia, ob)  # decimals of two scales meet at their common type
            if pair is not None:
                return pair
        return None

    def scalars(self, rel: Rel, scope: _Scope, nodes: list[exp.Subquery], ctes: dict[str, Rel],
                replace: dict) -> tuple[Rel, _Scope, dict]:
        """Scalar subqueries joined onto ``rel``, each then read through ``replace`` as an expression.

        An uncorrelated one is a relation of at most one row (checked at
        run time when its shape does not promise it: :class:`OneRow`),
        left-joined on no key, so an empty result reads as NULL.  A
        correlated one is decorrelated (:meth:`decorrelated`).  After GROUP
        BY (``scope`` has no fields) only uncorrelated ones are allowed.
        """
        for s in nodes:
            key = s.sql(dialect="spark")
            if key in replace:
                continue
            q = s.this
            n = len(rel.schema)
            if _outer_refs(q, q):
                if not scope.fields:
                    raise _unsupported(s, "a correlated subquery in HAVING or beside GROUP BY")
                sub, outer_keys, value = self.decorrelated(q, scope, ctes, n)
                k = len(outer_keys)
                rel = Join(rel, sub, "left", outer_keys,
                           tuple(Col(i, t, f"_k{i}") for i, t in enumerate(sub.schema.types[:k])))
            else:
                sub = self.query(q, ctes)
                if len(sub.schema) != 1:
                    raise _unsupported(s, "a scalar subquery of several columns")
                if not _one_row(sub):
                    sub = OneRow(sub, _quoted(s))
                rel = Join(rel, sub, "left", (), ())
                value = Col(n, sub.schema.types[0], "subquery")
            if scope.fields:
                scope = _Scope(scope.fields + [_Field("", f"#{n + i}", n + i, t) for i, t in enumerate(sub.schema.types)])
            replace = {**replace, key: value}
        return rel, scope, replace

    def decorrelated(self, q: exp.Expression, outer: _Scope, ctes: dict[str, Rel], at: int):
        """A correlated scalar subquery ``(SELECT f(aggregates) FROM ... WHERE inner = outer AND ...)`` as the
        aggregate grouped by its inner keys (one row per key), the outer keys to join it on, and its value.

        Joined on the outer keys with a left join: an outer row with no
        group reads what the subquery gives over no rows (COUNT 0, other
        aggregates NULL: the "count bug" avoided).  ``at`` is where the
        subquery's columns (keys, then value) will start.  Refused: a
        correlated condition other than an equality, or no aggregate.
        """
        if not isinstance(q, exp.Select) or any(q.args.get(k) for k in ("group", "having", "distinct", "limit")) \
                or len(q.expressions) != 1:
            raise _unsupported(q, "a correlated scalar subquery other than SELECT <aggregate> FROM ... WHERE")
        item = q.expressions[0]
        item = item.this if isinstance(item, exp.Alias) else item
        aggs = _aggregates(item)
        if not aggs:
            raise _unsupported(q, "a correlated scalar subquery without an aggregate")
        if _outer_refs(item, q) or _has_subquery(item):
            raise _unsupported(q, "a correlated scalar subquery whose SELECT reads the outer row or a subquery")
        rel, scope, correlated = self._correlated_body(q, ctes, outer)
        inner_nodes, outer_keys, key_types = [], [], []
        for conj, pair in correlated:
            if pair is None:
                raise _unsupported(conj, "a correlated condition other than inner = outer in a scalar subquery")
            side = conj.left if not _outer_refs(conj.left, q) else conj.right
            inner_nodes.append(side)
            outer_keys.append(pair[1])
            key_types.append(pair[0].type)  # both sides at their common type (decimals of two scales)
        grouped, gscope, rep = self.aggregate(rel, scope, inner_nodes, aggs)
        value = self.expr(item, gscope, rep)
        k = len(inner_nodes)
        types = grouped.schema.types
        sub = Project(grouped, tuple(retyped_expr(Col(i, types[i], f"_k{i}"), key_types[i]) for i in range(k))
                      + (value,), tuple(f"_k{i}" for i in range(k)) + ("value",))
        types = sub.schema.types
        empty = {g.sql(dialect="spark"): Lit(None, types[i]) for i, g in enumerate(inner_nodes)}
        for a in aggs:
            typ = rep[a.sql(dialect="spark")].type
            empty[a.sql(dialect="spark")] = Lit(0, "bigint") if isinstance(a, exp.Count) else Lit(None, typ)
        over_none = self.expr(item, gscope, empty)
        vtype = sub.schema.types[k]
        got = Col(at + k, vtype, "subquery")
        if isinstance(over_none, Lit) and over_none.value is None:
            return sub, tuple(outer_keys), got
        matched = Call("is_not_null", (Col(at, types[0], "_k0"),), "boolean")
        return sub, tuple(outer_keys), Call("case", (matched, got, over_none), vtype)

    def join(self, left: Rel, lscope: _Scope, j: exp.Join, ctes: dict[str, Rel]) -> tuple[Rel, _Scope]:
        _check_join(j)
        side = (j.side or "").upper()
        right, rscope = self.source(j.this, ctes)
        scope = lscope.then(rscope)
        nl = len(lscope.fields)
        lkeys, rkeys, rest = [], [], []
        on = j.args.get("on")
        for conj in (_conjuncts(on) if on is not None else []):
            if isinstance(conj, exp.EQ):
                a, b = self.expr(conj.left, scope), self.expr(conj.right, scope)
                ca, cb = a.columns(), b.columns()
                pair = key_pair(a, b) if ca and cb else None
                if pair is not None:
                    a, b = pair
                    if max(ca) < nl <= min(cb):
                        lkeys.append(a)
                        rkeys.append(remapped(b, lambda i: i - nl))
                        continue
                    if max(cb) < nl <= min(ca):
                        lkeys.append(b)
                        rkeys.append(remapped(a, lambda i: i - nl))
                        continue
            rest.append(self.predicate(conj, scope))
        residual = conjunction(rest)
        kind = (j.kind or "").upper()
        if kind in ("SEMI", "ANTI"):  # LEFT SEMI / ANTI JOIN: the left rows with (without) a match; the left columns
            return SemiJoin(left, right, tuple(lkeys), tuple(rkeys), anti=kind == "ANTI", residual=residual), lscope
        return Join(left, right, side.lower() or "inner", tuple(lkeys), tuple(rkeys), residual), scope

    def aggregate(self, rel: Rel, scope: _Scope, group: list[exp.Expression], aggs: list[exp.Expression],
                  sets: tuple | None = None):
        """GROUP BY; ``sets``: GROUPING SETS, ROLLUP or CUBE's re-keyed rows (:meth:`grouping_sets`)."""
        if sets is None:
            rel, keys, close = self.windowed_group(rel, scope, group)
            hidden, flags = [], {}
        else:
            rel, keys, hidden, flags = sets
            close = lambda agg: agg  # noqa: E731
        gexprs = tuple(e for _, e in keys) + tuple(hidden)
        seen: dict[str, int] = {}
        plan_aggs: list[Agg] = []
        for a in aggs:
            key = a.sql(dialect="spark")
            if key in seen:
                continue
            seen[key] = len(plan_aggs)
            plan_aggs.append(self.agg(a, scope))
        k = len(gexprs)
        names = tuple(f"_g{i}" for i in range(k)) + tuple(f"_a{i}" for i in range(len(plan_aggs)))
        out = Aggregate(rel, gexprs, tuple(plan_aggs), names)
        types = out.schema.types
        replace = {text: Col(i, types[i], str(gexprs[i])) for i, (text, _) in enumerate(keys)}
        replace.update({text: Col(i, "bigint", text) for text, i in flags.items()})
        out = close(out)
        for key, i in seen.items():
            replace[key] = Col(k + i, types[k + i], key)
        return out, _Scope([]), replace

    def agg(self, node: exp.Expression, scope: _Scope) -> Agg:
        if isinstance(node, exp.Filter):  # AGG(x) FILTER (WHERE c) is AGG over CASE WHEN c THEN x END
            node = _filtered(node)
        if isinstance(node, exp.IgnoreNulls):  # first(x, true): ddflow's first already skips NULLs (it is MIN)
            if not isinstance(node.this, (exp.First, exp.Last, exp.AnyValue)):
                raise _unsupported(node, "IGNORE NULLS here")
            node = node.this
        func = _AGGS.get(type(node))
        if func is None:  # a subclass of a known one
            raise _unsupported(node)
        if func == "percentile_disc":  # ddflow.sql.sugar's reading of PERCENTILE_DISC(f) WITHIN GROUP (ORDER BY x)
            e = self.expr(node.this, scope)
            if not numeric(e.type):
                raise SchemaError(f"SQL: PERCENTILE_DISC needs a number, got {e.type} in `{node.sql(dialect='spark')}`")
            return Agg(func, e, fraction=self.fraction(node), desc=node.args["desc"] is not None)
        if isinstance(node, (exp.ApproxDistinct, exp.ApproxQuantile)):
            self.accuracy(node)
        if func == "listagg":
            return self.listagg(node, scope)
        arg = node.this
        distinct = isinstance(arg, exp.Distinct) or isinstance(node, exp.ApproxDistinct)
        if isinstance(arg, exp.Distinct):
            if len(arg.expressions) != 1 and func != "count":
                raise _unsupported(node, "an aggregate of several DISTINCT arguments other than COUNT")
            arg = arg.expressions[0] if len(arg.expressions) == 1 else self.tuple_key(arg.expressions, scope, node)
        if func == "count" and isinstance(arg, exp.Star):
            return Agg("count_star", None)
        if distinct and func not in ("count", "sum", "avg", "min", "max", "percentile", "var_samp", "var_pop",
                                     "stddev_samp", "stddev_pop", "skewness", "kurtosis"):
            raise _unsupported(node)
        e = self.expr(arg, scope)
        if func == "mode" and not isinstance(node.args.get("deterministic") or exp.true(), exp.Boolean):
            raise _unsupported(node, "MODE's second argument other than a constant TRUE or FALSE")
        if func not in ("count", "min", "max", "max_by", "min_by", "mode") and not numeric(e.type):
            raise SchemaError(f"SQL: {func.upper()} needs a number, got {e.type} in `{node.sql(dialect='spark')}`")
        if func.startswith("bit_") and e.type not in ("bigint", "null"):
            raise _unsupported(node, f"{func.upper()} of a {e.type} (it takes integers)")
        if func in ("percentile", "percentile_approx"):
            return Agg(func, e, distinct, self.fraction(node))
        if func in ("covar_pop", "covar_samp", "corr", "max_by", "min_by") or func.startswith("regr_"):
            other = self.expr(node.expression, scope)
            if func[0] in "cr" and not numeric(other.type):  # COVAR_POP, COVAR_SAMP, CORR, REGR_
                raise SchemaError(f"SQL: {func.upper()} cannot use {other.type} as its second argument "
                                  f"(in `{node.sql(dialect='spark')}`)")
            return Agg(func, e, other=other)
        return Agg(func, e, distinct)

    def listagg(self, node: exp.GroupConcat, scope: _Scope) -> Agg:
        """LISTAGG / STRING_AGG(x[, separator]) WITHIN GROUP (ORDER BY k): the order is needed (Spark's is the
        rows' arrival otherwise, which a view's answer must not depend on); the separator is a constant string."""
        body = node.this
        if not isinstance(body, exp.Order) or len(body.expressions) != 1:
            raise _unsupported(node, "LISTAGG without WITHIN GROUP (ORDER BY one key) (the order of its values is "
                                     "not determined)")
        x, (o,) = body.this, body.expressions
        distinct = isinstance(x, exp.Distinct)
        if distinct:
            if len(x.expressions) != 1 or x.expressions[0] != o.this:
                raise _unsupported(node, "LISTAGG(DISTINCT x) ordered by a key other than x")
            x = x.expressions[0]
        separator = ""
        if node.args.get("separator") is not None:
            sep = self.expr(node.args["separator"], scope)
            if not isinstance(sep, Lit) or sep.type != "string":
                raise _unsupported(node, "LISTAGG's separator other than a constant string")
            separator = sep.value
        e, k = self.expr(x, scope), self.expr(o.this, scope)
        if e.type not in ("string", "null"):
            raise SchemaError(f"SQL: LISTAGG needs a string, got {e.type} in `{node.sql(dialect='spark')}`")
        desc = bool(o.args.get("desc"))
        nulls_first = o.args.get("nulls_first")
        return Agg("listagg", e, distinct, other=k, separator=separator, desc=desc,
                   nulls_first=(not desc) if nulls_first is None else bool(nulls_first))

    def tuple_key(self, parts: list[exp.Expression], scope: _Scope, node: exp.Expression) -> exp.Expression:
        """COUNT(DISTINCT a, b, ...)'s one argument: a string per row, NULL when any part is NULL (Spark counts
        only rows with every part non-NULL) and equal for two rows exactly when every part is: each part's text
        behind its length (``3:abc1:x``), which no two different tuples share.  A double part is refused: its
        text tells 0.0 from -0.0, which DISTINCT does not.  O(parts)."""
        pieces: list[exp.Expression] = []
        for p in parts:
            t = self.expr(p, scope).type
            if t == "double":
                raise _unsupported(node, "COUNT(DISTINCT ...) of several arguments with a double among them")
            text = exp.Cast(this=p.copy(), to=exp.DataType.build("string"))
            pieces += [exp.Cast(this=exp.Length(this=text.copy()), to=exp.DataType.build("string")),
                       exp.Literal.string(":"), text]
        key = pieces[0]
        for piece in pieces[1:]:
            key = exp.DPipe(this=key, expression=piece)
        return key

    def constant_number(self, arg: exp.Expression) -> float | None:
        """The value of an aggregate's constant numeric argument (a decimal's at its scale), or None where it is
        not a constant number: what PERCENTILE's fraction and the approximate aggregates' accuracy must be."""
        got = self.expr(arg, _Scope([])) if arg.find(exp.Column) is None else None
        if not isinstance(got, Lit) or got.value is None or not numeric(got.type) or isinstance(got.value, bool):
            return None
        ps = decimal_ps(got.type)
        return float(got.value) / (10 ** ps[1] if ps else 1)

    def accuracy(self, node: exp.Expression) -> None:
        """APPROX_COUNT_DISTINCT's relative error and PERCENTILE_APPROX's accuracy: constants in Spark's ranges,
        then unused, since ddflow's answers are exact."""
        a = node.args.get("accuracy")
        if a is None:
            return
        v = self.constant_number(a)
        ok = v is not None and ((0.0 < v < 1.0 and isinstance(node, exp.ApproxDistinct)) or (
            v >= 1 and v == int(v) and v <= (1 << 31) - 1 and isinstance(node, exp.ApproxQuantile)))
        if not ok:
            what = "a relative error between 0 and 1" if isinstance(node, exp.ApproxDistinct) else \
                "a positive integer accuracy"
            raise _unsupported(node, f"{node.sql_name()} without {what} as a constant")

    def fraction(self, node: exp.Expression) -> float:
        """PERCENTILE's fraction (MEDIAN's 0.5): a constant from 0 to 1, as Spark requires."""
        q = node.args.get("quantile")
        if q is None:
            return 0.5
        v = self.constant_number(q)
        if v is None:
            raise _unsupported(node, "PERCENTILE with a fraction other than a constant number (an ARRAY of them "
                                     "needs ARRAY columns)")
        if not 0.0 <= v <= 1.0:
            raise SchemaError(f"SQL: PERCENTILE's fraction must be between 0.0 and 1.0, not {v} "
                              f"(in `{node.sql(dialect='spark')}`)")
        return v

    # -- expressions ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Empty(Rel):
    """Stands for a relation of ``schema`` in checks."""

    schema: Schema


def _reads(node: exp.Expression, names: list[str]) -> bool:
    """``node`` reads a table or definition named in ``names``."""
    return any(t.name.lower() in names for t in node.find_all(exp.Table))


def _union_parts(node: exp.Expression) -> list[exp.Expression]:
    """The parts of a chain of UNIONs (a recursive definition), in order; UNION ALL is refused.  Iterative."""
    out: list[exp.Expression] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, exp.Subquery):
            stack.append(n.this)
        elif isinstance(n, exp.Union):
            if not n.args.get("distinct"):
                raise _unsupported(n, "UNION ALL in a recursive definition (use UNION: the view is a set's fixpoint)")
            stack.append(n.right)
            stack.append(n.left)
        else:
            out.append(n)
    return out


def _aligned(rels: list[Rel], node: exp.Expression) -> tuple[Rel, ...]:
    """The parts of a set operation with each column cast to the type all parts' columns meet in.

    A column that is a bare NULL (``SELECT NULL``) takes the others' type, as in Spark.
    """
    first = rels[0]
    for r in rels[1:]:
        _check_union(first, r, node)
    want = []
    typed = [_typed(r) for r in rels]
    for j in range(len(first.schema)):
        types = [t for ts in typed if (t := ts[j]) != "null"] or ["null"]
        try:
            want.append(common_types(types, "a set operation"))
        except TypeMismatch:
            raise SchemaError(f"SQL: UNION of {' and '.join(sorted(set(types)))} columns in "
                              f"`{node.sql(dialect='spark')[:80]}`") from None
    return tuple(_retyped_to(r, tuple(want)) for r in rels)


def _unknown_table(node: exp.Table, tables: Mapping[str, Schema], views: Mapping[str, Rel]) -> SchemaError:
    shown = f"its tables are {sorted(tables)}" if tables else "it has no tables"
    if views:
        shown += f" and its views {sorted(views)}"
    where = _position(node).replace(" near", "", 1)
    return SchemaError(f"SQL: table {node.name!r} is not a table of this dataflow{f' ({where.strip()})' if where else ''}; "
                       f"{shown}")


def _check_tables(tree: exp.Expression, tables: Mapping[str, Schema], views: Mapping[str, Rel]) -> None:
    """Every table the query reads is a table, a view or a CTE: an unknown one is refused by name before the
    qualifier would call its columns unresolvable."""
    ctes = {c.alias.lower() for c in tree.find_all(exp.CTE)}
    for t in tree.find_all(exp.Table):
        name = t.name.lower()
        if name and name not in tables and name not in views and name not in ctes:
            raise _unknown_table(t, tables, views)


def _top(rel: Rel, keys: tuple[Order, ...], limit: int | None, offset: int) -> Rel:
    """The rows ranked ``offset + 1`` to ``offset + limit`` by ``keys`` (ties broken by the whole row).

    With an offset, the rows are numbered (ROW_NUMBER over the top
    ``offset + limit``) and those numbered ``<= offset`` dropped; OFFSET
    without LIMIT numbers every row (one partition: a change costs the
    reduce over the whole result's history).
    """
    if not offset:
        return TopK(rel, (), keys, limit)
    n = len(rel.schema)
    ranked = TopK(rel, (), keys, None if limit is None else limit + offset, "row_number", "_row")
    rank = Col(n, "bigint", "_row")
    kept = Filter(ranked, Call(">", (rank, Lit(offset, "bigint")), "boolean"))
    s = rel.schema
    return Project(kept, tuple(Col(i, t, m) for i, (m, t) in enumerate(zip(s.names, s.types))), s.names)


def _distinct_names(names: tuple[str, ...]) -> tuple[str, ...]:
    """``names`` made unique (``a, a`` is ``a, a_2``): a result may name two columns alike, a schema may not."""
    used: set[str] = set()
    out = []
    for n in names:
        name, i = n, 1
        while name.lower() in used:
            i += 1
            name = f"{n}_{i}"
        used.add(name.lower())
        out.append(name)
    return tuple(out)


def _nulls_first(o: exp.Ordered) -> bool:
    """Spark's default: NULLs first ascending, last descending."""
    nf = o.args.get("nulls_first")
    return bool(nf) if nf is not None else not o.args.get("desc")


def _limit_ranks(rel: Rel, pred: Expr) -> Rel:
    """``rank <= k`` (or ``< k``, ``= 1``) over a projected ranking: the ranking keeps only ranks up to k.

    The filter stays above it, so this only prunes what it would drop.
    """
    k = ranks_kept(rel, pred)
    if k is None or rel.input.limit is not None:
        return rel
    top = rel.input
    return Project(TopK(top.input, top.partition, top.order, max(k, 0), top.rank, top.rank_name), rel.exprs, rel.names)


def _filtered(node: exp.Filter) -> exp.Expression:
    """``AGG(x) FILTER (WHERE c)`` as ``AGG(CASE WHEN c THEN x END)`` (``COUNT(*)`` counts ``CASE WHEN c THEN 1``)."""
    agg, cond = node.this.copy(), node.expression.this
    arg = agg.this
    distinct = isinstance(arg, exp.Distinct)
    inner = arg.expressions[0] if distinct and len(arg.expressions) == 1 else arg
    if distinct and len(arg.expressions) != 1:
        raise _unsupported(node, "an aggregate of several DISTINCT arguments")
    value = exp.Literal.number(1) if isinstance(inner, exp.Star) else inner
    case = exp.Case(ifs=[exp.If(this=cond.copy(), true=value.copy())])
    agg.set("this", exp.Distinct(expressions=[case]) if distinct else case)
    return agg


def _aggregates(node: exp.Expression) -> list[exp.Expression]:
    """The outermost aggregate calls in ``node`` in written order, not those of its subqueries (they aggregate
    their own rows).  O(nodes), iterative."""
    out: list[exp.Expression] = []
    aggs = tuple(_AGGS)
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, aggs) or (isinstance(n, (exp.Filter, exp.IgnoreNulls)) and isinstance(n.this, aggs)):
            out.append(n)
            continue
        if isinstance(n, exp.Window):  # its function aggregates its window; its operands may aggregate groups
            stack.extend(reversed(window_operands(n)))
            continue
        if n is not node and isinstance(n, (exp.Select, exp.Subquery, exp.Exists)):
            continue
        stack.extend(reversed(list(n.iter_expressions())))
    return out


def _through_aliases(node: exp.Expression, items: list[exp.Expression]) -> exp.Expression:
    """``node`` (an ORDER BY key) with each unqualified column that names a SELECT item replaced by the item's
    expression: ``CASE WHEN lochierarchy = 0 THEN s_state END`` where ``lochierarchy`` is ``grouping(a) +
    grouping(b)`` and ``s_state`` is ``store.s_state``.  A copy, hung where ``node`` was.  O(size of node).

    >>> import sqlglot
    >>> q = sqlglot.parse_one("SELECT t.a AS a, x + 1 AS k FROM t")
    >>> _through_aliases(sqlglot.parse_one("CASE WHEN k = 0 THEN a END"), q.expressions).sql()
    'CASE WHEN x + 1 = 0 THEN t.a END'
    """
    named = {}
    for item in items:
        if isinstance(item, exp.Alias):
            named.setdefault(item.alias.lower(), item.this)
        elif isinstance(item, exp.Column):
            named.setdefault(item.name.lower(), item)

    def swap(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Column) and not n.table and n.name.lower() in named:
            return named[n.name.lower()].copy()
        return n

    out = node.copy().transform(swap)
    out.parent = node.parent
    return out


def _common_equalities(cond: exp.Expression) -> list[exp.Expression]:
    """``cond`` as conjuncts, with the column equalities common to every branch of an OR pulled out of it:
    ``(a = o.a AND x) OR (a = o.a AND y)`` is ``a = o.a`` and ``(x OR y)``, so a correlated subquery written so
    (TPC-DS Q41) is keyed by ``a``.  Equal in SQL's three-valued logic; an equality of columns cannot raise.
    O(size of cond).

    >>> import sqlglot
    >>> [c.sql() for c in _common_equalities(sqlglot.parse_one("(a = o.a AND x > 1) OR (o.a = a AND y < 2)"))]
    ['a = o.a', 'x > 1 OR y < 2']
    """
    node = cond
    while isinstance(node, exp.Paren):
        node = node.this
    if not isinstance(node, exp.Or):
        return [cond]
    parts, _ = chain_parts(node, through_parens=True)
    branches = [_conjuncts(b) for b in parts]

    def key(c: exp.Expression) -> str | None:  # an equality of two columns, either way round
        if isinstance(c, exp.EQ) and isinstance(c.left, exp.Column) and isinstance(c.right, exp.Column):
            return " = ".join(sorted((c.left.sql(), c.right.sql())))
        return None

    keys = [{key(c) for c in b} - {None} for b in branches]
    common = set.intersection(*keys)
    if not common:
        return [cond]
    pulled = {}
    for c in branches[0]:
        pulled.setdefault(key(c), c)
    rest = [[c for c in b if key(c) not in common] for b in branches]
    out = [pulled[k] for k in sorted(common)]
    if all(rest):  # a branch of common equalities alone is TRUE once they hold: the OR is then TRUE
        either = exp.or_(*(exp.and_(*r) if len(r) > 1 else r[0] for r in rest), wrap=True)
        either.parent = node.parent  # a copy, hung where the OR was: its columns resolve as the OR's did
        out.append(either)
    return out


def _conjuncts(node: exp.Expression) -> list[exp.Expression]:
    """The conjuncts of a condition, in order (an AND chain read in one loop, through parentheses)."""
    while isinstance(node, exp.Paren):
        node = node.this
    if not isinstance(node, exp.And):
        return [node]
    parts, _ = chain_parts(node, through_parens=True)
    out = []
    for p in parts:
        while isinstance(p, exp.Paren):
            p = p.this
        out.append(p)
    return out










def _typed(rel: Rel) -> tuple[str, ...]:
    """``rel``'s column types, ``null`` for a column that is a bare NULL literal (its schema says bigint), or
    reads one (``SELECT t.b FROM VALUES (1, NULL) AS t(a, b)``, a UNION of NULLs).  Iterative: O(projections
    above the first other operator), each column followed down only while it is a plain column."""
    types = list(rel.schema.types)
    pending = {j: j for j in range(len(types))}  # output column -> its position in ``cur``
    cur = rel
    while pending and isinstance(cur, (Project, Filter, Distinct)):
        if isinstance(cur, Project):
            below = {}
            for j, i in pending.items():
                e = cur.exprs[i]
                if e.type == "null":
                    types[j] = "null"
                elif isinstance(e, Col):
                    below[j] = e.index
            pending = below
        cur = cur.input
    if pending and isinstance(cur, Union):
        parts = [_typed(p) for p in cur.parts]
        for j, i in pending.items():
            if all(p[i] == "null" for p in parts):
                types[j] = "null"
    return tuple(types)


def _retyped_to(rel: Rel, want: tuple[str, ...]) -> Rel:
    """``rel`` with each column of type ``want`` (its bare NULLs typed, other columns cast)."""
    s, typed = rel.schema, _typed(rel)
    if all(w in (t, "null") for w, t in zip(want, s.types)):
        return rel
    if isinstance(rel, Project):
        exprs = tuple(Lit(None, w) if t == "null" and w != "null" else retyped_expr(e, w)
                      for e, t, w in zip(rel.exprs, typed, want))
        return Project(rel.input, exprs, rel.names)
    exprs = tuple(Lit(None, w) if t == "null" else retyped_expr(Col(i, u, n), w)
                  for i, (n, u, t, w) in enumerate(zip(s.names, s.types, typed, want)))
    return Project(rel, exprs, s.names)


def _check_union(left: Rel, right: Rel, node: exp.Expression) -> None:
    if len(left.schema) != len(right.schema):
        raise SchemaError(f"SQL: UNION of {len(left.schema)} and {len(right.schema)} columns "
                          f"in `{node.sql(dialect='spark')[:80]}`")
    for a, b in zip(_typed(left), _typed(right)):
        try:
            common_types([a, b], "a set operation")
        except TypeMismatch:
            raise SchemaError(f"SQL: UNION of {a} and {b} columns in `{node.sql(dialect='spark')[:80]}`") from None


def _check_join(j: exp.Join) -> None:
    side, kind = (j.side or "").upper(), (j.kind or "").upper()
    if kind in ("SEMI", "ANTI") and side in ("", "LEFT"):
        return
    if side not in ("", "LEFT", "RIGHT", "FULL") or kind not in ("", "INNER", "CROSS", "OUTER"):
        raise _unsupported(j, f"{' '.join(x for x in (side, kind) if x)} JOIN")
    if j.args.get("method"):
        if str(j.args["method"]).upper() == "NATURAL" and j.args.get("on") is None:
            return  # the qualifier wrote the shared columns' equalities; none shared: a cross product, as in Spark
        raise _unsupported(j, f"{j.args['method']} JOIN")
    if j.args.get("using"):
        raise _unsupported(j, "JOIN ... USING")


def _has_subquery(node: exp.Expression) -> bool:
    return node.find(exp.Select, exp.Subquery, exp.Exists) is not None


def _flag_subqueries(node: exp.Expression) -> list[exp.Expression]:
    """The EXISTS and ``IN (subquery)`` nodes in ``node`` in written order, not those nested in a subquery.
    O(nodes), iterative."""
    out: list[exp.Expression] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, exp.Exists) or (isinstance(n, exp.In) and n.args.get("query") is not None):
            out.append(n)
            continue
        if isinstance(n, (exp.Select, exp.Subquery)):
            continue
        stack.extend(reversed(list(n.iter_expressions())))
    return out


def _scalar_subqueries(node: exp.Expression) -> list[exp.Subquery]:
    """The subqueries in ``node`` that stand for a value, in written order: not those of EXISTS or IN, not those
    nested in another.  O(nodes), iterative."""
    out: list[exp.Subquery] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, exp.Subquery):
            out.append(n)
            continue
        if isinstance(n, (exp.Exists, exp.Select)):
            continue
        kids = []
        for k, v in n.args.items():
            if isinstance(n, exp.In) and k == "query":
                continue
            for c in (v if isinstance(v, list) else [v]):
                if isinstance(c, exp.Expression):
                    kids.append(c)
        stack.extend(reversed(kids))
    return out


def _in_as_exists(node: exp.In, q: exp.Expression) -> exp.Exists | None:
    """``x IN (SELECT y FROM ... WHERE c)`` as ``EXISTS (SELECT y FROM ... WHERE c AND y = x)``, or None.

    The two agree where a WHERE conjunct reads them (TRUE where some row has
    ``y = x``; IN's NULL, where none does and a ``y`` or ``x`` is NULL, is
    not TRUE either), when the subquery is a plain SELECT of one column and
    no table it reads is named as ``x``'s are (``x`` moves inside it).
    """
    if not isinstance(q, exp.Select) or len(q.expressions) != 1 or any(
            q.args.get(k) for k in ("group", "having", "limit", "offset", "qualify", "distinct")) \
            or _aggregates(q.expressions[0]) or _has_subquery(node.this) or q.find(exp.Window):
        return None
    if {c.table.lower() for c in node.this.find_all(exp.Column)} & _sources(q):
        return None
    body = q.copy()
    y = body.expressions[0]
    y = y.this if isinstance(y, exp.Alias) else y
    eq = exp.EQ(this=exp.Paren(this=y.copy()), expression=exp.Paren(this=node.this.copy()))
    where = body.args.get("where")
    body.set("where", exp.Where(this=eq if where is None else exp.And(this=exp.Paren(this=where.this), expression=eq)))
    body.set("expressions", [exp.Literal.number(1)])
    exists = exp.Exists(this=body)
    exists.parent = node.parent  # read in the outer query's place: its outer references stay outer
    return exists


def _sources(select: exp.Expression) -> set[str]:
    """The names a SELECT's FROM and joins define (aliases, else table names)."""
    f = select.args.get("from_") or select.args.get("from")
    names = {f.this.alias_or_name.lower()} if f is not None else set()
    return names | {j.this.alias_or_name.lower() for j in select.args.get("joins") or ()}


def _outer_refs(node: exp.Expression, top: exp.Expression) -> list[exp.Column]:
    """Columns in ``node`` that no SELECT from their own up to ``top`` (included) defines: references to an outer
    query.  O(nodes of ``node`` + its depth below ``top``): the SELECTs above ``node`` are read once, those within
    it on the way down (a column's own walk up a 10,000-term chain made this quadratic)."""
    above: set[str] = set()
    p = node.parent if node is not top else None
    inside_top = node is top
    while p is not None:
        if isinstance(p, exp.Select):
            above |= _sources(p)
        if p is top:
            inside_top = True
            break
        p = p.parent
    if not inside_top:
        return []
    out = []
    stack: list[tuple[exp.Expression, frozenset]] = [(node, frozenset())]
    while stack:
        n, defined = stack.pop()
        if isinstance(n, exp.Select):
            defined = defined | _sources(n)
        if isinstance(n, exp.Column):
            t = n.table.lower()
            if t and t not in defined and t not in above:
                out.append(n)
            continue
        stack.extend((c, defined) for c in reversed(list(n.iter_expressions())))
    return out


def _one_row(rel: Rel) -> bool:
    """``rel`` has exactly (at most) one row by its shape: a global aggregate (an ORDER BY ... LIMIT 1)."""
    while isinstance(rel, (Project, Filter)):
        rel = rel.input
    if isinstance(rel, Aggregate):
        return not rel.group
    return isinstance(rel, TopK) and rel.limit is not None and rel.limit <= 1 and not rel.partition \
        and rel.rank in (None, "row_number")


def _position(node: exp.Expression) -> str:
    """Where ``node`` starts in the SQL text, as sqlglot recorded it on its tokens (empty when it did not)."""
    spots = [(n.meta["start"], n.meta["line"], n.meta["col"] - (n.meta.get("end", n.meta["start"]) - n.meta["start"]))
             for n in node.walk() if n.meta and {"start", "line", "col"} <= n.meta.keys()]
    if not spots:
        return ""
    _, line, col = min(spots)
    return f" near line {line}, column {col}"


def _quoted(node: exp.Expression) -> str:
    text = node.sql(dialect="spark")
    return f"`{text[:77] + '...' if len(text) > 80 else text}`{_position(node)}"
