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
import collections
import json
import os
import resource
import sys
import time
from dataclasses import dataclass, field

import numpy as np

import ddflow

# -- workload ----------------------------------------------------------------------


@dataclass
class Workload:
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

    def updates(self, n: int) -> np.ndarray:
        """New edges for updates 0..n-1 (update i removes the window's oldest edge and adds edge i)."""
        return self.rng.integers(0, self.nodes, size=(n, 2), dtype=np.int64)


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


class DdflowSystem:
    name = "ddflow"

    def __init__(self, w: Workload, workers: int = 1):
        self.flow = ddflow.Dataflow(workers=workers)
        self.roots_in, roots = self.flow.new_collection("roots", schema=("i",))
        self.edges_in, edges = self.flow.new_collection("edges", schema=("i", "i"))
        self.cap = reach_dataflow(roots, edges).capture()
        self.roots_in.update({"root": w.roots}, times=0)
        self.edges_in.update({"src": w.initial[:, 0], "dst": w.initial[:, 1]}, times=0)
        self.flow.advance_to(1)
        self.flow.run()
        self.state = {r: 1 for r, _, _ in self.cap.drain()}

    def step(self, removed: np.ndarray, added: np.ndarray, t0: int) -> list[tuple[tuple, int, int]]:
        k = len(added)
        times = np.arange(t0, t0 + k, dtype=np.int64)
        both = np.concatenate([removed, added])
        self.edges_in.update({"src": both[:, 0], "dst": both[:, 1]},
                             times=np.concatenate([times, times]),
                             diffs=np.concatenate([-np.ones(k, dtype=np.int64), np.ones(k, dtype=np.int64)]))
        self.flow.advance_to(t0 + k)
        self.flow.run()
        return self.cap.drain_updates().to_rows(self.flow.interner)

    def trace_size(self) -> int:
        return self.flow.trace_size()

    def coordination(self) -> dict:
        """Per loop round, over all workers: time from a worker's last local work to the round's completion."""
        stats = self.flow.worker_stats()
        if not stats:
            return {}
        coord = np.concatenate([np.asarray(s["coord_s"], dtype=np.float64) for s in stats]) * 1e3
        rounds = max(s["rounds"] for s in stats)
        return {
            "rounds": rounds,
            "coord_p50_ms": float(np.percentile(coord, 50)) if len(coord) else 0.0,
            "coord_p90_ms": float(np.percentile(coord, 90)) if len(coord) else 0.0,
            "coord_mean_ms": float(coord.mean()) if len(coord) else 0.0,
            "wait_per_round_ms": float(np.mean([s["wait_s"] for s in stats]) / max(rounds, 1) * 1e3),
            "busy_per_round_ms": float(np.mean([s["busy_s"] for s in stats]) / max(rounds, 1) * 1e3),
            "messages_per_round": float(sum(s["messages_sent"] for s in stats) / max(rounds, 1)),
            "data_messages_per_round": float(sum(s["data_messages_sent"] for s in stats) / max(rounds, 1)),
            # CPU per worker per round: unlike waiting, not inflated when more workers than cores share the machine
            "cpu_per_round_ms": float(np.mean([s["cpu_s"] for s in stats]) / max(rounds, 1) * 1e3),
            "bytes_sent": int(sum(s["bytes_sent"] for s in stats)),
        }

    def close(self) -> None:
        self.flow.shutdown()


class NaiveSystem:
    """From scratch after every single update: BFS from the roots, diffed with the previous answer.

    The reachable set is a (roots x nodes) boolean matrix, so the diff is
    one vectorized comparison and only the changed pairs become tuples.
    """

    name = "naive"

    def __init__(self, w: Workload, workers: int = 1):
        self.w = w
        self.window = collections.deque(map(tuple, w.initial.tolist()))
        self.current = self._matrix(w.initial)
        self.state = {p: 1 for p in reachable(w.nodes, w.initial, w.roots)}

    def _matrix(self, edges: np.ndarray) -> np.ndarray:
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import breadth_first_order

        n = self.w.nodes
        g = csr_matrix((np.ones(len(edges), dtype=np.int8), (edges[:, 0], edges[:, 1])), shape=(n, n))
        m = np.zeros((len(self.w.roots), n), dtype=bool)
        for i, r in enumerate(self.w.roots.tolist()):
            m[i, breadth_first_order(g, r, directed=True, return_predecessors=False)] = True
        return m

    def step(self, removed: np.ndarray, added: np.ndarray, t0: int) -> list[tuple[tuple, int, int]]:
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

    def trace_size(self) -> int:
        return 0

    def coordination(self) -> dict:
        return {}

    def close(self) -> None:
        pass


# -- harness ----------------------------------------------------------------------


def rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@dataclass
class Result:
    checkpoints: list[dict] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)


