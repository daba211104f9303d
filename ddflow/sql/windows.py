"""Window functions (``f(...) OVER (...)``, ``WINDOW w AS (...)``) and grouping sets, planned from sqlglot's nodes.

A mixin of the planner (it calls ``self.expr``).  Window functions of one
SELECT are grouped by their PARTITION BY and ORDER BY, and by how they can
be lowered (:func:`~ddflow.plan.window.lowered_as`: whole-partition
aggregates and bounded RANGE frames apart from the rest): each group is one
:class:`~ddflow.plan.ir.Window` (a lone ROW_NUMBER, RANK or DENSE_RANK a
:class:`~ddflow.plan.ir.TopK`, so ``rank <= k`` above it still limits it),
stacked on the rows (or, after GROUP BY, on the groups: ``SUM(SUM(x)) OVER``).
GROUPING SETS, ROLLUP and CUBE are one :class:`~ddflow.plan.ir.Union` of the
rows re-keyed once per set (the columns outside the set NULL, then the set's
``grouping_id`` and ``grouping`` flags), under one aggregate.
"""
from __future__ import annotations

import decimal
import itertools

from sqlglot import exp

from ddflow.base.schema import decimal_ps
from ddflow.errors import SchemaError
from ddflow.plan.expr import Col, Expr, Lit
from ddflow.plan.functions import TypeMismatch
from ddflow.plan.functions import common_type as common_types
from ddflow.plan.ir import RANKS, Order, Project, Rel, TopK, Union
from ddflow.plan.window import FRAMED, WINDOW_FUNCS, Frame, WinFunc, Window, lowered_as
from ddflow.sql.scalars import AGGREGATES, retyped_expr, unsupported

_FUNCS = {**AGGREGATES, exp.RowNumber: "row_number", exp.Rank: "rank", exp.DenseRank: "dense_rank",
          exp.PercentRank: "percent_rank", exp.CumeDist: "cume_dist", exp.Ntile: "ntile", exp.Lag: "lag",
          exp.Lead: "lead", exp.FirstValue: "first_value", exp.LastValue: "last_value", exp.NthValue: "nth_value",
          exp.First: "first_value", exp.Last: "last_value"}  # Spark's first(x) and last(x) over a window: ordered
_ORDERED = RANKS + ("percent_rank", "cume_dist", "ntile", "lag", "lead")  # Spark: these need an ORDER BY


def window_operands(w: exp.Window) -> list[exp.Expression]:
    """What a window reads besides its function: the function's arguments, PARTITION BY and ORDER BY (where an
    aggregate of the groups below may stand: ``SUM(SUM(x)) OVER (ORDER BY SUM(y))``)."""
    fn = w.this
    while isinstance(fn, (exp.IgnoreNulls, exp.RespectNulls)):
        fn = fn.this
    out = list(fn.iter_expressions()) if isinstance(fn, exp.Expression) else []
    out += list(w.args.get("partition_by") or [])
    order = w.args.get("order")
    if order is not None:
        out += [o.this for o in order.expressions]
    return out


def windows_in(node: exp.Expression) -> list[exp.Window]:
    """The window functions in ``node``, outermost, in written order, not those of its subqueries."""
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        if isinstance(n, exp.Window):
            out.append(n)
            continue
        if n is not node and isinstance(n, (exp.Select, exp.Subquery, exp.Exists)):
            continue
        stack.extend(reversed(list(n.iter_expressions())))
    return out


def has_grouping_sets(group: exp.Group | None) -> bool:
    return group is not None and (bool(group.args.get("rollup") or group.args.get("cube"))
                                  or any(isinstance(g, (exp.Rollup, exp.Cube, exp.GroupingSets))
                                         for g in group.expressions))


