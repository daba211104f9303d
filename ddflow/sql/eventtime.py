"""The planner's event-time half: Spark's ``window`` and ``session_window`` in GROUP BY, and ``now()`` predicates.

- ``GROUP BY k, window(ts, width[, slide[, start]])`` plans a
  :class:`~ddflow.plan.ir.Windowed` below the aggregate, grouped by the
  window's two bounds; ``window.start`` / ``window.end`` read them.
  ``session_window(ts, gap)`` plans a :class:`~ddflow.plan.ir.Sessionized`
  keyed by the other group expressions.
- When ``ts`` is the event-time column of the table it comes from (through
  filters and projections only), each row's data time is ``ts``: the
  window copies expire at the window's end, and a
  :class:`~ddflow.plan.ir.CloseAt` above the aggregate keeps each window's
  final row, so no trace keeps a closed window.  Otherwise the same plan
  without expiry: exact, with state that grows.
- A WHERE or HAVING conjunct that compares a row expression with
  ``now()`` (or ``current_timestamp()``), plus or minus a constant, is a
  :class:`~ddflow.plan.ir.TemporalFilter`; ``now()`` anywhere else is
  refused by name.
"""
from __future__ import annotations


from sqlglot import exp

from ddflow.errors import SchemaError
from ddflow.plan import functions as F
from ddflow.plan.expr import Col, Expr
from ddflow.plan.ir import CloseAt, Filter, Project, Rel, Scan, Sessionized, TemporalFilter, Windowed

WINDOWS = ("window", "session_window")
#: What ``window.start`` (and the rest) read, renamed before sqlglot qualifies columns (it knows no ``window`` table).
PLACEHOLDERS = {(w, b): f"__{w}_{b}" for w in WINDOWS for b in ("start", "end")}
_OUTPUT_NAMES = {v: b for (w, b), v in PLACEHOLDERS.items()}
_FLIP = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE, exp.EQ: exp.EQ}


