"""Window functions over one sorted partition: the reduce function of :mod:`ddflow.plan.window`'s lowering.

Pure Python over a partition's rows (or a band's: a RANGE frame bounded both
ways reads only the rows near each one): sort them by the order keys with
Spark's NULL placement, ties broken by the whole stored row; find each row's
peers and its frame as positions; compute every function of the node.
Costs: :mod:`ddflow.plan.window`'s, by form.
"""
from __future__ import annotations

import bisect
import math
from collections import Counter
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING, Callable

from ddflow.base.schema import KIND, NULL_VALUE, decimal_ps
from ddflow.errors import DataflowError

if TYPE_CHECKING:
    from ddflow.plan.ir import Order
    from ddflow.plan.window import Frame, WinFunc

_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


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
        pos = [i for i in range(n) if not part[i][2 * a + 1]] if f.ignore_nulls else []
        for i in range(n):
            if f.ignore_nulls:  # the n-th non-NULL value before (after) the row
                k = bisect.bisect_left(pos, i) - f.n if f.func == "lag" else bisect.bisect_right(pos, i) + f.n - 1
                j = pos[k] if 0 <= k < len(pos) else -1
            else:
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
        if f.func == "count":  # of any type: a string or a date is counted, never added
            continue
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
