"""Where one update's time goes: outside the scheduler, the scheduler, operator steps' Python, native kernels.

    python -m bench.split                      # reach, one update per advance
    python -m bench.split --bench sssp --updates 400 --batch 1

The question this answers is the one issue 24's second item asks: would
running a loop round as one compiled sequence pay?  Timers go around the
top-level scheduler step, every operator step and every compiled kernel
call an operator step makes (a kernel calling a kernel counts once; the
kernels are also listed one by one).  What is
left of an operator step after its kernels is Python and numpy glue, and
the scheduler's share is what it spends between steps; fusing a round
would remove those two, not the kernels' own work.  Kernels the
scheduler calls between steps (finding a loop's next round, whether a
node has work) count as the scheduler's.  The timers add about half a
microsecond a call, so the shares are close, not exact.

The kernels are wrapped before any operator module is imported (ddflow
loads them lazily), so this runs in its own interpreter.  The last line
printed is one JSON object.
"""
from __future__ import annotations

import argparse
import collections
import json
import time

import numpy as np

import ddflow.base.kernels as _kernels
import ddflow.base.native as _native

#: Each benchmark's default workload (its own command line's defaults), less the seed.
WORKLOADS = {"reach": (1000, 2000, 10), "sssp": (1000, 2000, 10), "components": (1000, 1000)}

_acc: collections.Counter = collections.Counter()
_calls: collections.Counter = collections.Counter()
_depth = [0]  # 1 inside an operator step, 2 inside a kernel called there
_by_op: collections.Counter = collections.Counter()  # seconds in steps, per operator class
_by_op_kernels: collections.Counter = collections.Counter()  # of which in kernels
_by_op_calls: collections.Counter = collections.Counter()
_by_kernel: collections.Counter = collections.Counter()  # seconds in each kernel an operator step called
_by_kernel_calls: collections.Counter = collections.Counter()


def _timed(fn, name: str):
    def call(*args):
        if _depth[0] != 1:  # outside an operator step (input, compaction: not a step's), or inside another kernel
            return fn(*args)
        _depth[0] += 1
        t = time.perf_counter()
        try:
            return fn(*args)
        finally:
            dt = time.perf_counter() - t
            _acc["kernels"] += dt
            _calls["kernels"] += 1
            _by_kernel[name] += dt
            _by_kernel_calls[name] += 1
            _depth[0] -= 1
    return call


def _wrap_kernels() -> None:
    make, namespace = _native.kernel, _kernels.kernels
    wrapped = []

    def kernel(layer, name=None, native=None):
        decorate = make(layer, name, native)
        return lambda plain: _timed(decorate(plain), plain.__name__)

    def kernels():
        if not wrapped:
            wrapped.append(type(namespace())(**{k: _timed(v, k) for k, v in vars(namespace()).items()}))
        return wrapped[0]

    _native.kernel, _kernels.kernels = kernel, kernels


def _wrap_steps() -> None:
    from ddflow.graph import node, scope

    run_step, step_scope = node.Node.run_step, scope.Scheduler.step_scope

    def timed_run_step(self, bound):
        _depth[0] = 1
        t, k = time.perf_counter(), _acc["kernels"]
        try:
            return run_step(self, bound)
        finally:
            dt = time.perf_counter() - t
            _acc["steps"] += dt
            _calls["steps"] += 1
            op = type(self).__name__
            _by_op[op] += dt
            _by_op_kernels[op] += _acc["kernels"] - k
            _by_op_calls[op] += 1
            _depth[0] = 0

    def timed_step_scope(self, s, bound):
        if s.parent is not None:
            return step_scope(self, s, bound)
        t = time.perf_counter()
        try:
            return step_scope(self, s, bound)
        finally:
            _acc["scheduler"] += time.perf_counter() - t

    node.Node.run_step, scope.Scheduler.step_scope = timed_run_step, timed_step_scope


