"""Plan rewrites that never change a result: they only move work to where it is cheaper.

:func:`push_filters` moves each conjunct of a filter above a join to the
side it reads, so fewer rows reach the join's arrangements: below an
inner join both ways; below a left (right) join only predicates on the
preserved left (right) side, since a predicate on the NULL-padded side
must still see the padding.  Over an inner join, an equality of an
expression of each side becomes a join key (a comma join's ``WHERE a.k =
b.k`` is an equi-join, not a cross product filtered); other conjuncts
that read both sides become its residual.  An inner join's residual is
treated as a filter above it, and an outer join's ON residual gives keys
and filters of its NULL-padded side, so pushing works on both.

Disjunctions (TPC-H Q19: ``(p_partkey = l_partkey AND ...) OR
(p_partkey = l_partkey AND ...)``) would leave every conjunct in one OR
that reads both sides: a cross product filtered.  Spark's optimizer
handles them in two steps, done here too:

- :func:`factor_or` (BooleanSimplification's factoring): a conjunct
  common to every branch of an OR is pulled out of it, ``(A AND B) OR
  (A AND C)`` to ``A AND (B OR C)``, so ``A`` can become a join key or
  a pushed filter;
- :func:`implied` (PushPredicateThroughJoin's extraction from a
  disjunction): for one side, the OR over the branches of each branch's
  conjuncts that read only that side is implied by the disjunction, so
  it filters that side below the join while the disjunction stays above.

Both only take expressions that cannot raise (:func:`cannot_raise`): the
rewritten predicate evaluates a moved conjunct on rows the original,
short-circuiting, may never have evaluated it on, and a division by zero
there must not become an error.

Why on the IR and not (only) in the SQL planner: every front end (SQL,
Datalog) builds this IR and goes through :func:`push_filters`, so all get
it.  The SQL planner also calls :func:`factor_or` on the conjuncts it
pools for its join order, so a key factored out of an OR ties two
relations when it picks which to join next (a three-way comma join would
otherwise start with a cross product).
:func:`prune_columns` cuts each join input (a semi join's subquery to its keys and residual), each part
of a UNION ALL, window and session to the columns read above it,
drops a filter on a ranking's rank that its limit already keeps, and the
row numbers nobody reads (so the ranking is a plain top-k).
(Sharing arrangements between operators that need the same rows keyed
the same way, and skipping exchanges that would move nothing, are done
by :class:`ddflow.plan.lower.Lowering`.)
``tests/plan/test_rewrite.py`` checks every rewrite against the plan
without it on random update streams.

>>> from ddflow.base.schema import Schema
>>> from ddflow.plan.expr import Call, Col, Lit
>>> from ddflow.plan.ir import Filter, Join, Scan, explain
>>> a, b = Scan("a", Schema(("k", "x"), ("bigint", "bigint"))), Scan("b", Schema(("k",), ("bigint",)))
>>> j = Join(a, b, "inner", (Col(0, "bigint", "k"),), (Col(0, "bigint", "k"),))
>>> print(explain(push_filters(Filter(j, Call(">", (Col(1, "bigint", "x"), Lit(2, "bigint")), "boolean")))))
Join inner ON k = k_2  [arrange both sides by key]
  Filter (x > 2)
    Scan a [k, x]
  Scan b [k]
"""
from __future__ import annotations

import dataclasses

from ddflow.plan.expr import Call, Col, Expr, Held, Lit, bottom_up, conjunction, conjuncts, remapped
from ddflow.plan.ir import (Aggregate, CloseAt, Filter, Join, Project, Recursive, Rel, SemiJoin, Sessionized, TopK,
                             Union, Windowed)


