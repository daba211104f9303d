"""A loop variable's feedback kernel (``operators/feedback.py``), native against its plain reference at the edges.

(``feedback_round_into``, which writes into an arena, is checked in
tests/operators/test_route.py, against the insert it extends and on the
arenas of an engine run.)
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ddflow.base.native import native_module, reference
from ddflow.operators.feedback import feedback_round
from kernel_modes import as_run

I64 = np.iinfo(np.int64)
_ENDS = [I64.min, -1, 0, 1, 2, I64.max - 1, I64.max]


def _same(got, ref):
    assert len(got) == len(ref) == 5
    for i, (g, r) in enumerate(zip(got, ref)):
        if isinstance(r, np.ndarray):
            assert g.dtype == r.dtype and g.shape == r.shape and np.array_equal(g, r), f"result {i}: {g!r} != {r!r}"
        else:
            assert g == r, f"result {i}: {g!r} != {r!r}"


@settings(max_examples=400)
@given(st.data())
def test_feedback_round_is_the_reference_at_the_edges(data):
    """Rows at int64's ends (an iteration at int64 max wraps, as the reference's int64 does; sums past int64),
    duplicates that cancel, more rows than the insertion sort takes, rows not complete under the bound, empty
    feedback."""
    m = data.draw(st.integers(0, 3))
    depth = data.draw(st.integers(1, 3))
    n = data.draw(st.sampled_from([0, 1, 2, 5, 12, 40, 80]))
    wide = data.draw(st.booleans())
    elems = st.sampled_from(_ENDS) if wide else st.integers(0, 4)
    K = data.draw(hnp.arrays(np.int64, (n, m + depth), elements=elems))
    diffs = data.draw(hnp.arrays(np.int64, n, elements=st.sampled_from([I64.min, -1, 1, 2, I64.max]) if wide
                                 else st.sampled_from([-1, 1])))
    bound = np.array(data.draw(st.lists(st.sampled_from([0, 1, 3, I64.max, I64.max, I64.max]), min_size=depth, max_size=depth)),
                     dtype=np.int64)
    if data.draw(st.booleans()):  # read-only feedback, as a trace hands it
        K.flags.writeable = diffs.flags.writeable = False
    with np.errstate(over="ignore"):  # the plain reference wraps with numpy's scalars
        _same(as_run(feedback_round, "native")(K, diffs, m, bound), reference(feedback_round)(K, diffs, m, bound))


@pytest.mark.parametrize("seed", range(6))
def test_feedback_round_past_the_insertion_sort_is_the_reference(seed):
    """Past SMALL_ROWS rows (consolidated by the merge sort), some cancelling."""
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(33, 120)), int(rng.integers(1, 3))
    K = rng.integers(0, 4, size=(n, m + 2)).astype(np.int64)
    diffs = rng.choice([-1, 1, 2], n).astype(np.int64)
    ref = reference(feedback_round)(K, diffs, m, np.array([9, 9]))
    assert ref[3] and len(ref[2]) > 0
    _same(as_run(feedback_round, "native")(K, diffs, m, np.array([9, 9])), ref)


def test_the_native_feedback_round_refuses_arrays_that_do_not_fit_together():
    fb = native_module().operators.feedback_round
    K, diffs, bound = np.zeros((2, 3), dtype=np.int64), np.ones(2, dtype=np.int64), np.full(2, 2, dtype=np.int64)
    assert fb(K, diffs, 1, bound)[3]  # due
    for args, what in (((K, diffs[:1], 1, bound), "differ in length"),
                       ((K, diffs, 3, bound), "at least one time column"),
                       ((K, diffs, -1, bound), "at least one time column"),
                       ((K, diffs, 2, bound), "more coordinates than K's times")):
        with pytest.raises(ValueError, match=what):
            fb(*args)
