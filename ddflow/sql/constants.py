"""Relations that read no table: ``SELECT`` without FROM, ``VALUES`` lists and ``range(...)``.

They are constant collections (:class:`~ddflow.plan.ir.Values`, there
from time 0 on and never changed), so they cost nothing per step and
join, union and nest like any table.  ``range`` is Spark's: one column
``id`` (bigint) of ``start, start + step, ...`` up to ``end`` (excluded),
given to sqlglot's qualifier as a table of its own name.  A ``VALUES``
list is a UNION ALL of one projected row per tuple over the one-row
constant (so its NULLs and typed literals go through the expression
kernels like any other), each column at the common type of its rows;
unnamed, its columns are ``col1, col2, ...`` as Spark names them.

>>> import sqlglot
>>> from ddflow.sql.nesting import parsed
>>> tree = parsed("SELECT id FROM range(1, 7, 2)")[0]
>>> rels = named_ranges(tree)
>>> [(name, rel.rows) for name, rel in rels.items()]
[('__range_0', ((1,), (3,), (5,)))]
"""
from __future__ import annotations

from sqlglot import exp

from ddflow.base.schema import Schema
from ddflow.errors import SchemaError
from ddflow.plan.ir import Project, Rel, Union, Values

#: The most rows a ``range(...)`` may hold: its rows are built at plan time and kept in memory.
MAX_RANGE_ROWS = 1_000_000
#: The one row a SELECT without FROM reads (its column is never visible).
ONE = Values(Schema(("_one",), ("bigint",)), ((0,),))


def _quoted(node: exp.Expression) -> str:
    text = node.sql(dialect="spark")
    return text if len(text) <= 80 else text[:77] + "..."


def _whole(node: exp.Expression, call: exp.Expression) -> int:
    """A whole-number constant argument of ``call`` (``-3`` included)."""
    neg = isinstance(node, exp.Neg)
    lit = node.this if neg else node
    if isinstance(lit, exp.Paren):
        lit = lit.this
    if not (isinstance(lit, exp.Literal) and not lit.is_string and lit.this.lstrip("-").isdigit()):
        raise SchemaError(f"SQL: range() takes whole-number constants, not `{node.sql(dialect='spark')}` "
                          f"(in `{_quoted(call)}`)")
    return -int(lit.this) if neg else int(lit.this)


def range_rows(call: exp.Expression) -> tuple[tuple[int], ...]:
    """The rows of Spark's ``range(end)``, ``range(start, end[, step[, partitions]])``.  O(rows).

    >>> from sqlglot import parse_one
    >>> range_rows(parse_one("range(5, 0, -2)", read="spark"))
    ((5,), (3,), (1,))
    """
    args = [_whole(a, call) for a in call.expressions]
    if not 1 <= len(args) <= 4:
        raise SchemaError(f"SQL: range() takes 1 to 4 arguments, not {len(args)} (in `{_quoted(call)}`)")
    start, end = (0, args[0]) if len(args) == 1 else (args[0], args[1])
    step = args[2] if len(args) >= 3 else 1
    if step == 0:
        raise SchemaError(f"SQL: range() needs a step other than 0 (in `{_quoted(call)}`)")
    r = range(start, end, step)
    if len(r) > MAX_RANGE_ROWS:
        raise SchemaError(f"SQL: range() of {len(r):,} rows is more than the {MAX_RANGE_ROWS:,} ddflow builds "
                          f"(in `{_quoted(call)}`)")
    return tuple((i,) for i in r)


