"""Lowering the plan IR to ddflow operators.

Rows are stored as :mod:`ddflow.base.schema` lays them out: the column
values, then the null mask's words (:mod:`ddflow.base.nullmask`, which
alone shifts their bits).  Each plan node becomes a few
operators:

- Filter and Project: one vectorized ``filter_columns`` / ``map_columns``
  (:func:`ddflow.plan.expr.evaluate` over whole columns).
- Join: each side keyed by its join key (rows with a NULL key dropped:
  they match nothing), an arranged ``join``, then one ``map_columns``
  that lays the pair out and a ``filter_columns`` for the residual.
- Aggregate: :mod:`ddflow.plan.aggregate` (diff-weighted sums, and
  ``min``/``max`` walks, met per group by left joins; a global aggregate
  adds its one default row while its input is empty).
- TopK: with row numbers or none and a limit, ``top_k`` keyed by the whole
  partition (:mod:`ddflow.plan.ranking`, compiled); RANK, DENSE_RANK and
  strings sorted descending, one ``reduce`` per partition (Python per
  changed key, proportional to its history).
- Window: :mod:`ddflow.plan.window` (a ``reduce`` per partition, or per
  band of the key for a RANGE frame bounded both ways; aggregates of whole
  partitions as their aggregate joined back to the rows).
- Distinct: ``distinct``; UNION, INTERSECT and EXCEPT: :mod:`ddflow.plan.setops`.

A plan node used twice is lowered once (``Lowering.memo``), so a shared
subquery shares its operators and arrangements.

A :class:`Lowering` holds the tables and the scope to build in, never the
dataflow: what it adds beside the plan's operators (a fixpoint's loop
and its empty starts, a global aggregate's default row) are built from
the scope (:meth:`ddflow.Collection.empty`, :meth:`ddflow.Collection.constant`),
never extra inputs.  It knows no SQL: any front end's plan lowers here.
"""
from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from ddflow.base import nullmask
from ddflow.base.exactsum import exact_sum_reference
from ddflow.base.schema import KIND, NULL_VALUE, Schema
from ddflow.collection import Collection, Variable
from ddflow.errors import DataflowError, SchemaError
from ddflow.graph.scope import IterativeScope, Scope
from ddflow.plan import setops
from ddflow.plan.groupwise import ONE_OPERAND, arg_by, covariance, decimal_total, listagg
from ddflow.plan.expr import Call, Col, Column, Expr, as_type, evaluate, filled, null_values
from ddflow.plan.ir import (Agg, Aggregate, CloseAt, Distinct, Filter, Join, OneRow, Order, Project, RecRef, Recursive,
                            Rel, Scan, Sessionized, SemiJoin, SetOp, TemporalFilter, TopK, Union, Values, Windowed)
from ddflow.plan.limits import LoopLimits
from ddflow.plan.partition import partitioned_by
from ddflow.plan.setops import row_key

_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


def columns_of(cols: tuple[np.ndarray, ...], schema: Schema) -> list[Column]:
    """Stored field columns (values, then the mask words) as ``(values, null)`` pairs."""
    n = len(schema.types)
    nulls = nullmask.null_columns(cols[n:n + nullmask.words(n)], n)
    out = []
    for j, typ in enumerate(schema.types):
        vals = cols[j]
        if KIND[typ] == "o" and vals.dtype != object:
            vals = vals.astype(object)
        out.append((vals, nulls[j]))
    return out


def stored(cols: list[Column], types: tuple[str, ...], n: int | None = None) -> tuple[np.ndarray, ...]:
    """``(values, null)`` columns as stored fields: canonical NULL values, then the mask words (``n`` rows)."""
    n = len(cols[0][0]) if cols else (n or 0)
    out = [filled(as_type(vals, typ), null, typ) for (vals, null), typ in zip(cols, types)]
    return (*out, *nullmask.encode([null for _, null in cols], n))


#: Lower every TopK through the per-partition reduce of :meth:`Lowering._topk` (tests only: the reference).
TOPK_REDUCE = False


