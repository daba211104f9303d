"""The harness the sliding-window benchmarks share: one loop, one JSON line, one oracle.

A benchmark is a :class:`Workload`: a window of input rows and a
from-scratch answer over it.  Each update removes the window's oldest row
and adds a fresh one, at its own data time; ``--batch K`` submits K of
them under one frontier advance, and every update's exact output change
is still produced at its own time.  A system (ddflow, or the bench's own
from-scratch baseline at C speed) answers each batch with its output
changes; the harness times it, keeps latency quantiles at checkpoints,
optionally checks the per-update deltas against the workload's answer,
and checks the final state against it.

The last line printed is one JSON object (also appended to ``--json``);
a run whose correctness check fails exits with status 1.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import sys
import time
from typing import Callable, Protocol

import numpy as np

import ddflow

Change = tuple[tuple, int, int]


class Workload(Protocol):
    """A window of input rows and what the output is over any window, from scratch."""

    initial: np.ndarray  # (n, arity) int64: the window at the start

    def fresh(self, k: int) -> np.ndarray:
        """``k`` new rows (each enters the window as the oldest one leaves)."""

    def answer(self, rows: np.ndarray) -> dict[tuple, int]:
        """The output over window ``rows``, from scratch: record -> multiplicity."""


class System(Protocol):
    name: str
    state: dict[tuple, int]  # the output after the initial load

    def step(self, removed: np.ndarray, added: np.ndarray, t0: int) -> list[Change]:
        """Apply the batch (update i at time t0 + i) and return the output changes."""

    def trace_size(self) -> int: ...

    def coordination(self) -> dict: ...

    def close(self) -> None: ...


class DdflowSystem:
    """ddflow running ``build``: ``build(flow, workload) -> (window input, output collection)``."""

    name = "ddflow"

    def __init__(self, w: Workload, build: Callable, workers: int = 1):
        self.flow = ddflow.Dataflow(workers=workers)
        self.window_in, out = build(self.flow, w)
        self.cap = out.capture()
        self.window_in.update(_columns(w.initial), times=0)
        self.flow.advance_to(1)
        self.flow.run()
        self.state = {}
        for r, _, d in self.cap.drain():
            self.state[r] = self.state.get(r, 0) + d

    def step(self, removed: np.ndarray, added: np.ndarray, t0: int) -> list[Change]:
        k = len(added)
        times = np.arange(t0, t0 + k, dtype=np.int64)
        self.window_in.update(_columns(np.concatenate([removed, added])),
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
        self.flow.close()


class RecomputeSystem:
    """From scratch after every single update with ``w.answer``, diffed with the previous answer."""

    name = "naive"

    def __init__(self, w: Workload, workers: int = 1):
        self.w = w
        self.window = collections.deque(map(tuple, w.initial.tolist()))
        self.state = w.answer(w.initial)
        self.current = dict(self.state)

    def step(self, removed: np.ndarray, added: np.ndarray, t0: int) -> list[Change]:
        out = []
        for i, e in enumerate(added.tolist()):
            self.window.popleft()
            self.window.append(tuple(e))
            nxt = self.w.answer(np.array(self.window, dtype=np.int64))
            out.extend((r, t0 + i, d) for r, d in diff_answers(self.current, nxt).items())
            self.current = nxt
        return out

    def trace_size(self) -> int:
        return 0

    def coordination(self) -> dict:
        return {}

    def close(self) -> None:
        pass


def diff_answers(before: dict[tuple, int], after: dict[tuple, int]) -> dict[tuple, int]:
    """``after - before`` as nonzero changes per record."""
    out = {r: m - before.get(r, 0) for r, m in after.items() if m != before.get(r, 0)}
    out.update({r: -m for r, m in before.items() if r not in after})
    return out


def _columns(rows: np.ndarray) -> dict[str, np.ndarray]:
    return {f"c{j}": np.ascontiguousarray(rows[:, j]) for j in range(rows.shape[1])}


def rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run(args: argparse.Namespace, w: Workload, make_system: Callable[[], System], describe: dict) -> dict:
    """Feed ``args.updates`` updates to a new system in batches of ``args.batch``; the result as a dict."""
    t_setup = time.perf_counter()
    system = make_system()
    setup_s = time.perf_counter() - t_setup
    window = collections.deque(map(tuple, w.initial.tolist()))
    checkpoints = sorted(c for c in args.checkpoints if c <= args.updates)
    if args.updates not in checkpoints:
        checkpoints.append(args.updates)
    lat_ms: collections.deque[float] = collections.deque(maxlen=1000)
    cps: list[dict] = []
    state = system.state
    verify_ok = True
    done = 0
    next_cp = 0
    t_start = time.perf_counter()
    busy = 0.0
    while done < args.updates:
        k = min(args.batch, args.updates - done)
        added = w.fresh(k)
        removed = np.array([window[i] for i in range(k)], dtype=np.int64)
        t0 = done + 1
        verify = args.verify_every and (done // args.verify_every != (done + k) // args.verify_every or done == 0)
        before = dict(state) if verify else None
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
            cps.append({
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
                print(json.dumps(cps[-1]), file=sys.stderr, flush=True)
            next_cp += 1
    wall = time.perf_counter() - t_start
    coordination = system.coordination()
    system.close()
    final = w.answer(np.array(window, dtype=np.int64))
    correct = verify_ok and final == state
    return {
        "system": system.name, **describe,
        "updates": args.updates, "batch": args.batch, "workers": args.workers, "seed": args.seed,
        "setup_s": setup_s,
        "updates_per_s": args.updates / busy if busy else 0.0,
        "wall_s": wall,
        "checkpoints": cps,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "coordination": coordination,
        "correct": bool(correct),
    }


def check_deltas(w: Workload, window: collections.deque, added: np.ndarray, before: dict, changes: list,
                 t0: int) -> bool:
    """Every update's exact output change is at its own data time."""
    win = collections.deque(window)
    prev = before
    by_time: dict[int, dict] = collections.defaultdict(dict)
    for row, t, d in changes:
        by_time[t][row] = by_time[t].get(row, 0) + d
    for i, e in enumerate(added.tolist()):
        win.popleft()
        win.append(tuple(e))
        cur = w.answer(np.array(win, dtype=np.int64))
        expect = diff_answers(prev, cur)
        got = {r: d for r, d in by_time.get(t0 + i, {}).items() if d}
        if got != expect:
            print(f"verify: output at time {t0 + i} differs: expected {sorted(expect.items())[:5]}..., "
                  f"got {sorted(got.items())[:5]}...", file=sys.stderr)
            return False
        prev = cur
    return True