def push_filters(rel: Rel) -> Rel:
    """``rel`` with filters moved below the joins they sit on, where that keeps the result.  O(plan size)."""
    rel = _map_inputs(rel, push_filters)
    if isinstance(rel, Filter) and isinstance(rel.input, Filter):
        rel = Filter(rel.input.input, conjunction([rel.input.predicate, rel.predicate]))
    unchanged = rel
    if isinstance(rel, Join) and rel.residual is not None:
        if rel.kind != "inner":
            return _push_on(rel)
        # an inner join's residual is a filter of its pairs: pushed like one (its equalities become keys)
        rel = Filter(dataclasses.replace(rel, residual=None), rel.residual)
    if not (isinstance(rel, Filter) and isinstance(rel.input, Join)):
        return rel
    join = rel.input
    nl = len(join.left.schema)
    left, right, stay = [], [], []
    parts = [p for c in conjuncts(rel.predicate) for p in conjuncts(factor_or(c))]
    for c in parts + _implied_sides(parts, nl, len(join.schema)):
        cols = c.columns()
        if cols and max(cols) < nl and join.kind in ("inner", "left"):
            left.append(c)
        elif cols and min(cols) >= nl and join.kind in ("inner", "right"):
            right.append(remapped(c, lambda i: i - nl))
        elif any(c is p for p in parts):
            stay.append(c)
    lkeys, rkeys = list(join.left_keys), list(join.right_keys)
    if join.kind == "inner":
        rest = []
        for c in stay:
            pair = equi_key(c, nl)
            if pair is None:
                rest.append(c)
            else:
                lkeys.append(pair[0])
                rkeys.append(pair[1])
        stay = rest
    if not left and not right and len(lkeys) == len(join.left_keys):
        return unchanged
    new_left = push_filters(Filter(join.left, conjunction(left))) if left else join.left
    new_right = push_filters(Filter(join.right, conjunction(right))) if right else join.right
    moved = dataclasses.replace(join, left=new_left, right=new_right, left_keys=tuple(lkeys), right_keys=tuple(rkeys))
    if stay and join.kind == "inner":  # the residual of an inner join is a filter of its pairs
        residual = conjunction(([join.residual] if join.residual is not None else []) + stay)
        return dataclasses.replace(moved, residual=residual)
    return Filter(moved, conjunction(stay)) if stay else moved


def _push_on(join: Join) -> Join:
    """An outer join with its ON residual factored (:func:`factor_or`): equalities of one expression of each side
    become keys, conjuncts (and implied ones) reading only the NULL-padded side filter that side first.

    The ON condition only decides which pairs match; a left join's right
    row that fails a right-only conjunct matches no left row, so dropping
    it first changes nothing (the left rows it would not match are padded
    either way).  Conjuncts reading only the preserved side stay.
    """
    nl = len(join.left.schema)
    parts = [p for c in conjuncts(join.residual) for p in conjuncts(factor_or(c))]
    lkeys, rkeys, left, right, stay = list(join.left_keys), list(join.right_keys), [], [], []
    for c in parts + _implied_sides(parts, nl, len(join.schema)):
        cols = c.columns()
        pair = equi_key(c, nl)
        if pair is not None:
            lkeys.append(pair[0])
            rkeys.append(pair[1])
        elif cols and max(cols) < nl and join.kind == "right":
            left.append(c)
        elif cols and min(cols) >= nl and join.kind == "left":
            right.append(remapped(c, lambda i: i - nl))
        elif any(c is p for p in parts):
            stay.append(c)
    if not left and not right and len(lkeys) == len(join.left_keys):
        return join
    return dataclasses.replace(
        join, left=push_filters(Filter(join.left, conjunction(left))) if left else join.left,
        right=push_filters(Filter(join.right, conjunction(right))) if right else join.right,
        left_keys=tuple(lkeys), right_keys=tuple(rkeys), residual=conjunction(stay))


#: Operators that never raise, whatever their (non-raising) arguments: comparisons (decimals compared exactly),
#: the logical forms, and string functions of no pattern.  Arithmetic (overflow, division by zero), CAST (a bad
#: string) and LIKE / RLIKE (a bad pattern) can.
SAFE_OPS = frozenset({"=", "<>", "<", "<=", ">", ">=", "and", "or", "not", "is_null", "is_not_null", "coalesce",
                      "case", "switch", "between", "in", "nullif", "greatest", "least", "lower", "upper", "trim",
                      "ltrim", "rtrim", "length", "reverse", "concat", "concat_ws", "contains", "starts_with", "ends_with"})


def cannot_raise(e: Expr) -> bool:
    """``e`` evaluates without an error on any row (so it may be evaluated on rows it was not before).  O(size)."""
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, Call):
            if x.op not in SAFE_OPS:
                return False
            stack.extend(x.args)
    return True


