"""The kernels of a loop variable's usual step: a few rows of feedback moved on one iteration, consolidated.

Apart from :mod:`ddflow.operators.iterate`, whose variable calls them,
so that a fused loop round (:mod:`ddflow.operators.round`) can call them
too without importing the node.
"""
from __future__ import annotations

import numpy as np

from ddflow.base.kernels import consolidated_split
from ddflow.base.native import kernel
from ddflow.graph.node import complete_row
from ddflow.traces.arena import insert_fields


@kernel("operators")
def feedback_round(K, diffs, m, bound):
    """A few rows of feedback moved on one iteration and consolidated, if all of them are due under ``bound``.

    ``K``: the ``(n, m + depth)`` matrix of the rows' ``m`` columns then
    times.  Returns ``(C, T, D, due, overflow)``: the consolidated rows
    (columns as the rows of ``C``), their times one iteration on, their
    diffs, as ``consolidate`` orders them; ``due`` False when some row is
    not complete under ``bound`` (nothing else is then computed);
    ``overflow`` when a sum leaves int64.  O(n^2 (m + depth)): for the
    ``SMALL_ROWS`` of a small step.
    """
    n, w = K.shape
    A = K.copy()
    for i in range(n):
        A[i, w - 1] += 1
    none_c, none_t = np.empty((m, 0), dtype=np.int64), np.empty((0, w - m), dtype=np.int64)
    T = A[:, m:]
    for i in range(n):
        if not complete_row(T, i, bound):
            return none_c, none_t, np.empty(0, dtype=np.int64), False, False
    C, TT, D, overflow = consolidated_split(A, diffs, m)
    return C, TT, D, True, overflow


@kernel("operators")
def feedback_round_into(K, diffs, m, bound, idx, buf, used, At, at):
    """:func:`feedback_round`, its output's fields ``idx`` then written into an arrangement's arena, in one call.

    What a variable whose output is routed to an arrangement
    (:mod:`ddflow.operators.route`) does with a round's feedback: the
    feedback, moved on and consolidated, projected to fields ``idx``, is
    consolidated again and written as a batch at ``buf[used:]``, its
    table row at ``At[at]`` (:func:`traces.arena.insert_fields`).  Returns
    ``(k, cols, times, diffs, due, overflow, used)``: how many updates the
    variable emits, what the arrangement took, :func:`feedback_round`'s
    flags (a sum past int64 while inserting is an overflow too; nothing is
    written unless due and no overflow) and the words now used.
    O(n^2 (m + depth)).
    """
    C, T, D, due, overflow = feedback_round(K, diffs, m, bound)
    k = len(D)
    if due and not overflow and k:
        cols, times, ds, now_used, overflow = insert_fields(C, T, D, idx, buf, used, At, at)
        if not overflow:
            return k, cols, times, ds, due, False, now_used
    noC, noT = np.empty((len(idx), 0), dtype=np.int64), np.empty((0, T.shape[1]), dtype=np.int64)
    return k, noC, noT, np.empty(0, dtype=np.int64), due, overflow, used