class WindowPlanning:
    """The planner's window functions and grouping sets (mixed into it)."""

    # -- window functions -----------------------------------------------------------------------
    def refuse_misplaced_windows(self, node: exp.Select, aggs: list[exp.Expression]) -> None:
        """Window functions only in the SELECT list (Spark: not in WHERE, GROUP BY, HAVING or an aggregate);
        ``grouping()`` and ``grouping_id()`` only with GROUPING SETS, ROLLUP or CUBE."""
        if not has_grouping_sets(node.args.get("group")):
            for part in (node.args.get("expressions") or []) + [node.args.get("having")]:
                g = part.find(exp.Grouping, exp.GroupingId) if part is not None else None
                if g is not None:
                    raise unsupported(g, f"{'grouping_id' if isinstance(g, exp.GroupingId) else 'grouping'}() "
                                         "without GROUPING SETS, ROLLUP or CUBE")
        for key, where in (("where", "WHERE"), ("group", "GROUP BY"), ("having", "HAVING")):
            part = node.args.get(key)
            found = windows_in(part) if part is not None else []
            if found:
                raise unsupported(found[0], f"a window function in {where}")
        for a in aggs:
            found = [w for x in a.iter_expressions() for w in windows_in(x)]
            if found:
                raise unsupported(found[0], "a window function inside an aggregate")

    def windows(self, rel: Rel, scope, items: list[exp.Expression], named: list[exp.Window], replace: dict):
        """``(rel, added, replace)``: ``rel`` with a column per window function of ``items`` (``added``: their
        positions and types), ``replace`` mapping each function's text to its column."""
        nodes = [w for item in items for w in windows_in(item)]
        if not nodes:
            return rel, [], replace
        defs = {}
        for d in named:
            if d.args.get("alias") is not None or not isinstance(d.this, exp.Identifier):
                raise unsupported(d, "a named window defined by another")
            defs[d.this.name.lower()] = d
        replace = dict(replace)
        groups: dict[tuple, list[tuple[str, WinFunc]]] = {}
        seen = set()
        for w in nodes:
            text = w.sql(dialect="spark")
            if text in seen:
                continue
            seen.add(text)
            for x in window_operands(w):
                if windows_in(x):
                    raise unsupported(w, "a window function inside another window")
            part_nodes, order_node, spec = _resolved(w, defs)
            part = tuple(self.expr(p, scope, replace) for p in part_nodes)
            order = tuple(Order(self.expr(o.this, scope, replace), bool(o.args.get("desc")), _nulls_first(o))
                          for o in (order_node.expressions if order_node is not None else ()))
            f = self.win_func(w, spec, order, scope, replace)
            groups.setdefault((part, order, lowered_as(f, bool(order))), []).append((text, f))
        added = []
        for (part, order, _), fs in groups.items():
            n = len(rel.schema)
            if len(fs) == 1 and fs[0][1].func in RANKS:
                rel = TopK(rel, part, order, None, fs[0][1].func, "_rank")
            else:
                rel = Window(rel, part, order, tuple(f for _, f in fs), tuple(f"_w{n + j}" for j in range(len(fs))))
            for j, (text, f) in enumerate(fs):
                replace[text] = Col(n + j, f.type, text)
                added.append((n + j, f.type))
        return rel, added, replace

    def win_func(self, w: exp.Window, spec: exp.WindowSpec | None, order: tuple[Order, ...], scope,
                 replace: dict) -> WinFunc:
        fn, ignore = w.this, False
        while isinstance(fn, (exp.IgnoreNulls, exp.RespectNulls)):
            ignore = ignore or isinstance(fn, exp.IgnoreNulls)
            fn = fn.this
        kind = _FUNCS.get(type(fn))
        if isinstance(fn, exp.Filter):
            raise unsupported(w, "an aggregate with FILTER over a window")
        if kind not in WINDOW_FUNCS:
            raise unsupported(w, f"the window function {fn.sql(dialect='spark').split('(')[0].upper()}")
        name = kind.upper()
        if ignore and kind not in ("first_value", "last_value", "nth_value", "lag", "lead"):
            raise unsupported(w, f"IGNORE NULLS in {name}")
        if kind in _ORDERED and not order:
            raise unsupported(w, f"{name} without ORDER BY in its window (Spark requires one)")
        if kind not in FRAMED and spec is not None:
            raise unsupported(w, f"a window frame for {name}")
        def e(x: exp.Expression) -> Expr:  # a bare NULL argument is a bigint NULL, as a NULL column is stored
            got = self.expr(x, scope, replace)
            return retyped_expr(got, "bigint") if got.type == "null" and x is not fn.args.get("this") or \
                got.type == "null" and fn.args.get("default") is None else got
        arg = fn.this if kind not in ("ntile",) + RANKS + ("percent_rank", "cume_dist") else None
        if kind in AGGREGATES.values():
            if isinstance(arg, exp.Distinct):
                raise unsupported(w, f"{name}(DISTINCT ...) over a window")
            if kind == "count" and isinstance(arg, exp.Star):
                return WinFunc("count_star", frame=self.frame(w, spec, order))
            a = e(arg)
            if kind in ("sum", "avg") and not (a.type in ("bigint", "double", "null") or decimal_ps(a.type)):
                raise SchemaError(f"SQL: {name} needs a number, got {a.type} in `{w.sql(dialect='spark')}`")
            return WinFunc(kind, a, frame=self.frame(w, spec, order))
        if kind == "ntile":
            return WinFunc(kind, n=_count(fn.this, w, "NTILE's bucket count", 1))
        if kind in ("lag", "lead"):
            a = e(arg)
            n = _count(fn.args.get("offset"), w, f"{name}'s offset", None) if fn.args.get("offset") else 1
            if ignore and n < 1:
                raise unsupported(w, f"IGNORE NULLS in {name} with an offset under 1")
            d = fn.args.get("default")
            if d is None:
                return WinFunc(kind, a, n, ignore_nulls=ignore)
            dv = e(d)
            try:
                common_types([a.type, dv.type], "LAG/LEAD's value and default")
            except TypeMismatch:
                raise SchemaError(f"SQL: {name}'s default ({dv.type}) does not meet its value ({a.type}) in "
                                  f"`{w.sql(dialect='spark')}`") from None
            if a.type == "null":
                return WinFunc(kind, retyped_expr(a, dv.type), n, dv, ignore)
            return WinFunc(kind, a, n, retyped_expr(dv, a.type), ignore)  # Spark casts the default to the value's type
        if kind in ("first_value", "last_value", "nth_value"):
            extra = [k for k, v in fn.args.items() if v is not None and k not in ("this", "offset")]
            if extra:
                raise unsupported(w, f"{name} with more arguments")
            n = _count(fn.args.get("offset"), w, "NTH_VALUE's position", 1) if kind == "nth_value" else 1
            return WinFunc(kind, e(arg), n, ignore_nulls=ignore, frame=self.frame(w, spec, order))
        return WinFunc(kind)

    def frame(self, w: exp.Window, spec: exp.WindowSpec | None, order: tuple[Order, ...]) -> Frame:
        """The frame of a window function that reads one; Spark's default without a frame clause."""
        if spec is None:
            return Frame(False, None, 0) if order else Frame(True, None, None)
        if spec.args.get("exclude"):
            raise unsupported(w, "EXCLUDE in a window frame")
        rows = spec.args.get("kind", "").upper() == "ROWS"
        words = f"{'ROWS' if rows else 'RANGE'} frame"
        bounds = []
        for which in ("start", "end"):
            b, side = spec.args.get(which), (spec.args.get(f"{which}_side") or "").upper()
            if b is None and which == "end":
                b = "CURRENT ROW"
            if isinstance(b, str) and b.upper() == "UNBOUNDED":
                if (which == "start") != (side == "PRECEDING"):
                    raise SchemaError(f"SQL: a frame cannot {'start' if which == 'start' else 'end'} at UNBOUNDED "
                                      f"{side} in `{w.sql(dialect='spark')}`")
                bounds.append(None)
                continue
            if isinstance(b, str) and b.upper() == "CURRENT ROW":
                bounds.append(0)
                continue
            value = _offset(b, w, rows, order)
            bounds.append(-value if side == "PRECEDING" else value)
        lo, hi = bounds
        if lo is not None and hi is not None and lo > hi:
            raise SchemaError(f"SQL: the {words} starts after it ends in `{w.sql(dialect='spark')}`")
        return Frame(rows, lo, hi)

    # -- grouping sets -----------------------------------------------------------------------------
    def grouping_sets(self, rel: Rel, scope, group: exp.Group, uses: list[exp.Expression]):
        """``(rel, sets, keys, flags)`` for GROUPING SETS, ROLLUP and CUBE: ``rel`` is the union of the rows
        re-keyed per set (the input's columns, each grouping column or NULL, ``grouping_id``, one
        ``grouping`` flag per column, and the set's position where sets repeat); ``keys`` the grouping
        columns as ``(text, Col)``; ``flags`` the texts of ``grouping(...)`` / ``grouping_id(...)`` in ``uses``
        and the position of their column among the aggregate's group keys."""
        columns: dict[str, exp.Expression] = {}

        def col(g: exp.Expression) -> str:
            g = g.this if isinstance(g, exp.Paren) else g
            if isinstance(g, exp.Anonymous) and g.name.lower() in ("window", "session_window"):
                raise unsupported(group, f"{g.name}() in GROUPING SETS, ROLLUP or CUBE")
            text = g.sql(dialect="spark")
            columns.setdefault(text, g)
            return text

        def members(g: exp.Expression) -> list[str]:
            if isinstance(g, exp.Tuple):
                return [col(x) for x in g.expressions]
            return [col(g)]

        sets: list[list[str]] = [[]]
        plain = []
        for g in group.expressions:
            if isinstance(g, exp.Rollup):
                cols = [members(x) for x in g.expressions]
                options = [sum(cols[:k], []) for k in range(len(cols), -1, -1)]
            elif isinstance(g, exp.Cube):
                cols = [members(x) for x in g.expressions]
                options = [sum((c for c, keep in zip(cols, bits) if keep), [])
                           for bits in itertools.product((True, False), repeat=len(cols))]
            elif isinstance(g, exp.GroupingSets):
                options = [[] if isinstance(s, exp.Tuple) and not s.expressions else members(s.this)
                           if isinstance(s, exp.Paren) else members(s) for s in g.expressions]
            else:
                plain.append(g)
                options = [members(g)]
            sets = [s + o for s in sets for o in options]
        if group.args.get("rollup") or group.args.get("cube"):  # GROUP BY a, b WITH ROLLUP / WITH CUBE
            cols = [members(x) for x in plain]
            if group.args.get("rollup"):
                options = [sum(cols[:k], []) for k in range(len(cols), -1, -1)]
            else:
                options = [sum((c for c, keep in zip(cols, bits) if keep), [])
                           for bits in itertools.product((True, False), repeat=len(cols))]
            sets = options
        names = list(columns)
        m = len(names)
        exprs = [self.expr(columns[t], scope) for t in names]
        k = len(rel.schema)
        repeated = len({frozenset(s) for s in sets}) < len(sets)
        parts = []
        for p, s in enumerate(sets):
            bits = [int(t not in s) for t in names]
            gid = sum(b << (m - 1 - j) for j, b in enumerate(bits))
            row = [Col(i, t, n) for i, (n, t) in enumerate(zip(rel.schema.names, rel.schema.types))]
            row += [x if t in s else Lit(None, x.type if x.type != "null" else "bigint") for t, x in zip(names, exprs)]
            row += [Lit(gid, "bigint")] + [Lit(b, "bigint") for b in bits] + ([Lit(p, "bigint")] if repeated else [])
            extra = tuple(f"_g{j}" for j in range(m)) + ("_gid",) + tuple(f"_flag{j}" for j in range(m))
            parts.append(Project(rel, tuple(row), rel.schema.names + extra + (("_set",) if repeated else ())))
        union = Union(tuple(parts), all=True) if len(parts) > 1 else parts[0]
        keys = [(t, Col(k + j, exprs[j].type if exprs[j].type != "null" else "bigint", str(exprs[j])))
                for j, t in enumerate(names)]
        hidden_names = ("grouping_id",) + tuple(f"grouping({exprs[j]})" for j in range(m)) + (("set",) if repeated else ())
        hidden = [Col(k + m + j, "bigint", name) for j, name in enumerate(hidden_names)]
        flags: dict[str, int] = {}
        for node in uses:
            for g in node.find_all(exp.Grouping, exp.GroupingId):
                args = [col_text(a) for a in g.expressions]
                if isinstance(g, exp.GroupingId):
                    if args and args != names:
                        raise unsupported(g, "grouping_id() of columns other than the GROUP BY's, in its order")
                    flags[g.sql(dialect="spark")] = m  # grouping_id, after the m grouping columns
                    continue
                if len(args) != 1 or args[0] not in names:
                    raise SchemaError(f"SQL: grouping() takes one of the grouping columns ({', '.join(names)}), got "
                                      f"`{g.sql(dialect='spark')}`")
                flags[g.sql(dialect="spark")] = m + 1 + names.index(args[0])
        return union, keys, hidden, flags


