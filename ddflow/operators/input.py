"""Input nodes: updates submitted by the user wait here until the frontier passes their times."""
from __future__ import annotations

import numpy as np

from ddflow.base.updates import Updates
from ddflow.graph.node import Node
from ddflow.graph.scope import Scope


class InputNode(Node):
    """Holds submitted updates until the frontier passes their times, then emits them."""

    def __init__(self, scope: Scope, name: str):
        super().__init__(scope, name, n_inputs=1)

    def step(self, bound: np.ndarray) -> None:
        """Emit the queued updates at times before ``bound``; keep the rest.  O(n) vectorized."""
        q = self.queues[0]
        if not q:
            return
        u = Updates.concat(q)
        ready = np.all(u.times < bound, axis=1)
        self.queues[0] = [u.take(np.flatnonzero(~ready))] if not ready.all() else []
        if ready.any():
            self.emit(u.take(np.flatnonzero(ready)))

