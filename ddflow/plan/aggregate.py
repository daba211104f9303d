"""Lowering a GROUP BY (:class:`~ddflow.plan.ir.Aggregate`) to operators that cost the changes, not the groups.

A refresh must not re-read a changed group's history, so each aggregate
takes the cheapest exact route:

- COUNT(*), COUNT(x), SUM(x) and AVG(x) over bigint and decimal (stored as
  unscaled int64) are diff-weighted sums: one
  :meth:`~ddflow.collection.Collection.accumulate` per aggregate node keeps,
  per group, the row count and the sums of its weights (the not-NULL flag
  for COUNT(x); the value with NULL as 0, and the not-NULL count, for SUM
  and AVG, so a SUM of only NULLs is NULL).  Its state is O(1) rows per
  group and a step is vectorized.  A sum past int64 is an error naming the
  operator.
- The DISTINCT forms of those go through a ``distinct`` of (group, x)
  (NULL x left out) whose changes feed the same accumulate with weights of
  their own (1, and x).
- MIN and MAX: per aggregate, the non-NULL values keyed by the group go
  through ``min``/``max`` (the compiled walk tactic over the group's
  arranged values; string values are ranked by their decoded values in
  the step).  The group key is :func:`group_key`: the group value itself
  for one string column (NULL is None, never a string), else a tuple of
  the group values and their null bits (built per changed row).
- SUM and AVG over double are the same diff-weighted sums, with the value
  as a float weight of the accumulate: summed exactly (its integer limbs,
  :mod:`ddflow.base.exactsum`) and rounded once, so a retraction undoes
  exactly and the result depends only on the group's rows, never on the
  order of their updates.  AVG is that sum divided by the count.

The parts meet in one stored row per group (group values, aggregates,
null mask) by left joins of the accumulate's rows (one per group) with
each MIN/MAX part (at most one per group), on the first group field
and then equal group fields and null bits.  NULL group values group
together; a global aggregate has exactly one row, also over no input
(counts 0, the other aggregates NULL).

The statistics (variances, standard deviations, covariances, CORR,
PERCENTILE and MEDIAN, MAX_BY and MIN_BY; :data:`STATISTICS`) take the
all-in-one reduce, which re-reads each changed group's rows and computes
them exactly (:mod:`ddflow.plan.groupwise`): O(group size) per changed group.
Running sums of x and x squared would be O(1) but lose every digit to
cancellation when the mean is large against the spread.

``GENERIC`` (or ``lower_aggregate(..., generic=True)``) selects that
all-in-one reduce for every aggregate, which ``bench.aggregates``
compares against.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from ddflow.base import nullmask
from ddflow.base.schema import KIND, NULL_VALUE
from ddflow.collection import Collection
from ddflow.errors import SchemaError
from ddflow.plan.expr import Expr, evaluate
from ddflow.plan.ir import Agg, Aggregate

if TYPE_CHECKING:
    from ddflow.plan.lower import Lowering

#: The aggregates computed from each changed group's rows (:mod:`ddflow.plan.groupwise`).
STATISTICS = ("var_samp", "var_pop", "stddev_samp", "stddev_pop", "percentile", "covar_pop", "covar_samp", "corr",
              "max_by", "min_by", "try_sum", "try_avg", "skewness", "kurtosis", "bit_and", "bit_or", "bit_xor",
              "percentile_approx", "regr_sxx", "regr_syy", "regr_sxy", "regr_slope", "regr_intercept", "regr_r2",
              "mode", "listagg", "percentile_disc")
#: Lower every aggregate through the former per-key reduce (the bench's "before"); tests and bench only.
GENERIC = False

_I64_MAX = (1 << 63) - 1
_DTYPE = {"i": np.int64, "f": np.float64, "b": bool, "o": object}
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")


def decimal_scale(t: str) -> tuple[int, int] | None:
    """``(precision, scale)`` of ``decimal(p,s)``, None for other types.

    >>> decimal_scale("decimal(15,2)"), decimal_scale("bigint")
    ((15, 2), None)
    """
    m = _DECIMAL.match(t)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _kind(t: str) -> str:
    return "i" if decimal_scale(t) else KIND.get(t, "i" if t == "null" else "o")


#: Weights that are float64 (exact sums of doubles); the others are int64.
_FLOAT_WEIGHTS = ("fval", "dfsum")


def _float_arg(a: Agg) -> bool:
    return a.arg is not None and a.arg.type == "double"


def lower_aggregate(low: "Lowering", rel: Aggregate, generic: bool | None = None) -> "Collection":
    """The stored rows of ``rel`` (group values, aggregates, mask): see the module docstring."""
    if (GENERIC if generic is None else generic) or any(a.func in STATISTICS for a in rel.aggs):
        return _generic(low, rel)
    return _Plan(low, rel).build()


class _Plan:
    def __init__(self, low: "Lowering", rel: Aggregate):
        self.low, self.rel = low, rel
        self.src = rel.input.schema
        self.k = len(rel.group)
        self.gtypes = tuple(g.type for g in rel.group)
        self.nf = nullmask.width(self.k) if self.k else 1  # group fields: values and mask words, or one constant
        self.weights: list[tuple] = []  # ("one",) | ("nn", x) | ("val", x) | ("dcount", x) | ("dsum", x)

    def weight(self, spec: tuple) -> int:
        if spec not in self.weights:
            self.weights.append(spec)
        return self.weights.index(spec)

    def group_fields(self, ins, n: int) -> list[np.ndarray]:
        """The group values (NULL as the canonical value) and their null bits, or one constant."""
        from ddflow.plan.lower import stored

        if not self.k:
            return [np.zeros(n, dtype=np.int64)]
        fields = list(stored([evaluate(g, ins) for g in self.rel.group], self.gtypes, n))
        for j, t in enumerate(self.gtypes):  # -0.0 groups as 0.0, and is shown so, as Spark normalizes keys
            if t == "double":
                fields[j] = fields[j] + 0.0
        return fields

    def build(self) -> "Collection":
        from ddflow.plan.lower import columns_of

        rel, low, src = self.rel, self.low, self.src
        aggs = rel.aggs
        distinct_args: list[Expr] = []
        plan: list[tuple] = []  # per aggregate: how its value is read (weights by their index in self.weights)
        parts: list[Agg] = []  # the MIN/MAX aggregates, each a side joined to the accumulate's rows
        for a in aggs:
            floating = _float_arg(a)
            if a.func in ("min", "max"):
                parts.append(a)
                plan.append(("extreme", len(parts) - 1, 0))
            elif a.distinct and a.func != "count_star":
                if a.arg not in distinct_args:
                    distinct_args.append(a.arg)
                plan.append(("distinct", self.weight(("dcount", a.arg)),
                             self.weight(("dfsum" if floating else "dsum", a.arg)) if a.func != "count" else None))
            elif a.func == "count_star":
                plan.append(("star",))
            elif a.func == "count":
                plan.append(("count", self.weight(("nn", a.arg))))
            else:
                plan.append(("sum", self.weight(("nn", a.arg)), self.weight(("fval" if floating else "val", a.arg))))
        star = None
        if distinct_args:  # the count is then no longer the rows' count: weigh the rows themselves
            star = self.weight(("one",))
        # The accumulate's weights: the int64 ones, then the float64 ones.
        weights = [w for w in self.weights if w[0] not in _FLOAT_WEIGHTS]
        weights += [w for w in self.weights if w[0] in _FLOAT_WEIGHTS]
        at = [weights.index(w) for w in self.weights]
        plan = [(how[0], *(None if i is None else at[i] for i in how[1:])) if how[0] in ("sum", "distinct", "count")
                else how for how in plan]
        star = None if star is None else at[star]
        floats = sum(w[0] in _FLOAT_WEIGHTS for w in weights)

        def main(*cols):
            n = len(cols[0])
            ins = columns_of(cols, src)
            out = self.group_fields(ins, n)
            cache: dict = {}
            for j, spec in enumerate(weights):
                if spec[0] == "one":
                    out.append(np.ones(n, dtype=np.int64))
                elif spec[0] in ("nn", "val", "fval"):
                    key = id(spec[1])
                    if key not in cache:
                        cache[key] = evaluate(spec[1], ins)
                    vals, null = cache[key]
                    if spec[0] == "nn":
                        out.append((~null).astype(np.int64))
                    elif spec[0] == "val":
                        out.append(_int_values(vals, null))
                    else:
                        out.append(np.where(null, 0.0, vals).astype(np.float64))
                else:
                    out.append(np.zeros(n, dtype=np.float64 if spec[0] in _FLOAT_WEIGHTS else np.int64))
            return tuple(out)

        base = low.lower(rel.input)
        placed = low._placed_by(rel.input, rel.group[0] if self.k else None)
        rows = base.map_columns(main)
        rows.partitioned = placed
        feeds = [rows]
        for x in distinct_args:
            feeds.append(self._distinct_feed(base, x, weights))
        fed = feeds[0].concat(*feeds[1:]) if len(feeds) > 1 else feeds[0]
        fed.partitioned = placed and len(feeds) == 1
        acc = fed.accumulate(groups=self.nf, weights=len(weights) - floats, floats=floats)
        # acc rows: (group fields.., c, S_0..); each part adds (values.., null bits).
        width = self.nf + 1 + len(weights)
        widths = []
        combined = acc
        for a in parts:
            side, types = self._extreme(base, a)
            combined = self._left_join(combined, width, side, types)
            width += nullmask.width(len(types))
            widths.append(len(types))
        out_types = rel.schema.types
        result = combined.map_columns(self._finish(plan, star, widths, out_types, len(weights)))
        if self.k:
            return result
        return self._with_default(acc, result, out_types)

    def _distinct_feed(self, base: "Collection", x: Expr, weights: list[tuple]) -> "Collection":
        """Distinct (group, x) of the rows with x not NULL, as accumulate records weighing 1 and x."""
        from ddflow.plan.lower import columns_of

        src, nf = self.src, self.nf

        def pairs(*cols):
            ins = columns_of(cols, src)
            vals, null = evaluate(x, ins)
            keep = ~null
            fields = self.group_fields(ins, len(cols[0]))
            return tuple(f[keep] for f in fields) + (np.asarray(vals)[keep],)

        def weighed(*cols):
            n = len(cols[0])
            out = list(cols[:nf])
            for spec in weights:
                if spec[0] == "dcount" and spec[1] == x:
                    out.append(np.ones(n, dtype=np.int64))
                elif spec[0] == "dsum" and spec[1] == x:
                    out.append(_int_values(cols[nf], np.zeros(n, dtype=bool)))
                elif spec[0] == "dfsum" and spec[1] == x:
                    out.append(np.asarray(cols[nf], dtype=np.float64))
                else:
                    out.append(np.zeros(n, dtype=np.float64 if spec[0] in _FLOAT_WEIGHTS else np.int64))
            return tuple(out)

        # filter first, then map: map_columns keeps the row count, so NULL x rows are dropped by a filter.
        kept = base.filter_columns(lambda *cols: ~evaluate(x, columns_of(cols, src))[1])
        return kept.map_columns(pairs).distinct().map_columns(weighed)

    def _key(self, fields: list[np.ndarray]) -> np.ndarray:
        """One exact field per group: the constant, or :func:`group_key`."""
        return group_key(fields, self.gtypes) if self.k else fields[0]

    def _unkey(self, key: np.ndarray) -> list[np.ndarray]:
        """The group fields back from :meth:`_key`'s field."""
        if not self.k:
            return [np.asarray(key, dtype=np.int64)]
        if self.k == 1 and _kind(self.gtypes[0]) == "o":
            return [key, *nullmask.encode([np.array([v is None for v in key], dtype=bool)], len(key))]
        tuples = key.tolist()
        cols = [np.array([t[i] for t in tuples], dtype=object) for i in range(self.nf)]
        return ([c.astype(_DTYPE[_kind(t)]) for c, t in zip(cols, self.gtypes)]
                + [c.astype(np.int64) for c in cols[self.k:]])

    def _extreme(self, base: "Collection", a: Agg) -> tuple["Collection", tuple[str, ...]]:
        """Per group, MIN or MAX of the non-NULL values: (group fields.., value, 0)."""
        from ddflow.plan.lower import columns_of

        src, x = self.src, a.arg

        def keyed(*cols):
            ins = columns_of(cols, src)
            vals, _ = evaluate(x, ins)
            return self._key(self.group_fields(ins, len(cols[0]))), vals

        kept = base.filter_columns(lambda *cols: ~evaluate(x, columns_of(cols, src))[1])
        pairs = kept.map_columns(keyed)
        best = pairs.min() if a.func == "min" else pairs.max()
        side = best.map_columns(lambda key, v: (*self._unkey(key), v, *nullmask.zeros(1, len(v))))
        return side, (a.type,)

    def _left_join(self, left: "Collection", width: int, side: "Collection", types: tuple[str, ...]) -> "Collection":
        """``left`` rows (one per group) with ``side``'s values of the same group, or NULLs where it has none."""
        nf, nvals = self.nf, len(types)
        joined = left.join(side)  # (g_0, left[1:].., side[1:]..)
        # side fields after the join: group fields 1.. at width.., then values, then null bits.
        def same_group(*cols):
            ok = np.ones(len(cols[0]), dtype=bool)
            for i in range(1, nf):
                ok &= _equal(cols[i], cols[width + i - 1])
            return ok

        matched = joined.filter_columns(same_group)
        vals_at = width + nf - 1
        pairs = matched.project(*range(width), *range(vals_at, vals_at + nullmask.width(nvals)))
        pairs.partitioned = True
        lost = left.concat(pairs.project(*range(width)).negate())

        def padded(*cols):
            n = len(cols[0])
            nulls = [np.full(n, NULL_VALUE[_kind(t)], dtype=_DTYPE[_kind(t)]) for t in types]
            return (*cols, *nulls, *nullmask.all_null(nvals, n))

        out = pairs.concat(lost.map_columns(padded))
        out.partitioned = True
        return out

    def _finish(self, plan: list[tuple], star: int | None, widths: list[int], out_types: tuple[str, ...],
                nw: int):
        """The map from combined records to the stored output row."""
        from ddflow.plan.lower import stored

        k, nf, aggs = self.k, self.nf, self.rel.aggs
        offsets, at = [], nf + 1 + nw
        for w in widths:
            offsets.append(at)
            at += nullmask.width(w)
        gtypes = self.gtypes

        def finish(*cols):
            n = len(cols[0])
            c = np.asarray(cols[nf], dtype=np.int64)
            S = [np.asarray(cols[nf + 1 + j]) for j in range(nw)]
            out = []
            if k:
                out += list(zip(cols[:k], nullmask.null_columns(cols[k:nf], k)))
            for a, how, typ in zip(aggs, plan, out_types[k:]):
                none = np.zeros(n, dtype=bool)
                if how[0] == "star":
                    out.append((S[star] if star is not None else c, none))
                elif how[0] == "count":
                    out.append((S[how[1]], none))
                elif how[0] in ("sum", "distinct"):
                    cnt = S[how[1]]
                    if a.func == "count":
                        out.append((cnt, none))
                        continue
                    total = S[how[2]]
                    null = cnt == 0
                    if a.func == "sum":
                        out.append((rescaled_sum(total, a.arg.type, typ, a), null))
                    else:
                        out.append((average(total, np.where(null, 1, cnt), a.arg.type, typ, a), null))
                else:
                    off, w = offsets[how[1]], widths[how[1]]
                    out.append((cols[off + how[2]], nullmask.null_column(cols[off + w:off + nullmask.width(w)], how[2])))
            return stored(out, gtypes + tuple(out_types[k:]), n)

        return finish

    def _with_default(self, acc: "Collection", rows: "Collection", out_types) -> "Collection":
        """A global aggregate's one row over no input: counts 0, the rest NULL, while no group exists."""
        width = nullmask.width(len(out_types))
        present = acc.project(0).distinct()
        return _default_row(self.low, self.rel.aggs).antijoin(present).project(*range(1, width + 1)).concat(rows)


