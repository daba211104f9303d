"""The hot paths' kernels: one native call per job, one code path for all sizes.

A numpy call on a tiny array costs 2-3 us of fixed overhead, and a single
update touches each operator with a handful of rows dozens of times; a
native call with a few array arguments costs well under a microsecond.
So the inner loops that every update goes through (sorting and
consolidating, seeking keys in a trace batch, building trie levels) are
native kernels (``native/base/kernels.cpp``, compiled when the package is
built), and this module keeps each one's plain-Python reference: the
functions below, written as plain loops over arrays.  ``DDFLOW_NATIVE=0``
runs the references (slow; for debugging and for checking the native
code against them, :mod:`ddflow.base.native`).  Sorting large arrays
stays with numpy's stable sort.

Each kernel states its contract and cost, and ``tests/base/test_kernels.py``
checks the native code against its reference on random inputs (empty and
single-row ones included).  Diff arithmetic is checked: a sum past int64
is reported, never wrapped.

Keys are int64.  Float columns enter through :func:`float_keys`, an
order-preserving map to int64 in which every NaN is one value (above
every number) and -0.0 equals 0.0.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ddflow.base.native import native_enabled, native_module
from ddflow.errors import SchemaError

_INT64_SIGN = np.int64(0x7FFFFFFFFFFFFFFF)


def float_keys(col: np.ndarray) -> np.ndarray:
    """Float64 values as int64 keys in the same order; all NaNs one key (last), -0.0 == 0.0.  O(n).

    >>> float_keys(np.array([1.5, -2.0, 0.0, -0.0])).argsort().tolist()
    [1, 2, 3, 0]
    """
    c = np.where(col == 0.0, 0.0, col)  # -0.0 -> 0.0
    c = np.where(np.isnan(c), np.nan, c)  # one NaN bit pattern
    bits = c.view(np.int64)
    return bits ^ ((bits >> 63) & _INT64_SIGN)


def float_values(keys: np.ndarray) -> np.ndarray:
    """The float64 values of int64 keys made by :func:`float_keys` (its inverse: the map is an involution).  O(n).

    Canonical as the keys are: one NaN, and 0.0 for -0.0.

    >>> float_values(float_keys(np.array([1.5, -2.0, -0.0, np.inf]))).tolist()
    [1.5, -2.0, 0.0, inf]
    """
    bits = np.asarray(keys, dtype=np.int64)
    return (bits ^ ((bits >> 63) & _INT64_SIGN)).view(np.float64)


def key_matrix(cols, times: np.ndarray | None = None) -> np.ndarray:
    """The sort key of each row as an ``(n, m)`` int64 matrix: the columns, then the time coordinates."""
    n = len(times) if times is not None else len(cols[0])
    m = len(cols) + (times.shape[1] if times is not None else 0)
    out = np.empty((n, m), dtype=np.int64)
    for j, c in enumerate(cols):
        out[:, j] = float_keys(c) if c.dtype.kind == "f" else c
    if times is not None:
        out[:, len(cols):] = times
    return out


def row_hashes(cols) -> np.ndarray:
    """A 64-bit mix of each whole row (floats canonical: one NaN, 0.0 for -0.0): a key that spreads any rows.

    Equal rows (as consolidation compares them) hash equal; a trace keyed by
    it can be sought for given rows without reading others that share a
    first field.  O(n m), vectorized.

    >>> a = row_hashes([np.array([1, 1]), np.array([2.0, -0.0])])
    >>> b = row_hashes([np.array([1, 1]), np.array([2.0, 0.0])])
    >>> bool((a == b).all()), bool(a[0] != a[1])
    (True, True)
    """
    K = key_matrix(cols)
    h = np.full(len(K), 0x9E3779B97F4A7C15, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(K.shape[1]):
            h = (h ^ K[:, j].view(np.uint64)) * np.uint64(0xBF58476D1CE4E5B9)
            h ^= h >> np.uint64(31)
    return h.view(np.int64)


# -- the kernels, as plain Python over arrays ---------------------------------------------------------


def _pack(K):
    """One order-preserving int64 per row, if the columns' ranges fit in 62 bits.

    Returns ``(packed, fits)``; when ``fits`` is False ``packed`` is empty
    and rows must be sorted column by column.  One column is its own key.
    O(n m).
    """
    n, m = K.shape
    if m == 1:
        return K[:, 0].copy(), True
    lo = np.empty(m, dtype=np.int64)
    span = np.empty(m, dtype=np.int64)
    bits = 0
    for j in range(m):
        a = K[0, j] if n else 0
        b = a
        for i in range(1, n):
            v = K[i, j]
            if v < a:
                a = v
            elif v > b:
                b = v
        lo[j] = a
        # b - a would overflow when the column spans most of int64: then it does not fit anyway.
        if a < 0 and b > a + 0x3FFFFFFFFFFFFFFF:
            return np.empty(0, dtype=np.int64), False
        s = b - a + 1
        span[j] = s
        w = 0
        t = s - 1
        while t > 0:
            w += 1
            t >>= 1
        bits += max(w, 1)
        if bits > 62:
            return np.empty(0, dtype=np.int64), False
    packed = np.empty(n, dtype=np.int64)
    for i in range(n):
        p = K[i, 0] - lo[0]
        for j in range(1, m):
            p = p * span[j] + (K[i, j] - lo[j])
        packed[i] = p
    return packed, True


def group_sums(K, order, diffs):
    """Consolidation of rows ``K`` (data then time) with ``diffs``, visited in sorted ``order``.

    The grouping every consolidation ends with, in a kernel or called from
    one (compiled with the kernels that call it).

    Returns ``(sel, sums, overflow)``: ``sel`` the index (into the input)
    of the first row of each group of equal rows with a nonzero sum, in
    sorted order; ``sums`` those sums; ``overflow`` True if a running sum
    (in ``order``) left int64, and then the other results are meaningless.
    O(n m).
    """
    n = K.shape[0]
    m = K.shape[1]
    sel = np.empty(n, dtype=np.int64)
    sums = np.empty(n, dtype=np.int64)
    out = 0
    i = 0
    while i < n:
        r = order[i]
        s = diffs[r]
        j = i + 1
        while j < n:
            q = order[j]
            same = True
            for c in range(m):
                if K[q, c] != K[r, c]:
                    same = False
                    break
            if not same:
                break
            d = diffs[q]
            t = s + d
            if ((s ^ t) & (d ^ t)) < 0:
                return sel[:0], sums[:0], True
            s = t
            j += 1
        if s != 0:
            sel[out] = r
            sums[out] = s
            out += 1
        i = j
    return sel[:out], sums[:out], False


def _consolidate_small(K, diffs):
    """:func:`group_sums` of a few rows in one call: a stable insertion sort of the rows, then the grouping.

    For batches of up to ``SMALL_ROWS`` rows, where the three calls of the
    general path (pack, numpy's sort, group) cost more than sorting.
    O(n^2 m) for n rows of m columns.
    """
    n, m = K.shape
    order = np.arange(n)
    for i in range(1, n):
        x = order[i]
        j = i - 1
        while j >= 0:
            y = order[j]
            less = False
            for c in range(m):
                if K[x, c] != K[y, c]:
                    less = K[x, c] < K[y, c]
                    break
            if not less:
                break
            order[j + 1] = y
            j -= 1
        order[j + 1] = x
    return group_sums(K, order, diffs)


def _key_less(a, b):
    """``a`` before ``b`` in a trie's key order: numbers as usual, NaN after every number (``float_keys``' order)."""
    return (a == a and b != b) or a < b


def _same_key(a, b):
    """One key: equal, or both NaN (-0.0 and 0.0 are equal already)."""
    return a == b or (a != a and b != b)


def _seek(bkeys, key_offs, val_offs, keys):
    """Every update of one trie batch whose key is among ``keys`` (in any order, repeats allowed).

    Returns ``(q, vrow, urow)`` per (query, update) pair: the index of the
    query key, the value row and the update row in the batch.  A binary
    search per run of equal query keys, then the pairs: O(k log n +
    output) for k query keys and n batch keys.  A trace seek passes sorted
    unique keys; a join passes the keys of its batch's updates as they are.
    NaN keys find NaN keys (all NaNs are one key, sorted last, as
    ``float_keys`` orders them).
    """
    nk = len(keys)
    nb = len(bkeys)
    pos = np.empty(nk, dtype=np.int64)
    total = 0
    for i in range(nk):
        x = keys[i]
        if i > 0 and _same_key(keys[i - 1], x):
            pos[i] = pos[i - 1]
        else:
            a, b = 0, nb
            while a < b:
                h = (a + b) >> 1
                if _key_less(bkeys[h], x):
                    a = h + 1
                else:
                    b = h
            pos[i] = a if a < nb and _same_key(bkeys[a], x) else -1
        if pos[i] >= 0:
            total += val_offs[key_offs[pos[i] + 1]] - val_offs[key_offs[pos[i]]]
    q = np.empty(total, dtype=np.int64)
    vrow = np.empty(total, dtype=np.int64)
    urow = np.empty(total, dtype=np.int64)
    k = 0
    for i in range(nk):
        p = pos[i]
        if p < 0:
            continue
        for v in range(key_offs[p], key_offs[p + 1]):
            for u in range(val_offs[v], val_offs[v + 1]):
                q[k] = i
                vrow[k] = v
                urow[k] = u
                k += 1
    return q, vrow, urow


def consolidated_split(K, diffs, m):
    """Rows consolidated and split: ``(C, T, D, overflow)``.  A kernel helper.

    ``K``: ``(n, m + depth)`` rows of ``m`` columns then times.  ``C``
    holds the columns as its rows (``(m, k)``), ``T`` the ``(k, depth)``
    times and ``D`` the sums, in ``consolidate``'s order; ``overflow``
    when a sum leaves int64.  Up to ``SMALL_ROWS`` rows an insertion sort
    (:func:`_consolidate_small`), O(n^2 (m + depth)); beyond, a merge sort
    (:func:`lex_order`), O(n log n (m + depth)), in the same order: both
    are stable, so the same rows are kept and summed in the same order.
    """
    w = K.shape[1]
    if K.shape[0] <= SMALL_ROWS:
        sel, D, overflow = _consolidate_small(K, diffs)
    else:
        sel, D, overflow = group_sums(K, lex_order(K), diffs)
    k = len(sel)
    C = np.empty((m, k), dtype=np.int64)
    T = np.empty((k, w - m), dtype=np.int64)
    for x in range(k):
        for c in range(m):
            C[c, x] = K[sel[x], c]
        for c in range(w - m):
            T[x, c] = K[sel[x], m + c]
    return C, T, D.copy(), overflow


def _trie_starts(K):
    """Group starts of a sorted key matrix: rows where column 0 (the key) changes, and where any column does.

    Returns ``(kstarts, vstarts, key_offs)``: key groups, value groups, and
    for each key the index of its first value group (plus a final end).
    The trie levels of a batch.  O(n m).
    """
    n, m = K.shape
    kstarts = np.empty(n, dtype=np.int64)
    vstarts = np.empty(n, dtype=np.int64)
    key_offs = np.empty(n + 1, dtype=np.int64)
    nk = 0
    nv = 0
    for i in range(n):
        newkey = i == 0 or K[i, 0] != K[i - 1, 0]
        newval = newkey
        if not newval:
            for j in range(1, m):
                if K[i, j] != K[i - 1, j]:
                    newval = True
                    break
        if newkey:
            kstarts[nk] = i
            key_offs[nk] = nv
            nk += 1
        if newval:
            vstarts[nv] = i
            nv += 1
    key_offs[nk] = nv
    return kstarts[:nk], vstarts[:nv], key_offs[: nk + 1]


# -- the namespace of kernels above: native, or these references ---------------------------------------

_PLAIN = SimpleNamespace(pack=_pack, consolidate=group_sums, consolidate_small=_consolidate_small, seek=_seek,
                         trie_starts=_trie_starts)
_bound: SimpleNamespace | None = None


def kernels() -> SimpleNamespace:
    """The kernels above as Python calls them: native (``ddflow._native.base``), or the references under
    ``DDFLOW_NATIVE=0``.  O(1) after the first call.

    >>> sorted(vars(kernels()))
    ['consolidate', 'consolidate_small', 'pack', 'seek', 'trie_starts']
    """
    global _bound
    if _bound is None:
        if not native_enabled():
            _bound = _PLAIN
        else:
            b = native_module().base
            _bound = SimpleNamespace(pack=b.pack, consolidate=b.group_sums, consolidate_small=b.consolidate_small,
                                     seek=b.seek, trie_starts=b.trie_starts)
    return _bound


#: Arrays up to this long are sorted by insertion in the kernels' small sorts (:func:`sort_small`).
SORT_BY_INSERTION = 24


def sort_small(a):
    """Sort int64 array ``a`` in place: by insertion up to ``SORT_BY_INSERTION`` values, else ``a.sort()``.

    A library sort sets up its partition stack each call.  O(n^2) for the few, else O(n log n).
    """
    if len(a) > SORT_BY_INSERTION:
        a.sort()
        return
    for i in range(1, len(a)):
        x = a[i]
        j = i
        while j > 0 and a[j - 1] > x:
            a[j] = a[j - 1]
            j -= 1
        a[j] = x


def sorted_unique(a):
    """The distinct values of int64 array ``a``, sorted (sorts ``a`` in place).  O(n log n).

    For use inside kernels, where ``np.unique`` (several array passes) is not wanted.
    """
    sort_small(a)
    n = 0
    for i in range(len(a)):
        if i == 0 or a[i] != a[n - 1]:
            a[n] = a[i]
            n += 1
    return a[:n]


def lex_order(M):
    """The stable permutation sorting the rows of ``M`` lexicographically: a natural merge sort.

    The rows' sorted runs are found first, then merged pairwise, so input
    made of r sorted runs (a few sorted batches, or sorted pending work
    plus a sorted new part) costs O(n m log r), O(n m) when already sorted;
    any input at most O(n m log n).  For use inside kernels (compiled with
    the kernels that call it), where :func:`sort_rows` (a packing kernel and
    numpy's sort) cannot be called.
    """
    n, m = M.shape
    a = np.arange(n)
    b = np.empty(n, dtype=np.int64)
    starts = np.empty(n + 1, dtype=np.int64)
    nr = 0
    i = 0
    while i < n:
        starts[nr] = i
        nr += 1
        i += 1
        while i < n:
            down = False  # row i before row i - 1: the run ends
            for c in range(m):
                if M[i, c] != M[i - 1, c]:
                    down = M[i, c] < M[i - 1, c]
                    break
            if down:
                break
            i += 1
    starts[nr] = n
    while nr > 1:
        nn = 0
        for r in range(0, nr, 2):
            lo, mid = starts[r], starts[r + 1]
            hi = starts[r + 2] if r + 2 <= nr else mid
            i, j, k = lo, mid, lo
            while i < mid and j < hi:
                x, y = a[j], a[i]
                less = False  # row x (right run) strictly before row y (left run): else the left one goes first
                for c in range(m):
                    if M[x, c] != M[y, c]:
                        less = M[x, c] < M[y, c]
                        break
                if less:
                    b[k] = x
                    j += 1
                else:
                    b[k] = y
                    i += 1
                k += 1
            while i < mid:
                b[k] = a[i]
                i += 1
                k += 1
            while j < hi:
                b[k] = a[j]
                j += 1
                k += 1
            starts[nn] = lo
            nn += 1
        starts[nn] = n
        nr = nn
        a, b = b, a
    return a


def rows_differ(M, a, b, ncols):
    """Whether rows ``a`` and ``b`` of ``M`` differ in their first ``ncols`` columns.  O(ncols).

    For kernels that walk rows in sorted order and start a new group, rank
    or distinct row where one differs from the previous (compiled with the
    kernels that call it).
    """
    for c in range(ncols):
        if M[a, c] != M[b, c]:
            return True
    return False


def run_of(sorted_ids, lo, g):
    """``(start, end)``: the run of value ``g`` in ``sorted_ids``, searched from ``lo`` on.  O(skipped + run).

    For kernels that walk several arrays grouped by the same sorted ids in step.
    """
    n = len(sorted_ids)
    while lo < n and sorted_ids[lo] < g:
        lo += 1
    hi = lo
    while hi < n and sorted_ids[hi] == g:
        hi += 1
    return lo, hi


def grown(A, n, need):
    """``A`` (2-D) with room for at least ``need`` rows, its first ``n`` rows kept.  O(n) when it grows.

    For use inside kernels whose output size is known only at the end
    (capacity doubles).
    """
    if need <= len(A):
        return A
    B = np.empty((max(2 * len(A), need), A.shape[1]), dtype=A.dtype)
    for i in range(n):
        for j in range(A.shape[1]):
            B[i, j] = A[i, j]
    return B


def sort_rows(K: np.ndarray) -> np.ndarray:
    """Stable permutation sorting the rows of ``K`` lexicographically.

    The rows are packed into one int64 each when their ranges allow (a
    kernel), then sorted by numpy's stable sort, a timsort: a few sorted
    runs (a trace merge) cost O(n), anything else O(n log n) at numpy's
    speed; rows too wide to pack go to ``np.lexsort``.
    """
    packed, fits = kernels().pack(K)
    if fits:
        return np.argsort(packed, kind="stable")
    return np.lexsort(K.T[::-1])


#: Up to this many rows, :func:`consolidate_rows` sorts and groups in one compiled call.
SMALL_ROWS = 32


def consolidate_rows(K: np.ndarray, diffs: np.ndarray, where: str = "consolidate") -> tuple[np.ndarray, np.ndarray]:
    """``(sel, sums)`` of :func:`group_sums` over rows ``K``; a sum past int64 is an error naming ``where``.

    Cost: up to ``SMALL_ROWS`` rows, one kernel (:func:`_consolidate_small`);
    beyond, one packing kernel, one numpy sort and one grouping kernel:
    O(n log n), O(n) for a few sorted runs.
    """
    k = kernels()
    if len(K) <= SMALL_ROWS:
        sel, sums, overflow = k.consolidate_small(K, diffs)
    else:
        sel, sums, overflow = k.consolidate(K, sort_rows(K), diffs)
    if overflow:
        raise SchemaError(f"{where}: a sum of diffs does not fit in int64")
    return sel, sums
