"""A SQL view over one table under timed refreshes: what ``bench.aggregates`` and ``bench.rankings`` share.

The view is built with one lowering switch set (``aggregate.GENERIC``,
``lower.TOPK_REDUCE``: the path before a change), loads its table at time
0, then takes refreshes: inserts and deletes spread over 4 data times,
one frontier advance, the changes drained.  The rows now are every
drained update added up, so two views can be compared after draining.
"""
from __future__ import annotations

import time
from collections import Counter

import numpy as np
import pyarrow as pa

import ddflow


class RefreshedView:
    """``query`` over table ``t`` (``schema``), lowered with ``module.<switch> = value``, loaded with ``table``."""

    def __init__(self, query: str, schema: dict[str, str], table: pa.Table, switch: tuple[object, str, bool]):
        self.flow = ddflow.Dataflow()
        self.t_in, _ = self.flow.new_collection("t", schema=schema)
        module, name, value = switch
        old = getattr(module, name)
        setattr(module, name, value)
        try:
            self.cap = self.flow.sql(query).capture()
        finally:
            setattr(module, name, old)
        self.t_in.update(table, times=0)
        self.time = 1
        start = time.perf_counter()
        self.flow.advance_to(1)
        self.flow.run()
        self.load_s = time.perf_counter() - start
        self.acc: Counter = Counter()
        self._add(self.cap.drain())

    def refresh(self, ins: pa.Table, dels: pa.Table) -> float:
        """Seconds to apply one refresh (inserts and deletes over 4 data times) and drain its changes."""
        times = (self.time + np.arange(len(ins)) % 4).tolist()
        start = time.perf_counter()
        self.t_in.update(ins, times=times)
        self.t_in.update(dels, times=times, diffs=-1)
        self.time += 4
        self.flow.advance_to(self.time)
        self.flow.run()
        drained = self.cap.drain()
        took = time.perf_counter() - start
        self._add(drained)
        return took

    def _add(self, updates: list) -> None:
        for row, _, d in updates:
            self.acc[row] += d

    def contents(self) -> dict:
        """The view's rows now: every drained update added up."""
        return {r: m for r, m in self.acc.items() if m}
