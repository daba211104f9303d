"""The logical plan IR: relational operators over named, typed columns, independent of any query syntax.

SQL (:mod:`ddflow.sql`) and, later, Datalog front ends build these
nodes; :mod:`ddflow.plan.lower` turns them into ddflow operators.  Every
node is an immutable value with a :class:`~ddflow.base.schema.Schema`;
expressions (:mod:`ddflow.plan.expr`) refer to input columns by position.
The semantics are SQL's bag semantics: a relation is a multiset of rows.

>>> from ddflow.base.schema import Schema
>>> from ddflow.plan.expr import Col, Lit, Call
>>> t = Scan("t", Schema(("a", "b"), ("bigint", "string")))
>>> f = Filter(t, Call(">", (Col(0, "bigint", "a"), Lit(1, "bigint")), "boolean"))
>>> print(explain(Project(f, (Col(1, "string", "b"),), ("b",))))
Project [b]
  Filter (a > 1)
    Scan t [a, b]
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ddflow.base.schema import MAX_PRECISION, Schema, decimal_ps, decimal_type
from ddflow.errors import SchemaError
from ddflow.plan.expr import Col, Expr
from ddflow.plan.shown import Text as _Text, join_condition as _on, shown as _shown, unique_names as _unique

if TYPE_CHECKING:
    from ddflow.plan.limits import LoopLimits


class Rel:
    """A relation: a multiset of rows of ``schema``."""

    schema: Schema

    def inputs(self) -> tuple["Rel", ...]:
        return ()

    def label(self) -> str:
        return type(self).__name__


@dataclass(frozen=True)
class Scan(Rel):
    """A named table of the dataflow."""

    table: str
    schema: Schema

    def label(self) -> str:
        return f"Scan {self.table} [{', '.join(self.schema.names)}]"


@dataclass(frozen=True)
class Values(Rel):
    """Fixed rows, there from time 0 on and never changed (a Datalog program's facts).  No NULLs."""

    schema: Schema
    rows: tuple[tuple, ...]

    def label(self) -> str:
        return f"Values [{', '.join(self.schema.names)}] ({len(self.rows)} row{'s' * (len(self.rows) != 1)})"


@dataclass(frozen=True)
class _Unary(Rel):
    """A relation computed from one input."""

    input: Rel

    def inputs(self) -> tuple[Rel, ...]:
        return (self.input,)


@dataclass(frozen=True)
class _RowsOf(_Unary):
    """A relation with the columns of its one input."""

    @property
    def schema(self) -> Schema:
        return self.input.schema


@dataclass(frozen=True)
class Filter(_RowsOf):
    """Rows for which ``predicate`` is TRUE (not FALSE, not NULL)."""

    predicate: Expr

    def label(self) -> str:
        return f"Filter {_shown([self.predicate], self.input.schema.names)[0]}"


@dataclass(frozen=True)
class Project(_Unary):
    """One output column per expression, named ``names``."""

    exprs: tuple[Expr, ...]
    names: tuple[str, ...]

    @property
    def schema(self) -> Schema:
        return Schema(self.names, tuple(e.type if e.type != "null" else "bigint" for e in self.exprs))

    def label(self) -> str:
        texts = _shown(self.exprs, self.input.schema.names)
        shown = [n if isinstance(e, Col) and t == n else f"{t} AS {n}" for e, t, n in zip(self.exprs, texts, self.names)]
        return f"Project [{', '.join(shown)}]"


JOIN_KINDS = ("inner", "left", "right", "full")


@dataclass(frozen=True)
class Join(Rel):
    """Pairs of rows whose keys are equal (a NULL key matches nothing) and ``residual`` holds.

    ``left`` / ``right`` / ``full`` add each row of that side that no row
    matches, with the other side's columns NULL.

    ``left_keys[i]`` (over the left columns) is matched with
    ``right_keys[i]`` (over the right columns); the output has the left
    columns, then the right ones, and ``residual`` reads that output.
    """

    left: Rel
    right: Rel
    kind: str
    left_keys: tuple[Expr, ...]
    right_keys: tuple[Expr, ...]
    residual: Expr | None = None

    def __post_init__(self):
        if self.kind not in JOIN_KINDS:
            raise SchemaError(f"{self.kind} joins are not supported yet (only {', '.join(JOIN_KINDS)})")
        if len(self.left_keys) != len(self.right_keys):
            raise SchemaError("a join needs as many keys on each side")

    @property
    def schema(self) -> Schema:
        ls, rs = self.left.schema, self.right.schema
        return Schema(_unique(ls.names + rs.names), ls.types + rs.types)

    def inputs(self) -> tuple[Rel, ...]:
        return (self.left, self.right)

    def label(self) -> str:
        return f"Join {self.kind} ON {_on(self.left, self.right, self.left_keys, self.right_keys, self.residual)}" \
            "  [arrange both sides by key]"


@dataclass(frozen=True)
class Agg:
    """An aggregate: ``func`` of ``arg`` (and ``other``: COVAR's and CORR's y, MAX_BY's and LISTAGG's ordering)
    over a group (``distinct``: its distinct non-NULL values); ``fraction`` is PERCENTILE's (MEDIAN is PERCENTILE
    0.5); ``separator``, ``desc`` and ``nulls_first``: LISTAGG's delimiter and its WITHIN GROUP order."""

    func: str
    arg: Expr | None
    distinct: bool = False
    fraction: float | None = None
    other: Expr | None = None
    separator: str = ""
    desc: bool = False
    nulls_first: bool = True

    def operands(self) -> tuple[Expr, ...]:
        return tuple(x for x in (self.arg, self.other) if x is not None)

    @property
    def type(self) -> str:
        """Spark's result type: SUM widens a decimal by 10 digits, AVG of a decimal adds 4 places."""
        if self.func in ("count", "count_star"):
            return "bigint"
        if self.func.startswith(("var_", "stddev_", "covar_", "regr_")) or self.func in (
                "percentile", "percentile_disc", "corr", "skewness", "kurtosis"):
            return "double"  # the spread and the others of aggregate.STATISTICS
        t = self.arg.type if self.arg is not None and self.arg.type != "null" else "bigint"
        ps, func = decimal_ps(t), self.func.removeprefix("try_")  # TRY_SUM, TRY_AVG: NULL past the type
        if func == "avg":
            return "double" if ps is None else decimal_type(min(MAX_PRECISION, ps[0] + 4), min(MAX_PRECISION, ps[1] + 4))
        if func == "sum" and ps is not None:
            return decimal_type(min(MAX_PRECISION, ps[0] + 10), ps[1])
        return t

    def __str__(self) -> str:
        if self.func == "count_star":
            return "count(*)"
        more = f", {self.fraction}" if self.fraction is not None else f", {self.other}" if self.other else ""
        return f"{self.func}({'DISTINCT ' if self.distinct else ''}{self.arg}{more})"


@dataclass(frozen=True)
class Aggregate(_Unary):
    """One row per group of equal ``group`` values (NULLs group together): the group values, then the aggregates.

    With no ``group`` expressions, exactly one row, even over no input
    (counts 0, other aggregates NULL).
    """

    group: tuple[Expr, ...]
    aggs: tuple[Agg, ...]
    names: tuple[str, ...] = field(default=())

    @property
    def schema(self) -> Schema:
        types = tuple(g.type for g in self.group) + tuple(a.type for a in self.aggs)
        names = self.names or tuple(f"_{i}" for i in range(len(types)))
        return Schema(names, types)

    def label(self) -> str:
        texts = iter(_shown(self.group + tuple(x for a in self.aggs for x in a.operands()), self.input.schema.names))
        group = [next(texts) for _ in self.group]
        aggs = [str(a) if a.arg is None else str(dataclasses.replace(a, arg=_Text(next(texts)), other=a.other and
                                                                     _Text(next(texts)))) for a in self.aggs]
        return f"Aggregate group=[{', '.join(group)}] aggs=[{', '.join(aggs)}]  [arrange by group key]"


@dataclass(frozen=True)
class Windowed(_Unary):
    """Each row once per window of ``width`` every ``slide`` from ``offset`` that holds ``time``, with its bounds.

    Spark's ``window(time, width, slide, offset)``: half-open windows
    ``[start, start + width)`` with ``start = offset (mod slide)``; the
    output is the input's columns then ``window.start`` and ``window.end``
    (rows whose ``time`` is NULL belong to no window).  ``expire`` (set
    when ``time`` is the input's event time, so each row's data time is
    ``time``): a row leaves its window's copy at ``window.end``, so
    everything computed per window is retracted when the window closes and
    no trace keeps it; :class:`CloseAt` above the per-window result keeps
    the value it had.  Lengths in microseconds.
    """

    time: Expr
    width: int
    slide: int
    offset: int = 0
    expire: bool = False
    prefix: str = "window"

    @property
    def schema(self) -> Schema:
        s = self.input.schema
        return Schema(s.names + (f"{self.prefix}.start", f"{self.prefix}.end"), s.types + ("timestamp", "timestamp"))

    def label(self) -> str:
        (t,) = _shown([self.time], self.input.schema.names)
        return (f"Windowed {t} width={self.width}us slide={self.slide}us offset={self.offset}us"
                + ("  [expires at window.end]" if self.expire else ""))


@dataclass(frozen=True)
class Sessionized(_Unary):
    """Each row with the bounds of its session: per ``keys``, runs of ``time`` at most ``gap`` apart.

    Spark's ``session_window(time, gap)`` (a row exactly ``gap`` after
    the previous extends the session; ``end`` = last ``time`` + ``gap``).
    Output: the input's columns, then ``session_window.start`` and
    ``session_window.end``.  ``expire``: as :class:`Windowed`, a session
    leaves at ``end + 1``, when it can no longer change.
    """

    keys: tuple[Expr, ...]
    time: Expr
    gap: int
    expire: bool = False

    @property
    def schema(self) -> Schema:
        s = self.input.schema
        return Schema(s.names + ("session_window.start", "session_window.end"), s.types + ("timestamp", "timestamp"))

    def label(self) -> str:
        texts = _shown(self.keys + (self.time,), self.input.schema.names)
        return (f"Sessionized keys=[{', '.join(texts[:-1])}] {texts[-1]} gap={self.gap}us  [by key]"
                + ("  [expires at end + 1]" if self.expire else ""))


@dataclass(frozen=True)
class TemporalFilter(_RowsOf):
    """Rows present while ``lower <= now < upper`` (either bound may be absent): a predicate on ``now()``.

    ``now()`` is the logical time at which the view is evaluated, as
    Materialize's ``mz_now()``: a row enters at ``max(its time, lower)``
    and leaves at ``upper``.  A NULL bound keeps the row out.
    """

    lower: Expr | None
    upper: Expr | None
    lower_plus: int = 0  # microseconds added to ``lower`` (``ts < now()`` is ``ts + 1us <= now()``)
    upper_plus: int = 0

    def label(self) -> str:
        bounds = [e for e in (self.lower, self.upper) if e is not None]
        texts = iter(_shown(bounds, self.input.schema.names))
        lo = f"{next(texts)}{f' + {self.lower_plus}us' if self.lower_plus else ''} <= " if self.lower is not None else ""
        hi = f" < {next(texts)}{f' + {self.upper_plus}us' if self.upper_plus else ''}" if self.upper is not None else ""
        return f"TemporalFilter {lo}now(){hi}"


@dataclass(frozen=True)
class CloseAt(_RowsOf):
    """The rows of a per-window result, each kept as it was when its window closed at ``end + after`` (later changes dropped).

    ``final``: each row's changes are moved to its close time as well, so
    the row appears once, final, when its window closes, and is never
    retracted (Spark's append mode, for sinks that cannot take deletes).
    """

    end: Expr
    after: int = 0
    final: bool = False

    def label(self) -> str:
        return (f"{'Final' if self.final else 'CloseAt'} {_shown([self.end], self.input.schema.names)[0]}"
                + (f" + {self.after}us" if self.after else ""))


@dataclass(frozen=True)
class Distinct(_RowsOf):
    """Each distinct row once."""

    def label(self) -> str:
        return "Distinct  [arrange by row]"


@dataclass(frozen=True)
class Union(Rel):
    """The rows of every input (``all``), or each distinct row once."""

    parts: tuple[Rel, ...]
    all: bool = True

    @property
    def schema(self) -> Schema:
        return self.parts[0].schema

    def inputs(self) -> tuple[Rel, ...]:
        return self.parts

    def label(self) -> str:
        return "Union all" if self.all else "Union  [arrange by row]"


@dataclass(frozen=True)
class SetOp(Rel):
    """``except``: distinct rows of ``left`` not in ``right``; ``intersect``: distinct rows in both (NULL equals NULL).

    ``all`` (EXCEPT ALL, INTERSECT ALL): multisets, a row ``m`` times in
    ``left`` and ``n`` in ``right`` is kept ``max(m - n, 0)`` times
    (except) or ``min(m, n)`` times (intersect).
    """

    kind: str
    left: Rel
    right: Rel
    all: bool = False

    def __post_init__(self):
        if self.kind not in ("except", "intersect"):
            raise SchemaError(f"unknown set operation {self.kind!r}")

    @property
    def schema(self) -> Schema:
        return self.left.schema

    def inputs(self) -> tuple[Rel, ...]:
        return (self.left, self.right)

    def label(self) -> str:
        if self.all:
            return f"{self.kind.capitalize()} all  [count by row]"
        return f"{self.kind.capitalize()}  [arrange both sides by row]"


@dataclass(frozen=True)
class SemiJoin(Rel):
    """Rows of ``left`` with (``anti``: without) a row of ``right`` whose keys equal theirs.

    ``null_aware`` gives NOT IN's rules for an anti join: no row at all
    if ``right`` has a NULL key, and a row with a NULL key only while
    ``right`` is empty.  Otherwise a NULL key matches nothing.  With no
    keys every row of ``right`` is a candidate (an uncorrelated EXISTS).

    ``residual`` (EXISTS correlated by a non-equality, TPC-H Q21) reads
    the left columns, then the right ones: a row of ``right`` matches
    only where it also holds.
    """

    left: Rel
    right: Rel
    left_keys: tuple[Expr, ...]
    right_keys: tuple[Expr, ...]
    anti: bool = False
    null_aware: bool = False
    residual: Expr | None = None

    def __post_init__(self):
        if len(self.left_keys) != len(self.right_keys):
            raise SchemaError("a semi join needs as many keys on each side")
        if self.null_aware and self.residual is not None:
            raise SchemaError("NOT IN takes no residual predicate")

    @property
    def schema(self) -> Schema:
        return self.left.schema

    def inputs(self) -> tuple[Rel, ...]:
        return (self.left, self.right)

    def label(self) -> str:
        kind = "Anti" if self.anti else "Semi"
        on = _on(self.left, self.right, self.left_keys, self.right_keys, self.residual)
        return f"{kind}Join ON {on}{' (NOT IN)' if self.null_aware else ''}  [arrange both sides by key]"


@dataclass(frozen=True)
class OneRow(_RowsOf):
    """The rows of ``input``, which must be at most one (a scalar subquery): more is an error naming ``what``."""

    what: str

    def label(self) -> str:
        return f"OneRow (at most one row of {self.what})  [arrange by a constant]"


@dataclass(frozen=True)
class Order:
    """A sort key: ``expr`` ascending or ``desc``, NULLs first or last."""

    expr: Expr
    desc: bool = False
    nulls_first: bool = True

    def __str__(self) -> str:
        return f"{self.expr}{' DESC' if self.desc else ''} NULLS {'FIRST' if self.nulls_first else 'LAST'}"


RANKS = ("row_number", "rank", "dense_rank")


@dataclass(frozen=True)
class TopK(_Unary):
    """Rows ranked within each partition by ``order``; with ``limit``, only those ranked ``<= limit``.

    ``rank`` (``row_number``, ``rank`` or ``dense_rank``) appends the rank
    as a bigint column named ``rank_name``; without it the rows are kept
    as they are (ORDER BY ... LIMIT: row numbers, ties broken by the whole
    row so the result is deterministic).
    """

    partition: tuple[Expr, ...]
    order: tuple[Order, ...]
    limit: int | None = None
    rank: str | None = None
    rank_name: str = "rank"

    def __post_init__(self):
        if self.rank is not None and self.rank not in RANKS:
            raise SchemaError(f"unknown ranking {self.rank!r}")
        if self.limit is not None and self.limit < 0:
            raise SchemaError(f"a limit is at least 0, not {self.limit}")

    @property
    def schema(self) -> Schema:
        s = self.input.schema
        if self.rank is None:
            return s
        return Schema(_unique(s.names + (self.rank_name,)), s.types + ("bigint",))

    def label(self) -> str:
        texts = iter(_shown(self.partition + tuple(o.expr for o in self.order), self.input.schema.names))
        part = [next(texts) for _ in self.partition]
        order = [str(dataclasses.replace(o, expr=_Text(next(texts)))) for o in self.order]
        part = f" partition=[{', '.join(part)}]" if self.partition else ""
        lim = f" limit={self.limit}" if self.limit is not None else ""
        return f"TopK {self.rank or 'row_number'}{part} order=[{', '.join(order)}]{lim}  [arrange by partition]"


@dataclass(frozen=True)
class RecRef(Rel):
    """Inside a recursive definition: the relation being defined (``uid`` tells apart two fixpoints' names)."""

    name: str
    schema: Schema
    uid: int
    #: Columns whose value decides the worker of every row (the front end's claim, from the body's last
    #: operator: a Datalog relation's body ends in a Distinct); checked when the fixpoint is lowered.
    placed: frozenset = frozenset()

    def label(self) -> str:
        return f"RecRef {self.name}"


@dataclass(frozen=True)
class Recursive(Rel):
    """The least fixpoint of ``names[i] = distinct(bodies[i])`` for all ``i`` together; rows of ``names[index]``.

    Bodies read the relations being defined through :class:`RecRef`
    (several of them: mutual recursion; the same one twice: non-linear).
    Set semantics (each row once) make the fixpoint finite.
    """

    names: tuple[str, ...]
    bodies: tuple[Rel, ...]
    index: int
    #: What bounds the loop (:class:`ddflow.plan.limits.LoopLimits`; None: the engine's defaults).
    limits: "LoopLimits | None" = None

    @property
    def schema(self) -> Schema:
        return self.bodies[self.index].schema

    def inputs(self) -> tuple[Rel, ...]:
        return (self.bodies[self.index],)

    def label(self) -> str:
        return f"Recursive {self.names[self.index]} (fixpoint of {', '.join(self.names)})  [loop]"


def explain(rel: Rel, indent: int = 0, note=None) -> str:
    """The plan as an indented tree, one operator per line, arrangements marked; ``note(rel)`` adds to a line.

    Expressions read their input's columns by name; where two columns
    share one (a self-join's keys), the second is shown by the name the
    input's schema gives it (``k_2``), so ``ON k = k_2`` says which is which.
    """
    lines = []
    stack = [(rel, indent)]
    while stack:  # depth first, without recursion (a plan may nest subqueries a thousand deep)
        r, depth = stack.pop()
        extra = note(r) if note is not None else ""
        lines.append("  " * depth + r.label() + (f"  {extra}" if extra else ""))
        stack.extend((x, depth + 1) for x in reversed(r.inputs()))
    return "\n".join(lines)