class Lowering:
    """Builds the operators of plans over ``tables`` (by lower-case name) in ``scope`` (the tables' scope)."""

    def __init__(self, tables: dict[str, Collection], scope: Scope, share: bool = True):
        self.tables = tables
        self.scope = scope
        #: Share keyed forms (and so arrangements) between operators, and skip exchanges that would move
        #: nothing (:mod:`ddflow.plan.partition`); off only to test that neither changes a result.
        self.share = share
        self.memo: dict[Rel, Collection] = {}
        self.variables: dict[RecRef, Collection] = {}  # loop variables of the fixpoints being built
        self.fixpoints: dict[tuple, list[Collection]] = {}
        self.shared: dict[tuple, Collection] = {}  # keyed forms of relations, so arrangements are shared

    def lower(self, rel: Rel) -> Collection:
        """The collection of ``rel``'s rows (stored layout), built once per distinct plan node."""
        c = self.memo.get(rel)
        if c is None:
            c = self.memo[rel] = self._lower(rel)
        return c

    def _lower(self, rel: Rel) -> Collection:
        if isinstance(rel, Scan):
            try:
                return self.tables[rel.table.lower()]
            except KeyError:
                raise SchemaError(f"no table {rel.table!r} (tables: {sorted(self.tables)})") from None
        if isinstance(rel, Values):
            if not rel.rows:
                return Collection.empty(self.scope)
            none = nullmask.row_encode([False] * len(rel.schema))
            return Collection.constant(self.scope, [(*r, *none) for r in rel.rows], list(rel.schema.kinds))
        if isinstance(rel, (Filter, Project)):
            from ddflow.plan import fused

            run = fused.run_below(rel)
            if run is not None:  # hundreds of them in a row (subqueries nested deep): one filter and one map
                return fused.lower_run(self, *run)
        if isinstance(rel, Filter):
            return self._filter(self.lower(rel.input), rel.input.schema, rel.predicate)
        if isinstance(rel, Project):
            src, types = rel.input.schema, rel.schema.types
            exprs = rel.exprs

            def project(*cols):
                ins = columns_of(cols, src)
                return stored([evaluate(e, ins) for e in exprs], types, len(cols[0]))

            return self.lower(rel.input).map_columns(project)
        if isinstance(rel, Join):
            return self._join(rel)
        if isinstance(rel, Aggregate):
            return self._aggregate(rel)
        if isinstance(rel, Distinct):
            return self.lower(rel.input).distinct()
        if isinstance(rel, Union):
            return setops.lower_union(rel, [self.lower(p) for p in rel.parts])
        if isinstance(rel, SetOp):
            return setops.lower_setop(rel, self.lower(rel.left), self.lower(rel.right))
        if isinstance(rel, SemiJoin):
            return self._semijoin(rel)
        if isinstance(rel, TopK):
            return self._topk(rel)
        from ddflow.plan.window import Window, lower_window

        if isinstance(rel, Window):
            return lower_window(self, rel)
        if isinstance(rel, OneRow):
            return self._one_row(rel)
        if isinstance(rel, RecRef):
            return self.variables[rel]
        if isinstance(rel, Recursive):
            return self._recursive(rel)
        if isinstance(rel, (Windowed, Sessionized, TemporalFilter, CloseAt)):
            from ddflow.plan import eventtime

            lower = {Windowed: eventtime.lower_windowed, Sessionized: eventtime.lower_sessionized,
                     TemporalFilter: eventtime.lower_temporal_filter, CloseAt: eventtime.lower_close_at}[type(rel)]
            return lower(self, rel)
        raise SchemaError(f"cannot lower plan node {type(rel).__name__}")

    def _recursive(self, rel: Recursive) -> Collection:
        """One loop per fixpoint: a variable per defined relation, starting empty, set to its body."""
        key = (rel.names, rel.bodies, rel.limits)
        outs = self.fixpoints.get(key)
        if outs is None:
            ctx = self.scope.ctx
            lim = rel.limits or LoopLimits()
            loop = IterativeScope(self.scope, ctx.fresh(f"recursive({','.join(rel.names)})"), lim.max_iterations,
                                  lim.max_seconds, lim.max_records)
            refs = {r.name: r for body in rel.bodies for r in _refs(body)}
            variables = []
            for name in rel.names:
                v = Variable(loop, Collection.empty(loop, ctx.fresh(f"{name}.start")), name=ctx.fresh(name))
                if name in refs:
                    self.variables[refs[name]] = v
                variables.append(v)
            outs = []
            for name, body in zip(rel.names, rel.bodies):
                ref = refs.get(name)
                if ref is not None and not ref.placed <= partitioned_by(body):
                    raise SchemaError(f"fixpoint {name}: its RecRef claims columns {sorted(ref.placed)} place its "
                                      f"rows, its body places them by {sorted(partitioned_by(body))}")
            for v, body in zip(variables, rel.bodies):
                v.set(self.lower(body))
                outs.append(v.result.leave())
            self.fixpoints[key] = outs
        return outs[rel.index]

    def _topk(self, rel: TopK) -> Collection:
        """Keyed by the first partition column; one reduce ranks each partition (Python per changed key).

        With a limit, :mod:`ddflow.plan.ranking` instead (compiled, no
        Python per key).
        """
        if not TOPK_REDUCE and rel.limit is not None and rel.limit >= 1:
            return self._top_k_walk(rel)
        src = rel.input.schema
        npart, nrow = len(rel.partition), len(src)
        exprs = (*rel.partition, *(o.expr for o in rel.order))
        nw = nullmask.words(len(exprs) + nrow)
        types = tuple(e.type if e.type != "null" else "bigint" for e in exprs) + src.types

        def prepared(*cols):
            ins = columns_of(cols, src)
            fields = stored([evaluate(e, ins) for e in exprs] + ins, types)
            if npart:  # the first partition column is the key
                return fields
            return (np.zeros(len(fields[-1]), dtype=np.int64), *fields)

        logic = _topk_logic(npart, rel.order, nrow, rel.limit, rel.rank, nw)
        keyed = self.lower(rel.input).map_columns(prepared)
        keyed.partitioned = self._placed_by(rel.input, rel.partition[0] if npart else None)
        ranked = keyed.reduce(logic)
        return ranked.project(*range(1, rel.schema.width + 1))

    def _top_k_walk(self, rel: TopK) -> Collection:
        from ddflow.plan.ranking import lower_top_k

        return lower_top_k(self, rel)

    def _one_row(self, rel: OneRow) -> Collection:
        """Every row under one constant key; a reduce passes them on while there is at most one, else raises.

        Python per changed time over the rows' history: a scalar subquery's
        result is one row, so this is small.
        """
        n = rel.schema.width
        what = rel.what

        def at_most_one(key, vals):
            rows = [(v, m) for v, m in vals if m > 0]
            total = sum(m for _, m in rows)
            if total > 1:
                raise DataflowError(f"SQL: the scalar subquery {what} returned {total} rows; it must return at most one")
            return rows

        at_most_one.__name__ = "one_row"
        keyed = self.lower(rel.input).map_columns(lambda *cols: (np.zeros(len(cols[0]), dtype=np.int64), *cols))
        return keyed.reduce(at_most_one).project(*range(1, n + 1))

    def _semijoin(self, rel: SemiJoin) -> Collection:
        n = rel.left.schema.width
        if rel.residual is not None:
            # The pairs the residual keeps, cut to their left rows (distinct), then a whole-row semi/anti join.
            join = Join(rel.left, rel.right, "inner", rel.left_keys, rel.right_keys, rel.residual)
            pairs = self.lower(join)
            whole = self.lower(rel.left).map_columns(row_key)
            matched = pairs.map_columns(_side_key(0, len(rel.left.schema), len(join.schema))).project(0).distinct()
            kept = whole.antijoin(matched) if rel.anti else whole.semijoin(matched)
            return kept.project(*range(1, n + 1))
        lk, rk = _aligned_keys(rel.left_keys, rel.right_keys)
        if not rel.anti:
            keys = self._keyed(rel.right, rk).project(0).distinct()
            return self._keyed(rel.left, lk).semijoin(keys).project(*range(1, n + 1))
        if not rel.null_aware:
            return self._unmatched_by_key(rel.left, lk, rel.right, rk)
        # NOT IN: nothing survives a NULL in the subquery; a NULL key survives only an empty subquery.
        keys = self._keyed(rel.right, rk).project(0).distinct()
        missing = self._keyed(rel.left, lk).antijoin(keys).project(*range(1, n + 1))
        null_key = self._null_keyed(rel.left, lk)

        def flag(coll: Collection) -> Collection:
            return coll.map_columns(lambda *cols: (np.zeros(len(cols[0]), dtype=np.int64),)).distinct()

        right_null = flag(self._null_keyed(rel.right, rk))
        right_any = flag(self.lower(rel.right))

        def under_zero(coll: Collection) -> Collection:
            return coll.map_columns(lambda *cols: (np.zeros(len(cols[0]), dtype=np.int64), *cols))

        kept = under_zero(missing).antijoin(right_null).project(*range(1, n + 1))
        return kept.concat(under_zero(null_key).antijoin(right_any).project(*range(1, n + 1)))

    def _filter(self, coll: Collection, schema: Schema, predicate: Expr) -> Collection:
        def keep(*cols):
            vals, null = evaluate(predicate, columns_of(cols, schema))
            return vals.astype(bool) & ~null

        return coll.filter_columns(keep)

    def _keyed(self, rel: Rel, keys: tuple[Expr, ...]) -> Collection:
        """``(key, *stored row)`` for rows whose key has no NULL; a key of several columns is one tuple.

        One collection per (relation, keys): every join of the same rows on
        the same key reads the same arrangement (``Collection.arrange``
        caches it), the roadmap's shared arrangements.
        """
        memo_key = ("keyed", rel, keys)
        got = self.shared.get(memo_key) if self.share else None
        if got is None:
            n = rel.schema.width  # stored fields
            got = self._keyed_all(rel, keys).filter_columns(lambda *cols: cols[-1]).project(*range(n + 1))
            got.partitioned = self._placed_by(rel, keys[0] if len(keys) == 1 else None)
            self.shared[memo_key] = got
        return got

    def _placed_by(self, rel: Rel, key: Expr | None) -> bool:
        """Rows of ``rel`` keyed by ``key`` are already on the key's worker (their exchange would move nothing)."""
        return self.share and isinstance(key, Col) and key.index in partitioned_by(rel)

    def _join(self, rel: Join) -> Collection:
        ls, rs = rel.left.schema, rel.right.schema
        for a, b in zip(rel.left_keys, rel.right_keys):
            if KIND.get(a.type, "o") != KIND.get(b.type, "o") and not {a.type, b.type} <= {"bigint", "double", "null"}:
                raise SchemaError(f"join keys {a} ({a.type}) and {b} ({b.type}) have different types")
        lk, rk = _aligned_keys(rel.left_keys, rel.right_keys)
        joined = self._keyed(rel.left, lk).join(self._keyed(rel.right, rk))
        nl, nr = len(ls), len(rs)  # columns of each side
        wl, wr = ls.width, rs.width  # stored fields of each side

        def layout(*cols):
            # cols: (key, left values, left mask words, right values, right mask words)
            masks = nullmask.concat([(cols[1 + nl:1 + wl], nl), (cols[1 + wl + nr:1 + wl + wr], nr)])
            return (*cols[1:1 + nl], *cols[1 + wl:1 + wl + nr], *masks)

        inner = joined.map_columns(layout)
        if rel.residual is not None:
            inner = self._filter(inner, rel.schema, rel.residual)
        if rel.kind == "inner":
            return inner
        parts = [inner]
        if rel.kind in ("left", "full"):
            lost = self._unmatched(rel.left, lk, rel.right, rk, inner, 0, rel.residual is not None)
            parts.append(lost.map_columns(_padded(ls, rs, pad_right=True)))
        if rel.kind in ("right", "full"):
            lost = self._unmatched(rel.right, rk, rel.left, lk, inner, len(ls), rel.residual is not None)
            parts.append(lost.map_columns(_padded(ls, rs, pad_right=False)))
        return parts[0].concat(*parts[1:])

    def _unmatched(self, side: Rel, keys: tuple[Expr, ...], other: Rel, other_keys: tuple[Expr, ...],
                   inner: Collection, offset: int, residual: bool) -> Collection:
        """Rows of ``side`` (stored layout) that no row of ``other`` matches: an outer join's NULL-padded part.

        Without a residual, a row matches iff its key has no NULL and
        occurs in ``other``: an antijoin by key.  With one, iff the row
        occurs among the inner join's rows (columns ``offset`` on): an
        antijoin by the whole row.
        """
        if not residual:
            return self._unmatched_by_key(side, keys, other, other_keys)
        n = len(side.schema)
        whole = self.lower(side).map_columns(row_key)
        matched = inner.map_columns(_side_key(offset, n, n + len(other.schema))).project(0).distinct()
        return whole.antijoin(matched).project(*range(1, side.schema.width + 1))

    def _unmatched_by_key(self, side: Rel, keys: tuple[Expr, ...], other: Rel,
                          other_keys: tuple[Expr, ...]) -> Collection:
        """Rows of ``side`` (stored layout) whose key is NULL or absent from ``other``: an antijoin by key.

        It reads the same keyed form, and so the same arrangement, as a join
        of ``side`` on those keys.
        """
        n = side.schema.width
        present = self._keyed(other, other_keys).project(0).distinct()
        missing = self._keyed(side, keys).antijoin(present).project(*range(1, n + 1))
        return missing.concat(self._null_keyed(side, keys))

    def _null_keyed(self, rel: Rel, keys: tuple[Expr, ...]) -> Collection:
        """Rows of ``rel`` (stored layout) whose key has a NULL: they match nothing."""
        n = rel.schema.width
        return self._keyed_all(rel, keys).filter_columns(lambda *cols: ~cols[-1]).project(*range(1, n + 1))

    def _keyed_all(self, rel: Rel, keys: tuple[Expr, ...]) -> Collection:
        """``(key, *stored row, key_ok)`` for every row: ``key_ok`` is False where the key has a NULL."""
        memo_key = ("keyed_all", rel, keys)
        if self.share and memo_key in self.shared:
            return self.shared[memo_key]
        schema = rel.schema

        def keyed(*cols):
            ins = columns_of(cols, schema)
            parts = [evaluate(k, ins) for k in keys]
            ok = ~np.logical_or.reduce([null for _, null in parts]) if parts else np.ones(len(cols[0]), bool)
            if not parts:  # no keys (a cross product, a scalar subquery): every row under one constant key
                key = np.zeros(len(ok), dtype=np.int64)
            elif len(parts) == 1:
                key = parts[0][0]
            else:
                key = np.empty(len(ok), dtype=object)
                key[:] = list(zip(*(v.tolist() for v, _ in parts)))
            return (key, *cols, ok)

        self.shared[memo_key] = got = self.lower(rel).map_columns(keyed)
        return got

    def _aggregate(self, rel: Aggregate) -> Collection:
        from ddflow.plan.aggregate import lower_aggregate

        return lower_aggregate(self, rel)