def driver(bench: str, seed: int, batch: int, nodes: int | None = None, edges: int | None = None):
    """``(system, run)``: a benchmark's ddflow system on its default workload, and ``run(n)``, which feeds it ``n``
    more updates of its sliding window, ``batch`` an advance (what the benchmark itself does)."""
    import importlib

    from bench.harness import DdflowSystem

    mod = importlib.import_module(f"bench.{bench}")
    shape = list(WORKLOADS[bench])
    shape[0] = nodes or shape[0]
    shape[1] = edges or shape[1]
    w = mod.Workload.make(*shape, seed)
    system = DdflowSystem(w, mod.build)
    window = collections.deque(map(tuple, w.initial.tolist()))
    t = 1

    def run(n: int) -> None:
        nonlocal t
        for _ in range(n // batch):
            removed = np.array([window.popleft() for _ in range(batch)], dtype=np.int64)
            added = w.fresh(batch)
            window.extend(map(tuple, added.tolist()))
            system.step(removed, added, t)
            t += batch

    return system, run


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bench", default="reach", choices=["reach", "sssp", "components"])
    p.add_argument("--updates", type=int, default=400)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--nodes", type=int, default=None, help="the graph's nodes (default: the benchmark's own)")
    p.add_argument("--edges", type=int, default=None, help="the graph's edges (default: the benchmark's own)")
    args = p.parse_args(argv)
    _wrap_kernels()
    system, run = driver(args.bench, args.seed, args.batch, args.nodes, args.edges)
    run(args.warmup)
    _wrap_steps()
    t0 = time.perf_counter()
    run(args.updates)
    total = (time.perf_counter() - t0) / args.updates * 1e3
    per = {k: _acc.get(k, 0.0) / args.updates * 1e3 for k in ("scheduler", "steps", "kernels")}
    shares = {"outside the scheduler (API, input, output)": total - per["scheduler"],
              "scheduler between steps": per["scheduler"] - per["steps"],
              "operator steps: Python and numpy": per["steps"] - per["kernels"],
              "compiled kernels": per["kernels"]}
    print(f"{args.bench}, {args.batch} update(s) per advance: {total:.2f} ms an update, "
          f"{_calls['steps'] / args.updates:.0f} operator steps and {_calls['kernels'] / args.updates:.0f} kernel calls")
    for name, ms in shares.items():
        print(f"  {name:45s} {ms:6.2f} ms  {ms / total:4.0%}")
    print("  per operator class: steps an update, us a step (of which kernels)")
    for op, sec in _by_op.most_common():
        n = _by_op_calls[op]
        print(f"    {op:24s} {n / args.updates:5.1f}  {sec / n * 1e6:6.1f} us  ({_by_op_kernels[op] / n * 1e6:5.1f})")
    print("  per kernel: calls an update, ms an update, us a call")
    for k, sec in _by_kernel.most_common(12):
        n = _by_kernel_calls[k]
        print(f"    {k:24s} {n / args.updates:7.2f}  {sec / args.updates * 1e3:6.3f} ms  {sec / n * 1e6:8.1f} us")
    system.close()
    line = {"bench": args.bench, "batch": args.batch, "updates": args.updates, "ms_per_update": total,
            "operator_steps": _calls["steps"] / args.updates, "kernel_calls": _calls["kernels"] / args.updates,
            "ms": shares,
            "per_operator_us": {op: {"steps_per_update": _by_op_calls[op] / args.updates,
                                     "us_per_step": sec / _by_op_calls[op] * 1e6,
                                     "kernel_us_per_step": _by_op_kernels[op] / _by_op_calls[op] * 1e6}
                                for op, sec in _by_op.items()},
            "per_kernel_us": {k: {"calls_per_update": _by_kernel_calls[k] / args.updates,
                                  "us_per_call": sec / _by_kernel_calls[k] * 1e6}
                              for k, sec in _by_kernel.items()}}
    print(json.dumps(line))
    return line


if __name__ == "__main__":
    main()