def parser(prog: str, doc: str, updates: int = 10000) -> argparse.ArgumentParser:
    """The options every benchmark takes; a bench adds its workload's own."""
    p = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0])
    p.add_argument("--updates", type=int, default=updates)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--system", choices=("ddflow", "naive"), default="ddflow")
    p.add_argument("--checkpoints", type=lambda s: [int(x) for x in s.split(",") if x],
                   default=[1000, 10000, 100000, 1000000])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--verify-every", type=int, default=0, help="check exact per-update deltas every M updates")
    p.add_argument("--json", default=None, help="append the result line to this file")
    p.add_argument("--progress", action="store_true", help="print each checkpoint to stderr as it is reached")
    return p


def main(args: argparse.Namespace, w: Workload, build: Callable, naive: Callable[[Workload], System],
         describe: dict) -> int:
    """Run ``args.system`` (ddflow running ``build``, or the ``naive`` baseline) on ``w`` and report it."""
    if args.system == "ddflow":
        return report(run(args, w, lambda: DdflowSystem(w, build, workers=args.workers), describe), args)
    return report(run(args, w, lambda: naive(w), describe), args)


def report(out: dict, args: argparse.Namespace) -> int:
    """Print (and append to ``--json``) the result line; the exit status."""
    line = json.dumps(out)
    if args.json:
        with open(args.json, "a") as f:
            f.write(line + "\n")
    print(line)
    return 0 if out["correct"] else 1
