"""The linear merge of two trie batches, advancing times and consolidating, in one compiled pass.

Both batches list their (key, value) rows sorted and unique, each row's
(time, diff) updates sorted by time.  The merge walks the two row lists
in step (a merge of sorted lists); a row present in both gets the
updates of both.  Each row's updates are advanced by the frontier
(``advance_by``: the greatest time no future reader can tell apart),
sorted again when advancing broke their order, and consolidated: equal
times add up, zero sums vanish, a row whose sums all vanish is dropped,
and a key whose rows all vanish is dropped.

Contract of :func:`merge_rows`, for rows ``R_A``, ``R_B`` (int64 sort
keys, sorted unique) with update lists ``U_A(r)``, ``U_B(r)``:

    out = [(r, C(adv(U_A(r) ++ U_B(r)))) for r in sorted(R_A | R_B) if C(...) != []]

where ``adv`` advances every time by the frontier and ``C`` sorts by
time, adds the diffs of equal times and drops zeros.  A partial sum past
int64 is reported, not wrapped.
Cost: O(n + m) for n rows and m updates when advancing keeps each row's
times in order (no frontier, or a total order), O(m log m) at worst.
"""
from __future__ import annotations

import numpy as np

from ddflow.base.address import view_2d, view_i64
from ddflow.base.kernels import group_sums, lex_order
from ddflow.base.native import kernel

from .layout import DIFFS, KEYS, NKEYS, NUPD, NVALS, TIMES, VAL0, key_offsets, offset, trie_row, val_offsets

#: A row's updates up to this many are sorted by insertion, in place; more by a merge sort through scratch arrays.
SORT_IN_PLACE = 32


_I64_MAX = np.iinfo(np.int64).max
_I64_MIN = np.iinfo(np.int64).min


def sum_overflows(s, d):
    """Whether ``s + d`` leaves int64, decided before adding (a signed sum that wraps is undefined once compiled).

    A kernel helper, for the sums of diffs that merges and compactions make.  O(1).

    >>> sum_overflows(_I64_MAX, 1), sum_overflows(_I64_MIN, -1), sum_overflows(_I64_MAX, -1)
    (True, True, False)
    """
    return (d > 0 and s > _I64_MAX - d) or (d < 0 and s < _I64_MIN - d)


def _row_cmp(KA, i, KB, j):
    """-1, 0 or 1 as row ``i`` of ``KA`` is before, equal to or after row ``j`` of ``KB``."""
    for c in range(KA.shape[1]):
        if KA[i, c] < KB[j, c]:
            return -1
        if KA[i, c] > KB[j, c]:
            return 1
    return 0


def _time_less(T, a, b):
    """Row ``a`` of ``T`` is lexicographically before row ``b``."""
    for c in range(T.shape[1]):
        if T[a, c] != T[b, c]:
            return T[a, c] < T[b, c]
    return False


def _copy_advanced(T, D, nu, src_t, src_d, lo, hi, F):
    """Append updates ``lo:hi`` of a source to ``T, D`` at ``nu``, times advanced by ``F``; the new ``nu``.

    No frontier and a frontier of one element (the usual cases) are
    straight loops; the meet over several elements is the general one.
    """
    d = T.shape[1]
    nf = F.shape[0]
    for u in range(lo, hi):
        if nf == 0:
            for c in range(d):
                T[nu, c] = src_t[u, c]
        elif nf == 1:
            for c in range(d):
                x = src_t[u, c]
                f = F[0, c]
                T[nu, c] = x if x > f else f
        else:
            for c in range(d):
                x = src_t[u, c]
                best = max(x, F[0, c])
                for e in range(1, nf):
                    y = max(x, F[e, c])
                    if y < best:
                        best = y
                T[nu, c] = best
        D[nu] = src_d[u]
        nu += 1
    return nu


def _longest_row(offs):
    """The most updates one row holds, from a batch's ``val_offs``.  O(rows)."""
    most = 0
    for r in range(len(offs) - 1):
        most = max(most, offs[r + 1] - offs[r])
    return most