def col_text(g: exp.Expression) -> str:
    return (g.this if isinstance(g, exp.Paren) else g).sql(dialect="spark")


def _resolved(w: exp.Window, defs: dict[str, exp.Window]):
    """PARTITION BY, ORDER BY and frame of ``w``, a named window's filled in (``OVER w``, ``OVER (w ORDER BY ...)``)."""
    part, order, spec = w.args.get("partition_by"), w.args.get("order"), w.args.get("spec")
    ref = w.args.get("alias")
    if ref is not None:
        d = defs.get(ref.name.lower())
        if d is None:
            raise SchemaError(f"SQL: no window named {ref.name!r} in `{w.sql(dialect='spark')}`")
        if part and d.args.get("partition_by"):
            raise unsupported(w, "PARTITION BY over a named window that has one")
        part = part or d.args.get("partition_by")
        if order is not None and d.args.get("order") is not None:
            raise unsupported(w, "ORDER BY over a named window that has one")
        order = order if order is not None else d.args.get("order")
        spec = spec if spec is not None else d.args.get("spec")
    return list(part or ()), order, spec


def _nulls_first(o: exp.Ordered) -> bool:
    """Spark's default: NULLs first ascending, last descending."""
    nf = o.args.get("nulls_first")
    return bool(nf) if nf is not None else not o.args.get("desc")


