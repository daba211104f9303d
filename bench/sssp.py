"""Single-source shortest paths: ``min`` over path lengths inside ``iterate``, against Dijkstra from scratch.

A weighted random directed graph whose edges form a sliding window: each
update removes the oldest edge and adds a random one, at its own data
time.  ddflow keeps ``(node, distance)`` for every node reachable from
the root with one loop whose body is a join, a vectorized map and a
``min`` per node (the general reduce path before the compiled extreme
tactic).  The baseline runs ``scipy.sparse.csgraph.dijkstra`` after every
single update and diffs the distance vector.

    python -m bench.sssp --updates 1000 --batch 1
    python -m bench.sssp --updates 6000 --batch 1000 --system naive
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
    root: int
    max_weight: int
    initial: np.ndarray  # (edges, 3): src, dst, weight
    rng: np.random.Generator

    @classmethod
    def make(cls, nodes: int, edges: int, max_weight: int, seed: int) -> "Workload":
        rng = np.random.default_rng(seed)
        w = cls(nodes, int(rng.integers(0, nodes)), max_weight, np.zeros((0, 3), dtype=np.int64), rng)
        w.initial = w.fresh(edges)
        return w

    def fresh(self, k: int) -> np.ndarray:
        ends = self.rng.integers(0, self.nodes, size=(k, 2), dtype=np.int64)
        weights = self.rng.integers(1, self.max_weight + 1, size=(k, 1), dtype=np.int64)
        return np.concatenate([ends, weights], axis=1)

    def distances(self, rows: np.ndarray) -> np.ndarray:
        """Shortest distance from the root to every node (-1: unreachable), by Dijkstra at C speed."""
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import dijkstra

        # Parallel edges: only the lightest counts (a sparse matrix would add their weights).
        order = np.lexsort((rows[:, 2], rows[:, 1], rows[:, 0]))
        r = rows[order]
        first = np.ones(len(r), dtype=bool)
        first[1:] = (r[1:, 0] != r[:-1, 0]) | (r[1:, 1] != r[:-1, 1])
        r = r[first]
        g = csr_matrix((r[:, 2].astype(np.float64), (r[:, 0], r[:, 1])), shape=(self.nodes, self.nodes))
        d = dijkstra(g, directed=True, indices=self.root)
        return np.where(np.isinf(d), -1, d).astype(np.int64)

    def answer(self, rows: np.ndarray) -> dict[tuple, int]:
        d = self.distances(rows)
        return {(n, int(d[n])): 1 for n in np.flatnonzero(d >= 0).tolist()}


def sssp_dataflow(roots: ddflow.Collection, edges: ddflow.Collection) -> ddflow.Collection:
    """(node, distance from the root) for every reachable node: Bellman-Ford rounds with ``min``."""
    start = roots.map_columns(lambda r: (r, np.zeros_like(r)))
    return start.iterate(
        lambda dist: dist.join(edges).map_columns(lambda n, d, dst, w: (dst, d + w)).concat(start).min(),
        name="sssp",
    )


def build(flow: ddflow.Dataflow, w: Workload):
    roots_in, roots = flow.new_collection("root", schema=("i",))
    edges_in, edges = flow.new_collection("edges", schema=("i", "i", "i"))
    roots_in.update({"root": np.array([w.root])}, times=0)
    return edges_in, sssp_dataflow(roots, edges)


class NaiveSystem(RecomputeSystem):
    """Dijkstra after every single update; only the nodes whose distance changed become tuples."""

    def __init__(self, w: Workload, workers: int = 1):
        super().__init__(w, workers)
        self.dist = w.distances(w.initial)

    def step(self, removed: np.ndarray, added: np.ndarray, t0: int) -> list[Change]:
        out: list[Change] = []
        for i, e in enumerate(added.tolist()):
            self.window.popleft()
            self.window.append(tuple(e))
            nxt = self.w.distances(np.array(self.window, dtype=np.int64))
            for n in np.flatnonzero(nxt != self.dist).tolist():
                old, new = int(self.dist[n]), int(nxt[n])
                if old >= 0:
                    out.append(((n, old), t0 + i, -1))
                if new >= 0:
                    out.append(((n, new), t0 + i, 1))
            self.dist = nxt
        return out


def main(argv: list[str] | None = None) -> int:
    p = parser("python -m bench.sssp", __doc__)
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--edges", type=int, default=2000)
    p.add_argument("--max-weight", type=int, default=10)
    args = p.parse_args(argv)
    w = Workload.make(args.nodes, args.edges, args.max_weight, args.seed)
    return harness.main(args, w, build, NaiveSystem, {"bench": "sssp", "nodes": args.nodes, "edges": args.edges})


if __name__ == "__main__":
    sys.exit(main())