def _refs(rel: Rel) -> list[RecRef]:
    """Every RecRef under ``rel`` (not looking into nested fixpoints' own bodies' loops twice)."""
    if isinstance(rel, RecRef):
        return [rel]
    if isinstance(rel, Recursive):
        return [r for b in rel.bodies for r in _refs(b)]
    return [r for i in rel.inputs() for r in _refs(i)]


def _side_key(offset: int, n: int, total: int) -> Callable:
    """Join rows (``total`` columns) to ``(row, ...)``: ``row`` is the whole-row key of one side's ``n`` columns from ``offset``."""

    def side_of_inner(*cols):
        mine = cols[offset: offset + n]
        return row_key(*mine, *nullmask.sliced(cols[total:], offset, n))

    return side_of_inner


def _padded(ls: Schema, rs: Schema, pad_right: bool) -> Callable:
    """Stored rows of one side laid out as join rows, the other side's columns NULL."""
    nl, nr = len(ls), len(rs)

    def pad(*cols):
        n = len(cols[0])
        k = nl if pad_right else nr
        mine, masks = cols[:k], cols[k:]
        other = rs if pad_right else ls
        nulls = tuple(null_values(t, n) for t in other.types)
        if pad_right:
            return (*mine, *nulls, *nullmask.padded(masks, nl, 0, nr))
        return (*nulls, *mine, *nullmask.padded(masks, nr, nl, 0))

    return pad