def factor_or(e: Expr) -> Expr:
    """``e`` with the conjuncts common to every branch of each OR pulled out of it: ``(A AND B) OR (A AND C)``
    is ``A AND (B OR C)``, and ``A OR (A AND C)`` is ``A``.  O(size of e x branch conjuncts).
    Conjuncts are compared in :func:`canonical` form (``a.k = b.k`` is ``b.k = a.k``).

    Both hold in SQL's three-valued logic.  Only a common conjunct that
    cannot raise is pulled out (the factored form evaluates it on every
    row, the original maybe only after another conjunct was TRUE); the
    rest is evaluated on a subset of the rows the original evaluated it on.

    >>> from ddflow.plan.expr import Lit
    >>> k, v, w = Col(0, "bigint", "k"), Col(1, "bigint", "v"), Col(2, "bigint", "w")
    >>> eq = lambda a, b: Call("=", (a, b), "boolean")
    >>> both = lambda a, b: Call("and", (a, b), "boolean")
    >>> print(factor_or(Call("or", (both(eq(k, w), eq(v, Lit(1, "bigint"))), both(eq(k, w), eq(w, Lit(2, "bigint")))),
    ...                      "boolean")))
    ((k = w) and ((v = 1) or (w = 2)))
    """
    if not isinstance(e, Call) or e.op not in ("and", "or"):
        return e
    if e.op == "and":
        return conjunction([factor_or(a) for a in e.args])
    branches = [[p for q in conjuncts(b) for p in conjuncts(factor_or(q))] for b in disjuncts(e)]
    keys = [{canonical(c) for c in b} for b in branches]
    common = [c for c in _distinct(branches[0]) if cannot_raise(c) and all(canonical(c) in k for k in keys[1:])]
    if not common:
        return disjunction([conjunction(b) for b in branches])
    gone = {canonical(c) for c in common}
    rest = [[c for c in b if canonical(c) not in gone] for b in branches]
    if any(not r for r in rest):  # a branch that is all common conjuncts is TRUE once they hold
        return conjunction(common)
    return conjunction(common + [disjunction([conjunction(r) for r in rest])])


_FLIPPED = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def canonical(e: Expr) -> Expr:
    """``e`` in a form equal for expressions that are equal by the symmetry of comparisons (``a.k = b.k`` and
    ``b.k = a.k``, ``x < y`` and ``y > x``), column names dropped: what tells conjuncts apart when factoring."""
    def node(x: Expr, args: list[Expr]) -> Expr:
        if isinstance(x, Col):
            return Col(x.index, x.type)
        if not isinstance(x, Call):
            return x
        if x.op in _FLIPPED and len(args) == 2 and not isinstance(args[0], Held) \
                and _order_key(args[1]) < _order_key(args[0]):
            return Call(_FLIPPED[x.op], (args[1], args[0]), x.type)
        return Call(x.op, tuple(args), x.type)

    return bottom_up(e, node)


def _order_key(e: Expr) -> str:
    """A total order on expressions for :func:`canonical` (their text: no recursion, bounded by the tree)."""
    return f"{type(e).__name__}:{e.type}:{e}"


def implied(e: Expr, cols: set[int]) -> Expr | None:
    """A predicate reading only ``cols`` that ``e`` implies (TRUE wherever ``e`` is), that cannot raise; None if
    none is found.  An AND gives what either side gives; an OR what every branch gives, OR-ed (Spark's
    ``extractPredicatesWithinOutputSet``).  O(size of e)."""
    if isinstance(e, Call) and e.op == "and":
        got = [x for x in (implied(a, cols) for a in e.args) if x is not None]
        return conjunction(got)
    if isinstance(e, Call) and e.op == "or":
        got = [implied(a, cols) for a in e.args]
        return None if any(x is None for x in got) else disjunction(got)
    used = e.columns()
    return e if used and used <= cols and cannot_raise(e) else None


def _implied_sides(parts: list[Expr], nl: int, n: int) -> list[Expr]:
    """For each side of a join (columns below ``nl``, and from ``nl`` to ``n``), what each OR among ``parts`` that
    reads both implies over that side alone: extra filters, the ORs themselves staying."""
    out = []
    for c in parts:
        cols = c.columns()
        if not (isinstance(c, Call) and c.op == "or" and cols and min(cols) < nl <= max(cols)):
            continue
        for side in (set(range(nl)), set(range(nl, n))):
            got = implied(c, side)
            if got is not None:
                out.append(got)
    return out


def disjuncts(e: Expr) -> list[Expr]:
    """The parts of a chain of ORs, in order (without recursion)."""
    out: list[Expr] = []
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, Call) and x.op == "or":
            stack.extend(reversed(x.args))
        else:
            out.append(x)
    return out


