"""Spark functions that are other expressions in disguise, rewritten on the tree after parsing.

Each is exact, and costs what its rewrite costs.  Scalars: ``isnull(x)`` is
``x IS NULL``, ``isnotnull(x)`` ``x IS NOT NULL``, ``equal_null(a, b)`` is
``a <=> b``, ``zeroifnull(x)`` is ``coalesce(x, 0)`` and ``nullifzero(x)``
``nullif(x, 0)``; ``date_part(field, x)`` and ``datepart`` are
``EXTRACT(field FROM x)`` (the field a constant string, as Spark
requires); ``try_to_date(x)`` and ``try_to_timestamp(x)`` without a
pattern are ``TRY_CAST``; ``decode(x, s1, r1, ..., [default])`` is
``CASE WHEN x <=> s1 THEN r1 ... ELSE default END`` (a NULL ``x`` finds a
NULL search, as in Spark).  Aggregates (COUNTs: O(1) state per group, diff-weighted
sums):

- ``PERCENTILE_CONT(f) WITHIN GROUP (ORDER BY x)`` is ``PERCENTILE(x, f)``
  (``1 - f`` in descending order), and ``PERCENTILE_DISC`` a node of its own;

- ``count_if(c)`` is ``COUNT(CASE WHEN c THEN 1 END)``: the rows where ``c``
  is true (0 when none);
- ``regr_count(y, x)`` is ``COUNT(CASE WHEN y IS NOT NULL THEN x END)``
  (the rows where both are non-NULL), ``regr_avgx(y, x)`` the AVG of that
  and ``regr_avgy(y, x)`` ``AVG(CASE WHEN x IS NOT NULL THEN y END)``, as
  Spark defines them;
- ``bool_and(c)`` and ``every(c)`` are true when no row's ``c`` is false,
  ``bool_or(c)``, ``some(c)`` and ``any(c)`` when some row's is true; NULLs
  are skipped, and a group with no non-NULL ``c`` gives NULL, as in Spark.

Inside an OVER (a window function) they are left as written.

>>> import sqlglot
>>> desugared(sqlglot.parse_one("SELECT count_if(x > 1), bool_or(y) FROM t", read="spark")).sql("spark")
'SELECT COUNT(CASE WHEN x > 1 THEN 1 END), CASE WHEN COUNT(y) = 0 THEN NULL ELSE COUNT(CASE WHEN y THEN 1 END) > 0 END FROM t'
"""
from __future__ import annotations

from sqlglot import exp

from ddflow.sql.dialect import PercentileDisc


def _count_when(cond: exp.Expression) -> exp.Expression:
    return exp.Count(this=exp.Case(ifs=[exp.If(this=cond, true=exp.Literal.number(1))]))


def _all_or_any(arg: exp.Expression, every: bool) -> exp.Expression:
    """``every``: no row false; else some row true; NULL where no row has a value."""
    if every:
        found = exp.EQ(this=_count_when(exp.Not(this=exp.Paren(this=arg.copy()))), expression=exp.Literal.number(0))
    else:
        found = exp.GT(this=_count_when(arg.copy()), expression=exp.Literal.number(0))
    none = exp.EQ(this=exp.Count(this=arg.copy()), expression=exp.Literal.number(0))
    return exp.Case(ifs=[exp.If(this=none, true=exp.Null())], default=found)


def _argument(node: exp.Expression) -> exp.Expression | None:
    if isinstance(node, exp.Anonymous):
        return node.expressions[0] if len(node.expressions) == 1 else None
    arg = node.this
    return arg.this if isinstance(arg, exp.Paren) and isinstance(node, exp.Any) else arg