def _aligned_keys(left: tuple[Expr, ...], right: tuple[Expr, ...]) -> tuple[tuple[Expr, ...], tuple[Expr, ...]]:
    """Keys of bigint on one side and double on the other compared as doubles."""
    lk, rk = [], []
    for a, b in zip(left, right):
        if a.type != b.type and {a.type, b.type} <= {"bigint", "double"}:
            a = a if a.type == "double" else Call("cast", (a,), "double")
            b = b if b.type == "double" else Call("cast", (b,), "double")
        lk.append(a)
        rk.append(b)
    return tuple(lk), tuple(rk)


def _groups(key, vals: list[tuple[tuple, int]], k: int, nw: int = 1) -> dict[tuple, list[tuple[tuple, int]]]:
    """A reduce key's rows split by their first ``k`` columns, NULL bits included: ``{group: [(row, mult)]}``.

    The reduce is keyed by the first column alone, so rows of several
    groups (and a NULL beside its canonical value) share a key.  A row is
    ``(key, *value)``, or the value alone when ``k`` is 0 (the key is a
    constant then); its ``nw`` mask words come back as one integer of all
    its NULL bits (:func:`ddflow.base.nullmask.packed`), its last field.
    Rows with a multiplicity of 0 or less are left out.
    """
    groups: dict[tuple, list] = {}
    low = nullmask.low_bits(k)
    for v, m in vals:
        if m <= 0:
            continue
        row = (key, *v) if k else v
        if nw > 1:
            row = (*row[:-nw], nullmask.packed(row[-nw:]))
        groups.setdefault(row[:k] + (row[-1] & low,), []).append((row, m))
    return groups