def disjunction(parts: list[Expr]) -> Expr:
    """The OR of ``parts`` (at least one), one n-ary node: nested ORs among them are spliced in."""
    flat = [q for p in parts for q in disjuncts(p)]
    return flat[0] if len(flat) == 1 else Call("or", tuple(flat), "boolean")


def _distinct(xs: list[Expr]) -> list[Expr]:
    out, seen = [], set()
    for x in xs:
        if canonical(x) not in seen:
            seen.add(canonical(x))
            out.append(x)
    return out


def keyable(a: str, b: str) -> bool:
    """Values of types ``a`` and ``b`` are equal exactly when their stored keys are (or both are cast to double)."""
    if a == "null" or b == "null":
        return False
    if a == b or {a, b} <= {"bigint", "double"}:
        return True
    scale = lambda t: t[t.index(",") + 1:-1].strip() if t.startswith("decimal(") and "," in t else None  # noqa: E731
    return scale(a) is not None and scale(a) == scale(b)


def key_pair(a: Expr, b: Expr) -> tuple[Expr, Expr] | None:
    """``a`` and ``b`` as join keys: as they are when keyable, else both cast to their common numeric type
    (decimals of two scales, a decimal and a bigint or a double: equal exactly when the casts are); None for
    types that do not meet.

    >>> from ddflow.plan.expr import Col
    >>> a, b = key_pair(Col(0, "decimal(6,0)", "y"), Col(0, "decimal(4,3)", "x"))
    >>> a.type, b.type
    ('decimal(9,3)', 'decimal(9,3)')
    """
    if keyable(a.type, b.type):
        return a, b
    from ddflow.plan.functions import TypeMismatch, cast, common_type, numeric
    if not (numeric(a.type) and numeric(b.type)) or "null" in (a.type, b.type):
        return None
    try:
        typ = common_type([a.type, b.type], "a join key")
    except TypeMismatch:
        return None
    a2 = a if a.type == typ else cast(a, typ)
    b2 = b if b.type == typ else cast(b, typ)
    return (a2, b2) if keyable(a2.type, b2.type) else None


def equi_key(c: Expr, nl: int) -> tuple[Expr, Expr] | None:
    """``(left key, right key)`` when ``c`` is ``l = r`` with ``l`` reading only columns below ``nl`` and ``r`` only
    columns from ``nl`` on (or the other way round), keys of types that compare as stored; else None."""
    if not (isinstance(c, Call) and c.op == "=" and len(c.args) == 2):
        return None
    a, b = c.args
    ca, cb = a.columns(), b.columns()
    pair = key_pair(a, b) if ca and cb else None
    if pair is None:
        return None
    a, b = pair
    if max(ca) < nl <= min(cb):
        return a, remapped(b, lambda i: i - nl)
    if max(cb) < nl <= min(ca):
        return b, remapped(a, lambda i: i - nl)
    return None


def equate_extremes(rel: Rel) -> Rel:
    """``rel`` with each inner join on a group's MAX compared by ``>=`` (MIN by ``<=``) made an equality.  O(plan size).

    ``L JOIN (SELECT g, max(x) AS m FROM L' GROUP BY g) ON L.g = g AND L.x >= m``
    where ``L`` and ``L'`` project the same relation, so that each row of
    ``L`` is among those its group's max is taken over: then ``L.x <= m``
    always, and ``L.x >= m`` holds exactly when ``L.x = m`` (NULLs fail
    both).  As an equality the comparison is a join key, so a new max
    meets only its group's rows that reach it, not the whole group (the
    residual made Nexmark q5 quadratic).  Not for doubles (NaN).
    """
    rel = _map_inputs(rel, equate_extremes)
    if not (isinstance(rel, Join) and rel.kind == "inner" and rel.residual is not None):
        return rel
    nl = len(rel.left.schema)
    parts = conjuncts(rel.residual)
    for i, c in enumerate(parts):
        pair = equi_key(Call("=", c.args, "boolean"), nl) if _reaches_extreme(rel, c, nl) else None
        if pair is None:
            continue
        lk, rk = pair
        rest = conjunction(parts[:i] + parts[i + 1:])
        return equate_extremes(dataclasses.replace(rel, left_keys=rel.left_keys + (lk,),
                                                   right_keys=rel.right_keys + (rk,), residual=rest))
    return rel


