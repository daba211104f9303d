"""Clauses Spark accepts that are other clauses in disguise, rewritten on the parsed tree before it is qualified.

- ``LIMIT ALL`` is no limit (an ``OFFSET`` beside it stays).
- ``QUALIFY q`` filters a SELECT's rows after its window functions, before
  its DISTINCT, ORDER BY and LIMIT (Spark's order of evaluation): the
  SELECT without them, with ``q`` as one more column, is a subquery that
  the outer query filters on that column and selects every other column
  of, in order and by the same names.  ``q`` reads what the SELECT reads:
  its tables' columns, its aliases and its window functions; so does an
  ORDER BY key that is not an output column (a hidden column inside).

Each costs what its rewrite costs: QUALIFY one more column and a filter.

>>> import sqlglot
>>> rewritten(sqlglot.parse_one("SELECT a FROM t QUALIFY rank() OVER (ORDER BY b) = 1 LIMIT ALL",
...                             read="spark")).sql("spark")
'SELECT * EXCEPT (__qualify) FROM (SELECT a, RANK() OVER (ORDER BY b) = 1 AS __qualify FROM t) AS __qualified WHERE __qualify'
"""
from __future__ import annotations

from sqlglot import exp

#: The column that holds a QUALIFY condition's value, the subquery that has it, and its ORDER BY keys' columns.
FLAG, QUALIFIED, ORDER_KEY = "__qualify", "__qualified", "__order"


def _rewrite(node: exp.Expression) -> exp.Expression:
    if not isinstance(node, exp.Select):
        return node
    limit = node.args.get("limit")
    if isinstance(limit, exp.Limit) and isinstance(limit.expression, exp.Var) \
            and limit.expression.name.upper() == "ALL":
        node.set("limit", None)
    qualify = node.args.get("qualify")
    if qualify is None:
        return node
    inner = node.copy()
    for key in ("qualify", "order", "limit", "offset", "distinct", "with_"):
        inner.set(key, None)
    hidden = [FLAG]
    inner.append("expressions", exp.alias_(qualify.this.copy(), FLAG))
    order = node.args.get("order")
    if order is not None:  # a key that is not an output column is computed inside, as a hidden column
        order = order.copy()
        outputs = {e.alias_or_name.lower() for e in node.expressions}
        for i, o in enumerate(order.expressions):
            k = o.this
            if (isinstance(k, exp.Column) and not k.table and k.name.lower() in outputs) or \
                    (isinstance(k, exp.Literal) and not k.is_string):  # an output's name, or an ordinal
                continue
            hidden.append(f"{ORDER_KEY}{i}")
            inner.append("expressions", exp.alias_(k.copy(), hidden[-1]))
            o.set("this", exp.column(hidden[-1]))
    inner = rewritten(inner)  # a rewritten node's subtree is not visited again: a QUALIFY inside it is done here
    qualified = exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(QUALIFIED)))
    outer = exp.Select(expressions=[exp.Star(except_=[exp.column(h) for h in hidden])],
                       from_=exp.From(this=qualified), where=exp.Where(this=exp.column(FLAG)))
    if order is not None:
        outer.set("order", order)
    for key in ("limit", "offset", "distinct", "with_"):
        if node.args.get(key) is not None:
            outer.set(key, rewritten(node.args[key]))
    return outer

def rewritten(tree: exp.Expression) -> exp.Expression:
    """``tree`` with the clauses above rewritten (in place where it can be).  O(nodes)."""
    return tree.transform(_rewrite, copy=False)


__all__ = ["rewritten"]
