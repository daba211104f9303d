"""Routing updates to the worker that owns their key.

Before every arrangement of a multi-worker dataflow sits an exchange:
each worker sends every update to the worker ``route(key) % W``, so all
updates of a key meet in one trace and the keyed operators downstream
(join, the reduce family) never look beyond their own worker.  Inputs
from the driver are partitioned by the same function on the way in.

The hash must agree in every process, so it is arithmetic on the key
column (a 64-bit multiplicative mix), never Python's ``hash``.  We route
every keyed collection, including small ones: broadcasting a small
collection to every worker would save its exchange but make each worker
hold it whole and complicate retractions; one code path is kept.
"""
from __future__ import annotations

import numpy as np

from ddflow.base.columnar import group_by_index
from ddflow.base.kernels import float_keys
from ddflow.base.updates import Updates
from ddflow.errors import SchemaError
from ddflow.graph.node import Node
from ddflow.graph.scope import Scope

_MIX = np.uint64(0x9E3779B97F4A7C15)


def route(keys: np.ndarray, workers: int) -> np.ndarray:
    """The owning worker of each key (int64 codes, numbers or bools)."""
    if keys.dtype.kind == "f":
        # The keys consolidation sees: -0.0 and 0.0 are one key, and so are all NaNs.
        bits = float_keys(keys).view(np.uint64)
    else:
        bits = keys.astype(np.int64, copy=False).view(np.uint64)
    h = bits * _MIX
    h ^= h >> np.uint64(29)
    return (h % np.uint64(workers)).astype(np.int64)


def partition(u: Updates, workers: int) -> list[Updates]:
    """``u`` split by owning worker of its first field (records without fields go to worker 0)."""
    if not u.arity:
        return [u] + [u.take(np.zeros(0, dtype=np.int64))] * (workers - 1)
    order, bounds = group_by_index(route(u.cols[0], workers), workers)
    return [u.take(order[bounds[w] : bounds[w + 1]]) for w in range(workers)]


class ExchangeNode(Node):
    """Sends each update to its key's worker; what peers send here goes straight downstream.

    :meth:`step` keeps this worker's share and queues the rest in
    ``outgoing``; the worker runtime ships it (one message per peer with a
    share, none to the others) and delivers remote batches with
    :meth:`emit`.  Completion is counted by the runtime, never signalled.
    """

    needs_complete_input = True
    sends_to_workers = True

    def __init__(self, scope: Scope, name: str, workers: int):
        super().__init__(scope, name)
        self.workers = workers
        self.me = 0
        self.outgoing: list[tuple[int, Updates]] = []

    def start_worker(self, me: int) -> None:
        super().start_worker(me)
        self.me = me

    def step(self, bound: np.ndarray) -> None:
        u = self.dequeue()
        if u is None:
            return
        if u.arity < 1:
            raise SchemaError(f"exchange {self.name!r}: keyed operators need records with at least one field (the key)")
        for w, part in enumerate(partition(u, self.workers)):
            if not len(part):
                continue
            if w == self.me:
                self.emit(part)
            else:
                self.outgoing.append((w, part))
