"""OR factoring and predicates implied by a disjunction (ddflow/plan/rewrite.py) never change a result.

Two levels: random predicates evaluated over random rows with NULLs, the
rewritten one against the original (same TRUE/FALSE/NULL everywhere, no
error where the original had none, an implied predicate TRUE wherever the
original is); and random disjunctive queries (comma join, LEFT JOIN ON,
a filter over a RIGHT JOIN) on random update streams with several data
times per advance, the plan with the rewrites and the plan without them
(no factoring, no pushing, no pruning) each equal to DuckDB at every
complete time.
"""
from __future__ import annotations

from collections import Counter

import duckdb
import numpy as np
import pytest
import sqlglot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ddflow
from oracle import replay
from ddflow.errors import SchemaError
from ddflow.plan.expr import Call, Col, Expr, Lit, evaluate
from ddflow.plan.functions import typed
from ddflow.plan.rewrite import factor_or, implied
from ddflow.sql import planner
from ddflow.sql.frontend import SqlFrontend

# -- predicates over four columns: 0, 1 on the left, 2, 3 on the right -------------------------------------

COLS = [Col(i, "bigint", f"c{i}") for i in range(4)]
LEFT, RIGHT = {0, 1}, {2, 3}


@st.composite
def atoms(draw) -> Expr:
    kind = draw(st.sampled_from(["cmp", "cmp", "cmp", "null", "div", "not"]))
    a = draw(st.sampled_from(COLS))
    if kind == "null":
        return Call(draw(st.sampled_from(["is_null", "is_not_null"])), (a,), "boolean")
    if kind == "div":  # can raise (division by zero): never moved to rows the original did not evaluate it on
        return typed(">", [typed("/", [Lit(6, "bigint"), a]), Lit(draw(st.integers(0, 3)), "bigint")])
    b = draw(st.one_of(st.sampled_from(COLS), st.integers(0, 2).map(lambda v: Lit(v, "bigint"))))
    cmp = typed(draw(st.sampled_from(["=", "<>", "<", ">="])), [a, b])
    return Call("not", (cmp,), "boolean") if kind == "not" else cmp


@st.composite
def disjunctions(draw) -> Expr:
    """An OR of ANDs drawn from a small pool of atoms, so branches often share conjuncts; sometimes nested."""
    pool = draw(st.lists(atoms(), min_size=1, max_size=4))
    branches = []
    for _ in range(draw(st.integers(1, 3))):
        parts = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3))
        if draw(st.integers(0, 4)) == 0:
            inner = [draw(st.sampled_from(pool)) for _ in range(2)]
            parts.append(Call("or", tuple(Call("and", (x, parts[0]), "boolean") for x in inner), "boolean"))
        e = parts[0]
        for p in parts[1:]:
            e = Call("and", (e, p), "boolean")
        branches.append(e)
    e = branches[0]
    for b in branches[1:]:
        e = Call("or", (e, b), "boolean")
    return e


def _eval(e: Expr, cols) -> tuple[np.ndarray, np.ndarray] | None:
    """(TRUE mask, NULL mask), or None where evaluating raises."""
    try:
        vals, null = evaluate(e, cols)
    except SchemaError:
        return None
    return vals.astype(bool) & ~null, null.copy()


@settings(max_examples=300, deadline=None)
@given(disjunctions(), st.lists(st.tuples(*[st.one_of(st.none(), st.integers(0, 2))] * 4), min_size=1, max_size=12))
def test_factored_and_implied_predicates_agree_with_the_original(e, rows):
    cols = [(np.array([r[j] or 0 for r in rows], dtype=np.int64), np.array([r[j] is None for r in rows]))
            for j in range(4)]
    orig = _eval(e, cols)
    if orig is None:  # the original raises: the rewritten one may too, or not (fewer evaluations)
        return
    fac = _eval(factor_or(e), cols)
    assert fac is not None, f"factoring raised: {e} -> {factor_or(e)}"
    assert (fac[0] == orig[0]).all() and (fac[1] == orig[1]).all(), f"{e} -> {factor_or(e)}"
    for side in (LEFT, RIGHT):
        imp = implied(e, side)
        if imp is None:
            continue
        assert imp.columns() <= side
        got = _eval(imp, cols)
        assert got is not None, f"implied raised: {e} -> {imp}"
        assert not (orig[0] & ~got[0]).any(), f"{e} does not imply {imp}"


