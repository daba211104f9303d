"""Outputs: capture (a drainable record of output changes), probes and subscriptions."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pyarrow as pa

from ddflow.lattice import as_time
from ddflow.node import Node, Scope
from ddflow.updates import Updates, consolidate


class CaptureNode(Node):
    def __init__(self, scope: Scope, name: str, callback: Callable[[Updates], None] | None = None):
        super().__init__(scope, name)
        self.parts: list[Updates] = []
        self.callback = callback

    def step(self, bound: np.ndarray) -> None:
        u = self.take()
        if u is not None:
            self.parts.append(u)
            if self.callback is not None:
                self.callback(u)


class Capture:
    """The output changes of a collection, as they are produced.

    ``contents(t)`` is the collection accumulated at ``t``, meaningful for
    complete times (``t < frontier``); ``changes()`` the consolidated
    ``(row, time, diff)`` updates; ``drain()`` returns and forgets them.
    """

    def __init__(self, node: CaptureNode):
        self._node = node
        self.name = node.name

    @property
    def frontier(self) -> int:
        """Every time before this is complete: its output is final."""
        return self._node.flow.completed

    def updates(self) -> Updates:
        node = self._node
        kinds = node.kinds
        if not node.parts:
            return Updates.empty(kinds or (), node.depth)
        u = consolidate(Updates.concat(node.parts))
        node.parts = [u]
        return u

    def changes(self) -> list[tuple[tuple, Any, int]]:
        """Consolidated output updates ``(row, time, diff)`` sorted by time, then row."""
        u = self.updates()
        rows = u.to_rows(self._node.flow.interner)
        rows.sort(key=lambda r: (r[1], _orderable(r[0])))
        return rows

    def to_arrow(self, names: list[str] | None = None) -> pa.Table:
        return self.updates().to_arrow(self._node.flow.interner, names)

    def to_pandas(self, names: list[str] | None = None):
        return self.to_arrow(names).to_pandas()

    def take(self) -> Updates:
        """The raw columnar output updates since the last take/drain, and forget them (cheap)."""
        u = self.updates()
        self._node.parts = []
        return u

    def drain(self) -> list[tuple[tuple, Any, int]]:
        out = self.changes()
        self._node.parts = []
        return out

    def contents(self, time: Any) -> dict[tuple, int]:
        """Row -> multiplicity accumulated at ``time``."""
        u = self.updates()
        t = as_time(time, u.depth)
        sel = u.take(np.flatnonzero(np.all(u.times <= t, axis=1)))
        acc = consolidate(sel.with_times(np.zeros_like(sel.times)))
        return {row: d for row, _, d in acc.to_rows(self._node.flow.interner)}


def _orderable(row: tuple) -> tuple:
    return tuple((0, v) if isinstance(v, (int, float)) else (1, repr(v)) for v in row)


class Probe:
    """Tells whether a time's output is final."""

    def __init__(self, flow):
        self._flow = flow

    @property
    def frontier(self) -> int:
        return self._flow.completed

    def done(self, time: int) -> bool:
        return time < self._flow.completed
