"""The radix sort kernels use, compiled and plain, against numpy's stable argsort."""
from __future__ import annotations

import functools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ddflow.base import radix

_RADIX_ORDER = getattr(radix.radix_order, "py_func", radix.radix_order)


@functools.cache
def _radix_order_compiled():
    from numba import njit

    return njit(_RADIX_ORDER)


@settings(max_examples=200)
@given(values=st.one_of(hnp.arrays(np.int64, st.integers(0, 300), elements=st.integers(-5, 5)),
                        hnp.arrays(np.int64, st.integers(0, 300), elements=st.integers(-(2**63), 2**63 - 1)),
                        hnp.arrays(np.int64, st.integers(0, 300), elements=st.sampled_from(
                            [-(2**63), -(2**40), -1, 0, 1, 2**11, 2**22 + 1, 2**63 - 1]))),
       compiled=st.booleans())
def test_radix_order_is_a_stable_sort(values, compiled):
    """Against numpy's stable argsort: narrow ranges (one pass), the whole of int64 (six), and digits that skip."""
    order = (_radix_order_compiled() if compiled else _RADIX_ORDER)(values)
    assert order.tolist() == np.argsort(values, kind="stable").tolist()