def _reaches_extreme(join: Join, c: Expr, nl: int) -> bool:
    """``c`` is ``L.x >= m`` (or ``m <= L.x``; ``<=`` for MIN) as :func:`equate_extremes` asks."""
    if not (isinstance(c, Call) and c.op in (">=", "<=") and all(isinstance(x, Col) for x in c.args)):
        return False
    (a, b), op = c.args, c.op
    if a.index >= nl:
        a, b, op = b, a, _FLIPPED[op]
    if not (a.index < nl <= b.index) or "double" in (a.type, b.type):
        return False
    right = _projected(join.right)
    agg = right[1][b.index - nl] if right else None
    if not (right and isinstance(right[0], Aggregate) and isinstance(agg, Col) and agg.index >= len(right[0].group)):
        return False
    grouped = right[0]
    a_ = grouped.aggs[agg.index - len(grouped.group)]
    if a_.distinct or a_.func != ("max" if op == ">=" else "min") or not isinstance(a_.arg, Col):
        return False
    left, inner = _projected(join.left), _projected(grouped.input)
    if not (left and inner and left[0] == inner[0]):
        return False
    same = lambda lcol, icol: canonical(left[1][lcol]) == canonical(inner[1][icol])  # noqa: E731
    if not same(a.index, a_.arg.index):
        return False
    # Every group column is equated with the left column that is the same expression of the same rows.
    keys = {(canonical(lk), canonical(rk)) for lk, rk in zip(join.left_keys, join.right_keys)}
    for j, g in enumerate(grouped.group):
        at = [k for k, e in enumerate(right[1]) if canonical(e) == Col(j, e.type)]
        if not (isinstance(g, Col) and any((Col(lc, left[1][lc].type), Col(k, right[1][k].type)) in keys
                                           and same(lc, g.index) for k in at for lc in range(nl))):
            return False
    return True


def _projected(rel: Rel) -> tuple[Rel, tuple[Expr, ...]] | None:
    """``(input, exprs)`` of a projection of columns, or a relation as its own identity projection."""
    if isinstance(rel, Project):
        return rel.input, rel.exprs
    s = rel.schema
    return rel, tuple(Col(i, t, n) for i, (n, t) in enumerate(zip(s.names, s.types)))


def prune_columns(rel: Rel) -> Rel:
    """``rel`` with each join input, window and session cut to the columns used above it, so state holds less.  O(plan size).

    Projections drop outputs nobody reads; a join side keeps only its
    keys and what the residual and the operators above read.  The
    result's own columns are all kept, in order.
    """
    out, remap = _prune(rel, set(range(len(rel.schema))))
    assert all(remap[i] == i for i in range(len(rel.schema)))
    return out


