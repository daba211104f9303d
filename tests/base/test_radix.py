"""The radix sorts kernels use, plain and native: of values against numpy's stable argsort, of rows against lex_order."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ddflow.base import radix
from ddflow.base.kernels import lex_order
from kernel_modes import MODES, as_run


@settings(max_examples=200)
@given(values=st.one_of(hnp.arrays(np.int64, st.integers(0, 300), elements=st.integers(-5, 5)),
                        hnp.arrays(np.int64, st.integers(0, 300), elements=st.integers(-(2**63), 2**63 - 1)),
                        hnp.arrays(np.int64, st.integers(0, 300), elements=st.sampled_from(
                            [-(2**63), -(2**40), -1, 0, 1, 2**11, 2**22 + 1, 2**63 - 1]))),
       mode=st.sampled_from(MODES))
def test_radix_order_is_a_stable_sort(values, mode):
    """Against numpy's stable argsort: narrow ranges (one pass), the whole of int64 (six), and digits that skip."""
    order = as_run(radix.radix_order, mode)(values)
    assert order.tolist() == np.argsort(values, kind="stable").tolist()


_COLUMN = st.sampled_from([st.integers(-3, 3), st.integers(0, 2**20), st.integers(-(2**63), 2**63 - 1),
                           st.sampled_from([-(2**63), -1, 0, 2**40, 2**63 - 1])])


@st.composite
def _matrices(draw):
    """Rows of one to three columns, each column narrow, wide or extreme: packable or not, several per value."""
    n, m = draw(st.integers(0, 300)), draw(st.integers(1, 3))
    cols = [draw(hnp.arrays(np.int64, n, elements=draw(_COLUMN))) for _ in range(m)]
    return np.column_stack(cols).astype(np.int64)


@settings(max_examples=200, deadline=None)
@given(M=_matrices(), radix_above=st.sampled_from([0, 5, 10**9]), mode=st.sampled_from(MODES))
def test_row_order_is_lex_orders_permutation(M, radix_above, mode):
    """Radix-sorted packed rows (any above ``radix_above`` that pack), else the merge sort: the same stable order.

    With ``radix_above`` 0 every packable matrix in more than
    ``RADIX_RUNS_ABOVE`` runs takes the radix path; the extreme columns do
    not pack and take the merge sort; 10**9 never radix-sorts.
    """
    order = as_run(radix.row_order, mode)(M, radix_above)
    assert order.tolist() == lex_order(M).tolist()
    assert order.tolist() == sorted(range(len(M)), key=lambda i: (tuple(M[i].tolist()), i))
