"""``SELECT *`` over a JOIN ... USING (or NATURAL JOIN) that another join follows: refused where sqlglot errs.

sqlglot's qualifier expands ``*`` over ``a JOIN b USING (k) JOIN c ON ...``
without ``c.k``: it takes every later ``k`` for the merged key.  Spark
keeps ``c.k`` (``k, a's, b's, c.k, c's others``).  Rather than return a
column short, such a query is refused at ``flow.sql``, naming the column,
when a relation joined after the USING join has a column of a USING key's
name, or when its columns are not known by name here (a subquery).

>>> from sqlglot import parse_one
>>> schema = {"a": {"k": "BIGINT"}, "b": {"k": "BIGINT"}, "c": {"k": "BIGINT", "x": "BIGINT"}}
>>> check_stars(parse_one("SELECT * FROM a JOIN b USING (k) JOIN c ON b.k = c.x", read="spark"), schema)
Traceback (most recent call last):
  ...
ddflow.errors.SchemaError: SQL: SELECT * over a JOIN ... USING (k) and then a join of c, which has a column k too, is not supported; name the columns (in `SELECT * FROM a JOIN b USING (k) JOIN c ON b.k = c.x`)
"""
from __future__ import annotations

from typing import Mapping

from sqlglot import exp

from ddflow.errors import SchemaError


def _quoted(node: exp.Expression) -> str:
    text = node.sql(dialect="spark")
    return text if len(text) <= 80 else text[:77] + "..."


def _columns(item: exp.Expression, schema: Mapping[str, Mapping[str, str]]) -> set[str] | None:
    """The column names of a FROM item that names a table or view, else None (not known here)."""
    if isinstance(item, exp.Table) and isinstance(item.this, exp.Identifier) and item.name.lower() in schema:
        return {c.lower() for c in schema[item.name.lower()]}
    return None


def check_stars(tree: exp.Expression, schema: Mapping[str, Mapping[str, str]]) -> None:
    """A SchemaError for each ``SELECT *`` the qualifier would expand short (see the module).  O(nodes)."""
    for select in tree.find_all(exp.Select):
        joins = select.args.get("joins") or []
        if not any(isinstance(e, exp.Star) for e in select.expressions):
            continue
        from_ = select.args.get("from_") or select.args.get("from")
        if from_ is None:
            continue
        items = [from_.this] + [j.this for j in joins]
        keys: set[str] = set()
        shown: list[str] = []
        for i, j in enumerate(joins):
            natural = str(j.args.get("method") or "").upper() == "NATURAL"
            if j.args.get("using"):
                new = [k.name.lower() for k in j.args["using"]]
            elif natural:
                left = [_columns(x, schema) for x in items[:i + 1]]
                right = _columns(j.this, schema)
                new = None if right is None or any(c is None for c in left) else sorted(set().union(*left) & right)
            else:
                new = []
            if keys:  # a join after a USING one: a column of a key's name it does not merge would be dropped
                cols = _columns(j.this, schema)
                known = cols is not None and "*" not in keys and new is not None
                clash = sorted((keys & cols) - set(new)) if known else None
                if clash is None or clash:
                    what = f"which has a column {clash[0]} too" if clash else "whose columns are not known here"
                    raise SchemaError(f"SQL: SELECT * over a JOIN ... USING ({', '.join(shown)}) and then a join "
                                      f"of {j.this.alias_or_name}, {what}, is not supported; name the columns "
                                      f"(in `{_quoted(select)}`)")
            if new is None:  # NATURAL over a relation whose columns are not known: any later join may clash
                keys, shown = {"*"}, ["the shared columns"]
                continue
            keys |= set(new)
            shown += [k for k in new if k not in shown]
