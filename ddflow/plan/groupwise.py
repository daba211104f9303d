"""Aggregates computed from a group's rows, exactly: what the per-group reduce (:mod:`ddflow.plan.aggregate`'s
all-in-one path) evaluates for each changed group.

Each takes the group's non-NULL operands with their multiplicities and
returns ``(value, is NULL)`` as Spark's answer: rationals rounded once to
a double where Spark's result is a double (running sums would lose every
digit to cancellation), Spark's interpolation for PERCENTILE, and the
incremental path's own arithmetic for a decimal SUM or AVG beside them.
Cost: O(group size) per changed group (PERCENTILE: a sort of it).
"""
from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np

from ddflow.base.exactsum import exact_sum_reference
from ddflow.base.schema import decimal_ps
from ddflow.errors import SchemaError
from ddflow.plan.aggregate import average, rescaled_sum
from ddflow.plan.ir import Agg


def spread(a: Agg, live: list) -> tuple:
    """A variance or standard deviation of a group's non-NULL ``(value, multiplicity)`` pairs, exactly (rationals,
    rounded once; the root of the rounded variance): NULL for a sample of one, NaN where a value is not finite, as
    Spark.  O(len(live)).

    >>> from ddflow.plan.expr import Col
    >>> spread(Agg("var_samp", Col(0, "double")), [(1e9 + 1, 1), (1e9 + 2, 1), (1e9 + 3, 1)])
    (1.0, False)
    """
    n = sum(m for _, m in live)
    if n <= 1 and a.func.endswith("_samp"):
        return None, True
    ps = decimal_ps(a.arg.type)
    if ps is None and any(not math.isfinite(v) for v, _ in live):
        return math.nan, False
    scale = 10 ** ps[1] if ps else 1
    vals = [(Fraction(v) / scale, m) for v, m in live]
    s1 = sum(v * m for v, m in vals)
    m2 = sum(v * v * m for v, m in vals) - s1 * s1 / n
    try:
        var = float(m2 / (n - 1 if a.func.endswith("_samp") else n))
    except OverflowError:  # past the largest double
        var = math.inf
    return (math.sqrt(var) if a.func.startswith("stddev") else var), False


def decimal_total(a: Agg, live: list) -> tuple:
    """SUM or AVG of a decimal group's non-NULL ``(unscaled value, multiplicity)`` pairs, exactly as the
    incremental path computes them (SUM at the argument's scale, AVG rounded HALF_UP to 4 more places), as
    ``(unscaled value, is NULL)``.  O(len(live)).

    >>> from ddflow.plan.expr import Col
    >>> decimal_total(Agg("avg", Col(0, "decimal(7,2)")), [(125, 1), (250, 1)])
    (1875000, False)
    """
    total = sum(int(v) * m for v, m in live)
    if not -(1 << 63) <= total < (1 << 63):
        raise SchemaError(f"{a}: the result does not fit in int64 (decimal overflow)")
    arr = np.array([total], dtype=np.int64)
    if a.func == "sum":
        return int(rescaled_sum(arr, a.arg.type, a.type, a)[0]), False
    n = np.array([sum(m for _, m in live)], dtype=np.int64)
    return int(average(arr, n, a.arg.type, a.type, a)[0]), False


def moment(a: Agg, live: list) -> tuple:
    """SKEWNESS (``sqrt(n) m3 / m2^1.5``) or KURTOSIS (``n m4 / m2^2 - 3``, the excess) of a group's non-NULL
    ``(value, multiplicity)`` pairs, where ``mk`` is the sum of ``(x - mean)^k``: exact rationals, rounded once;
    NULL when every value is the mean (``m2 = 0``), NaN where a value is not finite, as Spark.  O(len(live)).

    >>> from ddflow.plan.expr import Col
    >>> moment(Agg("kurtosis", Col(0, "bigint")), [(1, 1), (2, 1), (3, 1), (10, 1)])
    (-0.7696, False)
    """
    if any(not math.isfinite(float(v)) for v, _ in live):
        return math.nan, False
    vals = [(_exact(v, a.arg.type), m) for v, m in live]
    n = sum(m for _, m in vals)
    mean = sum(v * m for v, m in vals) / n
    m2, m3, m4 = (sum((v - mean) ** k * m for v, m in vals) for k in (2, 3, 4))
    if m2 == 0:
        return None, True
    if a.func == "kurtosis":
        return float(n * m4 / (m2 * m2) - 3), False
    return float(m3 / m2) * math.sqrt(n / float(m2)), False