def _aggregate_logic(k: int, aggs: tuple[Agg, ...], arg_pos: list[int | None],
                     out_types: tuple[str, ...], nw: int = 1) -> Callable:
    """The reduce function: each group's rows (same first group value) split by full group, then every aggregate.

    Values arrive as ``(g_1.., args.., mask)`` tuples (``g_0`` is the key;
    with no group columns the key is a constant and the values are
    ``(args.., mask)``; the mask is ``nw`` words).  A row is ``(g_0.., args.., mask)``.
    """
    nout = k + len(aggs)

    def aggregate(key, vals):
        out = []
        for gkey, rows in _groups(key, vals, k, nw).items():
            gmask = gkey[-1]
            results, rmask = [], gmask
            for j, (a, p) in enumerate(zip(aggs, arg_pos)):
                value, is_null = _one_aggregate(a, p, rows)
                if is_null:
                    rmask = nullmask.packed_with_null(rmask, k + j)
                    value = NULL_VALUE[KIND[out_types[k + j]]]
                results.append(value)
            out.append(((*gkey[1:k], *results, *nullmask.unpacked(rmask, nout)), 1))
        return out

    aggregate.__name__ = "aggregate"
    return aggregate


def _topk_logic(npart: int, order: tuple[Order, ...], nrow: int, limit: int | None, rank: str | None,
                nw: int = 1) -> Callable:
    """The reduce function of a TopK: rows ``(p.., o.., row.., mask)`` (``nw`` mask words) ranked per full partition."""
    nord = len(order)
    lead = npart + nord
    nout = nrow + (rank is not None)
    bits = [nullmask.bit(npart + i) for i in range(nord)]

    def compare(a: tuple, b: tuple) -> int:
        for i, o in enumerate(order):
            x, y = a[npart + i], b[npart + i]
            xn, yn = a[-1] & bits[i], b[-1] & bits[i]
            if xn or yn:
                if xn and yn:
                    continue
                return (-1 if xn else 1) * (1 if o.nulls_first else -1)
            if x != y:
                c = -1 if _order(x) < _order(y) else 1
                return -c if o.desc else c
        return 0

    def tiebreak(a: tuple, b: tuple) -> int:
        c = compare(a, b)
        if c:
            return c
        ka, kb = tuple(map(_order, a[lead:])), tuple(map(_order, b[lead:]))
        return (ka > kb) - (ka < kb)

    def ranked(key, vals):
        out = []
        for rows in _groups(key, vals, npart, nw).values():
            rows.sort(key=functools.cmp_to_key(lambda a, b: tiebreak(a[0], b[0])))
            number, dense, prev = 0, 0, None
            for row, m in rows:
                new_rank = prev is None or compare(prev, row) != 0
                first = number + 1
                number += m
                if new_rank:
                    dense += 1
                    rank_at = first
                prev = row
                mask = nullmask.unpacked(nullmask.packed_sliced(row[-1], lead, nrow), nout)
                values = row[lead:-1]
                if rank is None or rank == "row_number":
                    copies = range(first, number + 1)
                    if limit is not None:
                        copies = range(first, min(number, limit) + 1)
                    if rank is None:
                        if len(copies):
                            out.append(((*values, *mask), len(copies)))
                    else:
                        out.extend(((*values, n, *mask), 1) for n in copies)
                else:
                    r = rank_at if rank == "rank" else dense
                    if limit is None or r <= limit:
                        out.append(((*values, r, *mask), m))
                if limit is not None and (rank in (None, "row_number") and number >= limit):
                    break
        return out

    ranked.__name__ = "top_k"
    return ranked