def group_key(fields: list[np.ndarray], types: tuple[str, ...]) -> np.ndarray:
    """One exact field per group from its stored fields (values, then the null mask).

    The value itself for one string column (NULL is None, never a
    string), else a tuple of all the fields, built per row (the one place
    a grouping pays Python per changed row).
    """
    if len(types) == 1 and _kind(types[0]) == "o":
        return fields[0]
    key = np.empty(len(fields[0]), dtype=object)
    key[:] = list(zip(*(np.asarray(f).tolist() for f in fields)))
    return key


def _equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype == object or b.dtype == object:
        return np.array([x == y for x, y in zip(a.tolist(), b.tolist())], dtype=bool)
    return a == b


def _int_values(vals: np.ndarray, null: np.ndarray) -> np.ndarray:
    """Integer (or unscaled decimal) values with NULL as 0, as int64."""
    if vals.dtype == object:  # the NULL type: every value is NULL (evaluate gives a decimal as int64)
        if not null.all():
            raise SchemaError(f"a sum of {vals[~null][0]!r}: not an integer or decimal")
        return np.zeros(len(vals), dtype=np.int64)
    return np.where(null, 0, vals).astype(np.int64)


def rescaled_sum(total: np.ndarray, arg_type: str, out_type: str, a: Agg) -> np.ndarray:
    """A sum of unscaled values of ``arg_type`` in the unscaled form of ``out_type`` (checked)."""
    si, so = decimal_scale(arg_type), decimal_scale(out_type)
    if si is None or so is None:
        return total
    d = so[1] - si[1]
    if d:
        total = _scaled_up(total, d, a)
    _check_precision(total, so[0], a)
    return total


