"""Keyed seeds and pending times of the compiled walk, each set made in one compiled call.

A reduce step retires *seeds*: ``(key, time)`` pairs at which a key's
output may change.  They are the new input's and the pending pairs now
complete; the rest stay pending.  :class:`~.general.GeneralTactic` keeps
the pending pairs as ``pending_keys`` and ``pending_times``, sorted by
(key, time) lexicographically with repeats dropped (what its
consolidation leaves); the kernels here keep that invariant, so the
reference and the walk can hand pending work to each other.

Invariant (``_check`` in the tests): for pending keys ``K`` and times
``T``, the rows ``(K[i], *T[i])`` are strictly increasing in
lexicographic order.

>>> import numpy as np
>>> keys, g, a, waiting, bad = due_seeds(np.array([5, 2]), np.array([[3], [1]]),
...                                      np.array([2, 9]), np.array([[0], [7]]), np.array([4]))
>>> keys.tolist(), g.tolist(), a.tolist(), waiting.tolist(), bad
([2, 5], [0, 0, 1], [0, 1, 3], [False, True], False)
"""
from __future__ import annotations

import numpy as np

from ddflow.base.kernels import rows_differ
from ddflow.base.native import kernel
from ddflow.base.radix import RADIX_ROWS_ABOVE, row_order
from ddflow.graph.node import complete_row


@kernel("operators.reduce")
def due_seeds(nk, nt, pk, pt, bound):
    """This step's seeds: every new ``(nk[i], nt[i])`` and the pending ``(pk[i], pt[i])`` complete under ``bound``.

    Returns ``(keys, g, a, waiting, bad)``: the distinct seeded keys,
    sorted; each seed's index into them and its outer time (first
    coordinate), sorted by (key, time) as the walk reads them (repeats
    kept); which pending pairs wait for a later bound; and ``bad`` if, at
    depth 2, a seed is not at the round ``bound[1] - 1`` (the walk's
    contract; the caller then takes the reference).  O(s log s) for s
    seeds; O(s) when both parts come sorted, and O(s) a radix pass when
    many come in many runs (:func:`~ddflow.base.radix.row_order`).
    """
    n = len(nk)
    p = len(pk)
    d = len(bound)
    waiting = np.zeros(p, dtype=np.bool_)
    M = np.empty((n + p, 1 + d), dtype=np.int64)
    ns = 0
    for i in range(n):
        M[ns, 0] = nk[i]
        for j in range(d):
            M[ns, 1 + j] = nt[i, j]
        ns += 1
    for i in range(p):
        if complete_row(pt, i, bound):
            M[ns, 0] = pk[i]
            for j in range(d):
                M[ns, 1 + j] = pt[i, j]
            ns += 1
        else:
            waiting[i] = True
    S = M[:ns]
    order = row_order(S, RADIX_ROWS_ABOVE)
    keys = np.empty(ns, dtype=np.int64)
    g = np.empty(ns, dtype=np.int64)
    a = np.empty(ns, dtype=np.int64)
    G = 0
    bad = False
    for x in range(ns):
        i = order[x]
        if G == 0 or S[i, 0] != keys[G - 1]:
            keys[G] = S[i, 0]
            G += 1
        g[x] = G - 1
        a[x] = S[i, 1]
        if d == 2 and S[i, 2] != bound[1] - 1:
            bad = True
    return keys[:G], g, a, waiting, bad


@kernel("operators.reduce")
def merge_pending(pk, pt, waiting, keys, P):
    """The pending pairs after a step: those still ``waiting`` and the walk's new ones ``P``, sorted, distinct.

    ``P`` rows are ``(group, outer time, iteration)`` with ``keys[group]``
    the key; at depth 1 (``pt`` has one column) the iteration is dropped.
    Returns ``(keys, times)`` keeping the module's invariant.  O(p log p);
    O(p) when ``P`` comes sorted (the waiting part always is), and O(p) a
    radix pass when many come in many runs (:func:`~ddflow.base.radix.row_order`).
    """
    d = pt.shape[1]
    nw = np.count_nonzero(waiting)
    n = nw + P.shape[0]
    M = np.empty((n, 1 + d), dtype=np.int64)
    x = 0
    for i in range(len(waiting)):
        if waiting[i]:
            M[x, 0] = pk[i]
            for j in range(d):
                M[x, 1 + j] = pt[i, j]
            x += 1
    for i in range(P.shape[0]):
        M[x, 0] = keys[P[i, 0]]
        for j in range(d):
            M[x, 1 + j] = P[i, 1 + j]
        x += 1
    order = row_order(M, RADIX_ROWS_ABOVE)
    out_k = np.empty(n, dtype=np.int64)
    out_t = np.empty((n, d), dtype=np.int64)
    m = 0
    for y in range(n):
        i = order[y]
        if y > 0 and not rows_differ(M, i, order[y - 1], 1 + d):
            continue
        out_k[m] = M[i, 0]
        for j in range(d):
            out_t[m, j] = M[i, 1 + j]
        m += 1
    return out_k[:m], out_t[:m]
