"""The null mask of a stored row: which of its columns are NULL, in as many int64 words as its width needs.

A row of ``n`` columns carries :func:`words` ``(n)`` mask fields after its
values; column ``j``'s bit is bit ``j % 63`` of word ``j // 63``.  A
word holds 63 bits, never the sign bit, so every word is a nonnegative
int64 and the arithmetic is the same in numpy and in Python integers.  A
row of at most 63 columns has exactly one word: the layout, and the cost
of every operation here, are then those of a single shifted int64.

This module is the one place that shifts mask bits; everything else asks
it.  The vectorized functions take and give a sequence of int64 arrays
(one per word, one element per row); the ``row_*`` ones a row's words as
Python ints, and :func:`packed` / :func:`unpacked` convert between a
row's words and one Python integer of all its bits (for per-row code).

>>> import numpy as np
>>> words(63), words(64), words(200)
(1, 2, 4)
>>> m = encode([np.array([True, False])] + [np.zeros(2, bool)] * 69 + [np.array([False, True])], 2)
>>> len(m), [int(x) for x in m[1]], null_column(m, 70).tolist()
(2, [0, 128], [False, True])
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

#: Mask bits per int64 word: the sign bit is never used.
BITS = 63
_FULL = (1 << BITS) - 1


def words(n: int) -> int:
    """Mask words of a row of ``n`` columns: one for up to 63 (also for none), then one per 63 more.  O(1).

    >>> words(0), words(1), words(126), words(127)
    (1, 1, 2, 3)
    """
    return max(1, -(-n // BITS))


def width(n: int) -> int:
    """Stored fields of a row of ``n`` columns: its values, then its mask words.  O(1).

    >>> width(2), width(70)
    (3, 72)
    """
    return n + words(n)


def mask_names(n: int) -> tuple[str, ...]:
    """Names of the mask columns of a table of ``n`` columns in Arrow form: ``__null_mask`` then ``__null_mask_1``...

    >>> mask_names(3), mask_names(64)
    (('__null_mask',), ('__null_mask', '__null_mask_1'))
    """
    return ("__null_mask",) + tuple(f"__null_mask_{i}" for i in range(1, words(n)))


def encode(nulls: Sequence[np.ndarray], rows: int) -> tuple[np.ndarray, ...]:
    """The mask words of ``rows`` rows whose column ``j`` is NULL where ``nulls[j]``.  O(rows * columns).

    >>> [m.tolist() for m in encode([np.array([True, False]), np.array([True, True])], 2)]
    [[3, 2]]
    """
    out = [np.zeros(rows, dtype=np.int64) for _ in range(words(len(nulls)))]
    for j, null in enumerate(nulls):
        out[j // BITS] |= np.asarray(null).astype(np.int64) << (j % BITS)
    return tuple(out)


def null_column(masks: Sequence[np.ndarray], j: int) -> np.ndarray:
    """Where column ``j`` is NULL (booleans), from the rows' mask words.  O(rows).

    >>> null_column([np.array([2, 1])], 1).tolist()
    [True, False]
    """
    return ((np.asarray(masks[j // BITS], dtype=np.int64) >> (j % BITS)) & 1).astype(bool)


def null_columns(masks: Sequence[np.ndarray], n: int) -> list[np.ndarray]:
    """Where each of ``n`` columns is NULL.  O(rows * n).

    >>> [x.tolist() for x in null_columns([np.array([2])], 2)]
    [[False], [True]]
    """
    ws = [np.asarray(m, dtype=np.int64) for m in masks]
    return [((ws[j // BITS] >> (j % BITS)) & 1).astype(bool) for j in range(n)]


def all_null(n: int, rows: int) -> tuple[np.ndarray, ...]:
    """The mask words of ``rows`` rows of ``n`` columns, every one NULL.  O(rows * words).

    >>> [m.tolist() for m in all_null(65, 1)] == [[2 ** 63 - 1], [3]]
    True
    """
    out = []
    for w in range(words(n)):
        bits = min(BITS, n - w * BITS) if n else 0
        out.append(np.full(rows, (1 << bits) - 1, dtype=np.int64))
    return tuple(out)


def zeros(n: int, rows: int) -> tuple[np.ndarray, ...]:
    """The mask words of ``rows`` rows of ``n`` columns, none NULL.  O(rows * words).

    >>> [m.tolist() for m in zeros(64, 1)]
    [[0], [0]]
    """
    return tuple(np.zeros(rows, dtype=np.int64) for _ in range(words(n)))


def _bits(masks: Sequence[np.ndarray], start: int, count: int) -> np.ndarray:
    """``count`` (at most 63) bits of the masks from bit ``start``, as the low bits of one int64 array."""
    i, off = divmod(start, BITS)
    v = np.asarray(masks[i], dtype=np.int64) >> off
    if off + count > BITS and i + 1 < len(masks):
        v = v | (np.asarray(masks[i + 1], dtype=np.int64) << (BITS - off))
    return v & ((1 << count) - 1)


def sliced(masks: Sequence[np.ndarray], offset: int, n: int) -> tuple[np.ndarray, ...]:
    """The mask words of columns ``offset .. offset + n - 1`` alone (a row of ``n`` columns).  O(rows * words).

    >>> [m.tolist() for m in sliced([np.array([6])], 1, 2)]
    [[3]]
    """
    if len(masks) == 1:
        m = np.asarray(masks[0], dtype=np.int64)
        return ((m >> offset) & ((1 << n) - 1) if offset or n < BITS else m,)
    if not n:
        return (np.zeros(len(masks[0]), dtype=np.int64),)
    return tuple(_bits(masks, offset + w * BITS, min(BITS, n - w * BITS)) for w in range(words(n)))


def concat(parts: Sequence[tuple[Sequence[np.ndarray], int]]) -> tuple[np.ndarray, ...]:
    """The mask words of rows made of several rows side by side: ``parts`` is ``(masks, columns)`` of each.

    Cost: O(rows * words); with one word in all (63 columns or fewer),
    one shift and one or per part.

    >>> [m.tolist() for m in concat([([np.array([1])], 1), ([np.array([1])], 2)])]
    [[3]]
    """
    total = sum(n for _, n in parts)
    if total <= BITS:
        out, at = None, 0
        for masks, n in parts:
            m = np.asarray(masks[0], dtype=np.int64)
            out = m if out is None else out | (m << at) if at else out | m
            at += n
        return (out,)
    rows = len(parts[0][0][0])
    out = [np.zeros(rows, dtype=np.int64) for _ in range(words(total))]
    at = 0
    for masks, n in parts:
        p = 0
        while p < n:
            w, off = divmod(at + p, BITS)
            c = min(n - p, BITS - off)
            out[w] |= _bits(masks, p, c) << off
            p += c
        at += n
    return tuple(out)


def padded(masks: Sequence[np.ndarray], n: int, before: int, after: int) -> tuple[np.ndarray, ...]:
    """The masks of rows of ``n`` columns as rows with ``before`` NULL columns ahead and ``after`` behind.

    An outer join's NULL-padded side.  Cost: one shift and two ors with
    constants where the result has one word; else as :func:`concat`.

    >>> [m.tolist() for m in padded([np.array([1])], 1, 2, 1)]
    [[15]]
    """
    if before + n + after <= BITS:
        m = np.asarray(masks[0], dtype=np.int64)
        return (((1 << before) - 1) | (m << before) | (((1 << after) - 1) << (before + n)),)
    rows = len(masks[0])
    return concat([(all_null(before, rows), before), (masks, n), (all_null(after, rows), after)])


def widened(masks: Sequence[np.ndarray], n: int, more: int) -> tuple[np.ndarray, ...]:
    """The masks of rows of ``n`` columns as rows of ``n + more`` columns (the new ones not NULL).  O(rows * words).

    A 64th column needs a second word; a row that keeps its words is unchanged.

    >>> [m.tolist() for m in widened([np.array([5])], 63, 1)]
    [[5], [0]]
    """
    extra = words(n + more) - len(masks)
    return tuple(masks) + tuple(np.zeros(len(masks[0]), dtype=np.int64) for _ in range(extra))


def packed(row_masks: Sequence[int]) -> int:
    """A row's mask words as one Python integer of all its bits (bit ``j``: column ``j``).  O(words).

    >>> packed((5,)), packed((0, 1)) == 1 << 63
    (5, True)
    """
    if len(row_masks) == 1:
        return int(row_masks[0])
    out = 0
    for w, m in enumerate(row_masks):
        out |= int(m) << (w * BITS)
    return out


def unpacked(bits: int, n: int) -> tuple[int, ...]:
    """The mask words of a row of ``n`` columns whose NULL bits are the integer ``bits``.  O(words).

    >>> unpacked(5, 3), unpacked(1 << 63, 64)
    ((5,), (0, 1))
    """
    k = words(n)
    if k == 1:
        return (bits,)
    return tuple((bits >> (w * BITS)) & _FULL for w in range(k))


def row_encode(nulls: Sequence[bool]) -> tuple[int, ...]:
    """The mask words of one row whose column ``j`` is NULL iff ``nulls[j]``.  O(columns).

    >>> row_encode([True, False, True])
    (5,)
    """
    return unpacked(sum(1 << j for j, z in enumerate(nulls) if z), len(nulls))


def row_of_nulls(nulls: Sequence[int], n: int) -> tuple[int, ...]:
    """The mask words of one row of ``n`` columns whose NULL columns are ``nulls`` (their positions).  O(words + NULLs).

    >>> row_of_nulls([0, 2], 3), row_of_nulls([64], 65)
    ((5,), (0, 2))
    """
    bits = 0
    for j in nulls:
        bits |= 1 << j
    return (bits,) if n <= BITS else unpacked(bits, n)


def row_null(row_masks: Sequence[int], j: int) -> bool:
    """Whether column ``j`` of a row with mask words ``row_masks`` is NULL.  O(1).

    >>> row_null((0, 2), 64)
    True
    """
    return bool((int(row_masks[j // BITS]) >> (j % BITS)) & 1)


def packed_null(bits: int, j: int) -> bool:
    """Whether column ``j`` is NULL in a row's :func:`packed` bits.  O(1).

    >>> packed_null(4, 2), packed_null(4, 0)
    (True, False)
    """
    return bool((bits >> j) & 1)


def packed_sliced(bits: int, offset: int, n: int) -> int:
    """The :func:`packed` bits of columns ``offset .. offset + n - 1`` alone.  O(words).

    >>> packed_sliced(0b1100, 2, 1)
    1
    """
    return (bits >> offset) & ((1 << n) - 1)


def packed_with_null(bits: int, j: int) -> int:
    """:func:`packed` bits with column ``j`` NULL too.  O(words).

    >>> packed_with_null(1, 64) == 1 | (1 << 64)
    True
    """
    return bits | (1 << j)


def bit(j: int) -> int:
    """The :func:`packed` bit of column ``j``: ``bits & bit(j)`` is nonzero iff it is NULL (per-row code's test).  O(1).

    >>> 5 & bit(2) != 0, 5 & bit(1) != 0
    (True, False)
    """
    return 1 << j


def low_bits(k: int) -> int:
    """The :func:`packed` bits of columns ``0 .. k - 1``: ``bits & low_bits(k)`` keeps only theirs.  O(1).

    >>> 0b1101 & low_bits(2)
    1
    """
    return (1 << k) - 1