def _scaled_up(x: np.ndarray, d: int, a: Agg) -> np.ndarray:
    from ddflow.base.columnar import wrapping_products

    p, wrapped = wrapping_products(x, np.full(len(x), 10 ** d, dtype=np.int64))
    if wrapped.any():
        raise SchemaError(f"{a}: the result does not fit in int64 (decimal overflow)")
    return p


def _check_precision(x: np.ndarray, precision: int, a: Agg) -> None:
    if precision < 19 and len(x) and int(np.abs(x).max()) >= 10 ** precision:
        raise SchemaError(f"{a}: the result does not fit in decimal precision {precision} (decimal overflow)")


def average(total: np.ndarray, count: np.ndarray, arg_type: str, out_type: str, a: Agg) -> np.ndarray:
    """AVG from a sum and a (positive) count: a double, or a decimal rounded HALF_UP to ``out_type``'s scale."""
    si, so = decimal_scale(arg_type), decimal_scale(out_type)
    if so is None:
        return total.astype(np.float64) / count
    d = so[1] - (si[1] if si is not None else 0)
    return half_up_quotient(total, count, d, a, so[0])


def half_up_quotient(num: np.ndarray, den: np.ndarray, d: int, a: Agg | str = "avg", precision: int = 38) -> np.ndarray:
    """``round_half_up(num * 10**d / den)`` exactly, for int64 ``num`` and positive int64 ``den``.

    Vectorized in int64 while ``2 * |num| * 10**d + den`` fits, else in
    Python integers on an object array; a result past int64 (or past
    ``precision`` digits) is an error.

    >>> half_up_quotient(np.array([5, -5, 7]), np.array([2, 2, 3]), 0).tolist()
    [3, -3, 2]
    """
    num = np.asarray(num, dtype=np.int64)
    den = np.asarray(den, dtype=np.int64)
    scale = 10 ** d
    bound = (_I64_MAX - int(den.max(initial=0))) // (2 * scale)
    if not len(num) or int(np.abs(num).max()) <= bound:
        mag = (2 * np.abs(num) * scale + den) // (2 * den)
        out = np.where(num < 0, -mag, mag)
    else:
        big = np.array([(2 * abs(int(x)) * scale + int(y)) // (2 * int(y)) * (-1 if x < 0 else 1)
                        for x, y in zip(num.tolist(), den.tolist())], dtype=object)
        if any(not -_I64_MAX - 1 <= int(v) <= _I64_MAX for v in big):
            raise SchemaError(f"{a}: the result does not fit in int64 (decimal overflow)")
        out = big.astype(np.int64)
    _check_precision(out, precision, a)
    return out