def _prune(rel: Rel, needed: set[int]) -> tuple[Rel, dict[int, int]]:
    """``(rel', remap)``: ``rel'`` has every needed column of ``rel``, column ``i`` now at ``remap[i]``.

    A relation nobody reads a column of (``SELECT 1 FROM (SELECT ...)``,
    ``COUNT(*)``, a cross join's side) keeps its first column: rows of no
    columns would have no length for the expressions above to evaluate to.
    """
    if not needed and len(rel.schema):
        needed = {0}
    if isinstance(rel, Project):
        keep = sorted(needed)
        below, m = _prune(rel.input, set().union(*(rel.exprs[j].columns() for j in keep)) if keep else set())
        exprs = tuple(remapped(rel.exprs[j], m) for j in keep)
        return Project(below, exprs, tuple(rel.names[j] for j in keep)), {j: i for i, j in enumerate(keep)}
    if isinstance(rel, Filter):
        if _implied_by_limit(rel):  # it drops nothing: without it, nothing may need the rank
            return _prune(rel.input, needed)
        below, m = _prune(rel.input, needed | rel.predicate.columns())
        return Filter(below, remapped(rel.predicate, m)), m
    if isinstance(rel, TopK):
        # Row numbers nobody reads: the rows kept are the same (numbered copies of a row, counted instead).
        # The input keeps every column: the whole row breaks ties, so a narrower row could keep another one.
        if rel.rank == "row_number" and len(rel.input.schema) not in needed:
            rel = dataclasses.replace(rel, rank=None)
        whole = _map_inputs(rel, lambda r: _prune(r, set(range(len(r.schema))))[0])
        return whole, {i: i for i in range(len(rel.schema))}
    if isinstance(rel, (Join, SemiJoin)):
        # Each side: its keys, the residual's columns and what is read above (a semi join's rows are its left's).
        nl = len(rel.left.schema)
        used = set(needed) | (rel.residual.columns() if rel.residual is not None else set())
        lneed = {i for i in used if i < nl}.union(*(k.columns() for k in rel.left_keys))
        rneed = {i - nl for i in used if i >= nl}.union(*(k.columns() for k in rel.right_keys))
        left, ml = _narrowed(*_prune(rel.left, lneed), lneed)
        right, mr = _narrowed(*_prune(rel.right, rneed), rneed)
        nl2 = len(left.schema)
        m = {i: ml[i] for i in lneed}
        m.update({nl + j: nl2 + mr[j] for j in rneed})
        residual = remapped(rel.residual, m) if rel.residual is not None else None
        pruned = dataclasses.replace(rel, left=left, right=right, left_keys=tuple(remapped(k, ml) for k in rel.left_keys),
                                     right_keys=tuple(remapped(k, mr) for k in rel.right_keys), residual=residual)
        return pruned, m if isinstance(rel, Join) else ml
    if isinstance(rel, Union) and rel.all:  # column by column: each part cut to the columns read, in order
        keep = sorted(needed)
        parts = tuple(_in_order(*_narrowed(*_prune(p, set(keep)), set(keep)), keep) for p in rel.parts)
        return Union(parts, True), {c: i for i, c in enumerate(keep)}
    if isinstance(rel, Aggregate):
        used = set().union(*(g.columns() for g in rel.group), *(x.columns() for a in rel.aggs for x in a.operands()))
        below, m = _prune(rel.input, used)
        group = tuple(remapped(g, m) for g in rel.group)
        aggs = tuple(dataclasses.replace(a, arg=a.arg and remapped(a.arg, m), other=a.other and remapped(a.other, m))
                     for a in rel.aggs)
        return Aggregate(below, group, aggs, rel.names), {i: i for i in range(len(rel.schema))}
    if isinstance(rel, (Windowed, Sessionized)):  # the input's columns, then the two bounds
        n = len(rel.input.schema)
        exprs = (rel.time, *(rel.keys if isinstance(rel, Sessionized) else ()))
        need = {i for i in needed if i < n}.union(*(e.columns() for e in exprs))
        below, m = _narrowed(*_prune(rel.input, need), need)
        changes = {"input": below, "time": remapped(rel.time, m)}
        if isinstance(rel, Sessionized):
            changes["keys"] = tuple(remapped(k, m) for k in rel.keys)
        n2 = len(below.schema)
        remap = {i: m[i] for i in needed if i < n}
        remap.update({n: n2, n + 1: n2 + 1})
        return dataclasses.replace(rel, **changes), remap
    whole = _map_inputs(rel, lambda r: _prune(r, set(range(len(r.schema))))[0])
    return whole, {i: i for i in range(len(rel.schema))}


def ranks_kept(rel: Rel, pred: Expr) -> int | None:
    """The largest rank ``pred`` keeps when it is ``rank <= k`` (``< k``, ``= 1``) over ``rel``, a projected ranking.

    None for any other predicate or relation.  The SQL planner sets a
    ranking's limit from it (and leaves the filter above); a filter whose
    ranking's limit is within it drops nothing (:func:`_prune`).  Ranks
    start at 1.
    """
    if not (isinstance(pred, Call) and pred.op in ("<=", "<", "=") and isinstance(pred.args[0], Col)
            and isinstance(pred.args[1], Lit) and isinstance(pred.args[1].value, int)
            and not isinstance(pred.args[1].value, bool)):
        return None
    if not (isinstance(rel, Project) and isinstance(rel.input, TopK) and rel.input.rank is not None):
        return None
    e = rel.exprs[pred.args[0].index]
    if not (isinstance(e, Col) and e.index == len(rel.input.input.schema)):
        return None
    k = pred.args[1].value
    if pred.op == "=":
        return 1 if k == 1 else None
    return k - 1 if pred.op == "<" else k


def _implied_by_limit(f: Filter) -> bool:
    """A filter on a projected ranking's rank that keeps every rank its limit does."""
    k = ranks_kept(f.input, f.predicate)
    return k is not None and f.input.input.limit is not None and f.input.input.limit <= k


