"""Input handles: int64 numpy columns skip Arrow, and must encode exactly as the Arrow path does."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddflow
from ddflow import FrontierError
from ddflow.errors import SchemaError

I64 = st.integers(-(2**63), 2**63 - 1)


def _same(a, b) -> None:
    assert a.kinds == b.kinds
    assert len(a.cols) == len(b.cols) and all(np.array_equal(x, y) and x.dtype == y.dtype for x, y in zip(a.cols, b.cols))
    assert np.array_equal(a.times, b.times) and a.times.dtype == b.times.dtype
    assert np.array_equal(a.diffs, b.diffs) and a.diffs.dtype == b.diffs.dtype


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 3), st.integers(0, 12), st.data())
def test_int64_columns_encode_as_the_arrow_path_does(arity, n, data):
    flow = ddflow.Dataflow()
    h, _ = flow.new_collection("c")
    rows = {f"f{j}": np.array(data.draw(st.lists(I64, min_size=n, max_size=n)), dtype=np.int64) for j in range(arity)}
    times = data.draw(st.one_of(st.integers(0, 50),
                                st.lists(st.integers(0, 50), min_size=n, max_size=n).map(np.array)))
    diffs = data.draw(st.one_of(st.integers(-3, 3), st.lists(I64, min_size=n, max_size=n).map(np.array)))
    fast, slow = _encoded(h, rows, times, diffs, flow), _encoded(h, pa.table(rows), times, diffs, flow)
    if isinstance(slow, Exception):  # refused alike (an empty float array of times, say)
        assert type(fast) is type(slow) and str(fast) == str(slow)
    else:
        _same(fast, slow)


def _encoded(h, rows, times, diffs, flow):
    try:
        return h.encode(rows, times, diffs, flow.interner, 0)
    except Exception as e:  # noqa: BLE001 - compared by the caller
        return e


def test_int64_columns_are_copied():
    """The caller may reuse its arrays once update returns."""
    flow = ddflow.Dataflow()
    h, c = flow.new_collection("c")
    out = c.capture()
    a, t, d = np.array([1, 2]), np.array([0, 0]), np.array([1, 1])
    h.update({"a": a}, times=t, diffs=d)
    a[:], t[:], d[:] = 9, 5, -1
    flow.advance_to(1)
    flow.run()
    assert out.drain() == [((1,), 0, 1), ((2,), 0, 1)]


@pytest.mark.parametrize("call, error, words", [
    (lambda h: h.update({"a": np.array([1, 2]), "b": np.array([1])}, times=0), SchemaError, "column 'b' has 1 values"),
    (lambda h: h.update({"a": np.array([1, 2])}, times=np.array([0, 1, 2])), SchemaError, "times for 2 rows"),
    (lambda h: h.update({"a": np.array([1])}, times=0, diffs=np.array([2**63], dtype=np.uint64)), SchemaError,
     "does not fit in int64"),
    (lambda h: h.update({"a": np.array([1])}, times=[2**63]), FrontierError, "outside the data times"),
    (lambda h: h.update({"a": np.array([1])}, times=np.array([-1])), FrontierError, "before the frontier"),
    (lambda h: h.update({"a": np.array([1])}, times=0, diffs=np.array([0.5])), SchemaError, "diffs must be integers"),
])
def test_int64_columns_refuse_what_the_arrow_path_refuses(call, error, words):
    flow = ddflow.Dataflow()
    h, _ = flow.new_collection("c")
    with pytest.raises(error, match=words):
        call(h)


def test_a_collection_of_object_fields_takes_int_columns_through_the_interner():
    """Kinds declared other than int: the Arrow path, which interns them."""
    flow = ddflow.Dataflow()
    h, c = flow.new_collection("c", schema=("o",))
    out = c.capture()
    h.update({"a": np.array([7])}, times=0)
    flow.advance_to(1)
    flow.run()
    assert out.drain() == [((7,), 0, 1)]
