"""Valid but hostile input through the Python API: each case is refused by name or gives the oracle's answer.

Issue 22's cases that do not need Spark: diffs past int64, NaN and -0.0
in object columns, retractions of absent records into loops, loops that
do not converge.
"""
from __future__ import annotations

import numpy as np
import pytest

import ddflow
from ddflow.errors import SchemaError


@pytest.mark.parametrize("diffs", [2 ** 63, -(2 ** 63) - 1, [2 ** 63], np.array([2 ** 64 - 1], dtype=np.uint64)])
def test_diffs_past_int64_are_refused_not_wrapped(diffs):
    flow = ddflow.Dataflow()
    a_in, a = flow.new_collection("a")
    cap = a.count().capture()
    with pytest.raises(SchemaError, match="does not fit in int64"):
        a_in.update([(1,)], times=0, diffs=diffs)
    flow.advance_to(1)
    flow.run()
    assert cap.contents(0) == {}  # nothing was applied


@pytest.mark.parametrize("workers", [1, 2])
def test_nan_and_negative_zero_in_object_columns_are_one_value(workers):
    """Inserting NaN then removing a NaN (another object) leaves nothing; -0.0 is 0.0, as in float columns."""
    with ddflow.Dataflow(workers=workers) as flow:
        o_in, o = flow.new_collection("o")
        cap = o.count().capture()
        o_in.update([(float("nan"),), ("x",), ((1, float("nan")),)], times=0)
        o_in.update([(float("nan"),), ((1, float("nan")),)], times=1, diffs=-1)
        o_in.update([(-0.0,), (0.0,)], times=1)
        flow.advance_to(2)
        flow.run()
        assert len(cap.contents(0)) == 3
        got = cap.contents(1)
        assert got == {("x", 1): 1, (0.0, 2): 1}
        assert all(not isinstance(r[0], float) or np.signbit(r[0]) == 0 for r in got)
