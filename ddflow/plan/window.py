"""Window functions: the plan node (:class:`Window`, its :class:`WinFunc` and :class:`Frame`) and its lowering.

The node sits beside :mod:`ddflow.plan.ir`'s (it is one of them, kept here
with the one lowering that reads it).  Lowering: one ``reduce`` per partition.

Every row is keyed by its partition (:func:`~ddflow.plan.aggregate.group_key`
of the partition values and their null bits; a constant without PARTITION
BY) and carries, before its stored fields, a value and a null flag for each
order key, function argument and LAG/LEAD default.  The reduce sorts the
partition (order keys with Spark's NULL placement, then the whole stored
row, so ties are broken by the rows alone and the result is determined),
finds each row's peers (rows equal on the order keys) and frame, and
computes every function of the node in one pass; a map lays the row and the
results out as stored fields.

Cost, by form (p rows in a changed partition; partitions a change does not
touch cost nothing; every form's output changes are the rows whose result
moved):

- ROW_NUMBER, RANK, DENSE_RANK, PERCENT_RANK, CUME_DIST, NTILE, LAG, LEAD,
  and every ROWS frame, and RANGE frames unbounded on one side (running
  sums, the default frame with ORDER BY), and DOUBLE keys: the whole
  partition is re-computed per change, O(p log p) Python per changed
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

import bisect
import dataclasses
import math
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING, Callable

import numpy as np

from ddflow.base.schema import KIND, NULL_VALUE, Schema, decimal_ps
from ddflow.collection import Collection
from ddflow.errors import DataflowError, SchemaError
from ddflow.plan.expr import Expr, as_type, evaluate, filled
from ddflow.plan.ir import RANKS, Agg, Order, _Text, _Unary, _shown, _unique

if TYPE_CHECKING:
    from ddflow.plan.lower import Lowering

_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


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


def whole_partition(rel: Window) -> bool:
    """Every function of ``rel`` aggregates its whole partition (no ORDER BY, or a frame unbounded both ways).

    >>> from ddflow.plan.expr import Col
    >>> from ddflow.plan.ir import Scan
    >>> t = Scan("t", Schema(("k", "v"), ("string", "bigint")))
    >>> total = WinFunc("sum", Col(1, "bigint", "v"), frame=Frame(True, None, None))
    >>> whole_partition(Window(t, (Col(0, "string", "k"),), (), (total,), ("s",)))
    True
    """
    def whole(f: WinFunc) -> bool:
        fr = f.frame
        return f.func in _AGGREGATES and ((fr.start is None and fr.end is None) or (not fr.rows and not rel.order))

    return all(whole(f) for f in rel.funcs)


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


class _Desc:
    """A sort key reversed (strings and numbers sorted descending in one key tuple)."""

    __slots__ = ("v",)

    def __init__(self, v):
        self.v = v

    def __lt__(self, other: "_Desc") -> bool:
        return other.v < self.v

    def __eq__(self, other) -> bool:
        return self.v == other.v

    def __hash__(self) -> int:
        return hash(self.v)


def _value_key(typ: str) -> Callable:
    """A value's sort key: NaN after every double (Spark's order), equal to itself."""
    if KIND[typ] == "f":
        return lambda v: (1, 0.0) if v != v else (0, v)
    return lambda v: v


def window_logic(order: tuple[Order, ...], otypes: tuple[str, ...], funcs: tuple[WinFunc, ...],
                 slots: list[tuple[int | None, int | None]], ncarried: int, flagged: bool = False) -> Callable:
    """The reduce function of a :class:`~ddflow.plan.ir.Window`: values ``(v, null, ..., *row)`` per partition.

    ``slots[j]`` gives the carried fields of function ``j``'s argument and
    default.  Each output value is ``(*row, result, null, ...)``.
    ``flagged``: each value leads with a flag, and only the rows flagged 1
    are given results (a band's own rows; the others are their frames' context).
    """
    vkeys = [_value_key(t) for t in otypes]
    lead = 2 * ncarried

    def order_key(t: tuple) -> tuple:
        out = []
        for i, o in enumerate(order):
            if t[2 * i + 1]:
                out.append((0,) if o.nulls_first else (2,))
            else:
                k = vkeys[i](t[2 * i])
                out.append((1, _Desc(k) if o.desc else k))
        return tuple(out)

    def windowed(key, vals):
        if flagged:
            rows = [(order_key(v[1:]), tuple(map(_order, v[1 + lead:])), v[1:], m, v[0]) for v, m in vals if m > 0]
        else:
            rows = [(order_key(v), tuple(map(_order, v[lead:])), v, m, 1) for v, m in vals if m > 0]
        rows.sort(key=lambda r: (r[0], r[1]))
        part = [r[2] for r in rows for _ in range(r[3])]
        peers = [r[0] for r in rows for _ in range(r[3])]
        owned = [r[4] for r in rows for _ in range(r[3])]
        results = [_function(f, slot, part, peers, order, otypes) for f, slot in zip(funcs, slots)]
        out: Counter = Counter()
        for i, t in enumerate(part):
            if not owned[i]:
                continue
            res = []
            for r in results:
                res += r[i]
            out[(*t[lead:], *res)] += 1
        return list(out.items())

    windowed.__name__ = "window"
    return windowed


def _peer_bounds(peers: list[tuple]) -> tuple[list[int], list[int], list[int]]:
    """Per row: the first row of its peers, one past the last, and its dense rank."""
    n = len(peers)
    start, end, dense = [0] * n, [0] * n, [0] * n
    i, d = 0, 0
    while i < n:
        j = i + 1
        while j < n and peers[j] == peers[i]:
            j += 1
        d += 1
        for x in range(i, j):
            start[x], end[x], dense[x] = i, j, d
        i = j
    return start, end, dense


def _function(f: WinFunc, slot, part: list[tuple], peers: list[tuple], order: tuple[Order, ...],
              otypes: tuple[str, ...]) -> list[tuple]:
    """``[(value, null)]`` of ``f`` for each row of the sorted partition ``part``."""
    n = len(part)
    a, d = slot
    null_of = NULL_VALUE[KIND[f.type]] if f.type in KIND else 0
    none = (null_of, 1)
    if f.func in ("row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile"):
        ps, pe, dense = _peer_bounds(peers)
        if f.func == "row_number":
            return [(i + 1, 0) for i in range(n)]
        if f.func == "rank":
            return [(ps[i] + 1, 0) for i in range(n)]
        if f.func == "dense_rank":
            return [(dense[i], 0) for i in range(n)]
        if f.func == "percent_rank":
            return [((ps[i] / (n - 1)) if n > 1 else 0.0, 0) for i in range(n)]
        if f.func == "cume_dist":
            return [(pe[i] / n, 0) for i in range(n)]
        q, r = divmod(n, f.n)  # the first r buckets hold q + 1 rows
        big = r * (q + 1)
        return [((i // (q + 1) + 1) if i < big else ((i - big) // q + r + 1), 0) for i in range(n)]
    if f.func in ("lag", "lead"):
        step = -f.n if f.func == "lag" else f.n
        out = []
        for i in range(n):
            j = i + step
            if 0 <= j < n:
                out.append((part[j][2 * a], part[j][2 * a + 1]))
            elif d is not None:
                out.append((part[i][2 * d], part[i][2 * d + 1]))
            else:
                out.append(none)
        return out
    lo, hi = _frames(f.frame, peers, part, order, otypes)
    if f.func == "count_star":
        return [(max(0, h - l), 0) for l, h in zip(lo, hi)]
    vals = [t[2 * a] for t in part]
    live = [not t[2 * a + 1] for t in part]
    if f.func in ("first_value", "last_value", "nth_value"):
        return _values(f, vals, live, lo, hi, none)
    if f.func in ("min", "max"):
        return _extremes(f, vals, live, lo, hi, none)
    return _sums(f, vals, live, lo, hi, none)


def _frames(frame: Frame, peers, part, order, otypes) -> tuple[list[int], list[int]]:
    """Each row's frame as ``[lo, hi)`` positions of the sorted partition (empty where ``lo >= hi``)."""
    n = len(part)
    idx = range(n)
    if frame.rows:
        lo = [0 if frame.start is None else min(n, max(0, i + frame.start)) for i in idx]
        hi = [n if frame.end is None else max(0, min(n, i + frame.end + 1)) for i in idx]
        return lo, hi
    ps, pe, _ = _peer_bounds(peers)
    lo = [0] * n if frame.start is None else list(ps)
    hi = [n] * n if frame.end is None else list(pe)
    offsets = [b for b in (frame.start, frame.end) if b]
    if not offsets:
        return lo, hi
    # RANGE with an offset: one numeric order key; bounds by value among the rows whose key is not NULL
    # (a NULL row's bound is its peers, as Spark compares NULL + offset with the keys).
    o, typ = order[0], otypes[0]
    vk = _value_key(typ)
    scale = decimal_ps(typ)
    live = [i for i in idx if not part[i][1]]
    first = live[0] if live else 0
    keys = [vk(part[i][0]) for i in live]
    if o.desc:
        keys = [_negated(k) for k in keys]

    def moved(v, off):
        if scale is not None:
            off = int(Decimal(str(off)).scaleb(scale[1]))
        return v - off if o.desc else v + off

    def tkey(v):
        k = vk(v)
        return _negated(k) if o.desc else k

    for i in live:
        v = part[i][0]
        if frame.start:
            lo[i] = first + bisect.bisect_left(keys, tkey(moved(v, frame.start)))
        if frame.end:
            hi[i] = first + bisect.bisect_right(keys, tkey(moved(v, frame.end)))
    return lo, hi