def try_total(a: Agg, live: list) -> tuple:
    """TRY_SUM or TRY_AVG: SUM or AVG, NULL where the sum overflows Spark's type (TRY_SUM's bigint; a decimal's
    precision).  A decimal sum within its precision but past int64 is an error, not NULL: Spark has its value
    and ddflow stores decimals in int64.  O(len(live)).

    >>> from ddflow.plan.expr import Col
    >>> x = Col(0, "bigint")
    >>> try_total(Agg("try_sum", x), [((1 << 62), 2)]), try_total(Agg("try_avg", x), [(3, 2)])
    ((None, True), (3.0, False))
    >>> try_total(Agg("try_avg", x), [((1 << 62), 4)])
    (4.611686018427388e+18, False)
    """
    t = a.arg.type
    if t == "double":
        total = exact_sum_reference([v for v, _ in live], [m for _, m in live])
        return (total if a.func == "try_sum" else total / sum(m for _, m in live)), False
    total = sum(int(v) * m for v, m in live)
    ps = decimal_ps(a.type) if a.func == "try_sum" else decimal_ps(t) and (decimal_ps(t)[0] + 10, 0)
    if ps is None and a.func == "try_avg":  # a bigint's AVG sums in double in Spark: it never overflows
        return float(total) / sum(m for _, m in live), False
    if ps is None and not -(1 << 63) <= total < (1 << 63) or ps is not None and abs(total) >= 10 ** ps[0]:
        return None, True
    if ps is None:
        return total, False
    return decimal_total(dataclasses.replace(a, func=a.func.removeprefix("try_")), live)


def covariance(a: Agg, live: list) -> tuple:
    """COVAR_POP, COVAR_SAMP, CORR or a REGR_ of a group's ``(u, v, multiplicity)`` triples (rows with both
    non-NULL; ``u`` is the first argument: REGR_'s ``y``), exactly (rationals, rounded once; CORR's root of the
    rounded product): NULL over no rows, and (a sample, or CORR) over one, as Spark; NaN where a value is not
    finite or CORR's variances are 0.  O(len(live)).

    The REGR_ functions of Spark's ``REGR_(y, x)``: ``sxx``, ``syy`` and
    ``sxy`` are the sums of squared (multiplied) deviations from the means;
    ``slope`` is sxy / sxx and ``intercept`` mean(y) - slope * mean(x), NULL
    where sxx is 0; ``r2`` is sxy**2 / (sxx * syy), NULL where sxx is 0 and 1
    where syy is.

    >>> from ddflow.plan.expr import Col
    >>> x = Col(0, "double")
    >>> covariance(Agg("covar_samp", x, other=x), [(1.0, 2.0, 1), (2.0, 4.0, 1), (3.0, 6.0, 1)])
    (2.0, False)
    >>> covariance(Agg("regr_slope", x, other=x), [(3.0, 1.0, 1), (5.0, 2.0, 1), (7.0, 3.0, 1)])
    (2.0, False)
    """
    n = sum(m for _, _, m in live)
    if n == 0 or n == 1 and a.func in ("covar_samp", "corr"):
        return None, True
    if any(not math.isfinite(float(v)) for x, y, _ in live for v in (x, y)):
        return math.nan, False
    xs, ys = ([(_exact(v, e.type), m) for v, m in zip(col, (m for *_, m in live))]
              for col, e in (((x for x, _, _ in live), a.arg), ((y for _, y, _ in live), a.other)))
    mx, my = sum(v * m for v, m in xs) / n, sum(v * m for v, m in ys) / n
    ck = sum((x - mx) * (y - my) * m for (x, m), (y, _) in zip(xs, ys))
    if a.func == "corr" or a.func.startswith("regr_"):
        vx, vy = (sum((v - mu) ** 2 * m for v, m in vs) for vs, mu in ((xs, mx), (ys, my)))
    if a.func.startswith("regr_"):  # x is the second argument: REGR_(y, x)
        sxx, syy, sxy = vy, vx, ck
        if a.func in ("regr_sxx", "regr_syy", "regr_sxy"):
            return float({"regr_sxx": sxx, "regr_syy": syy, "regr_sxy": sxy}[a.func]), False
        if sxx == 0:
            return None, True
        if a.func == "regr_slope":
            return float(sxy / sxx), False
        if a.func == "regr_intercept":
            return float(mx - sxy / sxx * my), False
        return (1.0 if syy == 0 else float(sxy * sxy / (sxx * syy))), False  # regr_r2
    if a.func == "corr":
        if vx == 0 or vy == 0:
            return math.nan, False
        return float(ck) / math.sqrt(float(vx) * float(vy)), False
    try:
        return float(ck / (n if a.func == "covar_pop" else n - 1)), False
    except OverflowError:
        return math.inf, False


