"""The roadmap's reachability benchmark: sustained latency and throughput with full resolution.

Reachability from ``--roots`` roots over a random directed graph; after
the initial load each update removes the oldest edge and adds a random
one (a sliding window), at its own data time.  ``--batch K`` submits K
updates, each at its own data time, under one frontier advance; every
update's exact output change is still produced at its own time.

    python -m bench.reach --updates 100000 --batch 1
    python -m bench.reach --updates 30000 --batch 1000 --system naive

The last line printed is one JSON object (also appended to ``--json``).
A run whose correctness check fails exits with status 1.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

import numpy as np

import ddflow
from bench import harness
from bench.harness import Change, RecomputeSystem, parser

# -- workload ----------------------------------------------------------------------


@dataclass
class Workload:
    """A window of edges (the initial graph) and fixed roots; update i replaces the oldest edge."""

    nodes: int
    edges: int
    roots: np.ndarray
    initial: np.ndarray  # (edges, 2)
    rng: np.random.Generator

    @classmethod
    def make(cls, nodes: int, edges: int, roots: int, seed: int) -> "Workload":
        rng = np.random.default_rng(seed)
        initial = rng.integers(0, nodes, size=(edges, 2), dtype=np.int64)
        root_ids = rng.choice(nodes, size=roots, replace=False).astype(np.int64)
        return cls(nodes, edges, root_ids, initial, rng)

    def fresh(self, k: int) -> np.ndarray:
        """New edges for the next k updates."""
        return self.rng.integers(0, self.nodes, size=(k, 2), dtype=np.int64)

    def answer(self, rows: np.ndarray) -> dict[tuple, int]:
        return {p: 1 for p in reachable(self.nodes, rows, self.roots)}


def reachable(nodes: int, edges: np.ndarray, roots: np.ndarray) -> set[tuple[int, int]]:
    """From-scratch answer: (node, root) pairs, by BFS at C speed."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import breadth_first_order

    if len(edges):
        g = csr_matrix((np.ones(len(edges), dtype=np.int8), (edges[:, 0], edges[:, 1])), shape=(nodes, nodes))
    else:
        g = csr_matrix((nodes, nodes), dtype=np.int8)
    out: set[tuple[int, int]] = set()
    for r in roots.tolist():
        for v in breadth_first_order(g, r, directed=True, return_predecessors=False).tolist():
            out.add((v, r))
    return out


# -- systems ----------------------------------------------------------------------


def reach_dataflow(roots: ddflow.Collection, edges: ddflow.Collection) -> ddflow.Collection:
    """(node, root) for every node reachable from a root; vectorized operators only."""
    start = roots.project(0, 0)
    return start.iterate(
        lambda reach: reach.join(edges).project(2, 1).concat(start).distinct(),
        name="reach",
    )


def build(flow: ddflow.Dataflow, w: Workload):
    roots_in, roots = flow.new_collection("roots", schema=("i",))
    edges_in, edges = flow.new_collection("edges", schema=("i", "i"))
    roots_in.update({"root": w.roots}, times=0)
    return edges_in, reach_dataflow(roots, edges)


class NaiveSystem(RecomputeSystem):
    """From scratch after every single update: BFS from the roots, diffed with the previous answer.

    The reachable set is a (roots x nodes) boolean matrix, so the diff is
    one vectorized comparison and only the changed pairs become tuples.
    """

    def __init__(self, w: Workload, workers: int = 1):
        super().__init__(w, workers)
        self.current = self._matrix(w.initial)

    def _matrix(self, edges: np.ndarray) -> np.ndarray:
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import breadth_first_order

        n = self.w.nodes
        g = csr_matrix((np.ones(len(edges), dtype=np.int8), (edges[:, 0], edges[:, 1])), shape=(n, n))
        m = np.zeros((len(self.w.roots), n), dtype=bool)
        for i, r in enumerate(self.w.roots.tolist()):
            m[i, breadth_first_order(g, r, directed=True, return_predecessors=False)] = True
        return m

    def step(self, removed: np.ndarray, added: np.ndarray, t0: int) -> list[Change]:
        out = []
        roots = self.w.roots
        for i, e in enumerate(added.tolist()):
            self.window.popleft()
            self.window.append(tuple(e))
            nxt = self._matrix(np.array(self.window, dtype=np.int64))
            ri, ni = np.nonzero(nxt != self.current)
            for r, n in zip(ri.tolist(), ni.tolist()):
                out.append(((n, int(roots[r])), t0 + i, 1 if nxt[r, n] else -1))
            self.current = nxt
        return out


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = parser("python -m bench.reach", __doc__)
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--edges", type=int, default=2000)
    p.add_argument("--roots", type=int, default=10)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    w = Workload.make(args.nodes, args.edges, args.roots, args.seed)
    return harness.main(args, w, build, NaiveSystem, {"nodes": args.nodes, "edges": args.edges, "roots": args.roots})


if __name__ == "__main__":
    sys.exit(main())