def _negated(k):
    return (-k[0], -k[1]) if isinstance(k, tuple) else -k


def _values(f: WinFunc, vals, live, lo, hi, none) -> list[tuple]:
    """FIRST_VALUE, LAST_VALUE and NTH_VALUE of each frame (IGNORE NULLS: among its non-NULL values)."""
    n = len(vals)
    pos = [i for i in range(n) if live[i]]
    out = []
    for l, h in zip(lo, hi):
        if l >= h:
            out.append(none)
            continue
        if not f.ignore_nulls:
            j = {"first_value": l, "last_value": h - 1}.get(f.func, l + f.n - 1)
            out.append((vals[j], 0) if j < h and live[j] else none)
            continue
        a, b = bisect.bisect_left(pos, l), bisect.bisect_left(pos, h)  # pos[a:b]: the frame's non-NULL rows
        k = {"first_value": a, "last_value": b - 1}.get(f.func, a + f.n - 1)
        out.append((vals[pos[k]], 0) if a <= k < b else none)
    return out


def _extremes(f: WinFunc, vals, live, lo, hi, none) -> list[tuple]:
    """MIN and MAX of each frame's non-NULL values: running where every frame starts (or ends) at the edge."""
    n = len(vals)
    vk = (lambda v: (1, 0.0) if v != v else (0, v)) if any(isinstance(v, float) for v in vals) else (lambda v: v)
    better = (lambda x, y: vk(x) < vk(y)) if f.func == "min" else (lambda x, y: vk(x) > vk(y))

    def scan(indices):
        acc, best = [], None
        for i in indices:
            if live[i] and (best is None or better(vals[i], best)):
                best = vals[i]
            acc.append(best)
        return acc

    if all(l == 0 for l in lo):
        run = scan(range(n))
        return [none if h <= 0 or run[h - 1] is None else (run[h - 1], 0) for h in hi]
    if all(h == n for h in hi):
        run = scan(range(n - 1, -1, -1))[::-1]
        return [none if l >= n or run[l] is None else (run[l], 0) for l in lo]
    out, memo = [], {}
    for l, h in zip(lo, hi):
        if (l, h) not in memo:
            got = scan(range(l, h))
            memo[(l, h)] = none if not got or got[-1] is None else (got[-1], 0)
        out.append(memo[(l, h)])
    return out


