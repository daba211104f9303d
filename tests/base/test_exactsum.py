"""Exact double sums (ddflow.base.exactsum): the limb kernels, plain and native, against Python fractions."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddflow.base import exactsum as E
from ddflow.base.native import native_module
from kernel_modes import MODES, as_run

I64 = np.iinfo(np.int64)


def _kernels(mode):
    """``(float_limbs, round_limbs)`` as ``mode`` (one of :data:`~kernel_modes.MODES`) runs them."""
    return as_run(E.float_limbs, mode), as_run(E.round_limbs, mode)

#: Any double: finite over the whole exponent range (subnormals, the largest), zeros of both signs, infinities, NaN.
doubles = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                    st.sampled_from([0.1, 0.2, 0.3, 1e16, -1e16, 5e-324, -5e-324, 2.2250738585072014e-308,
                                     1.7976931348623157e308, -1.7976931348623157e308, -0.0]),
                    st.integers(-1000, 1000).map(lambda c: c / 100))
diffs = st.one_of(st.sampled_from([1, -1, 2]), st.integers(-(1 << 30), 1 << 30))


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))


def _totals(fn_limbs, xs, ds) -> np.ndarray:
    row, slot, val = fn_limbs(np.array(xs, dtype=np.float64))
    assert len(row) <= 4 * len(xs) and (0 <= slot).all() and (slot < E.SLOTS).all()
    assert (np.abs(val[slot >= E.FIRST_LIMB]) < (1 << E.BITS)).all() and (val != 0).all()
    tot = np.zeros(E.SLOTS, dtype=np.int64)
    for r, s, v in zip(row.tolist(), slot.tolist(), val.tolist()):
        tot[s] += ds[r] * v
    return tot


@settings(max_examples=400, deadline=None)
@given(xs=st.lists(doubles, max_size=12), data=st.data(), mode=st.sampled_from(MODES))
def test_limbs_then_rounding_equal_the_exact_sum_rounded_once(xs, data, mode):
    ds = data.draw(st.lists(diffs, min_size=len(xs), max_size=len(xs)))
    fl, rl = _kernels(mode)
    tot = _totals(fl, xs, ds)
    # Only the slots present are passed, in any order, as the accumulate passes them.
    used = np.flatnonzero(tot)[::-1].copy()
    got = rl(tot[used].reshape(1, -1), used.astype(np.int64))[0]
    assert _same(got, E.exact_sum_reference(xs, ds)), (xs, ds, got)


@settings(max_examples=300, deadline=None)
@given(limbs=st.dictionaries(st.integers(0, E.LIMBS - 1), st.one_of(st.integers(-5, 5), st.integers(I64.min, I64.max)),
                             max_size=6), mode=st.sampled_from(MODES))
def test_rounding_any_int64_limb_totals_equals_the_exact_integer_rounded(limbs, mode):
    """Totals as the accumulate may hold them: any int64 per limb, either sign, carries far past one limb."""
    rl = _kernels(mode)[1]
    subs = np.array([E.FIRST_LIMB + i for i in limbs], dtype=np.int64)
    sums = np.array([list(limbs.values())], dtype=np.int64).reshape(1, len(limbs))
    total = sum(v << (E.BITS * i) for i, v in limbs.items())
    assert _same(rl(sums, subs)[0], E.rounded_total(total))


@pytest.mark.parametrize("mode", MODES)
def test_non_finite_counts_and_rows_without_slots(mode):
    fl, rl = _kernels(mode)
    subs = np.array([E.NAN, E.POS_INF, E.NEG_INF, E.FIRST_LIMB], dtype=np.int64)
    sums = np.array([[1, 0, 0, 5], [0, 2, 0, 5], [0, 0, 1, 5], [0, 1, 1, 5], [0, 0, 0, 0], [0, 0, 0, -5]], dtype=np.int64)
    got = rl(sums, subs).tolist()
    assert math.isnan(got[0]) and got[1] == math.inf and got[2] == -math.inf and math.isnan(got[3])
    assert got[4] == 0.0 and got[5] == -5 * 2.0 ** -1074
    assert rl(np.zeros((3, 0), dtype=np.int64), np.zeros(0, dtype=np.int64)).tolist() == [0.0] * 3
    assert all(len(a) == 0 for a in fl(np.zeros(0)))


def test_native_round_limbs_refuses_slots_it_has_no_room_for():
    """A slot outside ``0..SLOTS-1`` would index past the native kernel's limbs: a ValueError naming it."""
    rl = native_module().base.round_limbs
    for bad in (-1, E.SLOTS):
        with pytest.raises(ValueError, match="slot in subs"):
            rl(np.ones((1, 1), dtype=np.int64), np.array([bad], dtype=np.int64))
    with pytest.raises(ValueError, match="each column"):
        rl(np.ones((1, 2), dtype=np.int64), np.array([3], dtype=np.int64))