def arg_by(a: Agg, live: list) -> tuple:
    """MAX_BY or MIN_BY: ``x`` of the row whose ordering value is the largest (smallest) of a group's ``(x,
    ordering, x is NULL, multiplicity)`` (rows with a NULL ordering skipped; NULL over none).  Rows that tie
    on the ordering: the largest (smallest) ``x``, so a view is deterministic where Spark picks any.
    O(len(live)).

    >>> from ddflow.plan.expr import Col
    >>> arg_by(Agg("max_by", Col(0, "string"), other=Col(1, "bigint")), [("a", 3, False, 1), ("b", 5, False, 1)])
    ('b', False)
    """
    if not live:
        return None, True
    pick = max if a.func == "max_by" else min
    x, _, null, _ = pick(live, key=lambda r: (r[1], not r[2], r[0] if not r[2] else 0))
    return (None, True) if null else (x, False)


def listagg(a: Agg, live: list) -> tuple:
    """LISTAGG (STRING_AGG) WITHIN GROUP (ORDER BY k): a group's non-NULL strings ``(x, k, k is NULL,
    multiplicity)`` in the order of ``k`` (its direction and NULLs' place as written), joined by the separator;
    NULL over none.  Rows that tie on ``k`` in the order of their strings, so a view is deterministic where
    Spark's order of ties is not.  NaN is the largest double and -0.0 is 0.0, as Spark orders them.  O(len(live)
    log len(live)).

    >>> from ddflow.plan.expr import Col
    >>> listagg(Agg("listagg", Col(0, "string"), other=Col(1, "bigint"), separator="-", desc=True, nulls_first=False),
    ...         [("a", 1, False, 2), ("b", 3, False, 1), ("c", 0, True, 1)])
    ('b-a-a-c', False)
    """
    if a.distinct:
        live = [(x, k, kn, 1) for x, k, kn in sorted({(x, k, kn) for x, k, kn, m in live if m}, key=repr)]
    if not any(m for *_, m in live):
        return None, True

    def key(row):
        _, k, kn, _ = row
        if kn:
            return (0,)
        if isinstance(k, float):
            k = (1, 0.0) if k != k else (0, k + 0.0)  # NaN last; -0.0 is 0.0
        return (1, k)
    nulls = [r for r in live if r[2]]
    ordered = sorted((r for r in live if not r[2]), key=lambda r: r[0])  # ties: by their strings
    ordered.sort(key=key, reverse=a.desc)
    ordered = nulls + ordered if a.nulls_first else ordered + nulls
    return a.separator.join(x for x, _, _, m in ordered for _ in range(m)), False


def _exact(v, t: str) -> Fraction:
    ps = decimal_ps(t)
    return Fraction(int(v), 10 ** ps[1]) if ps else Fraction(v)


def percentile(a: Agg, live: list) -> tuple:
    """PERCENTILE (and MEDIAN) of a group's non-NULL ``(value, multiplicity)`` pairs as Spark computes it: the
    values in order, position ``(n - 1) * fraction``, linear interpolation between the values either side, in
    doubles.  O(len(live) log len(live)).

    >>> from ddflow.plan.expr import Col
    >>> percentile(Agg("percentile", Col(0, "bigint"), fraction=0.25), [(1, 1), (2, 2), (10, 1)])
    (1.75, False)
    """
    ps = decimal_ps(a.arg.type)
    scale = 10 ** ps[1] if ps else 1
    vals = [(float(Fraction(int(v), scale)) if ps else float(v), m) for v, m in live if m]
    vals.sort(key=lambda vm: (math.isnan(vm[0]), vm[0]))  # NaN last, as Spark orders doubles
    n = sum(m for _, m in vals)
    position = (n - 1) * a.fraction
    lower, higher = math.floor(position), math.ceil(position)

    def at(i: int) -> float:  # the i-th value (0-based) of the expanded, sorted values
        seen = 0
        for v, m in vals:
            seen += m
            if i < seen:
                return v
        return vals[-1][0]

    lo = at(lower)
    if higher == lower:
        return lo, False
    hi = at(higher)
    if hi == lo:
        return lo, False
    return (higher - position) * lo + (position - lower) * hi, False


