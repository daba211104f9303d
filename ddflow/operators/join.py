"""Join of two arrangements by key, by the delta rule.

For new batches dA and dB with traces A and B that already contain them,
``d(A join B) = dA join B + A join dB - dA join dB``: every pair of
updates is counted exactly once, at the join of its two times with the
product of its diffs.  Matching is vectorized: one trace seek for the
distinct keys of a batch, then all pairs by ``searchsorted`` ranges.
"""
from __future__ import annotations

import numpy as np

from ddflow.base.columnar import ranges
from ddflow.base.consolidate import consolidate
from ddflow.base.updates import Updates
from ddflow.errors import SchemaError
from ddflow.graph.node import Node
from ddflow.graph.scope import Scope
from ddflow.operators.arrange import ArrangeNode
from ddflow.traces import Trace


def match_pairs(a_keys: np.ndarray, b_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (i, j) with ``a_keys[i] == b_keys[j]``, all of them."""
    if not len(a_keys) or not len(b_keys):
        z = np.zeros(0, dtype=np.int64)
        return z, z
    order = np.argsort(b_keys, kind="stable")
    bs = b_keys[order]
    lo = np.searchsorted(bs, a_keys, side="left")
    hi = np.searchsorted(bs, a_keys, side="right")
    counts = hi - lo
    ia = np.repeat(np.arange(len(a_keys), dtype=np.int64), counts)
    ib = order[ranges(lo, hi)]
    return ia, ib


def join_updates(a: Updates, b: Updates) -> Updates:
    """All matching pairs of ``a`` and ``b`` as ``(key, *a_vals, *b_vals)`` updates."""
    ia, ib = match_pairs(a.cols[0], b.cols[0])
    cols = (a.cols[0][ia], *(c[ia] for c in a.cols[1:]), *(c[ib] for c in b.cols[1:]))
    return Updates(cols, np.maximum(a.times[ia], b.times[ib]), a.diffs[ia] * b.diffs[ib],
                   (a.kinds[0], *a.kinds[1:], *b.kinds[1:]))


def seek_updates(trace: Trace, keys: np.ndarray) -> Updates:
    _, u = trace.seek(np.unique(keys))
    return u


class JoinNode(Node):
    """Joins two arrangements; port 0 gets the left batches, port 1 the right."""

    def __init__(self, scope: Scope, name: str, left: ArrangeNode, right: ArrangeNode):
        super().__init__(scope, name, n_inputs=2)
        self.left, self.right = left, right
        left.connect(self, 0)
        right.connect(self, 1)

    def step(self, bound: np.ndarray) -> None:
        da, db = self.dequeue(0), self.dequeue(1)
        if da is None and db is None:
            return
        ta, tb = self.left.trace, self.right.trace
        if ta is not None and tb is not None and ta.kinds[0] != tb.kinds[0]:
            raise SchemaError(f"join {self.name!r}: key kinds differ, {ta.kinds[0]!r} on the left and {tb.kinds[0]!r} on the right")
        parts = []
        if da is not None and tb is not None:
            parts.append(join_updates(da, seek_updates(tb, da.cols[0])))
        if db is not None and ta is not None:
            parts.append(join_updates(seek_updates(ta, db.cols[0]), db))
        if da is not None and db is not None:
            both = join_updates(da, db)
            parts.append(both.with_diffs(-both.diffs))
        parts = [p for p in parts if len(p)]
        if parts:
            self.emit(consolidate(Updates.concat(parts)))