def _sums(f: WinFunc, vals, live, lo, hi, none) -> list[tuple]:
    """COUNT, SUM and AVG of each frame by prefix sums (exact: doubles as fractions, rounded once)."""
    n = len(vals)
    t = f.arg.type
    double = KIND[t] == "f"
    count = [0] * (n + 1)
    total: list = [0] * (n + 1)
    odd = [(0, 0, 0)] * (n + 1)  # doubles: counts of NaN, +inf, -inf
    for i in range(n):
        count[i + 1] = count[i] + live[i]
        v = vals[i] if live[i] else 0
        if double:
            nan, pinf, ninf = odd[i]
            if v != v:
                nan, v = nan + 1, 0
            elif v in (math.inf, -math.inf):
                pinf, ninf = pinf + (v > 0), ninf + (v < 0)
                v = 0
            odd[i + 1] = (nan, pinf, ninf)
            total[i + 1] = total[i] + Fraction(v)
        else:
            total[i + 1] = total[i] + v
    out = []
    for l, h in zip(lo, hi):
        l, h = min(l, n), max(min(h, n), 0)
        c = count[h] - count[l] if l < h else 0
        if f.func == "count":
            out.append((c, 0))
            continue
        if c == 0:
            out.append(none)
            continue
        s = total[h] - total[l]
        if double:
            nan, pinf, ninf = (x - y for x, y in zip(odd[h], odd[l]))
            s = math.nan if nan or (pinf and ninf) else math.inf if pinf else -math.inf if ninf else float(s)
            out.append((s if f.func == "sum" else s / c, 0))
            continue
        if f.func == "sum":
            if f.type == "bigint" or decimal_ps(f.type) is not None:
                if not _I64_MIN <= s <= _I64_MAX:
                    raise DataflowError(f"SQL: {f}: the sum does not fit in {f.type}")
            out.append((int(s), 0))
            continue
        ps_in, ps_out = decimal_ps(t), decimal_ps(f.type)
        if ps_out is None:
            out.append((float(s) / c, 0))
            continue
        q, rem = divmod(abs(s) * 10 ** (ps_out[1] - ps_in[1]), c)  # HALF_UP at the result's scale
        q += 2 * rem >= c
        out.append((q if s >= 0 else -q, 0))
    return out


def _order(v):
    return (type(v).__name__, v)
