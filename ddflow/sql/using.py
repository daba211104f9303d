"""``t.*`` beside a JOIN ... USING or NATURAL JOIN, as Spark expands it.

sqlglot's qualifier rewrites ``a JOIN b USING (k)`` as ``ON a.k = b.k``
with ``COALESCE(a.k, b.k) AS k`` for ``*``, but expands ``b.*`` to all of
``b``'s columns.  Spark hides the merged key from the side it does not
keep: ``b.*`` in an inner or left join, ``a.*`` in a right join, both in
a full join (``SELECT a.*, b.* FROM a FULL JOIN b USING (k)`` has no
``k``).  So before the qualifier runs, each such ``t.*`` is written out
as ``t``'s columns without the key; where ``t``'s columns are not known
by name here (a subquery, a join of several relations before it) it is
refused rather than expanded otherwise.

>>> from sqlglot import parse_one
>>> tree = parse_one("SELECT a.*, b.* FROM a JOIN b USING (k)", read="spark")
>>> expand_stars(tree, {"a": {"k": "BIGINT", "x": "BIGINT"}, "b": {"k": "BIGINT", "y": "BIGINT"}}).sql()
'SELECT a.*, b.y FROM a JOIN b USING (k)'
"""
from __future__ import annotations

from typing import Mapping

from sqlglot import exp

from ddflow.errors import SchemaError


def _quoted(node: exp.Expression) -> str:
    text = node.sql(dialect="spark")
    return text if len(text) <= 80 else text[:77] + "..."


def expand_stars(tree: exp.Expression, schema: Mapping[str, Mapping[str, str]]) -> exp.Expression:
    """``tree`` with each ``t.*`` of a USING / NATURAL join's hidden side written out (in place).  O(nodes)."""
    for select in list(tree.find_all(exp.Select)):
        joins = select.args.get("joins") or []
        merged = [j for j in joins if j.args.get("using") or str(j.args.get("method") or "").upper() == "NATURAL"]
        stars = [e for e in select.expressions if isinstance(e, exp.Column) and isinstance(e.this, exp.Star)]
        if not merged or not stars:
            continue
        from_ = select.args.get("from_") or select.args.get("from")
        items = [from_.this] + [j.this for j in joins] if from_ is not None else [j.this for j in joins]
        by_alias = {i.alias_or_name.lower(): i for i in items}

        def columns(alias: str, star: exp.Expression) -> list[str] | None:
            item = by_alias.get(alias)
            if isinstance(item, exp.Table) and isinstance(item.this, exp.Identifier) \
                    and item.name.lower() in schema:
                return list(schema[item.name.lower()])
            return None

        hidden: dict[str, set[str]] = {}
        for j in merged:
            i = joins.index(j)
            right = j.this.alias_or_name.lower()
            left = items[i].alias_or_name.lower()  # the relation just before the join
            several = i > 0
            if j.args.get("using"):
                keys = {k.name.lower() for k in j.args["using"]}
            else:
                lc, rc = columns(left, j), columns(right, j)
                if lc is None or rc is None or several:
                    keys = None
                else:
                    keys = {c.lower() for c in lc} & {c.lower() for c in rc}
            side, kind = (j.side or "").upper(), (j.kind or "").upper()
            if kind in ("SEMI", "ANTI"):
                continue
            sides = {"RIGHT": [left], "FULL": [left, right]}.get(side, [right])
            for s in sides:
                if keys is None or (several and s == left):
                    hidden[s] = None  # type: ignore[assignment]
                else:
                    hidden.setdefault(s, set()).update(keys)
        for star in stars:
            t = star.table.lower()
            if not t or t not in hidden:
                continue
            cols = columns(t, star)
            if cols is None or hidden[t] is None:
                raise SchemaError(f"SQL: `{star.sql(dialect='spark')}` beside a JOIN ... USING or NATURAL JOIN is "
                                  f"supported only for a table or view named directly, the first in its join "
                                  f"(in `{_quoted(select)}`)")
            kept = [exp.column(c, table=star.table) for c in cols if c.lower() not in hidden[t]]
            if not kept:
                raise SchemaError(f"SQL: `{star.sql(dialect='spark')}` has no columns beside the USING keys "
                                  f"(in `{_quoted(select)}`)")
            first, *rest = kept
            star.replace(first)
            at = select.expressions.index(first)
            select.set("expressions", select.expressions[:at + 1] + rest + select.expressions[at + 1:])
    return tree