def _narrowed(rel: Rel, remap: dict[int, int], needed: set[int]) -> tuple[Rel, dict[int, int]]:
    """``rel`` cut to the ``needed`` columns (by a projection) when it has others."""
    if len(rel.schema) == len(needed):
        return rel, remap
    keep = sorted(remap[i] for i in needed)
    at = {c: i for i, c in enumerate(keep)}
    s = rel.schema
    cut = Project(rel, tuple(Col(c, s.types[c], s.names[c]) for c in keep), tuple(s.names[c] for c in keep))
    return cut, {i: at[remap[i]] for i in needed}


def _in_order(rel: Rel, remap: dict[int, int], keep: list[int]) -> Rel:
    """``rel`` (column ``i`` of the original at ``remap[i]``) with exactly the columns ``keep``, in that order."""
    if all(remap[c] == i for i, c in enumerate(keep)) and len(rel.schema) == len(keep):
        return rel
    s = rel.schema
    at = [remap[c] for c in keep]
    return Project(rel, tuple(Col(j, s.types[j], s.names[j]) for j in at), tuple(s.names[j] for j in at))


def _map_inputs(rel: Rel, fn) -> Rel:
    """``rel`` with ``fn`` applied to each input relation (fields named input, left, right, parts, bodies)."""
    changes = {}
    for f in dataclasses.fields(rel):
        v = getattr(rel, f.name)
        if f.name in ("input", "left", "right") and isinstance(v, Rel):
            changes[f.name] = fn(v)
        elif f.name in ("parts", "bodies") and isinstance(rel, (Union, Recursive)):
            changes[f.name] = tuple(fn(x) for x in v)
    return dataclasses.replace(rel, **changes) if changes else rel


def lift_closes(rel: Rel) -> Rel:
    """``rel`` with each window's :class:`CloseAt` moved up through filters, projections that keep the window's
    end, aggregates grouped by it, and inner joins keyed on both sides' window ends, so that everything below
    stays live and no arrangement keeps a closed window.  O(plan size).

    Sound because a live per-window row changes only before its window's
    end and leaves at exactly the end (``after`` included): a filter or a
    projection keeps that, so does an aggregate grouped by the end (a
    group's rows all leave at its end, and an empty group has no row), and
    so does an inner join whose keys equate the two sides' ends, since a
    pair lives exactly while both of its rows do.
    Closing the result then drops the same changes as closing the inputs.
    """
    rel = _map_inputs(rel, lift_closes)
    if isinstance(rel, Filter) and isinstance(rel.input, CloseAt):
        c = rel.input
        return dataclasses.replace(c, input=Filter(c.input, rel.predicate))
    if isinstance(rel, Project) and isinstance(rel.input, CloseAt):
        c = rel.input
        kept = [j for j, e in enumerate(rel.exprs) if _same_column(e, c.end)]
        if kept:
            e = c.end
            return dataclasses.replace(c, input=Project(c.input, rel.exprs, rel.names),
                                       end=Col(kept[0], e.type, rel.names[kept[0]]))
    if isinstance(rel, Aggregate) and isinstance(rel.input, CloseAt) and not rel.input.final:
        c = rel.input  # grouped by the window's end: each group lives exactly while its rows do
        at = [i for i, g in enumerate(rel.group) if _same_column(g, c.end)]
        if at:
            moved = dataclasses.replace(rel, input=c.input)
            return CloseAt(moved, Col(at[0], c.end.type, moved.schema.names[at[0]]), c.after)
    if isinstance(rel, Join) and rel.kind == "inner" and isinstance(rel.left, CloseAt) \
            and isinstance(rel.right, CloseAt) and rel.left.after == rel.right.after and not rel.left.final:
        a, b = rel.left, rel.right
        if any(_same_column(k, a.end) and _same_column(r, b.end) for k, r in zip(rel.left_keys, rel.right_keys)):
            return CloseAt(dataclasses.replace(rel, left=a.input, right=b.input), a.end, a.after)
    return rel


def _same_column(e: Expr, col: Expr) -> bool:
    """``e`` reads exactly column ``col`` (names are labels only)."""
    return isinstance(e, Col) and isinstance(col, Col) and e.index == col.index


def finalized(rel: Rel) -> Rel | None:
    """``rel`` emitting each row once, final, when its window closes: its top :class:`CloseAt` (above it only
    filters and projections) made ``final``; None when ``rel`` has no such close.  O(plan size)."""
    if isinstance(rel, CloseAt):
        return dataclasses.replace(rel, final=True)
    if isinstance(rel, (Filter, Project)):
        inner = finalized(rel.input)
        return None if inner is None else dataclasses.replace(rel, input=inner)
    return None
