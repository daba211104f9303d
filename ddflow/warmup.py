"""Compile every kernel into numba's disk cache before the first dataflow needs it: ``python -m ddflow.warmup``.

Why.  A kernel compiles on its first call, once per machine: the min/max
walk inside a loop takes about 30 s on a 2-core machine, all of them
about two minutes (138 s in one process, 81 to 129 s in two, by the
day).  Without a warm-up the first dataflow on a machine pays that while its first
updates wait, and the process that compiled keeps the
compiler's state (about 360 MB resident), which every worker process
forked from it then copies: a fork from it costs several times as much.
A process that finds the kernels cached only loads their machine code.

So run this where the machine or image is set up (``make test`` runs it
before the suite).  It runs a small dataflow of each operator family, one
process per core, then checks that every kernel Python calls
(:func:`ddflow.base.kernel_cache.entry_kernels`) was compiled or loaded by one
of them: a kernel no workload reaches is named, and the exit status is 1.
Outputs are not checked here; the test suite does that.  Cost: the
kernels' compile time, spread over the cores, the first time; about 2 s
once the cache holds them.

Not every signature: a test that calls a kernel with its own argument
types compiles it.  The order a process meets the kernels in does not
matter: a helper kernel that Python also calls (``key_walk``) runs its own
compiled code from Python, not the copy compiled into whichever caller
came first (:func:`ddflow.base.jit.lazy_jit`).
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Callable

#: Modules that define the kernels (imported to list them, which compiles nothing).
KERNEL_MODULES = (
    "ddflow.base.columnar", "ddflow.base.exactsum", "ddflow.base.kernels", "ddflow.base.radix",
    "ddflow.traces.arena", "ddflow.traces.layout", "ddflow.traces.merge", "ddflow.graph.node", "ddflow.graph.scope",
    "ddflow.operators.feedback", "ddflow.operators.iterate", "ddflow.operators.join", "ddflow.operators.round",
    "ddflow.operators.session",
    "ddflow.operators.reduce.accumulate", "ddflow.operators.reduce.chain", "ddflow.operators.reduce.compacted",
    "ddflow.operators.reduce.iterate", "ddflow.operators.reduce.keywalk", "ddflow.operators.reduce.pending",
    "ddflow.operators.reduce.walk",
)


def _feed(flow, handles_rows: list, steps: int = 3) -> None:
    """Insert each handle's rows (tuples) over ``steps`` advances, several times per advance, then remove some."""
    for step in range(steps):
        for handle, rows in handles_rows:
            part = rows[step::steps]
            if part:
                handle.update(part, times=[2 * step + (i % 2) for i in range(len(part))])
        flow.advance_to(2 * step + 2)
        flow.run()
    for handle, rows in handles_rows:
        handle.update(rows[::4], times=2 * steps, diffs=-1)
    flow.advance_to(2 * steps + 1)
    flow.run()


def _graph(n: int = 30) -> list[tuple[int, int]]:
    return [(i, (i * 7 + 3) % n) for i in range(n)] + [(i, (i + 1) % n) for i in range(0, n, 3)]


def _reachable(flow):
    """Reachability from ``roots`` over ``edges``, captured; its input handles, its start and its edges."""
    roots_in, roots = flow.new_collection("roots")
    edges_in, edges = flow.new_collection("edges")
    start = roots.project(0, 0)
    start.iterate(lambda r: r.join(edges).project(2, 1).concat(start).distinct()).capture()
    return roots_in, edges_in, start, edges


def loops() -> None:
    """Recursion: reachability (``distinct`` in a loop) and components by min label (``min`` in a loop)."""
    from ddflow.facade import Dataflow

    with Dataflow() as flow:
        roots_in, edges_in, start, edges = _reachable(flow)
        edges.map(lambda e: (e[0], e[0])).iterate(lambda lab: lab.join(edges).project(2, 1).concat(lab).min()).capture()
        start.iterate(lambda r: r.join(edges).project(2, 1).concat(start).count().project(0, 0)).capture()
        # A min in a loop: its rounds fused (loop_round's walk) at the advances of one time, the first and the
        # last; at the others the walk keeps its history, and the variable calls feedback_round_into from Python.
        start.iterate(lambda r: r.join(edges).project(2, 1).concat(start).min()).capture()
        _feed(flow, [(roots_in, [(0,), (5,)]), (edges_in, _graph())])