def _one_aggregate(a: Agg, p: int | None, rows: list) -> tuple:
    """``(value, is_null)`` of aggregate ``a`` over ``rows`` of ``(row, multiplicity)``."""
    if a.func == "count_star":
        return sum(m for _, m in rows), False
    null = nullmask.bit(p)
    if a.other is not None:  # two operands: p and p + 1
        other = nullmask.bit(p + 1)
        if a.func in ("max_by", "min_by"):
            return arg_by(a, [(r[p], r[p + 1], bool(r[-1] & null), m) for r, m in rows if not r[-1] & other])
        if a.func == "listagg":
            return listagg(a, [(r[p], r[p + 1], bool(r[-1] & other), m) for r, m in rows if not r[-1] & null])
        return covariance(a, [(r[p], r[p + 1], m) for r, m in rows if not r[-1] & (null | other)])
    live = [(r[p], m) for r, m in rows if not r[-1] & null]
    if a.distinct:
        live = [(v, 1) for v in sorted(set(v for v, _ in live), key=_order)]
    if a.func == "count":
        return sum(m for _, m in live), False
    if not live:
        return None, True
    if a.func in ONE_OPERAND:
        return ONE_OPERAND[a.func](a, live)
    if a.func in ("sum", "avg") and a.arg.type.startswith("decimal("):
        return decimal_total(a, live)
    if a.func in ("sum", "avg") and a.arg.type == "double":  # the exact sum, rounded once
        total = exact_sum_reference([v for v, _ in live], [m for _, m in live])
        return (total if a.func == "sum" else total / sum(m for _, m in live)), False
    if a.func == "sum":
        total = sum(v * m for v, m in live)
        if not _I64_MIN <= total <= _I64_MAX:  # a bigint's (doubles and decimals are summed above)
            raise SchemaError(f"{a}: the sum does not fit in bigint")
        return int(total), False
    if a.func == "avg":
        return float(sum(v * m for v, m in live)) / sum(m for _, m in live), False
    pick = min if a.func == "min" else max
    return pick(v for v, _ in live), False


def _order(v):
    return (type(v).__name__, v)
