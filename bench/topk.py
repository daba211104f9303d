"""Top-k per key over a sliding window of keyed values, against a numpy recompute.

Each update removes the window's oldest ``(key, value)`` record and adds
a random one, at its own data time.  ddflow keeps the ``k`` smallest
values of every key with ``top_k`` (a reduce at the top level); the
baseline sorts the whole window by (key, value) with numpy after every
single update, keeps each key's first ``k`` and diffs that with the
previous answer, vectorized.

    python -m bench.topk --updates 1000 --batch 1
    python -m bench.topk --updates 6000 --batch 1000 --system naive
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

import ddflow
from bench import harness
from bench.harness import Change, RecomputeSystem, parser

VALUE_BITS = 32


@dataclass
class Workload:
    keys: int
    values: int
    k: int
    initial: np.ndarray  # (window, 2): key, value
    rng: np.random.Generator

    @classmethod
    def make(cls, keys: int, window: int, values: int, k: int, seed: int) -> "Workload":
        rng = np.random.default_rng(seed)
        w = cls(keys, values, k, np.zeros((0, 2), dtype=np.int64), rng)
        w.initial = w.fresh(window)
        return w

    def fresh(self, n: int) -> np.ndarray:
        return np.column_stack([self.rng.integers(0, self.keys, n), self.rng.integers(0, self.values, n)]).astype(np.int64)

    def top(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The answer as sorted packed ``key << 32 | value`` codes and their multiplicities, in numpy."""
        packed = np.sort((rows[:, 0] << VALUE_BITS) | rows[:, 1])
        key = packed >> VALUE_BITS
        start = np.searchsorted(key, key, side="left")
        keep = packed[np.arange(len(packed)) - start < self.k]
        return np.unique(keep, return_counts=True)

    def answer(self, rows: np.ndarray) -> dict[tuple, int]:
        codes, counts = self.top(rows)
        return {(c >> VALUE_BITS, c & ((1 << VALUE_BITS) - 1)): m for c, m in zip(codes.tolist(), counts.tolist())}


def build(flow: ddflow.Dataflow, w: Workload):
    records_in, records = flow.new_collection("records", schema=("i", "i"))
    return records_in, records.top_k(w.k)


class NaiveSystem(RecomputeSystem):
    """numpy recompute after every single update; only the changed (key, value) pairs become tuples."""

    def __init__(self, w: Workload, workers: int = 1):
        super().__init__(w, workers)
        self.codes, self.counts = w.top(w.initial)

    def step(self, removed: np.ndarray, added: np.ndarray, t0: int) -> list[Change]:
        out: list[Change] = []
        mask = (1 << VALUE_BITS) - 1
        for i, e in enumerate(added.tolist()):
            self.window.popleft()
            self.window.append(tuple(e))
            codes, counts = self.w.top(np.array(self.window, dtype=np.int64))
            both = np.concatenate([self.codes, codes])
            u, inv = np.unique(both, return_inverse=True)
            d = np.bincount(inv, weights=np.concatenate([-self.counts, counts]), minlength=len(u)).astype(np.int64)
            for c, m in zip(u[d != 0].tolist(), d[d != 0].tolist()):
                out.append(((c >> VALUE_BITS, c & mask), t0 + i, m))
            self.codes, self.counts = codes, counts
        return out


def main(argv: list[str] | None = None) -> int:
    p = parser("python -m bench.topk", __doc__)
    p.add_argument("--keys", type=int, default=1000)
    p.add_argument("--window", type=int, default=10000)
    p.add_argument("--values", type=int, default=1_000_000)
    p.add_argument("--k", type=int, default=3)
    args = p.parse_args(argv)
    w = Workload.make(args.keys, args.window, args.values, args.k, args.seed)
    return harness.main(args, w, build, NaiveSystem, {"bench": "topk", "keys": args.keys, "window": args.window, "k": args.k})


if __name__ == "__main__":
    sys.exit(main())