def sort_segment(T, D, lo, hi, scratch_t, scratch_d):
    """Sort updates ``lo:hi`` of ``T, D`` by time, stably, if they are out of order.  O(k) if sorted, else O(k log k).

    A kernel helper: rows of ``T`` compare as tuples, whatever they hold
    (the merges' times; :mod:`ddflow.operators.reduce.compacted`'s
    entries).  ``scratch_t``/``scratch_d``: at least ``hi - lo`` rows.
    """
    ordered = True
    for u in range(lo + 1, hi):
        if _time_less(T, u, u - 1):
            ordered = False
            break
    if ordered:
        return
    n = hi - lo
    d = T.shape[1]
    if n <= SORT_IN_PLACE:  # a stable insertion sort in place, no passes through the scratch arrays
        for u in range(lo + 1, hi):
            if not _time_less(T, u, u - 1):
                continue
            for c in range(d):
                scratch_t[0, c] = T[u, c]
            x = D[u]
            v = u
            while v > lo and _row_cmp(scratch_t, 0, T, v - 1) < 0:  # the held time before row v - 1
                for c in range(d):
                    T[v, c] = T[v - 1, c]
                D[v] = D[v - 1]
                v -= 1
            for c in range(d):
                T[v, c] = scratch_t[0, c]
            D[v] = x
        return
    # Bottom-up merge sort between the segment and the scratch arrays.
    width = 1
    src_t, src_d, dst_t, dst_d = T, D, scratch_t, scratch_d
    s_off, d_off = lo, 0
    in_scratch = False
    while width < n:
        for start in range(0, n, 2 * width):
            mid = min(start + width, n)
            end = min(start + 2 * width, n)
            a, b, k = start, mid, start
            while a < mid or b < end:
                if b >= end or (a < mid and not _time_less(src_t, s_off + b, s_off + a)):
                    for c in range(d):
                        dst_t[d_off + k, c] = src_t[s_off + a, c]
                    dst_d[d_off + k] = src_d[s_off + a]
                    a += 1
                else:
                    for c in range(d):
                        dst_t[d_off + k, c] = src_t[s_off + b, c]
                    dst_d[d_off + k] = src_d[s_off + b]
                    b += 1
                k += 1
        src_t, dst_t = dst_t, src_t
        src_d, dst_d = dst_d, src_d
        s_off, d_off = d_off, s_off
        in_scratch = not in_scratch
        width *= 2
    if in_scratch:  # the sorted run ended in the scratch arrays
        for k in range(n):
            for c in range(d):
                T[lo + k, c] = src_t[s_off + k, c]
            D[lo + k] = src_d[s_off + k]


def consolidate_segment(T, D, lo, hi):
    """Add up equal adjacent times of sorted ``lo:hi`` in place, dropping zeros; ``(new hi, overflow)``.

    A kernel helper, for any rows of ``T`` (see :func:`sort_segment`).
    """
    d = T.shape[1]
    k = lo
    u = lo
    while u < hi:
        s = D[u]
        v = u + 1
        while v < hi:
            same = True
            for c in range(d):
                if T[v, c] != T[u, c]:
                    same = False
                    break
            if not same:
                break
            x = D[v]
            if sum_overflows(s, x):
                return k, True
            s += x
            v += 1
        if s != 0:
            for c in range(d):
                T[k, c] = T[u, c]
            D[k] = s
            k += 1
        u = v
    return k, False




def _sort_inner(T, D, lo, hi, scratch_t, scratch_d):
    """:func:`sort_segment` for updates ``lo:hi`` whose first coordinates are all equal (two coordinates).

    A few are sorted by the second coordinate alone, by insertion in
    place; more go to :func:`sort_segment`.  O(k) if sorted.
    """
    if hi - lo > SORT_IN_PLACE:
        sort_segment(T, D, lo, hi, scratch_t, scratch_d)
        return
    for u in range(lo + 1, hi):
        x = T[u, 1]
        if x >= T[u - 1, 1]:
            continue
        y = D[u]
        v = u
        while v > lo and T[v - 1, 1] > x:
            T[v, 1] = T[v - 1, 1]
            D[v] = D[v - 1]
            v -= 1
        T[v, 1] = x
        D[v] = y


def _copy_prefix(T, D, nu, src_t, src_d, a, a1, f0, f1):
    """Append updates ``a:a1`` of a source up to outer time ``f0`` at ``nu``, moved to ``(f0, max(inner, f1))``.

    ``(new nu, first update past f0)``.  O(updates copied).
    """
    while a < a1 and src_t[a, 0] <= f0:
        T[nu, 0] = f0
        T[nu, 1] = max(src_t[a, 1], f1)
        D[nu] = src_d[a]
        nu += 1
        a += 1
    return nu, a


