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

import itertools
from dataclasses import dataclass
from typing import Mapping

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.qualify import qualify

from ddflow.base.schema import Schema, sql_type
from ddflow.errors import SchemaError
from ddflow.plan.expr import Call, Col, Expr, Lit, conjunction, remapped
from ddflow.plan.ir import (Agg, Aggregate, Distinct, Filter, Join, Order, Project, RecRef, Recursive, Rel, Scan,
                            SemiJoin, SetOp, TopK, Union)

_NUMERIC = ("bigint", "double", "null")
_ARITH = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%"}
_CMP = {exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
_AGGS = {exp.Sum: "sum", exp.Min: "min", exp.Max: "max", exp.Avg: "avg", exp.Count: "count"}


def _unsupported(node: exp.Expression, what: str | None = None) -> SchemaError:
    text = node.sql(dialect="spark")
    if len(text) > 80:
        text = text[:77] + "..."
    return SchemaError(f"SQL: {what or type(node).__name__} is not supported (in `{text}`)")


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
    def of(cls, rel: Rel, alias: str) -> "_Scope":
        s = rel.schema
        return cls([_Field(alias.lower(), n.lower(), i, t) for i, (n, t) in enumerate(zip(s.names, s.types))])

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
    """The plan of one SQL query over ``tables`` (name -> schema)."""
    try:
        tree = sqlglot.parse_one(sql, read="spark")
    except SqlglotError as err:
        raise SchemaError(f"SQL: cannot parse the query: {err}") from None
    if not isinstance(tree, exp.Query):
        raise SchemaError(f"SQL: expected a query (SELECT, WITH or a set operation), got `{tree.sql(dialect='spark')[:80]}`")
    schema = {name: {c: _glot_type(t) for c, t in zip(s.names, s.types)} for name, s in tables.items()}
    try:
        tree = qualify(tree, schema=schema, dialect="spark", quote_identifiers=False, validate_qualify_columns=True)
    except SqlglotError as err:
        raise SchemaError(f"SQL: {err}") from None
    return _Planner({k.lower(): v for k, v in tables.items()}).query(tree, {})


def _glot_type(t: str) -> str:
    return {"bigint": "BIGINT", "double": "DOUBLE", "string": "STRING", "boolean": "BOOLEAN",
            "date": "DATE", "timestamp": "TIMESTAMP"}[t]


class _Planner:
    def __init__(self, tables: dict[str, Schema]):
        self.tables = tables
        self._uids = itertools.count()

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
            left, right = self.query(node.left, ctes), self.query(node.right, ctes)
            _check_union(left, right, node)
            right = _retyped(right, left.schema)
            left = _retyped(left, right.schema)
            return self.limited(Union((left, right), all=not node.args.get("distinct")), node)
        if isinstance(node, (exp.Except, exp.Intersect)):
            name = type(node).__name__.upper()
            if not node.args.get("distinct"):
                raise _unsupported(node, f"{name} ALL")
            left, right = self.query(node.left, ctes), self.query(node.right, ctes)
            _check_union(left, right, node)
            right = _retyped(right, left.schema)
            left = _retyped(left, right.schema)
            return self.limited(SetOp(name.lower(), left, right), node)
        if isinstance(node, exp.Subquery):
            return self.query(node.this, ctes)
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
                r = _retyped(r, schema)
                rels.append(Project(r, tuple(Col(i, t, n) for i, (n, t) in enumerate(zip(r.schema.names, schema.types))),
                                    schema.names))
            bodies.append(Union(tuple(rels), all=False))
        for i, name in enumerate(gnames):
            out[name] = Recursive(tuple(gnames), tuple(bodies), i)
        return out

    def source(self, node: exp.Expression, ctes: dict[str, Rel]) -> tuple[Rel, _Scope]:
        if isinstance(node, exp.Table):
            name = node.name.lower()
            if name in ctes:
                rel = ctes[name]
            elif name in self.tables:
                rel = Scan(name, self.tables[name])
            else:
                raise SchemaError(f"SQL: no table {node.name!r} (tables: {sorted(self.tables)})")
            return rel, _Scope.of(rel, node.alias_or_name)
        if isinstance(node, exp.Subquery):
            rel = self.query(node.this, ctes)
            return rel, _Scope.of(rel, node.alias_or_name)
        raise _unsupported(node, f"{type(node).__name__} in FROM")

    def select(self, node: exp.Select, ctes: dict[str, Rel]) -> Rel:
        for key in ("offset", "qualify", "windows", "pivots", "laterals"):
            if node.args.get(key):
                raise _unsupported(node.args[key] if isinstance(node.args[key], exp.Expression) else node,
                                   key.upper())
        from_ = node.args.get("from_") or node.args.get("from")
        if from_ is None:
            raise _unsupported(node, "SELECT without FROM")
        rel, scope = self.source(from_.this, ctes)
        for j in node.args.get("joins") or ():
            rel, scope = self.join(rel, scope, j, ctes)
        where = node.args.get("where")
        if where is not None:
            rel = self.where(rel, scope, where.this, ctes)
        group = node.args.get("group")
        having = node.args.get("having")
        items = node.expressions
        aggs = [a for item in items for a in _aggregates(item)]
        if having is not None:
            aggs += _aggregates(having.this)
        if group is not None or aggs:
            rel, scope, replace = self.aggregate(rel, scope, group.expressions if group else [], aggs)
            if having is not None:
                rel = Filter(rel, self.predicate(having.this, scope, replace))
        else:
            replace = {}
        windows = [w for item in items for w in item.find_all(exp.Window)]
        if windows:
            if len(windows) > 1 or group is not None or aggs:
                raise _unsupported(windows[-1], "more than one window function, or one beside GROUP BY")
            rel, scope, replace = self.window(rel, scope, windows[0], replace)
        exprs = tuple(self.expr(item.this if isinstance(item, exp.Alias) else item, scope, replace) for item in items)
        names = tuple(item.alias_or_name for item in items)
        rel = Project(rel, exprs, names)
        if node.args.get("distinct"):
            rel = Distinct(rel)
        return self.limited(rel, node)

    def limited(self, rel: Rel, node: exp.Expression) -> Rel:
        """ORDER BY ... LIMIT k as a top-k over the query's output (ORDER BY alone orders nothing: a view is a bag)."""
        limit = node.args.get("limit")
        if limit is None:
            return rel
        if node.args.get("offset") is not None:
            raise _unsupported(node.args["offset"], "OFFSET")
        k = limit.expression
        if not (isinstance(k, exp.Literal) and not k.is_string and k.this.isdigit()):
            raise _unsupported(limit, "a LIMIT other than a whole number")
        out = _Scope.of(rel, "")
        order = node.args.get("order")
        keys = []
        for o in (order.expressions if order is not None else []):
            try:
                e = self.expr(o.this, out)
            except SchemaError:
                raise _unsupported(o, "ORDER BY an expression not in the SELECT list, with LIMIT") from None
            keys.append(Order(e, bool(o.args.get("desc")), _nulls_first(o)))
        return TopK(rel, (), tuple(keys), int(k.this))

    def window(self, rel: Rel, scope: _Scope, w: exp.Window, replace: dict):
        """ROW_NUMBER() / RANK() / DENSE_RANK() OVER (PARTITION BY ... ORDER BY ...) as a ranking TopK."""
        kinds = {exp.RowNumber: "row_number", exp.Rank: "rank", exp.DenseRank: "dense_rank"}
        if type(w.this) not in kinds or w.args.get("spec") is not None:
            raise _unsupported(w, "a window function other than ROW_NUMBER, RANK or DENSE_RANK")
        part = tuple(self.expr(p, scope) for p in (w.args.get("partition_by") or ()))
        order = w.args.get("order")
        keys = tuple(Order(self.expr(o.this, scope), bool(o.args.get("desc")), _nulls_first(o))
                     for o in (order.expressions if order is not None else ()))
        top = TopK(rel, part, keys, None, kinds[type(w.this)], "_rank")
        n = len(rel.schema)
        fields = scope.fields + [_Field("", "_rank", n, "bigint")]
        return top, _Scope(fields), {**replace, w.sql(dialect="spark"): Col(n, "bigint", "rank")}

    def where(self, rel: Rel, scope: _Scope, cond: exp.Expression, ctes: dict[str, Rel]) -> Rel:
        """WHERE: plain conjuncts filter; ``[NOT] IN (subquery)`` and ``[NOT] EXISTS`` become semi and anti joins."""
        plain, subs = [], []
        for conj in _conjuncts(cond):
            inner = conj.this if isinstance(conj, exp.Not) else conj
            if isinstance(inner, exp.Exists) or (isinstance(inner, exp.In) and inner.args.get("query") is not None):
                subs.append(conj)
            else:
                plain.append(self.predicate(conj, scope))
        if plain:
            for p in plain:
                rel = _limit_ranks(rel, p)
            rel = Filter(rel, conjunction(plain))
        for conj in subs:
            negated = isinstance(conj, exp.Not)
            inner = conj.this if negated else conj
            if isinstance(inner, exp.In):
                sub = self.query(inner.args["query"].this if isinstance(inner.args["query"], exp.Subquery)
                                 else inner.args["query"], ctes)
                if len(sub.schema) != 1:
                    raise _unsupported(inner, "IN with a subquery of several columns")
                key = self.expr(inner.this, scope)
                _comparable(inner, key, Col(0, sub.schema.types[0]))
                rel = SemiJoin(rel, sub, (key,), (Col(0, sub.schema.types[0], sub.schema.names[0]),),
                               anti=negated, null_aware=negated)
            else:
                sub, inner_keys, outer_keys = self.correlated(inner.this, scope, ctes)
                rel = SemiJoin(rel, sub, outer_keys, inner_keys, anti=negated)
        return rel

    def correlated(self, node: exp.Expression, outer: _Scope, ctes: dict[str, Rel]):
        """An EXISTS subquery as a relation and the equalities that tie it to the outer row (decorrelation)."""
        if isinstance(node, exp.Subquery):
            node = node.this
        if not isinstance(node, exp.Select) or node.args.get("group") or node.args.get("having") \
                or any(_aggregates(x) for x in node.expressions):
            raise _unsupported(node, "EXISTS over anything but a plain SELECT ... FROM ... WHERE")
        from_ = node.args.get("from_") or node.args.get("from")
        rel, scope = self.source(from_.this, ctes)
        for j in node.args.get("joins") or ():
            rel, scope = self.join(rel, scope, j, ctes)
        preds, inner_keys, outer_keys = [], [], []
        where = node.args.get("where")
        for conj in (_conjuncts(where.this) if where is not None else []):
            try:
                preds.append(self.predicate(conj, scope))
                continue
            except SchemaError:
                if not isinstance(conj, exp.EQ):
                    raise _unsupported(conj, "a correlated condition other than an equality") from None
            for a, b in ((conj.left, conj.right), (conj.right, conj.left)):
                try:
                    ia, ob = self.expr(a, scope), self.expr(b, outer)
                except SchemaError:
                    continue
                _comparable(conj, ia, ob)
                inner_keys.append(ia)
                outer_keys.append(ob)
                break
            else:
                raise _unsupported(conj, "a correlated condition that is not inner = outer")
        if preds:
            rel = Filter(rel, conjunction(preds))
        if not inner_keys:
            raise _unsupported(node, "an uncorrelated EXISTS")
        return rel, tuple(inner_keys), tuple(outer_keys)

    def join(self, left: Rel, lscope: _Scope, j: exp.Join, ctes: dict[str, Rel]) -> tuple[Rel, _Scope]:
        side, kind = (j.side or "").upper(), (j.kind or "").upper()
        if side not in ("", "LEFT", "RIGHT", "FULL") or kind not in ("", "INNER", "CROSS", "OUTER"):
            raise _unsupported(j, f"{' '.join(x for x in (side, kind) if x)} JOIN")
        if j.args.get("method"):
            raise _unsupported(j, f"{j.args['method']} JOIN")
        if j.args.get("using"):
            raise _unsupported(j, "JOIN ... USING")
        right, rscope = self.source(j.this, ctes)
        scope = lscope.then(rscope)
        nl = len(lscope.fields)
        lkeys, rkeys, rest = [], [], []
        on = j.args.get("on")
        for conj in (_conjuncts(on) if on is not None else []):
            if isinstance(conj, exp.EQ):
                a, b = self.expr(conj.left, scope), self.expr(conj.right, scope)
                ca, cb = a.columns(), b.columns()
                if ca and cb and max(ca) < nl <= min(cb):
                    lkeys.append(a)
                    rkeys.append(remapped(b, lambda i: i - nl))
                    continue
                if ca and cb and max(cb) < nl <= min(ca):
                    lkeys.append(b)
                    rkeys.append(remapped(a, lambda i: i - nl))
                    continue
            rest.append(self.predicate(conj, scope))
        residual = conjunction(rest)
        return Join(left, right, side.lower() or "inner", tuple(lkeys), tuple(rkeys), residual), scope

    def aggregate(self, rel: Rel, scope: _Scope, group: list[exp.Expression], aggs: list[exp.Expression]):
        gexprs = tuple(self.expr(g, scope) for g in group)
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
        replace = {g.sql(dialect="spark"): Col(i, types[i], str(gexprs[i])) for i, g in enumerate(group)}
        for key, i in seen.items():
            replace[key] = Col(k + i, types[k + i], key)
        return out, _Scope([]), replace

    def agg(self, node: exp.Expression, scope: _Scope) -> Agg:
        func = _AGGS[type(node)]
        arg = node.this
        distinct = isinstance(arg, exp.Distinct)
        if distinct:
            if len(arg.expressions) != 1:
                raise _unsupported(node, "an aggregate of several DISTINCT arguments")
            arg = arg.expressions[0]
        if func == "count" and isinstance(arg, exp.Star):
            return Agg("count_star", None)
        if distinct and func not in ("count", "sum", "avg", "min", "max"):
            raise _unsupported(node)
        e = self.expr(arg, scope)
        if func in ("sum", "avg") and e.type not in _NUMERIC:
            raise SchemaError(f"SQL: {func.upper()} needs a number, got {e.type} in `{node.sql(dialect='spark')}`")
        return Agg(func, e, distinct)

    # -- expressions ------------------------------------------------------------------------------
    def predicate(self, node: exp.Expression, scope: _Scope, replace: dict | None = None) -> Expr:
        e = self.expr(node, scope, replace or {})
        if e.type not in ("boolean", "null"):
            raise SchemaError(f"SQL: a condition must be boolean, `{node.sql(dialect='spark')}` is {e.type}")
        return e

    def expr(self, node: exp.Expression, scope: _Scope, replace: dict | None = None) -> Expr:
        replace = replace or {}
        if replace:
            hit = replace.get(node.sql(dialect="spark"))
            if hit is not None:
                return hit
        e = lambda x: self.expr(x, scope, replace)  # noqa: E731
        if isinstance(node, exp.Paren):
            return e(node.this)
        if isinstance(node, exp.Column):
            if replace and not scope.fields:  # after GROUP BY only group keys and aggregates are visible
                raise SchemaError(f"SQL: column `{node.sql(dialect='spark')}` must appear in GROUP BY or inside an aggregate")
            return scope.resolve(node)
        if isinstance(node, exp.Literal):
            if node.is_string:
                return Lit(node.this, "string")
            text = node.this
            try:
                return Lit(int(text), "bigint")
            except ValueError:
                return Lit(float(text), "double")
        if isinstance(node, exp.Null):
            return Lit(None, "null")
        if isinstance(node, exp.Boolean):
            return Lit(bool(node.this), "boolean")
        if type(node) in _AGGS:
            raise _unsupported(node, "an aggregate here")
        if type(node) in _ARITH:
            a, b = e(node.left), e(node.right)
            op = _ARITH[type(node)]
            _need_numbers(node, a, b)
            typ = "double" if op == "/" or "double" in (a.type, b.type) else "bigint"
            return Call(op, (a, b), typ)
        if type(node) in _CMP:
            a, b = e(node.left), e(node.right)
            _comparable(node, a, b)
            return Call(_CMP[type(node)], (a, b), "boolean")
        if isinstance(node, exp.And):
            return Call("and", (self._bool(node.left, scope, replace), self._bool(node.right, scope, replace)), "boolean")
        if isinstance(node, exp.Or):
            return Call("or", (self._bool(node.left, scope, replace), self._bool(node.right, scope, replace)), "boolean")
        if isinstance(node, exp.Not):
            inner = node.this
            if isinstance(inner, exp.Is) and isinstance(inner.expression, exp.Null):
                return Call("is_not_null", (e(inner.this),), "boolean")
            return Call("not", (self._bool(inner, scope, replace),), "boolean")
        if isinstance(node, exp.Is):
            if not isinstance(node.expression, exp.Null):
                raise _unsupported(node, "IS other than IS [NOT] NULL")
            return Call("is_null", (e(node.this),), "boolean")
        if isinstance(node, exp.Neg):
            a = e(node.this)
            _need_numbers(node, a)
            return Call("neg", (a,), a.type if a.type != "null" else "bigint")
        if isinstance(node, exp.Abs):
            a = e(node.this)
            _need_numbers(node, a)
            return Call("abs", (a,), a.type if a.type != "null" else "bigint")
        if isinstance(node, exp.In):
            if node.args.get("query") is not None:
                raise _unsupported(node, "IN (subquery)")
            a = e(node.this)
            options = [e(x) for x in node.expressions]
            for o in options:
                _comparable(node, a, o)
            out = Call("=", (a, options[0]), "boolean")
            for o in options[1:]:
                out = Call("or", (out, Call("=", (a, o), "boolean")), "boolean")
            return out
        if isinstance(node, exp.Between):
            a, lo, hi = e(node.this), e(node.args["low"]), e(node.args["high"])
            _comparable(node, a, lo)
            _comparable(node, a, hi)
            return Call("and", (Call(">=", (a, lo), "boolean"), Call("<=", (a, hi), "boolean")), "boolean")
        if isinstance(node, exp.Case):
            if node.this is not None:
                raise _unsupported(node, "CASE x WHEN (write CASE WHEN x = ...)")
            args: list[Expr] = []
            for w in node.args.get("ifs") or ():
                args += [self._bool(w.this, scope, replace), e(w.args["true"])]
            default = node.args.get("default")
            args.append(e(default) if default is not None else Lit(None, "null"))
            return Call("case", tuple(args), _common_type(node, [a for a in args[1::2]] + [args[-1]]))
        if isinstance(node, exp.If):
            cond, yes = self._bool(node.this, scope, replace), e(node.args["true"])
            no = e(node.args["false"]) if node.args.get("false") is not None else Lit(None, "null")
            return Call("case", (cond, yes, no), _common_type(node, [yes, no]))
        if isinstance(node, exp.Coalesce):
            args = [e(node.this)] + [e(x) for x in node.expressions]
            return Call("coalesce", tuple(args), _common_type(node, args))
        if isinstance(node, (exp.Cast, exp.TryCast)):
            to = node.to.this.value.lower() if hasattr(node.to.this, "value") else str(node.to).lower()
            return Call("cast", (e(node.this),), sql_type(to, "CAST"))
        if isinstance(node, exp.Concat):
            args = [e(x) for x in node.expressions]
            return Call("concat", tuple(_as_string(a) for a in args), "string")
        if isinstance(node, exp.DPipe):
            return Call("concat", (_as_string(e(node.this)), _as_string(e(node.expression))), "string")
        if isinstance(node, (exp.Lower, exp.Upper, exp.Length)):
            a = _as_string(e(node.this))
            op = type(node).__name__.lower()
            return Call(op, (a,), "bigint" if op == "length" else "string")
        if isinstance(node, exp.Substring):
            args = [_as_string(e(node.this)), e(node.args["start"])]
            if node.args.get("length") is not None:
                args.append(e(node.args["length"]))
            return Call("substring", tuple(args), "string")
        if isinstance(node, exp.Like):
            return Call("like", (_as_string(e(node.this)), e(node.expression)), "boolean")
        if isinstance(node, exp.Star):
            raise _unsupported(node, "* here")
        if isinstance(node, (exp.Exists, exp.Subquery)):
            raise _unsupported(node, "a subquery here")
        raise _unsupported(node)

    def _bool(self, node: exp.Expression, scope: _Scope, replace: dict | None) -> Expr:
        return self.predicate(node, scope, replace)


@dataclass(frozen=True)
class _Empty(Rel):
    """Stands for a relation of ``schema`` in checks."""

    schema: Schema


def _reads(node: exp.Expression, names: list[str]) -> bool:
    """``node`` reads a table or definition named in ``names``."""
    return any(t.name.lower() in names for t in node.find_all(exp.Table))


def _union_parts(node: exp.Expression) -> list[exp.Expression]:
    """The parts of a chain of UNIONs (a recursive definition); UNION ALL is refused."""
    if isinstance(node, exp.Subquery):
        return _union_parts(node.this)
    if isinstance(node, exp.Union):
        if not node.args.get("distinct"):
            raise _unsupported(node, "UNION ALL in a recursive definition (use UNION: the view is a set's fixpoint)")
        return _union_parts(node.left) + _union_parts(node.right)
    return [node]


def _nulls_first(o: exp.Ordered) -> bool:
    """Spark's default: NULLs first ascending, last descending."""
    nf = o.args.get("nulls_first")
    return bool(nf) if nf is not None else not o.args.get("desc")


def _limit_ranks(rel: Rel, pred: Expr) -> Rel:
    """``rank <= k`` (or ``< k``, ``= 1``) over a projected ranking: the ranking keeps only ranks up to k.

    The filter stays above it, so this only prunes what it would drop.
    """
    if not (isinstance(pred, Call) and pred.op in ("<=", "<", "=") and isinstance(pred.args[0], Col)
            and isinstance(pred.args[1], Lit) and isinstance(pred.args[1].value, int)):
        return rel
    if not (isinstance(rel, Project) and isinstance(rel.input, TopK) and rel.input.limit is None
            and rel.input.rank is not None):
        return rel
    top = rel.input
    e = rel.exprs[pred.args[0].index]
    if not (isinstance(e, Col) and e.index == len(top.input.schema)):
        return rel
    k = pred.args[1].value - (1 if pred.op == "<" else 0)
    if pred.op == "=" and k != 1:
        return rel
    return Project(TopK(top.input, top.partition, top.order, max(k, 0), top.rank, top.rank_name), rel.exprs, rel.names)


def _aggregates(node: exp.Expression) -> list[exp.Expression]:
    """The outermost aggregate calls in ``node``."""
    out = []
    for x in node.find_all(*_AGGS):
        if not any(isinstance(p, tuple(_AGGS)) for p in _ancestors(x)):
            out.append(x)
    return out


def _ancestors(node: exp.Expression):
    p = node.parent
    while p is not None:
        yield p
        p = p.parent


def _conjuncts(node: exp.Expression) -> list[exp.Expression]:
    if isinstance(node, exp.And):
        return _conjuncts(node.left) + _conjuncts(node.right)
    if isinstance(node, exp.Paren):
        return _conjuncts(node.this)
    return [node]


def _need_numbers(node: exp.Expression, *args: Expr) -> None:
    for a in args:
        if a.type not in _NUMERIC:
            raise SchemaError(f"SQL: `{node.sql(dialect='spark')}` needs numbers, got {a.type}")


def _comparable(node: exp.Expression, a: Expr, b: Expr) -> None:
    if "null" in (a.type, b.type) or a.type == b.type or {a.type, b.type} <= {"bigint", "double"}:
        return
    raise SchemaError(f"SQL: cannot compare {a.type} with {b.type} in `{node.sql(dialect='spark')}`")


def _common_type(node: exp.Expression, args: list[Expr]) -> str:
    types = {a.type for a in args} - {"null"}
    if not types:
        return "null"
    if len(types) == 1:
        return types.pop()
    if types <= {"bigint", "double"}:
        return "double"
    raise SchemaError(f"SQL: mixed types {sorted(types)} in `{node.sql(dialect='spark')}`")


def _as_string(a: Expr) -> Expr:
    return a if a.type in ("string", "null") else Call("cast", (a,), "string")


def _check_union(left: Rel, right: Rel, node: exp.Expression) -> None:
    if len(left.schema) != len(right.schema):
        raise SchemaError(f"SQL: UNION of {len(left.schema)} and {len(right.schema)} columns "
                          f"in `{node.sql(dialect='spark')[:80]}`")
    for a, b in zip(left.schema.types, right.schema.types):
        if a != b and not {a, b} <= {"bigint", "double"}:
            raise SchemaError(f"SQL: UNION of {a} and {b} columns in `{node.sql(dialect='spark')[:80]}`")


def _retyped(rel: Rel, like: Schema) -> Rel:
    """``rel`` with bigint columns cast to double where ``like`` has doubles (a UNION's common types)."""
    s = rel.schema
    if all(a == b or b != "double" for a, b in zip(s.types, like.types)):
        return rel
    exprs = tuple(Col(i, t, n) if not (t == "bigint" and like.types[i] == "double") else Call("cast", (Col(i, t, n),), "double")
                  for i, (n, t) in enumerate(zip(s.names, s.types)))
    return Project(rel, exprs, s.names)
