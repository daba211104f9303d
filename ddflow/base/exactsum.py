"""Exact sums of float64 values under retraction: integer limbs, rounded once.

Float addition does not undo (``(a + b) - b != a``), so a running float
sum drifts with every retraction and depends on the order of its updates.
An exact sum does neither: every finite double is an integer multiple of
``2**-1074``, at most ``2**2098`` of them, so it splits into ``LIMBS``
integer limbs of ``BITS`` bits each,

    x = sign(x) * sum(l_i * 2**(BITS * i - 1074) for i in range(LIMBS)),   0 <= l_i < 2**BITS

of which at most four are nonzero.  Diff-weighted sums of limbs are
int64 sums like any other (the accumulate operator keeps them, O(1) rows
per group); with ``BITS = 24`` a limb's sum has room for ``2**39``
full-size values before it passes int64 (an error, never a wrap).  The
result is the exact sum rounded once to nearest-even (:func:`round_limbs`,
what ``math.fsum`` gives), so it depends only on the multiset summed,
never on the order or the history of its updates.

Non-finite values are counted, not summed: slot ``NAN``, ``POS_INF`` and
``NEG_INF`` hold how many of each are present.  The sum is NaN if any
NaN or both infinities are present, else the infinity present, else the
rounded exact sum (``inf`` where it rounds past the largest double).  An
exact zero is ``0.0``.

Slots: ``0..2`` the non-finite counts, ``3 + i`` limb ``i``; ``SLOTS`` in
all.  :func:`exact_sum_reference` is the plain-Python oracle.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ddflow.base.native import kernel

BITS = 24
LIMBS = 88  # 88 * 24 = 2112 >= 1074 + 1024 bits
NAN, POS_INF, NEG_INF = 0, 1, 2
FIRST_LIMB = 3
SLOTS = FIRST_LIMB + LIMBS
_MASK = (1 << BITS) - 1
_UNIT = 1 << 1074  # one 2**-1074 is 1: the exact integer form of a double


@kernel("base")
def float_limbs(x):
    """The sparse slots of each value of ``x``: ``(row, slot, value)``, at most four a value.  O(n), one pass.

    A finite nonzero ``x[r]`` gives its nonzero limbs ``(r, 3 + i, ±l_i)``;
    NaN gives ``(r, NAN, 1)`` and an infinity ``(r, POS_INF or NEG_INF, 1)``;
    a zero gives nothing.

    >>> row, slot, val = float_limbs(np.array([1.0, -0.5, 0.0, np.inf]))
    >>> row.tolist(), (slot - FIRST_LIMB).tolist()[:2], val.tolist()  # 1.0 is 2**1074 units: 2**18 in limb 44
    ([0, 1, 3], [44, 44], [262144, -131072, 1])
    """
    n = len(x)
    row = np.empty(4 * n, dtype=np.int64)
    slot = np.empty(4 * n, dtype=np.int64)
    val = np.empty(4 * n, dtype=np.int64)
    mask = (1 << 24) - 1
    w = 0
    for r in range(n):
        v = x[r]
        if v != v:
            row[w], slot[w], val[w] = r, 0, 1
            w += 1
            continue
        if v == 0.0:
            continue
        if math.isinf(v):
            row[w], slot[w], val[w] = r, 1 if v > 0 else 2, 1
            w += 1
            continue
        sign = 1
        if v < 0:
            sign, v = -1, -v
        m, e = math.frexp(v)  # v = m * 2**e, 0.5 <= m < 1
        mant = np.int64(math.ldexp(m, 53))  # exact: 53 bits
        p = e - 53 + 1074  # bit position of mant's lowest bit, counted from 2**-1074
        if p < 0:  # a subnormal: its low bits are zeros
            mant >>= -p
            p = 0
        i = p // 24
        off = p - 24 * i
        low = (mant & ((np.int64(1) << (24 - off)) - 1)) << off
        rest = mant >> (24 - off)
        while True:
            if low:
                row[w], slot[w], val[w] = r, 3 + i, sign * low
                w += 1
            if rest == 0:
                break
            i += 1
            low = rest & mask
            rest >>= 24
    return row[:w], slot[:w], val[:w]


@kernel("base")
def round_limbs(sums, subs):
    """Each row's sum, rounded once to nearest-even: ``(R,)`` float64.  O(R LIMBS).

    ``sums``: ``(R, S)`` int64 slot totals (diff-weighted); ``subs``: the
    slot (``0..SLOTS-1``) of each of the ``S`` columns; absent slots are
    zero.  The limbs are normalized with carries (any int64 totals, either
    sign), the sign read off the top carry, and the top 62 bits rounded by
    the int-to-float conversion with a sticky bit for the rest.
    """
    R, S = sums.shape
    out = np.zeros(R, dtype=np.float64)
    raw = np.zeros(88, dtype=np.int64)
    limb = np.zeros(88, dtype=np.int64)
    mask = (1 << 24) - 1
    for r in range(R):
        nan = 0
        pinf = 0
        ninf = 0
        raw[:] = 0
        for s in range(S):
            c = subs[s]
            if c == 0:
                nan = sums[r, s]
            elif c == 1:
                pinf = sums[r, s]
            elif c == 2:
                ninf = sums[r, s]
            else:
                raw[c - 3] = sums[r, s]
        if nan != 0 or (pinf != 0 and ninf != 0):
            out[r] = np.nan
            continue
        if pinf != 0:
            out[r] = np.inf
            continue
        if ninf != 0:
            out[r] = -np.inf
            continue
        carry = np.int64(0)
        for i in range(88):
            v = raw[i]
            t = (v & mask) + carry
            limb[i] = t & mask
            carry = (v >> 24) + (t >> 24)
        sign = 1.0
        if carry < 0:  # V = carry * 2**2112 + L, L the limbs: -V = (-carry - 1) * 2**2112 + (2**2112 - L)
            sign = -1.0
            c = np.int64(1)
            for i in range(88):
                t = (mask - limb[i]) + c
                limb[i] = t & mask
                c = t >> 24
            carry = -carry - 1 + c
        if carry > 0:  # at least 2**(2112 - 1074): past every double
            out[r] = sign * np.inf
            continue
        h = 87
        while h >= 0 and limb[h] == 0:
            h -= 1
        if h < 0:
            out[r] = 0.0
            continue
        # acc: the top 62 bits (fewer if that is all there is); base: the power of two of acc's lowest bit.
        acc = np.int64(0)
        i = h
        while i >= 0 and acc < (np.int64(1) << 38):
            acc = (acc << 24) | limb[i]
            i -= 1
        base = 24 * (i + 1)
        if i >= 0:
            bl = 0
            while (acc >> bl) > 0:
                bl += 1
            k = 62 - bl  # bits still to take from limb i (0 <= k < 24)
            if k > 0:
                acc = (acc << k) | (limb[i] >> (24 - k))
                base = 24 * i + (24 - k)
                sticky = (limb[i] & ((np.int64(1) << (24 - k)) - 1)) != 0
            else:
                sticky = limb[i] != 0
            j = i - 1
            while not sticky and j >= 0:
                sticky = limb[j] != 0
                j -= 1
            if sticky:
                acc |= 1
        f = np.float64(acc)  # rounded to nearest-even; then scaled exactly, or past every double
        if math.frexp(f)[1] + base - 1074 > 1024:
            out[r] = sign * np.inf
        else:
            out[r] = sign * math.ldexp(f, base - 1074)
    return out


def exact_sum_reference(values, diffs) -> float:
    """``sum(d * x)`` rounded once, in plain Python: the oracle of :func:`float_limbs` and :func:`round_limbs`.

    >>> exact_sum_reference([0.1, 0.2, 0.1], [1, 1, -1])  # a running float sum gives 0.20000000000000004
    0.2
    >>> exact_sum_reference([1e308, 1e308, float("inf")], [1, 1, 0])
    inf
    """
    total = nan = pinf = ninf = 0
    for x, d in zip(values, diffs):
        u, a, b, c = exact_units(float(x))
        d = int(d)
        total, nan, pinf, ninf = total + d * u, nan + d * a, pinf + d * b, ninf + d * c
    return rounded_total(total, nan, pinf, ninf)


def rounded_total(total: int, nan: int = 0, pinf: int = 0, ninf: int = 0) -> float:
    """The double of an exact total in units of ``2**-1074`` and its non-finite counts (the module's rules)."""
    if nan or (pinf and ninf):
        return math.nan
    if pinf:
        return math.inf
    if ninf:
        return -math.inf
    try:
        return float(Fraction(total, _UNIT))
    except OverflowError:
        return math.inf if total > 0 else -math.inf


def exact_units(x: float) -> tuple[int, int, int, int]:
    """``(units, nan, pinf, ninf)``: a double as an exact integer of ``2**-1074`` units, or its non-finite count."""
    if math.isnan(x):
        return 0, 1, 0, 0
    if math.isinf(x):
        return (0, 0, 1, 0) if x > 0 else (0, 0, 0, 1)
    num, den = x.as_integer_ratio()
    return num * (_UNIT // den), 0, 0, 0