def _copy_row_split(T, D, nu, tA, dA, a, a1, tB, dB, b, b1, f0, f1):
    """Append a row's updates from A (``a:a1``) and B (``b:b1``) advanced by the one frontier element
    ``(f0, f1)``, for times of two coordinates; ``(new nu, end of the prefix)``.

    Advancing moves every time with outer coordinate ``<= f0`` to outer
    ``f0``, and keeps the order of the others: each side's updates are
    sorted by time, so they are a prefix that advancing scrambles and a
    suffix it leaves sorted.  Both prefixes are written first (A's, then
    B's), then the suffixes merged (A's first on ties): what a stable sort
    of A's updates then B's would give once the caller sorts the prefixes'
    region ``[nu, end of the prefix)``.  O(updates).
    """
    nu, a = _copy_prefix(T, D, nu, tA, dA, a, a1, f0, f1)
    nu, b = _copy_prefix(T, D, nu, tB, dB, b, b1, f0, f1)
    pre = nu
    while a < a1 or b < b1:
        if b < b1 and (a >= a1 or tB[b, 0] < tA[a, 0] or (tB[b, 0] == tA[a, 0]
                                                          and max(tB[b, 1], f1) < max(tA[a, 1], f1))):
            T[nu, 0] = tB[b, 0]
            T[nu, 1] = max(tB[b, 1], f1)
            D[nu] = dB[b]
            b += 1
        else:
            T[nu, 0] = tA[a, 0]
            T[nu, 1] = max(tA[a, 1], f1)
            D[nu] = dA[a]
            a += 1
        nu += 1
    return nu, pre


@kernel("traces")
def merge_rows(KA, offA, tA, dA, KB, offB, tB, dB, F):
    """Merge two batches' (key, value) rows and their updates; see the module's contract.

    ``KA``: ``(nA, m)`` int64 sort keys of A's rows (column 0 the key),
    ``offA``: A's ``val_offs`` (``nA + 1``), ``tA, dA``: its updates;
    the same for B.  ``F``: the frontier's elements (``(0, d)``: none).
    Returns ``(pick, val_offs, key_starts, times, diffs, overflow)``:
    for each output row the row it copies (``i`` in A, ``nA + j`` in B),
    the output's ``val_offs``, the output rows where a key starts, and
    the consolidated updates.  O(n + m), O(m log m) at worst.

    Times of two coordinates under one frontier element (a loop's traces,
    compacted) take :func:`_copy_row_split`: only the updates that
    advancing moved to the frontier's outer time are sorted, the rest
    merged as they come.
    """
    nA, nB = KA.shape[0], KB.shape[0]
    d = tA.shape[1]
    cap = len(dA) + len(dB)
    pick = np.empty(nA + nB, dtype=np.int64)
    voffs = np.empty(nA + nB + 1, dtype=np.int64)
    kstarts = np.empty(nA + nB, dtype=np.int64)
    T = np.empty((cap, d), dtype=np.int64)
    D = np.empty(cap, dtype=np.int64)
    # Scratch for sorting one row's updates, as long as the longest pair of rows: allocated once, since an
    # array reassigned inside the loop costs the loop reference counting (the loop ran 1.6x slower).
    most = _longest_row(offA) + _longest_row(offB)
    scratch_t = np.empty((most, d), dtype=np.int64)
    scratch_d = np.empty(most, dtype=np.int64)
    voffs[0] = 0
    i = 0
    j = 0
    nv = 0
    nk = 0
    nu = 0
    last_key = 0  # the key of the last output row (a new key starts where it changes)
    split = d == 2 and F.shape[0] == 1
    f0 = F[0, 0] if split else 0
    f1 = F[0, 1] if split else 0
    while i < nA or j < nB:
        if i >= nA:
            c = 1
        elif j >= nB:
            c = -1
        else:
            c = _row_cmp(KA, i, KB, j)
        lo = nu
        if c <= 0:
            src = i
            key = KA[i, 0]
        else:
            src = nA + j
            key = KB[j, 0]
        # The split copy leaves only its prefix to sort, which merge_rows sorts here with the rest: handing the
        # scratch arrays to a helper called for every row costs the loop reference counting (35% slower when tried).
        if split:
            a, a1 = (offA[i], offA[i + 1]) if c <= 0 else (0, 0)
            b, b1 = (offB[j], offB[j + 1]) if c >= 0 else (0, 0)
            nu, sort_end = _copy_row_split(T, D, nu, tA, dA, a, a1, tB, dB, b, b1, f0, f1)
        else:
            if c <= 0:
                nu = _copy_advanced(T, D, nu, tA, dA, offA[i], offA[i + 1], F)
            if c >= 0:
                nu = _copy_advanced(T, D, nu, tB, dB, offB[j], offB[j + 1], F)
            sort_end = nu
        if nu - lo > 1:
            if split:
                _sort_inner(T, D, lo, sort_end, scratch_t, scratch_d)
            else:
                sort_segment(T, D, lo, sort_end, scratch_t, scratch_d)
            nu, overflow = consolidate_segment(T, D, lo, nu)
            if overflow:
                return pick[:0], voffs[:1], kstarts[:0], T[:0], D[:0], True
        elif nu - lo == 1 and D[lo] == 0:
            nu = lo
        if nu > lo:
            if nv == 0 or key != last_key:
                kstarts[nk] = nv
                nk += 1
                last_key = key
            pick[nv] = src
            nv += 1
            voffs[nv] = nu
        if c <= 0:
            i += 1
        if c >= 0:
            j += 1
    return pick[:nv], voffs[: nv + 1], kstarts[:nk], T[:nu], D[:nu], False