def test_factoring_pulls_the_common_key_out_of_q19s_shape():
    k, v, kb, w = COLS
    eq = lambda x, y: typed("=", [x, y])  # noqa: E731
    both = lambda x, y: Call("and", (x, y), "boolean")  # noqa: E731
    e = Call("or", (both(eq(k, kb), eq(v, Lit(1, "bigint"))), both(eq(k, kb), eq(w, Lit(2, "bigint")))), "boolean")
    assert str(factor_or(e)) == "((c0 = c2) and ((c1 = 1) or (c3 = 2)))"
    flipped = Call("or", (both(eq(k, kb), eq(v, Lit(1, "bigint"))), both(eq(kb, k), eq(w, Lit(2, "bigint")))), "boolean")
    assert str(factor_or(flipped)) == "((c0 = c2) and ((c1 = 1) or (c3 = 2)))"
    assert implied(e, LEFT) is None  # the second branch says nothing of the left side alone
    e = Call("or", (both(eq(k, kb), eq(v, Lit(1, "bigint"))), both(eq(w, Lit(0, "bigint")), eq(v, Lit(2, "bigint")))),
             "boolean")
    assert str(implied(e, LEFT)) == "((c1 = 1) or (c1 = 2))" and implied(e, RIGHT) is None
    div = typed(">", [typed("/", [Lit(6, "bigint"), v]), Lit(1, "bigint")])  # may raise: stays in its branches
    e = Call("or", (both(eq(k, Lit(0, "bigint")), div), both(eq(k, Lit(1, "bigint")), div)), "boolean")
    assert factor_or(e) == e


# -- queries on streams, against DuckDB, with and without the rewrites -----------------------------------

ATOMS = ["a.k = b.k", "b.k = a.k", "a.v = 1", "a.v > 0", "b.w = 2", "b.w IS NULL", "a.v < b.w", "a.k = 1",
         "b.k <> 0", "a.v + b.w = 2", "NOT (a.v = b.w)"]
SHAPES = ["SELECT a.v, b.w FROM a, b WHERE {p}",
          "SELECT a.k, a.v, b.w FROM a LEFT JOIN b ON {p}",
          "SELECT a.v, b.k, b.w FROM a RIGHT JOIN b ON a.k = b.k WHERE {p}"]
SCHEMAS = {"a": {"k": "bigint", "v": "bigint"}, "b": {"k": "bigint", "w": "bigint"}}


@st.composite
def sql_predicates(draw) -> str:
    pool = draw(st.lists(st.sampled_from(ATOMS), min_size=1, max_size=4))
    branches = [" AND ".join(draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3)))
                for _ in range(draw(st.integers(2, 3)))]
    return " OR ".join(f"({b})" for b in branches)


value = st.one_of(st.none(), st.integers(0, 2))
ROWS = st.tuples(value, value)


@st.composite
def streams(draw):
    """Per advance, several data times; inserts, and removals of rows present at that time."""
    steps, acc, t = [], {"a": Counter(), "b": Counter()}, 0
    for _ in range(draw(st.integers(1, 3))):
        batch = []
        for _ in range(draw(st.integers(1, 3))):
            for name in ("a", "b"):
                for _ in range(draw(st.integers(0, 3))):
                    if acc[name] and draw(st.booleans()):
                        row = draw(st.sampled_from(sorted(acc[name], key=repr)))
                        acc[name][row] -= 1
                        acc[name] = +acc[name]
                        batch.append((name, row, t, -1))
                    else:
                        row = draw(ROWS)
                        acc[name][row] += 1
                        batch.append((name, row, t, 1))
            t += 1
        steps.append((batch, t))
    return steps


def _plain(front: SqlFrontend, query: str):
    """The query's view as the planner gives it without factoring, lowered without pushing or pruning."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(planner, "factor_or", lambda e: e)
        return front.sql(query).capture()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sql_predicates(), streams())
def test_disjunctive_joins_equal_duckdb_with_and_without_the_rewrites(pred, steps):
    flow = ddflow.Dataflow()
    handles = {n: flow.new_collection(n, schema=s)[0] for n, s in SCHEMAS.items()}
    plain = SqlFrontend(flow, rewrite=False, share=False)
    queries = [s.format(p=pred) for s in SHAPES]
    caps = [(flow.sql(q).capture(), _plain(plain, q)) for q in queries]
    con = duckdb.connect()
    for n, s in SCHEMAS.items():
        con.execute(f"CREATE TABLE {n} ({', '.join(f'{c} BIGINT' for c in s)})")
    duck = [sqlglot.transpile(q, read="spark", write="duckdb")[0] for q in queries]
    for t, acc in replay(flow, handles, steps):
        for n, rows in acc.items():
            con.execute(f"DELETE FROM {n}")
            if +rows:
                con.executemany(f"INSERT INTO {n} VALUES (?, ?)", list((+rows).elements()))
        for q, d, (rewritten, plain) in zip(queries, duck, caps):
            want = Counter(con.execute(d).fetchall())
            assert Counter(rewritten.contents(t)) == want, f"time {t}, rewritten: {q}"
            assert Counter(plain.contents(t)) == want, f"time {t}, plain: {q}"