def loop_reductions() -> None:
    """The reduces inside a loop, whose kernels differ from the top level's: by value fields, kinds and logic."""
    from ddflow.facade import Dataflow

    ops = [lambda c: c.min(), lambda c: c.max(), lambda c: c.top_k(2), lambda c: c.top_k(2, numbered=True),
           lambda c: c.threshold(lambda n: n % 2), lambda c: c.sum(), lambda c: c.count()]
    with Dataflow() as flow:
        one_in, one = flow.new_collection("one")        # (key, value)
        wide_in, wide = flow.new_collection("wide")     # (key, value, value)
        fl_in, fl = flow.new_collection("fl")           # (key, float)
        text_in, text = flow.new_collection("text")     # (key, string)
        for source in (one, wide, fl, text):
            for op in ops[:5] if source is not fl else [ops[5]]:
                # Each body ignores its variable: the loop's fixed point is op(source), after one round.
                op(source).iterate(lambda v, source=source, op=op: op(source.enter(v.scope))).capture()
        rows = [(i % 13, (i * 7) % 29) for i in range(120)]
        _feed(flow, [(one_in, rows), (wide_in, [(k, v % 3, v) for k, v in rows]),
                     (fl_in, [(k, v / 4) for k, v in rows]), (text_in, [(k, f"s{v}") for k, v in rows])])


def reductions() -> None:
    """The top-level reduces: counts, sums (int and float), min/max, top-k, a user reduce, accumulate, joins."""
    from ddflow.facade import Dataflow

    with Dataflow() as flow:
        kv_in, kv = flow.new_collection("kv")
        fl_in, fl = flow.new_collection("fl")
        outs = [kv.count(), kv.distinct(), kv.threshold(lambda c: min(c, 1)), kv.sum(), kv.min(), kv.max(),
                kv.top_k(2), kv.top_k(2, numbered=True), kv.reduce(lambda k, vs: [((len(vs),), 1)]),
                kv.accumulate(groups=1, weights=1), fl.accumulate(groups=1, weights=0, floats=1), fl.sum(),
                kv.join(kv), kv.semijoin(kv.project(0)), kv.antijoin(kv.map(lambda r: (r[1],))), kv.consolidate(),
                fl.map(lambda r: (r[1], r[0])).count()]  # float keys: the batch seek's float kernel
        for out in outs:
            out.capture()
        # Steps of 400 rows: the traces' batches pass the spine's tail size, so they merge in pairs too.
        rows = [(i % 37, (i * 13) % 101) for i in range(1200)]
        _feed(flow, [(kv_in, rows), (fl_in, [(k, v / 8) for k, v in rows])])


def event_time() -> None:
    """Windows, sessions, temporal filters and SQL over an event-time table."""
    from datetime import datetime, timedelta, timezone
    from decimal import Decimal

    from ddflow.facade import Dataflow

    with Dataflow() as flow:
        bids_in, _ = flow.new_collection("bids", schema={"auction": "bigint", "price": "decimal(10,2)",
                                                           "ts": "timestamp"}, event_time="ts")
        for query, mode in [
            ("SELECT auction, window.start AS ws, COUNT(*) AS n, MAX(price) AS top, SUM(price) AS s "
             "FROM bids GROUP BY auction, window(ts, '10 seconds', '5 seconds')", "changelog"),
            ("SELECT auction, session_window.start, COUNT(*) AS n FROM bids "
             "GROUP BY auction, session_window(ts, '5 seconds')", "final"),
            ("SELECT auction, price FROM bids WHERE ts > now() - INTERVAL 20 SECONDS", "changelog"),
            ("SELECT auction, AVG(price) AS a, COUNT(DISTINCT price) AS d FROM bids GROUP BY auction "
             "ORDER BY a DESC LIMIT 3", "changelog"),
        ]:
            flow.sql(query, mode=mode).capture()
        at = datetime(2026, 1, 1, tzinfo=timezone.utc)
        for step in range(4):
            bids_in.update([(a, Decimal((a * 7 + step) % 50 + 1), at + timedelta(seconds=step * 10 + a))
                            for a in range(8)])
            flow.advance_to(at + timedelta(seconds=(step + 1) * 10))
            flow.run()