def prepare(tree: exp.Expression) -> exp.Expression:
    """``tree`` with ``window.start``-style columns as placeholder calls (before sqlglot qualifies it)."""
    def swap(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and (node.table.lower(), node.name.lower()) in PLACEHOLDERS:
            return exp.Anonymous(this=PLACEHOLDERS[(node.table.lower(), node.name.lower())], expressions=[])
        if isinstance(node, exp.Column) and not node.table and node.name.lower() in WINDOWS:
            raise SchemaError(f"SQL: `{node.name}` is a struct here only through its fields: select "
                              f"`{node.name}.start` and `{node.name}.end`")
        return node

    tree = tree.transform(swap, copy=False)  # the tree is the planner's own (parsed for this plan)
    for select in tree.find_all(exp.Select):  # Spark names an unaliased `window.start` column `start`
        select.set("expressions", [exp.alias_(e, _OUTPUT_NAMES[e.name]) if isinstance(e, exp.Anonymous)
                                   and e.name in _OUTPUT_NAMES else e for e in select.expressions])
    return tree


def output_name(item: exp.Expression) -> str:
    """A select item's column name: ``window.start`` is ``start``, as in Spark."""
    inner = item.this if isinstance(item, exp.Alias) else item
    if not isinstance(item, exp.Alias) and isinstance(inner, exp.Anonymous) and inner.name in _OUTPUT_NAMES:
        return _OUTPUT_NAMES[inner.name]
    return item.alias_or_name


def is_now(node: exp.Expression) -> bool:
    return isinstance(node, exp.CurrentTimestamp) or (isinstance(node, exp.Anonymous) and node.name.lower() == "now")


def mentions_now(node: exp.Expression) -> bool:
    return any(is_now(n) for n in _own_nodes(node))


def _own_nodes(node: exp.Expression):
    """``node`` and its descendants, not entering subqueries (they are planned on their own)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        for child in n.iter_expressions():
            if not isinstance(child, (exp.Select, exp.Subquery)):
                stack.append(child)


def duration(node: exp.Expression, what: str) -> int:
    """A window length: ``'10 seconds'``, ``'1 minute 30 seconds'`` or ``INTERVAL 10 SECONDS``, in microseconds."""
    if isinstance(node, exp.Interval):
        text = f"{node.this.name} {node.unit.name if node.unit is not None else ''}"
    elif isinstance(node, exp.Literal) and node.is_string:
        text = node.this
    else:
        raise SchemaError(f"SQL: {what} must be a duration string such as '10 seconds', got `{node.sql(dialect='spark')}`")
    return duration_text(text, what)


def duration_text(text: str, what: str) -> int:
    """``'10 seconds'`` (or ``'1 minute 30 seconds'``) in microseconds.

    >>> duration_text("1 minute 30 seconds", "lateness")
    90000000
    """
    words = text.lower().replace("interval", " ").split()
    if not words or len(words) % 2:
        raise SchemaError(f"{what} {text!r} is not a duration such as '10 seconds'")
    total = 0
    for amount, unit in zip(words[::2], words[1::2]):
        lit = F.interval(amount, unit)
        if lit.type != "interval_dt":
            raise SchemaError(f"SQL: {what} {text!r}: months and years have no fixed length; use days or less")
        total += int(lit.value)
    return total


def expiring(rel: Rel, e: Expr) -> bool:
    """``e`` is the event-time column of the one table below ``rel`` (through filters and projections): row times are its values."""
    while isinstance(e, Col):
        if isinstance(rel, Scan):
            return rel.schema.event_time is not None and rel.schema.names[e.index] == rel.schema.event_time
        if isinstance(rel, Filter):
            rel = rel.input
        elif isinstance(rel, Project):
            rel, e = rel.input, rel.exprs[e.index]
        else:
            return False
    return False


class EventTime:
    """Mixin of the planner (:class:`ddflow.sql.planner._Planner`): windows in GROUP BY and ``now()`` predicates."""

    def windowed_group(self, rel: Rel, scope, group: list[exp.Expression]):
        """``(rel, keys, close)``: the input with its window bounds, the group keys as ``(text, Expr)``, and
        ``close(aggregate)``, the aggregate kept at each window's close (identity without an expiring window)."""
        group = [g.this if isinstance(g, exp.Paren) else g for g in group]
        wins = [g for g in group if isinstance(g, exp.Anonymous) and g.name.lower() in WINDOWS]
        others = [g for g in group if not any(g is w for w in wins)]
        keys = [(g.sql(dialect="spark"), self.expr(g, scope)) for g in others]
        if not wins:
            return rel, keys, lambda agg: agg
        if len(wins) > 1:
            raise SchemaError(f"SQL: one window per GROUP BY, got `{wins[1].sql(dialect='spark')}` as well")
        w = wins[0]
        kind, args = w.name.lower(), w.expressions
        t = self.expr(args[0], scope) if args else None
        if t is None or t.type != "timestamp":
            raise SchemaError(f"SQL: {kind}(time, ...) needs a timestamp first, got `{w.sql(dialect='spark')}`")
        expire = expiring(rel, t)
        n = len(rel.schema)
        if kind == "window":
            if not 2 <= len(args) <= 4:
                raise SchemaError(f"SQL: window(time, width[, slide[, start]]), got `{w.sql(dialect='spark')}`")
            width = duration(args[1], "the window's width")
            slide = duration(args[2], "the window's slide") if len(args) > 2 else width
            offset = duration(args[3], "the window's start") if len(args) > 3 else 0
            if width <= 0 or slide <= 0 or slide > width:
                raise SchemaError(f"SQL: a window needs 0 < slide <= width, got `{w.sql(dialect='spark')}`")
            rel = Windowed(rel, t, width, slide, offset % slide, expire)
            after = 0
        else:
            if len(args) != 2:
                raise SchemaError(f"SQL: session_window(time, gap), got `{w.sql(dialect='spark')}`")
            gap = duration(args[1], "the session's gap")
            if gap <= 0:
                raise SchemaError(f"SQL: a session's gap must be positive, got `{w.sql(dialect='spark')}`")
            rel = Sessionized(rel, tuple(e for _, e in keys), t, gap, expire)
            after = 1  # a row exactly `gap` after the last extends a session: it can change until end inclusive
        at = len(keys)
        keys += [(exp.Anonymous(this=PLACEHOLDERS[(kind, b)], expressions=[]).sql(dialect="spark"),
                  Col(n + j, "timestamp", f"{kind}.{b}")) for j, b in enumerate(("start", "end"))]
        if not expire:
            return rel, keys, lambda agg: agg
        return rel, keys, lambda agg: CloseAt(agg, Col(at + 1, "timestamp", f"{kind}.end"), after)

    def temporal_filters(self, rel: Rel, scope, conds: list[exp.Expression], replace: dict | None = None) -> Rel:
        """``rel`` under each ``now()`` conjunct of ``conds``, as a :class:`TemporalFilter`."""
        for c in conds:
            rel = self._temporal_filter(rel, scope, c, replace)
        return rel

    def _temporal_filter(self, rel: Rel, scope, cond: exp.Expression, replace: dict | None) -> Rel:
        if isinstance(cond, exp.Between):
            parts = [exp.GTE(this=cond.this.copy(), expression=cond.args["low"].copy()),
                     exp.LTE(this=cond.this.copy(), expression=cond.args["high"].copy())]
            for p in parts:
                if mentions_now(p):
                    rel = self._temporal_filter(rel, scope, p, replace)
                else:
                    rel = Filter(rel, self.predicate(p, scope, replace))
            return rel
        if type(cond) not in _FLIP:
            raise _now_refused(cond)
        a, b, op = cond.this, cond.expression, type(cond)
        if mentions_now(a):
            a, b, op = b, a, _FLIP[op]
        if mentions_now(a):
            raise _now_refused(cond)
        # now `a op b` with `b` = now() [+- offset]: move the offset to the row side, `r op now()`
        row = a.copy()
        if is_now(b):
            pass
        elif isinstance(b, (exp.Add, exp.Sub)) and is_now(b.this) and not mentions_now(b.expression):
            row = (exp.Add if isinstance(b, exp.Sub) else exp.Sub)(this=row, expression=b.expression.copy())
        elif isinstance(b, exp.Add) and is_now(b.expression) and not mentions_now(b.this):
            row = exp.Sub(this=row, expression=b.this.copy())
        else:
            raise _now_refused(cond)
        r = self.expr(row, scope, replace)
        if r.type not in ("timestamp", "date"):
            raise SchemaError(f"SQL: `{cond.sql(dialect='spark')}` compares now() with a {r.type}; compare it with a timestamp")
        if r.type == "date":
            raise SchemaError(f"SQL: `{cond.sql(dialect='spark')}`: cast the date to a timestamp to compare it with now()")
        # r > now: now < r; r >= now: now < r + 1us; r < now: now >= r + 1us; r <= now: now >= r; r = now: both
        lower = upper = None
        lower_plus = upper_plus = 0
        if op in (exp.GT, exp.GTE, exp.EQ):
            upper, upper_plus = r, (0 if op is exp.GT else 1)
        if op in (exp.LT, exp.LTE, exp.EQ):
            lower, lower_plus = r, (1 if op is exp.LT else 0)
        return TemporalFilter(rel, lower, upper, lower_plus, upper_plus)


def _now_refused(node: exp.Expression) -> SchemaError:
    return SchemaError(f"SQL: now() is the time the view is evaluated at; it may appear only in a WHERE or HAVING "
                       f"conjunct comparing a timestamp with now() plus or minus a constant (a temporal filter), "
                       f"not in `{node.sql(dialect='spark')}`")


def refuse_other_nows(node: exp.Select, allowed: list[exp.Expression]) -> None:
    """A ``now()`` of ``node`` (outside its subqueries) that is not in one of the ``allowed`` conjuncts is refused."""
    ok = {id(n) for c in allowed for n in _own_nodes(c) if is_now(n)}
    for n in _own_nodes(node):
        if is_now(n) and id(n) not in ok:
            parent = n.parent if n.parent is not None else n
            raise _now_refused(parent)