def _count(node: exp.Expression | None, w: exp.Window, what: str, least: int | None) -> int:
    """A whole-number literal argument (at least ``least``)."""
    neg = isinstance(node, exp.Neg)
    inner = node.this if neg else node
    if not (isinstance(inner, exp.Literal) and not inner.is_string and inner.this.isdigit()):
        raise unsupported(w, f"{what} other than a whole number")
    n = -int(inner.this) if neg else int(inner.this)
    if least is not None and n < least:
        raise SchemaError(f"SQL: {what} must be at least {least}, got {n} in `{w.sql(dialect='spark')}`")
    return n


def _offset(b, w: exp.Window, rows: bool, order: tuple[Order, ...]):
    """A frame bound's offset: a whole number for ROWS; for RANGE a number of the one ORDER BY key's type."""
    text = w.sql(dialect="spark")
    if not (isinstance(b, exp.Literal) and not b.is_string):
        raise unsupported(w, f"a {'ROWS' if rows else 'RANGE'} frame bound other than a number")
    if rows:
        if not b.this.isdigit():
            raise unsupported(w, "a ROWS frame offset other than a whole number")
        return int(b.this)
    if len(order) != 1:
        raise SchemaError(f"SQL: a RANGE frame with an offset needs exactly one ORDER BY key in `{text}`")
    t = order[0].expr.type
    value = decimal.Decimal(b.this)
    if t == "bigint":
        if value != value.to_integral_value():
            raise unsupported(w, "a RANGE frame offset with a fraction over a bigint key")
        return int(value)
    if t == "double":
        return float(value)
    ps = decimal_ps(t)
    if ps is not None:
        if value.scaleb(ps[1]) != value.scaleb(ps[1]).to_integral_value():
            raise unsupported(w, f"a RANGE frame offset finer than its {t} key")
        return value
    raise unsupported(w, f"a RANGE frame with an offset over a {t} column")