def run(args: argparse.Namespace) -> dict:
    w = Workload.make(args.nodes, args.edges, args.roots, args.seed)
    system_cls = {"ddflow": DdflowSystem, "naive": NaiveSystem}[args.system]
    t_setup = time.perf_counter()
    system = system_cls(w, workers=args.workers)
    setup_s = time.perf_counter() - t_setup
    window = collections.deque(map(tuple, w.initial.tolist()))
    checkpoints = sorted(c for c in args.checkpoints if c <= args.updates)
    if args.updates not in checkpoints:
        checkpoints.append(args.updates)
    lat_ms: collections.deque[float] = collections.deque(maxlen=1000)
    res = Result()
    state = system.state
    verify_ok = True
    done = 0
    next_cp = 0
    t_start = time.perf_counter()
    busy = 0.0
    while done < args.updates:
        k = min(args.batch, args.updates - done)
        added = w.updates(k)
        removed = np.array([window[i] for i in range(k)], dtype=np.int64)
        t0 = done + 1
        verify = args.verify_every and (done // args.verify_every != (done + k) // args.verify_every or done == 0)
        before = set(state) if verify else None
        t1 = time.perf_counter()
        changes = system.step(removed, added, t0)
        dt = time.perf_counter() - t1
        busy += dt
        lat_ms.append(dt * 1e3)
        for row, _, d in changes:
            n = state.get(row, 0) + d
            if n:
                state[row] = n
            else:
                state.pop(row, None)
        if verify:
            verify_ok &= check_deltas(w, window, added, before, changes, t0)
        for e in added.tolist():
            window.popleft()
            window.append(tuple(e))
        done += k
        while next_cp < len(checkpoints) and done >= checkpoints[next_cp]:
            lat = np.array(lat_ms)
            res.checkpoints.append({
                "updates": done,
                "p50_ms": float(np.percentile(lat, 50)),
                "p99_ms": float(np.percentile(lat, 99)),
                "max_ms": float(lat.max()),
                "quantiles_ms": np.percentile(lat, np.linspace(0, 100, 41)).round(4).tolist(),
                "window": len(lat),
                "trace_updates": system.trace_size(),
                "rss_bytes": rss_bytes(),
                "elapsed_s": time.perf_counter() - t_start,
            })
            if args.progress:
                print(json.dumps(res.checkpoints[-1]), file=sys.stderr, flush=True)
            next_cp += 1
    wall = time.perf_counter() - t_start
    coordination = system.coordination()
    system.close()
    final = reachable(w.nodes, np.array(window, dtype=np.int64), w.roots)
    correct = verify_ok and final == {r for r, m in state.items() if m == 1} and all(m == 1 for m in state.values())
    return {
        "system": system.name,
        "nodes": args.nodes, "edges": args.edges, "roots": args.roots,
        "updates": args.updates, "batch": args.batch, "workers": args.workers, "seed": args.seed,
        "setup_s": setup_s,
        "updates_per_s": args.updates / busy if busy else 0.0,
        "wall_s": wall,
        "checkpoints": res.checkpoints,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "coordination": coordination,
        "correct": bool(correct),
    }


def check_deltas(w: Workload, window: collections.deque, added: np.ndarray, before: set, changes: list, t0: int) -> bool:
    """Every update's exact output change is at its own data time."""
    win = collections.deque(window)
    prev = before
    by_time: dict[int, dict] = collections.defaultdict(dict)
    for row, t, d in changes:
        by_time[t][row] = by_time[t].get(row, 0) + d
    for i, e in enumerate(added.tolist()):
        win.popleft()
        win.append(tuple(e))
        cur = reachable(w.nodes, np.array(win, dtype=np.int64), w.roots)
        expect = {p: 1 for p in cur - prev} | {p: -1 for p in prev - cur}
        got = {r: d for r, d in by_time.get(t0 + i, {}).items() if d}
        if got != expect:
            print(f"verify: output at time {t0 + i} differs: expected {sorted(expect.items())[:5]}..., "
                  f"got {sorted(got.items())[:5]}...", file=sys.stderr)
            return False
        prev = cur
    return True


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.reach", description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--edges", type=int, default=2000)
    p.add_argument("--roots", type=int, default=10)
    p.add_argument("--updates", type=int, default=10000)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--system", choices=("ddflow", "naive"), default="ddflow")
    p.add_argument("--checkpoints", type=lambda s: [int(x) for x in s.split(",") if x],
                   default=[1000, 10000, 100000, 1000000])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--verify-every", type=int, default=0, help="check exact per-update deltas every M updates")
    p.add_argument("--json", default=None, help="append the result line to this file")
    p.add_argument("--progress", action="store_true", help="print each checkpoint to stderr as it is reached")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    out = run(args)
    line = json.dumps(out)
    if args.json:
        with open(args.json, "a") as f:
            f.write(line + "\n")
    print(line)
    return 0 if out["correct"] else 1


if __name__ == "__main__":
    sys.exit(main())
