"""PIVOT and UNPIVOT in FROM, rewritten on the tree into the grouped aggregate and the UNION ALL they mean.

``X PIVOT (agg(a) [AS n], ... FOR k IN (v1 [AS m1], ...))`` groups X by
its columns that neither the aggregates nor ``k`` read, and computes each
aggregate once per value, over the rows where ``k <=> v``:
``agg(CASE WHEN k <=> v THEN a END)``, NULL where no row has the value
(a COUNT too, as Spark's pivot gives).  A column is named for its value
(its alias, or the value as text), then ``_`` and the aggregate's alias
(or text) when there are several aggregates, as Spark names them.  It is
one grouped aggregate, so it costs what that aggregate costs (O(1) state
per group and value for COUNT, SUM and AVG).

``X UNPIVOT [INCLUDE NULLS] (v FOR k IN (c1 [AS n1], ...))`` is one
``SELECT others, 'c1' AS k, c1 AS v FROM X`` per column, UNION ALL, the
rows whose ``v`` is NULL left out unless INCLUDE NULLS: O(columns) per
row.

>>> import sqlglot
>>> q = sqlglot.parse_one("SELECT * FROM t PIVOT (SUM(n) FOR s IN ('a', 'b'))", read="spark")
>>> t = q.args["from_"].this
>>> rewritten(t, t.args["pivots"][0], ("g", "s", "n")).sql("spark")
"(SELECT `g`, SUM(CASE WHEN s IS NOT DISTINCT FROM 'a' THEN n END) AS `a`, SUM(CASE WHEN s IS NOT DISTINCT FROM 'b' THEN n END) AS `b` FROM t GROUP BY `g`) AS t"
"""
from __future__ import annotations

from typing import Sequence

from sqlglot import exp

from ddflow.sql.library import refusal


def rewritten(source: exp.Expression, pivot: exp.Pivot, names: Sequence[str]) -> exp.Subquery:
    """The subquery ``source`` with ``pivot`` means; ``names`` are ``source``'s columns.  O(size of the pivot)."""
    bare = source.copy()
    bare.set("pivots", None)
    alias = pivot.alias or source.alias_or_name
    fields = pivot.args.get("fields") or []
    if len(fields) != 1 or not isinstance(fields[0], exp.In):
        raise refusal(pivot, "a PIVOT or UNPIVOT with other than one FOR ... IN (...)")
    body = _unpivot(bare, pivot, fields[0], names) if pivot.args.get("unpivot") else \
        _pivot(bare, pivot, fields[0], names)
    return exp.Subquery(this=body, alias=exp.TableAlias(this=exp.to_identifier(alias)))


def _pivot(source: exp.Expression, pivot: exp.Pivot, field: exp.In, names: Sequence[str]) -> exp.Select:
    keys = field.this.expressions if isinstance(field.this, exp.Tuple) else [field.this]
    aggs = list(pivot.expressions)
    read = {c.name.lower() for x in (*aggs, *keys) for c in x.find_all(exp.Column)}
    read |= {k.name.lower() for k in keys if isinstance(k, exp.Identifier)}
    group = [n for n in names if n.lower() not in read]
    items: list[exp.Expression] = [exp.column(exp.to_identifier(n, quoted=True)) for n in group]
    # The names sqlglot gave the pivot's columns when it parsed it (a SELECT * above was expanded with them).
    given = [c.name for c in pivot.args.get("columns") or []]
    for value in field.expressions:
        label, v = (value.alias, value.this) if isinstance(value, exp.PivotAlias) else (None, value)
        parts = v.expressions if isinstance(v, exp.Tuple) else [v]
        if len(parts) != len(keys):
            raise refusal(value, f"a PIVOT value of {len(parts)} parts for {len(keys)} columns")
        if label is None:
            if not isinstance(v, (exp.Literal, exp.Neg, exp.Null, exp.Boolean)):
                raise refusal(value, "an unaliased PIVOT value other than a literal (name it with AS)")
            label = v.name if isinstance(v, exp.Literal) else v.sql(dialect="spark").lower()
        cond = exp.and_(*(exp.NullSafeEQ(this=k.copy(), expression=p.copy()) for k, p in zip(keys, parts)))
        for a in aggs:
            agg, aname = (a.this, a.alias) if isinstance(a, exp.Alias) else (a, None)
            if not isinstance(agg, exp.AggFunc):
                raise refusal(a, "a PIVOT expression other than an aggregate")
            name = label if len(aggs) == 1 else f"{label}_{aname or agg.sql(dialect='spark').lower()}"
            if len(given) == len(field.expressions) * len(aggs):
                name = given[len(items) - len(group)]
            cell = _only_where(agg, cond)
            if isinstance(agg, exp.Count):  # a value no row has is NULL, as Spark's pivot gives, not 0
                none = exp.EQ(this=exp.Count(this=exp.Case(ifs=[exp.If(this=cond.copy(), true=exp.Literal.number(1))])),
                              expression=exp.Literal.number(0))
                cell = exp.Case(ifs=[exp.If(this=none, true=exp.Null())], default=cell)
            items.append(exp.alias_(cell, exp.to_identifier(name, quoted=True)))
    select = exp.select(*items).from_(source)
    if group:
        select = select.group_by(*(exp.column(exp.to_identifier(n, quoted=True)) for n in group))
    return select


def _only_where(agg: exp.AggFunc, cond: exp.Expression) -> exp.Expression:
    """``agg`` over the rows where ``cond`` holds: each argument it reads as ``CASE WHEN cond THEN arg END``."""
    out = agg.copy()
    for key in ("this", "expression"):
        arg = out.args.get(key)
        if arg is None or (key == "expression" and not isinstance(arg, exp.Expression)):
            continue
        if isinstance(arg, exp.Distinct):
            raise refusal(agg, "an aggregate of DISTINCT values in PIVOT")
        value = exp.Literal.number(1) if isinstance(arg, exp.Star) else arg
        out.set(key, exp.Case(ifs=[exp.If(this=cond.copy(), true=value)]))
    return out


def _unpivot(source: exp.Expression, pivot: exp.Pivot, field: exp.In, names: Sequence[str]) -> exp.Expression:
    values = list(pivot.expressions)
    if len(values) != 1 or isinstance(values[0], exp.Tuple):
        raise refusal(pivot, "an UNPIVOT of several value columns")
    value = values[0].name
    key = field.this.name
    columns = []
    for c in field.expressions:
        col, label = (c.this, c.alias) if isinstance(c, exp.PivotAlias) else (c, None)
        if not isinstance(col, exp.Column):
            raise refusal(c, "an UNPIVOT of other than columns")
        columns.append((col, label or col.name))
    taken = {col.name.lower() for col, _ in columns}
    others = [exp.column(exp.to_identifier(n, quoted=True)) for n in names if n.lower() not in taken]
    include = bool(pivot.args.get("include_nulls"))
    branches = []
    for col, label in columns:
        branch = exp.select(*(o.copy() for o in others), exp.alias_(exp.Literal.string(label), key),
                            exp.alias_(col.copy(), value)).from_(source.copy())
        if not include:
            branch = branch.where(exp.Not(this=exp.Is(this=col.copy(), expression=exp.Null())))
        branches.append(branch)
    out = branches[0]
    for b in branches[1:]:
        out = exp.union(out, b, distinct=False)
    return out
