"""Connected components by min label: ``min`` inside ``iterate``, against scipy's components from scratch.

An undirected random graph whose edges form a sliding window: each update
removes the oldest edge and adds a random one, at its own data time.
ddflow keeps ``(node, label)`` for every node, the label being the least
node id in its component: every node starts with its own id, and a loop
whose body is a join, a vectorized map and a ``min`` per node spreads the
least label along the edges until nothing changes.  The baseline runs
``scipy.sparse.csgraph.connected_components`` after every single update
and diffs the label vector.

    python -m bench.components --updates 300 --batch 1
    python -m bench.components --updates 6000 --batch 1000 --system naive
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

import ddflow
from bench import harness
from bench.harness import Change, RecomputeSystem, parser


@dataclass
class Workload:
    nodes: int
    initial: np.ndarray  # (edges, 2): src, dst; the graph is undirected
    rng: np.random.Generator

    @classmethod
    def make(cls, nodes: int, edges: int, seed: int) -> "Workload":
        rng = np.random.default_rng(seed)
        w = cls(nodes, np.zeros((0, 2), dtype=np.int64), rng)
        w.initial = w.fresh(edges)
        return w

    def fresh(self, k: int) -> np.ndarray:
        return self.rng.integers(0, self.nodes, size=(k, 2), dtype=np.int64)

    def labels(self, rows: np.ndarray) -> np.ndarray:
        """Each node's least node id in its component, at C speed."""
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import connected_components

        g = csr_matrix((np.ones(len(rows), dtype=np.int8), (rows[:, 0], rows[:, 1])), shape=(self.nodes, self.nodes))
        _, comp = connected_components(g, directed=False)
        least = np.full(comp.max() + 1, self.nodes, dtype=np.int64)
        np.minimum.at(least, comp, np.arange(self.nodes, dtype=np.int64))
        return least[comp]

    def answer(self, rows: np.ndarray) -> dict[tuple, int]:
        return {(n, int(lab)): 1 for n, lab in enumerate(self.labels(rows).tolist())}


def components_dataflow(nodes: ddflow.Collection, edges: ddflow.Collection) -> ddflow.Collection:
    """(node, least node id in its component): label propagation with ``min``.  Edges count both ways."""
    both = edges.concat(edges.project(1, 0))
    start = nodes.project(0, 0)
    return start.iterate(
        lambda label: label.join(both).project(2, 1).concat(start).min(),
        name="components",
    )


def build(flow: ddflow.Dataflow, w: Workload):
    nodes_in, nodes = flow.new_collection("nodes", schema=("i",))
    edges_in, edges = flow.new_collection("edges", schema=("i", "i"))
    nodes_in.update({"node": np.arange(w.nodes, dtype=np.int64)}, times=0)
    return edges_in, components_dataflow(nodes, edges)


class NaiveSystem(RecomputeSystem):
    """Components after every single update; only the nodes whose label changed become tuples."""

    def __init__(self, w: Workload, workers: int = 1):
        super().__init__(w, workers)
        self.lab = w.labels(w.initial)

    def step(self, removed: np.ndarray, added: np.ndarray, t0: int) -> list[Change]:
        out: list[Change] = []
        for i, e in enumerate(added.tolist()):
            self.window.popleft()
            self.window.append(tuple(e))
            nxt = self.w.labels(np.array(self.window, dtype=np.int64))
            for n in np.flatnonzero(nxt != self.lab).tolist():
                out.append(((n, int(self.lab[n])), t0 + i, -1))
                out.append(((n, int(nxt[n])), t0 + i, 1))
            self.lab = nxt
        return out


def main(argv: list[str] | None = None) -> int:
    p = parser("python -m bench.components", __doc__)
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--edges", type=int, default=1000)
    args = p.parse_args(argv)
    w = Workload.make(args.nodes, args.edges, args.seed)
    return harness.main(args, w, build, NaiveSystem, {"bench": "components", "nodes": args.nodes, "edges": args.edges})


if __name__ == "__main__":
    sys.exit(main())