def _key_rows(T, b, k0, k1, arity, depth):
    """The (key, value) rows of keys ``k0:k1`` of table ``T``'s batch ``b``, as :func:`merge_rows` takes them.

    Returns ``(K, offs, times, diffs)``: the rows' sort keys (``(n, arity)``,
    the key repeated for each of its values), their update offsets (``n +
    1``, into the batch's own ``times`` and ``diffs``), and those two.
    O(rows).
    """
    keys = view_i64(T[b, KEYS], T[b, NKEYS])
    ko64, ko32 = key_offsets(T, b)
    vo64, vo32 = val_offsets(T, b)
    v0, v1 = offset(ko64, ko32, k0), offset(ko64, ko32, k1)
    K = np.empty((v1 - v0, arity), dtype=np.int64)
    offs = np.empty(v1 - v0 + 1, dtype=np.int64)
    for p in range(k0, k1):
        for v in range(offset(ko64, ko32, p), offset(ko64, ko32, p + 1)):
            K[v - v0, 0] = keys[p]
    for j in range(1, arity):
        col = view_i64(T[b, VAL0 + j - 1], T[b, NVALS])
        for v in range(v0, v1):
            K[v - v0, j] = col[v]
    for v in range(v0, v1 + 1):
        offs[v - v0] = offset(vo64, vo32, v)
    return K, offs, view_2d(T[b, TIMES], T[b, NUPD], depth), view_i64(T[b, DIFFS], T[b, NUPD])


@kernel("traces")
def merge_pair(T, a0, a1, b0, b1, F):
    """Keys ``a0:a1`` of batch 0 of table ``T`` merged with keys ``b0:b1`` of batch 1, as one trie: one call.

    What :meth:`traces.batch.Batch.merge` does for two batches of int64
    columns (a merge in progress merges them a key range at a time): the
    rows are read through the table (:func:`_key_rows`), merged by
    :func:`merge_rows` (the module's contract; ``F`` the frontier's
    elements, ``(0, depth)`` for none), and the result is built as
    :func:`traces.layout.build_trie` builds a batch, with its table row.
    Returns ``(keys, key_offs, V, val_offs, times, diffs, row, overflow)``,
    offsets in 32 bits (the caller sends fewer than 2**31 updates); with
    ``overflow`` the rest is empty.  O(n + m) as :func:`merge_rows`.
    """
    arity = T.shape[1] - VAL0 + 1
    depth = F.shape[1]
    KA, offA, tA, dA = _key_rows(T, 0, a0, a1, arity, depth)
    KB, offB, tB, dB = _key_rows(T, 1, b0, b1, arity, depth)
    pick, voffs, kstarts, times, diffs, overflow = merge_rows(KA, offA, tA, dA, KB, offB, tB, dB, F)
    nA, nv, nk = KA.shape[0], len(pick), len(kstarts)
    if overflow:
        nv, nk = 0, 0
    keys = np.empty(nk, dtype=np.int64)
    key_offs = np.empty(nk + 1, dtype=np.int32)
    V = np.empty((arity - 1, nv), dtype=np.int64)
    val_offs = np.empty(nv + 1, dtype=np.int32)
    for g in range(nk):
        r = pick[kstarts[g]]
        keys[g] = KA[r, 0] if r < nA else KB[r - nA, 0]
        key_offs[g] = kstarts[g]
    key_offs[nk] = nv
    for v in range(nv):
        r = pick[v]
        for j in range(1, arity):
            V[j - 1, v] = KA[r, j] if r < nA else KB[r - nA, j]
        val_offs[v] = voffs[v]
    val_offs[nv] = voffs[nv] if not overflow else 0
    return keys, key_offs, V, val_offs, times, diffs, trie_row(keys, key_offs, V, val_offs, times, diffs), overflow