def _scalar(name: str | None, node: exp.Expression) -> exp.Expression | None:
    """The rewrite of a one-row function above, or None."""
    if isinstance(node, exp.EqualNull):
        return exp.NullSafeEQ(this=node.this, expression=node.expression)
    if isinstance(node, exp.DecodeCase) and len(node.expressions) >= 3:  # decode(x, s1, r1, ..., [default])
        x, *rest = node.expressions
        pairs, default = (rest, None) if len(rest) % 2 == 0 else (rest[:-1], rest[-1])
        return exp.Case(ifs=[exp.If(this=exp.NullSafeEQ(this=x.copy(), expression=pairs[i]), true=pairs[i + 1])
                             for i in range(0, len(pairs), 2)], default=default)
    if name in ("try_to_date", "try_to_timestamp") and len(node.expressions) == 1:  # no pattern: a TRY_CAST
        return exp.TryCast(this=node.expressions[0], to=exp.DataType.build(name.removeprefix("try_to_")), safe=True)
    if name in ("date_part", "datepart") and len(node.expressions) == 2 and node.expressions[0].is_string:
        field, source = node.expressions
        return exp.Extract(this=exp.Var(this=field.name), expression=source)
    if name not in ("isnull", "isnotnull", "zeroifnull", "nullifzero") or len(node.expressions) != 1:
        return None
    x = node.expressions[0]
    if name == "isnull":
        return exp.Paren(this=exp.Is(this=x, expression=exp.Null()))
    if name == "isnotnull":
        return exp.Paren(this=exp.Not(this=exp.Is(this=x, expression=exp.Null())))
    if name == "zeroifnull":
        return exp.Coalesce(this=x, expressions=[exp.Literal.number(0)])
    return exp.Nullif(this=x, expression=exp.Literal.number(0))


def _within_group(node: exp.WithinGroup) -> exp.Expression:
    """PERCENTILE_CONT(f) WITHIN GROUP (ORDER BY x) is PERCENTILE(x, f) (descending: 1 - f, the same
    interpolation from the other end); PERCENTILE_DISC(f) its own node (:class:`ddflow.sql.dialect.PercentileDisc`)."""
    fn, order = node.this, node.expression
    if not isinstance(fn, (exp.PercentileCont, exp.PercentileDisc)) or not isinstance(order, exp.Order) \
            or len(order.expressions) != 1:
        return node
    o = order.expressions[0]
    desc = bool(o.args.get("desc"))
    if isinstance(fn, exp.PercentileDisc):
        return PercentileDisc(this=o.this, quantile=fn.this, desc=exp.true() if desc else None)
    f = fn.this
    if desc:
        f = exp.Sub(this=exp.Literal.number(1), expression=exp.Paren(this=f.copy()))
    return exp.Quantile(this=o.this, quantile=f)


def _rewrite(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.WithinGroup):
        return _within_group(node)
    name = node.name.lower() if isinstance(node, exp.Anonymous) else None
    scalar = _scalar(name, node)
    if scalar is not None:
        return scalar
    if isinstance(node.parent, exp.Window):
        return node
    if isinstance(node, exp.CountIf):
        return _count_when(node.this)
    if isinstance(node, (exp.RegrCount, exp.RegrAvgx, exp.RegrAvgy)):
        y, x = node.this, node.expression
        keep, value = (x, y) if isinstance(node, exp.RegrAvgy) else (y, x)
        paired = exp.Case(ifs=[exp.If(this=exp.Not(this=exp.Is(this=keep.copy(), expression=exp.Null())),
                                      true=value.copy())])
        return exp.Count(this=paired) if isinstance(node, exp.RegrCount) else exp.Avg(this=paired)
    every = isinstance(node, exp.LogicalAnd) or name == "every"
    some = isinstance(node, exp.LogicalOr) or name == "some" or \
        (isinstance(node, exp.Any) and not isinstance(node.parent, (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT,
                                                                    exp.LTE)))
    if every or some:
        arg = _argument(node)
        if arg is not None:
            return _all_or_any(arg, every)
    return node


def desugared(tree: exp.Expression) -> exp.Expression:
    """``tree`` with the aggregates above rewritten (in place).  O(nodes)."""
    return tree.transform(_rewrite, copy=False)