def named_ranges(tree: exp.Expression) -> dict[str, Rel]:
    """Each ``range(...)`` in FROM replaced, in ``tree``, by a table of a name of its own; those names' rows.

    Also names the columns of every ``VALUES`` list written without
    names ``col1, col2, ...`` (Spark's names), and reads ``x IN (VALUES
    ...)`` as ``x IN (SELECT * FROM VALUES ...)``.  Any other function in
    FROM is refused by name.  O(nodes).
    """
    out: dict[str, Rel] = {}
    for node in list(tree.find_all(exp.In)):  # x IN (VALUES ...) is x IN (SELECT * FROM VALUES ...)
        items = node.expressions
        inner = items[0].this if len(items) == 1 and isinstance(items[0], (exp.Paren, exp.Subquery)) else \
            items[0] if len(items) == 1 else None
        if isinstance(inner, exp.Values):
            node.set("expressions", [])
            node.set("query", exp.Subquery(this=exp.select("*").from_(inner.copy())))
    for t in list(tree.find_all(exp.Table)):
        fn = t.this
        if not isinstance(fn, exp.Func):
            continue
        name = (fn.name if isinstance(fn, exp.Anonymous) else fn.sql_name()).lower()
        if name != "range":
            if name in ("explode", "posexplode", "inline", "explode_outer", "posexplode_outer", "inline_outer"):
                raise SchemaError(f"SQL: {name} needs ARRAY columns, not supported (in `{_quoted(t)}`)")
            raise SchemaError(f"SQL: the table function {name}() in FROM is not supported (in `{_quoted(t)}`)")
        rows = range_rows(fn)
        table = f"__range_{len(out)}"
        alias = t.args.get("alias")
        cols = alias.columns if alias is not None else []
        if len(cols) > 1:
            raise SchemaError(f"SQL: range() has one column, `{_quoted(t)}` names {len(cols)}")
        col = cols[0].name if cols else "id"
        out[table] = Values(Schema((col,), ("bigint",)), rows)
        new = exp.Table(this=exp.to_identifier(table))
        if alias is not None and alias.name:
            new.set("alias", exp.TableAlias(this=exp.to_identifier(alias.name)))
        t.replace(new)
    for v in tree.find_all(exp.Values):
        rows = v.expressions
        if not rows:
            continue
        alias = v.args.get("alias")
        last = rows[-1].expressions[-1] if isinstance(rows[-1], exp.Tuple) and rows[-1].expressions else None
        if isinstance(last, exp.Alias) and (alias is None or not alias.name):
            # ``VALUES 1, 2, 3 AS data(a)``: sqlglot reads ``3 AS data``; the name is the table's
            last.replace(last.this)
            alias = exp.TableAlias(this=last.args["alias"], columns=alias.columns if alias is not None else [])
            v.set("alias", alias)
        if alias is None or not alias.columns:
            width = len(rows[0].expressions) if isinstance(rows[0], exp.Tuple) else 1
            names = [exp.to_identifier(f"col{i + 1}") for i in range(width)]
            v.set("alias", exp.TableAlias(this=alias.this if alias is not None else None, columns=names))
    return out


def values_rel(node: exp.Values, cell, aligned) -> Rel:
    """A VALUES list as the UNION ALL of its rows, each a projection of :data:`ONE`.

    ``cell(node)`` plans a constant expression; ``aligned(rels, node)``
    casts the rows' columns to their common type (the set operations').
    O(cells).
    """
    alias = node.args.get("alias")
    names = tuple(c.name for c in alias.columns)
    rels = []
    for row in node.expressions:
        items = row.expressions if isinstance(row, exp.Tuple) else [row]
        if len(items) != len(names):
            raise SchemaError(f"SQL: a VALUES row of {len(items)} values where {len(names)} columns are named "
                              f"(in `{_quoted(node)}`)")
        items = [x.this if isinstance(x, exp.Alias) else x for x in items]  # ("one", 1 AS one): the name goes
        for x in items:
            if x.find(exp.Column, exp.Select, exp.Subquery) is not None:
                raise SchemaError(f"SQL: VALUES takes constants, not `{x.sql(dialect='spark')}` "
                                  f"(in `{_quoted(node)}`)")
        rels.append(Project(ONE, tuple(cell(x) for x in items), names))
    parts = aligned(rels, node)
    return parts[0] if len(parts) == 1 else Union(tuple(parts), all=True)