def _generic(low: "Lowering", rel: Aggregate) -> "Collection":
    """The former lowering: one per-key reduce computes every aggregate from each changed group's rows."""
    from ddflow.plan.lower import _aggregate_logic, columns_of, stored

    src = rel.input.schema
    k, aggs = len(rel.group), rel.aggs
    args = [x for a in aggs for x in a.operands()]
    arg_pos: list[int | None] = []
    at = k
    for a in aggs:  # each aggregate's first operand (a second one follows it)
        arg_pos.append(None if a.arg is None else at)
        at += len(a.operands())
    types = tuple(g.type for g in rel.group) + tuple(x.type for x in args)

    def prepared(*cols):
        ins = columns_of(cols, src)
        fields = stored([evaluate(e, ins) for e in (*rel.group, *args)], types, len(cols[0]))
        return fields if k else (np.zeros(len(fields[-1]), dtype=np.int64), *fields)

    out_types = rel.schema.types
    keyed = low.lower(rel.input).map_columns(prepared)
    keyed.partitioned = low._placed_by(rel.input, rel.group[0] if k else None)
    reduced = keyed.reduce(_aggregate_logic(k, aggs, arg_pos, out_types, nullmask.words(len(types))))
    width = nullmask.width(len(out_types))
    if k:
        return reduced
    rows = reduced.project(*range(1, width + 1))
    present = reduced.project(0).distinct()
    return _default_row(low, aggs).antijoin(present).project(*range(1, width + 1)).concat(rows)


def _default_row(low: "Lowering", aggs: tuple[Agg, ...]) -> Collection:
    """A global aggregate's row over no input, under key 0: counts 0, the rest NULL (a constant, not an input)."""
    default = tuple(0 if a.func in ("count", "count_star") else NULL_VALUE[_kind(a.type)] for a in aggs)
    masks = nullmask.row_encode([a.func not in ("count", "count_star") for a in aggs])
    return Collection.constant(low.scope, [(0, *default, *masks)], name=low.scope.ctx.fresh("default"))