#: The one-operand aggregates here, by name: each ``(agg, live pairs) -> (value, is NULL)``.
def bits(a: Agg, live: list) -> tuple:
    """BIT_AND, BIT_OR or BIT_XOR of a group's non-NULL ``(value, multiplicity)`` pairs (a value counted ``m``
    times is XORed ``m`` times: in once when ``m`` is odd).  Not invertible (AND, OR), so per changed group.
    O(len(live)).

    >>> from ddflow.plan.expr import Col
    >>> x = Col(0, "bigint")
    >>> bits(Agg("bit_and", x), [(6, 1), (3, 2)]), bits(Agg("bit_or", x), [(6, 1), (3, 2)]), bits(Agg("bit_xor", x), [(6, 1), (3, 2)])
    ((2, False), (7, False), (6, False))
    """
    out = None
    for v, m in live:
        v = int(v)
        if a.func == "bit_xor":
            out = (out or 0) ^ (v if m % 2 else 0)
        elif out is None:
            out = v
        else:
            out = out & v if a.func == "bit_and" else out | v
    return out, False


def nearest_rank(a: Agg, live: list) -> tuple:
    """PERCENTILE_APPROX (APPROX_PERCENTILE) exactly: the least value with at least ``fraction`` of the group's
    values at or below it (the value at rank ``ceil(fraction * n)``, the first for 0), of the argument's type.
    Spark's sketch answers this within its accuracy's rank error, exactly for groups smaller than it
    (10,000 by default).  NaN sorts last, as Spark orders doubles; which of 0.0 and -0.0 Spark's sketch
    answers depends on the rows' order.  O(len(live) log len(live)).

    >>> from ddflow.plan.expr import Col
    >>> nearest_rank(Agg("percentile_approx", Col(0, "bigint"), fraction=0.5), [(1, 1), (2, 1), (3, 1), (4, 1)])
    (2, False)
    """
    return _at_rank(sorted(((v, m) for v, m in live if m), key=_java_order), a.fraction)


def _java_order(vm: tuple) -> tuple:
    """NaN last, and -0.0 before 0.0 (Java's Double.compare), so equal doubles give one answer whatever the order."""
    v = vm[0]
    return v != v, v, math.copysign(1.0, v) if isinstance(v, float) else 0


def _at_rank(vals: list, fraction: float) -> tuple:
    """The value at rank ``ceil(fraction * n)`` (the first for 0) of ordered ``(value, multiplicity)`` pairs."""
    rank = max(math.ceil(fraction * sum(m for _, m in vals)), 1)
    seen = 0
    for v, m in vals:
        seen += m
        if seen >= rank:
            return v, False
    return vals[-1][0], False


def discrete_percentile(a: Agg, live: list) -> tuple:
    """PERCENTILE_DISC(fraction) WITHIN GROUP (ORDER BY x [DESC]): the first value, in that order, at which the
    share of the group's values reached is at least ``fraction`` (rank ``ceil(fraction * n)``, the first for 0),
    as a double, as Spark's.  O(len(live) log len(live)).

    >>> from ddflow.plan.expr import Col
    >>> discrete_percentile(Agg("percentile_disc", Col(0, "bigint"), fraction=0.5, desc=True), [(1, 1), (3, 1)])
    (3.0, False)
    """
    ps = decimal_ps(a.arg.type)
    vals = [(float(Fraction(int(v), 10 ** ps[1])) if ps else float(v), m) for v, m in live if m]
    return _at_rank(sorted(vals, key=_java_order, reverse=a.desc), a.fraction)


def mode(a: Agg, live: list) -> tuple:
    """MODE: the most frequent of a group's non-NULL ``(value, multiplicity)`` pairs; of values tied on the
    count, the least (Spark's ``mode(x, true)``; plain ``mode(x)`` lets Spark answer any of them, and a view's
    answer must not depend on the rows' order).  All NaNs are one value, ordered last; -0.0 is 0.0.
    O(len(live) log len(live)).

    >>> from ddflow.plan.expr import Col
    >>> mode(Agg("mode", Col(0, "bigint")), [(3, 2), (1, 1), (2, 2)])
    (2, False)
    """
    counts: dict = {}
    nan = None
    for v, m in live:
        if v != v:  # NaN: not equal to itself, so not a dict key of its own
            nan = (nan or 0) + m
        else:
            v = 0.0 if isinstance(v, float) and v == 0 else v  # -0.0 is 0.0, as Spark normalizes it
            counts[v] = counts.get(v, 0) + m
    best = max((c for c in counts.values() if c), default=0)
    if nan and nan > best:
        return math.nan, False
    if not best:
        return None, True
    return min(v for v, c in counts.items() if c == best), False


ONE_OPERAND = {**dict.fromkeys(("var_samp", "var_pop", "stddev_samp", "stddev_pop"), spread), "percentile": percentile,
               "percentile_approx": nearest_rank, "percentile_disc": discrete_percentile, "mode": mode,
               "skewness": moment, "kurtosis": moment, "try_sum": try_total, "try_avg": try_total,
               **dict.fromkeys(("bit_and", "bit_or", "bit_xor"), bits)}
