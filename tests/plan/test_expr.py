"""Vectorized expressions against a row-at-a-time Python reference of SQL's NULL semantics."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddflow.errors import SchemaError
from ddflow.plan.expr import Call, Col, Lit, evaluate

I64 = np.iinfo(np.int64)


def ref(op, *xs):
    """One row: SQL semantics with None as NULL."""
    if op == "and":
        a, b = xs
        if a is False or b is False:
            return False
        return None if a is None or b is None else True
    if op == "or":
        a, b = xs
        if a is True or b is True:
            return True
        return None if a is None or b is None else False
    if op == "not":
        return None if xs[0] is None else not xs[0]
    if op == "coalesce":
        return next((x for x in xs if x is not None), None)
    if any(x is None for x in xs):
        return None
    a, b = xs
    return {"+": a + b, "-": a - b, "*": a * b, "=": a == b, "<>": a != b, "<": a < b, ">=": a >= b}[op]


def column(values, typ):
    null = np.array([v is None for v in values], dtype=bool)
    dtype = bool if typ == "boolean" else np.int64
    return np.array([False if v is None and typ == "boolean" else (0 if v is None else v) for v in values], dtype=dtype), null


def rows_of(vals, null):
    return [None if n else v for v, n in zip(vals.tolist(), null.tolist())]


bools = st.lists(st.sampled_from([True, False, None]), min_size=0, max_size=12)


@settings(max_examples=200)
@given(data=st.data())
def test_three_valued_logic_matches_the_reference(data):
    n = data.draw(st.integers(0, 10))
    a = data.draw(st.lists(st.sampled_from([True, False, None]), min_size=n, max_size=n))
    b = data.draw(st.lists(st.sampled_from([True, False, None]), min_size=n, max_size=n))
    cols = [column(a, "boolean"), column(b, "boolean")]
    x, y = Col(0, "boolean"), Col(1, "boolean")
    for op in ("and", "or"):
        assert rows_of(*evaluate(Call(op, (x, y), "boolean"), cols)) == [ref(op, p, q) for p, q in zip(a, b)]
    assert rows_of(*evaluate(Call("not", (x,), "boolean"), cols)) == [ref("not", p) for p in a]


@settings(max_examples=200)
@given(data=st.data())
def test_arithmetic_comparisons_and_coalesce_match_the_reference(data):
    n = data.draw(st.integers(0, 10))
    vals = st.one_of(st.none(), st.integers(-50, 50))
    a = data.draw(st.lists(vals, min_size=n, max_size=n))
    b = data.draw(st.lists(vals, min_size=n, max_size=n))
    cols = [column(a, "bigint"), column(b, "bigint")]
    x, y = Col(0, "bigint"), Col(1, "bigint")
    for op in ("+", "-", "*"):
        assert rows_of(*evaluate(Call(op, (x, y), "bigint"), cols)) == [ref(op, p, q) for p, q in zip(a, b)]
    for op in ("=", "<>", "<", ">="):
        assert rows_of(*evaluate(Call(op, (x, y), "boolean"), cols)) == [ref(op, p, q) for p, q in zip(a, b)]
    got = rows_of(*evaluate(Call("coalesce", (x, y, Lit(7, "bigint")), "bigint"), cols))
    assert got == [ref("coalesce", p, q, 7) for p, q in zip(a, b)]
    case = Call("case", (Call(">", (x, Lit(0, "bigint")), "boolean"), x, y), "bigint")
    assert rows_of(*evaluate(case, cols)) == [p if p is not None and p > 0 else q for p, q in zip(a, b)]


def test_integer_overflow_and_division_by_zero_are_errors_and_try_divide_is_null():
    """Spark 4's ANSI mode: overflow and x / 0 raise; try_divide gives NULL."""
    cols = [column([I64.max, 1], "bigint"), column([1, 0], "bigint")]
    with pytest.raises(SchemaError, match="integer overflow in \\+"):
        evaluate(Call("+", (Col(0, "bigint"), Col(1, "bigint")), "bigint"), cols)
    with pytest.raises(SchemaError, match="division by zero"):
        evaluate(Call("/", (Col(0, "bigint"), Col(1, "bigint")), "double"), cols)
    vals, null = evaluate(Call("try_divide", (Col(0, "bigint"), Col(1, "bigint")), "double"), cols)
    assert null.tolist() == [False, True] and vals[0] == float(I64.max)
    guarded = Call("case", (Call("<>", (Col(1, "bigint"), Lit(0, "bigint")), "boolean"),
                            Call("/", (Col(0, "bigint"), Col(1, "bigint")), "double"), Lit(None, "null")), "double")
    assert rows_of(*evaluate(guarded, cols)) == [float(I64.max), None]  # a branch not taken never raises


def test_strings_through_arrow():
    s = (np.array(["Ab", None, "xyz"], dtype=object), np.array([False, True, False]))
    col = Col(0, "string")
    assert rows_of(*evaluate(Call("lower", (col,), "string"), [s])) == ["ab", None, "xyz"]
    assert rows_of(*evaluate(Call("length", (col,), "bigint"), [s])) == [2, None, 3]
    assert rows_of(*evaluate(Call("like", (col, Lit("x%", "string")), "boolean"), [s])) == [False, None, True]
    assert rows_of(*evaluate(Call("substring", (col, Lit(2, "bigint"), Lit(1, "bigint")), "string"), [s])) == ["b", None, "y"]
    assert rows_of(*evaluate(Call("concat", (col, Lit("!", "string")), "string"), [s])) == ["Ab!", None, "xyz!"]
    parsed = (np.array([" 12", "x", None, "99999999999999999999"], dtype=object), np.array([False, False, True, False]))
    with pytest.raises(SchemaError, match="CAST"):
        evaluate(Call("cast", (col,), "bigint"), [parsed])
    with pytest.raises(SchemaError, match="CAST"):  # ANSI: a string that does not parse raises
        evaluate(Call("cast", (col,), "bigint"), [(parsed[0][:3], parsed[1][:3])])
    assert rows_of(*evaluate(Call("try_cast", (col,), "bigint"), [parsed])) == [12, None, None, None]
