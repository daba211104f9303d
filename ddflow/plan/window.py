"""Window functions: the plan node (:class:`Window`, its :class:`WinFunc` and :class:`Frame`) and its lowering.

The node sits beside :mod:`ddflow.plan.ir`'s (it is one of them, kept here
with the one lowering that reads it).  Lowering: one ``reduce`` per partition.

Every row is keyed by its partition (:func:`~ddflow.plan.aggregate.group_key`
of the partition values and their null bits; a constant without PARTITION
BY) and carries, before its stored fields, a value and a null flag for each
order key, function argument and LAG/LEAD default.  The reduce sorts the
partition (:mod:`ddflow.plan.frames`: order keys with Spark's NULL placement, then the whole stored
row, so ties are broken by the rows alone and the result is determined),
finds each row's peers (rows equal on the order keys) and frame, and
computes every function of the node in one pass; a map lays the row and the
results out as stored fields.

Cost, by form (p rows in a changed partition; partitions a change does not
touch cost nothing; every form's output changes are the rows whose result
moved):

- ROW_NUMBER, RANK, DENSE_RANK, PERCENT_RANK, CUME_DIST, NTILE, LAG, LEAD
  (IGNORE NULLS too),
  and every ROWS frame, and RANGE frames unbounded on one side (running
  sums, the default frame with ORDER BY), and RANGE offsets over a double
  key: the whole partition is re-computed per change, O(p log p) Python per changed
  partition and interesting time (the sort; prefix sums for SUM, COUNT and
  AVG; prefix or suffix extremes for MIN and MAX over frames that start or
  end at the partition's edge, O(p * w) for MIN and MAX over frames of w
  rows bounded both ways), plus the reduce's own cost (its history of that
  partition).  A change here can move every later row's result (a rank, a
  running sum, a row's position in a ROWS frame), so up to p output rows.
  A lone ROW_NUMBER, RANK or DENSE_RANK is a TopK, and ``<= k`` over it the
  compiled top-k (:mod:`ddflow.plan.ranking`).
- RANGE frames bounded by offsets on both sides over a bigint or decimal
  key (``SUM(x) OVER (PARTITION BY k ORDER BY t RANGE BETWEEN 10 PRECEDING
  AND 5 FOLLOWING)``, every function of the node so): keyed finer, by
  (partition, band of the order key), bands as wide as the frame; a row is
  also sent to the (at most two) other bands whose rows' frames hold it.  A
  change re-computes only the rows of the bands its value falls in, O(b log
  b) for their b rows, not the partition.
- Aggregates over whole partitions (``SUM(x) OVER (PARTITION BY k)``: no
  ORDER BY, or a frame unbounded both ways): the partition's aggregate
  (:mod:`ddflow.plan.aggregate`, compiled, O(changed rows)) joined back to
  its rows; a changed aggregate emits its partition's p rows, vectorized,
  with no sort and no Python per partition.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Callable

import numpy as np

from ddflow.base.schema import KIND, Schema, decimal_ps
from ddflow.collection import Collection
from ddflow.errors import SchemaError
from ddflow.plan.expr import Expr, as_type, evaluate, filled
from ddflow.plan.frames import window_logic
from ddflow.plan.ir import RANKS, Agg, Order, _Text, _Unary, _shown, _unique

if TYPE_CHECKING:
    from ddflow.plan.lower import Lowering

#: Window functions: rankings and distributions, offsets (LAG/LEAD), frame values, and frame aggregates.
WINDOW_FUNCS = RANKS + ("percent_rank", "cume_dist", "ntile", "lag", "lead", "first_value", "last_value",
                        "nth_value", "sum", "count", "count_star", "avg", "min", "max")
#: Those that read a frame (the others ignore it: a ranking or an offset reads the partition's order).
FRAMED = ("first_value", "last_value", "nth_value", "sum", "count", "count_star", "avg", "min", "max")


@dataclass(frozen=True)
class Frame:
    """A window frame: ``rows`` (positions) or RANGE (order-key values, peers included) from ``start`` to ``end``.

    A bound is None (UNBOUNDED PRECEDING as ``start``, UNBOUNDED
    FOLLOWING as ``end``) or an offset from the current row: negative
    PRECEDING, 0 CURRENT ROW, positive FOLLOWING (for RANGE, in the order
    key's own units: a number of the key's type).
    """

    rows: bool
    start: int | float | object | None
    end: int | float | object | None

    def __str__(self) -> str:
        def bound(b, unbounded: str) -> str:
            if b is None:
                return f"UNBOUNDED {unbounded}"
            return "CURRENT ROW" if b == 0 else f"{abs(b)} {'PRECEDING' if b < 0 else 'FOLLOWING'}"

        return f"{'ROWS' if self.rows else 'RANGE'} {bound(self.start, 'PRECEDING')}..{bound(self.end, 'FOLLOWING')}"


@dataclass(frozen=True)
class WinFunc:
    """One window function: ``func`` of ``arg`` (LAG/LEAD: ``n`` rows away, ``default`` past the partition's edge;
    NTILE: ``n`` buckets; NTH_VALUE: the ``n``-th row of the frame); ``frame`` for those in :data:`FRAMED`."""

    func: str
    arg: Expr | None = None
    n: int = 1
    default: Expr | None = None
    ignore_nulls: bool = False
    frame: Frame | None = None

    def __post_init__(self):
        if self.func not in WINDOW_FUNCS:
            raise SchemaError(f"unknown window function {self.func!r}")
        if (self.frame is None) != (self.func not in FRAMED):
            raise SchemaError(f"{self.func} takes {'a' if self.func in FRAMED else 'no'} frame")

    @property
    def type(self) -> str:
        """Spark's result types, with bigint for Spark's int (ROW_NUMBER, RANK, DENSE_RANK, NTILE)."""
        if self.func in RANKS or self.func == "ntile":
            return "bigint"
        if self.func in ("percent_rank", "cume_dist"):
            return "double"
        if self.func in ("sum", "count", "count_star", "avg", "min", "max"):
            return Agg(self.func, self.arg).type
        t = self.arg.type
        return "bigint" if t == "null" else t

    def __str__(self) -> str:
        args = [str(x) for x in (self.arg,) if x is not None]
        if self.func in ("ntile", "nth_value") or (self.func in ("lag", "lead")
                                                   and (self.n != 1 or self.default is not None)):
            args.append(str(self.n))
        if self.default is not None:
            args.append(str(self.default))
        name = "count" if self.func == "count_star" else self.func
        text = f"{name}({'*' if self.func == 'count_star' else ', '.join(args)})"
        text += " IGNORE NULLS" if self.ignore_nulls else ""
        return text + (f" {self.frame}" if self.frame is not None else "")


@dataclass(frozen=True)
class Window(_Unary):
    """The input's rows, each with ``funcs`` over its partition (``partition`` values equal, NULLs together) in ``order``.

    Output: the input's columns, then one per function, named ``names``.
    Rows that tie on ``order`` are peers (one RANK, one RANGE step); ROWS
    frames, ROW_NUMBER, LAG and LEAD take peers in the order of their whole
    rows, so the result is determined by the rows alone.

    >>> from ddflow.plan.expr import Col
    >>> from ddflow.plan.ir import Scan
    >>> t = Scan("t", Schema(("k", "v"), ("string", "bigint")))
    >>> v = Col(1, "bigint", "v")
    >>> w = Window(t, (Col(0, "string", "k"),), (Order(v),), (WinFunc("sum", v, frame=Frame(False, None, 0)),), ("s",))
    >>> w.schema.types
    ('string', 'bigint', 'bigint')
    >>> print(w.label())
    Window partition=[k] order=[v NULLS FIRST] funcs=[sum(v) RANGE UNBOUNDED PRECEDING..CURRENT ROW]  [arrange by partition]
    """

    partition: tuple[Expr, ...]
    order: tuple[Order, ...]
    funcs: tuple[WinFunc, ...]
    names: tuple[str, ...]

    @property
    def schema(self) -> Schema:
        s = self.input.schema
        return Schema(_unique(s.names + self.names), s.types + tuple(f.type for f in self.funcs))

    def label(self) -> str:
        exprs = list(self.partition) + [o.expr for o in self.order]
        for f in self.funcs:
            exprs += [x for x in (f.arg, f.default) if x is not None]
        texts = iter(_shown(exprs, self.input.schema.names))
        part = [next(texts) for _ in self.partition]
        order = [str(dataclasses.replace(o, expr=_Text(next(texts)))) for o in self.order]
        funcs = []
        for f in self.funcs:
            shown = {k: _Text(next(texts)) for k in ("arg", "default") if getattr(f, k) is not None}
            funcs.append(str(dataclasses.replace(f, **shown)))
        part = f" partition=[{', '.join(part)}]" if self.partition else ""
        return f"Window{part} order=[{', '.join(order)}] funcs=[{', '.join(funcs)}]  [arrange by partition]"


def lower_window(low: "Lowering", rel: Window) -> Collection:
    """The stored rows of ``rel``: each input row, then its functions' values, then the null mask.

    Cost: a map per changed row (its partition key, O(1) Python per row
    for a key of several columns or strings), then the reduce: per changed
    partition, O(p log p) Python over its p rows (see the module's cost).
    """
    from ddflow.plan.aggregate import group_key
    from ddflow.plan.lower import columns_of, stored

    src = rel.input.schema
    width = len(src) + 1  # the input's stored fields: its values, then the null mask
    ptypes = tuple(_typ(e) for e in rel.partition)
    carried: list[Expr] = [o.expr for o in rel.order]  # value fields ahead of the row: order keys, args, defaults
    slots = []
    for f in rel.funcs:
        a = d = None
        if f.arg is not None:
            a = len(carried)
            carried.append(f.arg)
        if f.default is not None:
            d = len(carried)
            carried.append(f.default)
        slots.append((a, d))
    ctypes = tuple(_typ(e) for e in carried)

    def partition_key(ins, n: int) -> np.ndarray:
        if rel.partition:
            return group_key(list(stored([evaluate(e, ins) for e in rel.partition], ptypes, n)), ptypes)
        return np.zeros(n, dtype=np.int64)

    def keyed(*cols):
        ins = columns_of(cols, src)
        n = len(cols[0])
        key = partition_key(ins, n)
        fields = []
        for e, t in zip(carried, ctypes):
            vals, null = evaluate(e, ins)
            if e.type == "null":
                vals, null = np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool)
            fields += [filled(as_type(vals, t), null, t), null.astype(np.int64)]
        return (key, *fields, *cols)

    logic = window_logic(rel.order, tuple(o.expr.type for o in rel.order), rel.funcs, slots, len(carried))
    out_types = rel.schema.types
    nf = len(rel.funcs)

    def laid_out(*cols):  # (key, *row, value, null, value, null, ...) -> stored fields of the output
        ins = columns_of(cols[1:1 + width], src)
        res = [(cols[1 + width + 2 * j], np.asarray(cols[2 + width + 2 * j], dtype=bool)) for j in range(nf)]
        return stored(ins + res, out_types, len(cols[0]))

    if whole_partition(rel):
        return _joined_aggregate(low, rel, lambda *cols: (partition_key(columns_of(cols, src), len(cols[0])), *cols),
                                 laid_out)
    band = value_band(rel)
    if band is not None:
        flagged = window_logic(rel.order, tuple(o.expr.type for o in rel.order), rel.funcs, slots, len(carried), True)
        banded = _banded(low.lower(rel.input), keyed, band, 2 + 2 * len(carried) + width)
        return banded.reduce(flagged).map_columns(laid_out)
    ranked = low.lower(rel.input).map_columns(keyed).reduce(logic)
    return ranked.map_columns(laid_out)


def value_band(rel: Window) -> tuple | None:
    """``(low, high)``: where every function's frame is a RANGE bounded by offsets on both sides over a bigint or
    decimal key, the values a row's frame spans, ``[v + low, v + high]`` (stored units: a decimal's unscaled);
    else None.

    >>> from ddflow.plan.expr import Col
    >>> from ddflow.plan.ir import Scan
    >>> t = Scan("t", Schema(("k", "v"), ("string", "bigint")))
    >>> v = Col(1, "bigint", "v")
    >>> near = WinFunc("sum", v, frame=Frame(False, -2, 1))
    >>> value_band(Window(t, (), (Order(v, desc=True),), (near,), ("s",)))
    (-1, 2)
    """
    if len(rel.order) != 1 or KIND[_typ(rel.order[0].expr)] != "i":  # exact keys (a double's band could round)
        return None
    if not all(f.frame is not None and not f.frame.rows and f.frame.start is not None and f.frame.end is not None
               for f in rel.funcs):
        return None
    o, typ = rel.order[0], rel.order[0].expr.type
    if typ != "bigint" and decimal_ps(typ) is None:
        return None
    ps = decimal_ps(typ)

    def units(b):
        return int(Decimal(str(b)).scaleb(ps[1])) if ps is not None else int(b)

    spans = [(units(f.frame.start), units(f.frame.end)) for f in rel.funcs]
    if o.desc:  # PRECEDING is toward larger values
        spans = [(-hi, -lo) for lo, hi in spans]
    return min(lo for lo, _ in spans), max(hi for _, hi in spans)


def _banded(coll: Collection, keyed: Callable, band: tuple, fields: int) -> Collection:
    """``keyed``'s rows re-keyed by (partition, band of the order key), flagged 1, each also sent, flagged 0, to
    the other band of the rows whose frame holds it.

    Bands are ``width = high - low`` wide (at least 1), so the rows whose
    frame holds a row are in at most two bands, besides its own; a NULL key
    is a band of its own (its frame is its peers, and it is in no other
    row's frame).  One map per copy, the copies a row lacks filtered out; ``fields``: a copy's fields (key, flag, then ``keyed``'s
    values).  Cost: O(1) Python per row and copy (the keys are tuples).
    """
    low, high = band
    width = max(high - low, 1)

    def copy(k: int | None) -> Callable:
        """The copy of each row in its own band (``k`` None, flagged 1), or in the ``k``-th band of the rows whose
        frame holds it where that is another band (flagged 0)."""
        def rekeyed(*cols):
            got = keyed(*cols)
            null = np.asarray(got[2], dtype=bool)
            x = np.where(null, 0, np.asarray(got[1], dtype=np.int64)).astype(object)  # Python ints: no overflow
            own = x // width
            if k is None:
                band, keep = own, np.ones(len(x), dtype=bool)
            else:
                band = (x - high) // width + k
                keep = ~null & np.asarray(band <= (x - low) // width, dtype=bool) & np.asarray(band != own, dtype=bool)
            key = np.empty(len(x), dtype=object)
            key[:] = list(zip(got[0].tolist(), null.tolist(), np.where(null, 0, band).tolist()))
            return (key, np.full(len(x), int(k is None), dtype=np.int64), *got[1:], keep)

        return rekeyed

    parts = [coll.map_columns(copy(k)).filter_columns(lambda *cols: np.asarray(cols[-1], dtype=bool))
             .project(*range(fields)) for k in (None, 0, 1)]
    return parts[0].concat(*parts[1:])


_AGGREGATES = ("sum", "count", "count_star", "avg", "min", "max")


def lowered_as(f: WinFunc, ordered: bool) -> str:
    """How ``f`` can be lowered: ``"whole"`` (an aggregate of its whole partition), ``"band"`` (a RANGE frame
    bounded both ways, banded where the key allows) or ``"partition"``; a node of functions of one kind lowers
    by it, so the planner groups functions by it.

    >>> lowered_as(WinFunc("count_star", frame=Frame(False, None, 0)), ordered=False)
    'whole'
    >>> lowered_as(WinFunc("count_star", frame=Frame(False, -1, 0)), ordered=True)
    'band'
    """
    fr = f.frame
    if fr is None:
        return "partition"
    if f.func in _AGGREGATES and ((fr.start is None and fr.end is None) or (not fr.rows and not ordered)):
        return "whole"
    return "band" if not fr.rows and fr.start is not None and fr.end is not None else "partition"


def whole_partition(rel: Window) -> bool:
    """Every function of ``rel`` aggregates its whole partition (no ORDER BY, or a frame unbounded both ways).

    >>> from ddflow.plan.expr import Col
    >>> from ddflow.plan.ir import Scan
    >>> t = Scan("t", Schema(("k", "v"), ("string", "bigint")))
    >>> total = WinFunc("sum", Col(1, "bigint", "v"), frame=Frame(True, None, None))
    >>> whole_partition(Window(t, (Col(0, "string", "k"),), (), (total,), ("s",)))
    True
    """
    return all(lowered_as(f, bool(rel.order)) == "whole" for f in rel.funcs)


def _joined_aggregate(low: "Lowering", rel: Window, keyed: Callable, laid_out: Callable) -> Collection:
    """Aggregates over whole partitions: the partition's :class:`~ddflow.plan.ir.Aggregate` joined back to its rows.

    ``keyed`` gives ``(partition key, *stored row)``, the key as the
    aggregate's rows are keyed here; ``laid_out`` reads the join's
    ``(key, *row, value, null, ...)``.

    Cost: the aggregate's (compiled, O(changed rows) per step, see
    :mod:`ddflow.plan.aggregate`), then the join: a changed row emits its
    own row, a changed aggregate every row of its partition (vectorized).
    """
    from ddflow.plan.aggregate import group_key
    from ddflow.plan.ir import Aggregate
    from ddflow.plan.lower import columns_of, stored

    agg = Aggregate(rel.input, rel.partition, tuple(Agg(f.func, f.arg) for f in rel.funcs),
                    tuple(f"_p{i}" for i in range(len(rel.partition))) + rel.names)
    aschema = agg.schema
    npart = len(rel.partition)
    ptypes = aschema.types[:npart]

    def by_partition(*cols):  # (key, value, null, ...) of each partition's aggregates
        ins = columns_of(cols, aschema)
        n = len(cols[0])
        key = group_key(list(stored(ins[:npart], ptypes, n)), ptypes) if npart else np.zeros(n, dtype=np.int64)
        out = []
        for vals, null in ins[npart:]:
            out += [vals, null.astype(np.int64)]
        return (key, *out)

    joined = low.lower(rel.input).map_columns(keyed).join(low.lower(agg).map_columns(by_partition))
    return joined.map_columns(laid_out)


def _typ(e: Expr) -> str:
    return "bigint" if e.type == "null" else e.type