def _advance_time(x, F, c):
    """Coordinate ``c`` of time ``x`` advanced by frontier elements ``F`` (none: as it is)."""
    if not F.shape[0]:
        return x
    best = max(x, F[0, c])
    for f in range(1, F.shape[0]):
        y = max(x, F[f, c])
        if y < best:
            best = y
    return best


@kernel("traces")
def merge_table(T, arity, depth, F):
    """Every batch of table ``T`` as one trie, times advanced by ``F`` and consolidated: one call.

    What the spine's tail merge (:func:`traces.spine._merge_all`) does for
    batches of int64 columns.  Contract: the result holds, for each
    (record, advanced time), the sum of the diffs of the updates of all
    batches there, when it is not zero, in (record, time) order.
    Returns ``(keys, vals, key_offs, val_offs, times, diffs, row, overflow)``:
    ``vals`` an ``(arity - 1, v)`` matrix of the value rows, offsets in 32
    bits (the caller sends fewer than 2**31 updates), ``row`` the result's
    table row (:func:`traces.layout.trie_row`); ``overflow`` when a sum
    leaves int64 (the other results are then meaningless).  O(n log n)
    for n updates in all (a merge sort of the rows).
    """
    n = 0
    for b in range(T.shape[0]):
        n += T[b, NUPD]
    w = arity + depth
    M = np.empty((n, w), dtype=np.int64)
    D = np.empty(n, dtype=np.int64)
    k = 0
    for b in range(T.shape[0]):
        bk = view_i64(T[b, KEYS], T[b, NKEYS])
        ko64, ko32 = key_offsets(T, b)
        vo64, vo32 = val_offsets(T, b)
        bt = view_2d(T[b, TIMES], T[b, NUPD], depth)
        bd = view_i64(T[b, DIFFS], T[b, NUPD])
        for p in range(T[b, NKEYS]):
            for v in range(offset(ko64, ko32, p), offset(ko64, ko32, p + 1)):
                for u in range(offset(vo64, vo32, v), offset(vo64, vo32, v + 1)):
                    M[k, 0] = bk[p]
                    for j in range(1, arity):
                        M[k, j] = view_i64(T[b, VAL0 + j - 1], T[b, NVALS])[v]
                    for c in range(depth):
                        M[k, arity + c] = _advance_time(bt[u, c], F, c)
                    D[k] = bd[u]
                    k += 1
    sel, sums, overflow = group_sums(M, lex_order(M), D)
    nu = len(sel)
    keys = np.empty(nu, dtype=np.int64)
    vals = np.empty((arity - 1, nu), dtype=np.int64)
    key_offs = np.empty(nu + 1, dtype=np.int32)
    val_offs = np.empty(nu + 1, dtype=np.int32)
    times = np.empty((nu, depth), dtype=np.int64)
    if overflow:
        none = np.zeros(1, dtype=np.int32)  # no keys, no values (not key_offs[:1], whose one offset is unset)
        return keys[:0], vals[:, :0], none, none.copy(), times[:0], sums[:0], np.zeros(0, np.int64), True
    nk = 0
    nv = 0
    for u in range(nu):
        x = sel[u]
        newkey = u == 0 or M[x, 0] != M[sel[u - 1], 0]
        newval = newkey
        if not newval:
            for c in range(1, arity):
                if M[x, c] != M[sel[u - 1], c]:
                    newval = True
                    break
        if newkey:
            keys[nk] = M[x, 0]
            key_offs[nk] = nv
            nk += 1
        if newval:
            for c in range(1, arity):
                vals[c - 1, nv] = M[x, c]
            val_offs[nv] = u
            nv += 1
        for c in range(depth):
            times[u, c] = M[x, arity + c]
    key_offs[nk] = nv
    val_offs[nv] = nu
    keys, key_offs, val_offs = keys[:nk].copy(), key_offs[: nk + 1].copy(), val_offs[: nv + 1].copy()
    vals = np.ascontiguousarray(vals[:, :nv])
    return keys, vals, key_offs, val_offs, times, sums, trie_row(keys, key_offs, vals, val_offs, times, sums), False