def test_the_sum_depends_on_the_multiset_alone():
    """Inserted in one order and retracted in another, the running totals end exactly where they started."""
    rng = np.random.default_rng(3)
    xs = rng.standard_normal(500) * 10.0 ** rng.integers(-20, 20, 500)
    keep = xs[:50]
    tot = _totals(E.float_limbs, list(xs), [1] * 500)
    tot -= _totals(E.float_limbs, list(xs[50:][::-1]), [1] * 450)
    used = np.flatnonzero(tot)
    assert E.round_limbs(tot[used].reshape(1, -1), used)[0] == math.fsum(keep)


#: Sums where rounding is decided by bits far below the result's last (the sticky bit), ties to even, the edge
#: of overflow, subnormals, and totals that are exact multiples of the limbs' whole range.
EDGES = [
    ([2.0 ** 53, 1.0, 2.0 ** -60], [1, 1, 1]),  # just above a tie: rounds up to 2**53 + 2
    ([2.0 ** 53, 1.0, -(2.0 ** -60)], [1, 1, 1]),  # just below: 2**53
    ([2.0 ** 53, 1.0], [1, 1]),  # a tie: to even, 2**53
    ([2.0 ** 53, 3.0], [1, 1]),  # a tie: to even, 2**53 + 4
    ([1.7976931348623157e308, 2.0 ** 970], [1, 1]),  # the largest double plus half an ulp: a tie, to inf
    ([1.7976931348623157e308, 2.0 ** 970, -(2.0 ** -1074)], [1, 1, 1]),  # just below that tie: the largest
    ([1.7976931348623157e308], [1 << 20]),  # far past: inf
    ([-1.7976931348623157e308], [1 << 20]),
    ([5e-324, 5e-324, -2.2250738585072014e-308], [3, 1, 1]),  # subnormal results, exact
    ([0.1, 0.2, 0.3], [1, 1, -1]),
    ([1e16, 1.0, -1e16], [1, 1, 1]),
]


def test_edge_sums_round_as_python_fractions():
    for mode in MODES:
        fl, rl = _kernels(mode)
        for xs, ds in EDGES:
            tot = _totals(fl, xs, ds)
            used = np.flatnonzero(tot)
            got = rl(tot[used].reshape(1, -1), used.astype(np.int64))[0]
            assert _same(got, E.exact_sum_reference(xs, ds)), (xs, ds, got, mode)
        # Totals that are whole multiples of 2**(BITS * LIMBS): all limbs zero after the carries.
        for v in (1 << E.BITS, -(1 << E.BITS), -1, 1):
            sums = np.array([[v, 0]], dtype=np.int64)
            subs = np.array([E.FIRST_LIMB + E.LIMBS - 1, E.FIRST_LIMB], dtype=np.int64)
            assert _same(rl(sums, subs)[0], E.rounded_total(v << (E.BITS * (E.LIMBS - 1)))), (v, mode)