def relational() -> None:
    """Tables through the front ends: Datalog over symbols and floats (recursion, negation, an aggregate), SQL."""
    from ddflow.facade import Dataflow

    with Dataflow() as flow:
        edge_in, _ = flow.new_collection("edge", schema={"x": "string", "y": "string"})
        weight_in, _ = flow.new_collection("weight", schema={"x": "string", "w": "double"})
        outs = list(flow.datalog("""
            .type Node <: symbol
            .decl edge(x: Node, y: Node)
            .input edge
            .decl weight(x: Node, w: float)
            .input weight
            .decl path(x: Node, y: Node)
            path(x, y) :- edge(x, y).
            path(x, z) :- path(x, y), edge(y, z).
            .decl cyclic()
            cyclic() :- path(x, x).
            .decl acyclic()
            acyclic() :- !cyclic().
            .decl heavy(x: Node, total: float)
            heavy(x, t) :- edge(x, _), t = sum w : { edge(x, y), weight(y, w) }.
            """).values())
        outs.append(flow.sql("SELECT e.x, COUNT(*) AS n, MAX(w.w) AS m FROM edge e JOIN weight w ON e.y = w.x "
                             "GROUP BY e.x HAVING COUNT(*) > 1"))
        for out in outs:
            out.capture()
        graph = [(f"n{a}", f"n{b}") for a, b in _graph(20)]
        _feed(flow, [(edge_in, graph), (weight_in, [(f"n{i}", i / 4) for i in range(20)])])


def workers() -> None:
    """A join, a count and a loop on two workers: the exchange's kernels."""
    from ddflow.facade import Dataflow

    with Dataflow(workers=2) as flow:
        roots_in, edges_in, _, edges = _reachable(flow)
        edges.count().capture()
        _feed(flow, [(roots_in, [(0,), (5,)]), (edges_in, _graph())])


#: The workloads, longest first (they are handed out in this order).
WORKLOADS: dict[str, Callable[[], None]] = {
    "loops": loops, "loop_reductions": loop_reductions, "reductions": reductions, "event_time": event_time,
    "relational": relational, "workers": workers}


def _run(name: str) -> dict[str, list[str]]:
    """Run one workload in this (pool) process; each entry kernel's signatures afterwards."""
    from ddflow.base.kernel_cache import entry_kernels

    WORKLOADS[name]()
    return {k: sigs() for k, sigs in entry_kernels().items()}


def warm(processes: int | None = None, log: Callable[[str], None] = print) -> list[str]:
    """Run every workload, ``processes`` at once (default: the cores); the entry kernels none reached.

    Compiling happens only in the pool's processes: this one imports the
    kernels' modules to list them, and compiles nothing.
    """
    import multiprocessing

    from ddflow.base.jit import jit_enabled
    from ddflow.base.kernel_cache import entry_kernels
    from ddflow.errors import UsageError

    if not jit_enabled():
        raise UsageError("ddflow.warmup: DDFLOW_JIT=0 turns compiling off; there is nothing to warm")
    for module in KERNEL_MODULES:
        importlib.import_module(module)
    processes = max(1, min(processes or os.cpu_count() or 1, len(WORKLOADS)))
    reached: set[str] = set()
    t0 = time.perf_counter()
    # Fresh interpreters (spawn), not forks: a fork would copy whatever this process holds.  The pool runs
    # this module's functions by its package name, also when it runs as ``python -m ddflow.warmup``.
    run = importlib.import_module("ddflow.warmup")._run
    with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn")) as pool:
        for name, sigs in zip(WORKLOADS, pool.map(run, WORKLOADS)):
            reached |= {k for k, s in sigs.items() if s}
            log(f"ddflow.warmup: {name} done at {time.perf_counter() - t0:.1f} s")
    return sorted(set(entry_kernels()) - reached)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--processes", type=int, default=None, help="workloads run at once (default: the cores)")
    args = p.parse_args(argv)
    from ddflow.base.jit import jit_enabled

    if not jit_enabled():
        print("ddflow.warmup: DDFLOW_JIT=0: the kernels run as plain Python, nothing to compile")
        return 0
    missing = warm(args.processes)
    if missing:
        print(f"ddflow.warmup: no workload reached these kernels, so they were not compiled: {', '.join(missing)}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
