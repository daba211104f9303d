"""The cost of calling a kernel (issue 59), and Python calls an update (issue 24's count), exact where timings are not.

    python -m bench.calls                              # both: the call boundary, then reach's count
    python -m bench.calls --boundary                   # the call boundary alone
    python -m bench.calls --count --bench components --updates 1000 --top 30

**The call boundary** (:func:`boundary`): what crossing from Python into
a kernel costs, the native extension's call against numba's dispatch of
the same kernel, both warm, in one process: a call that does no work
(an array's address; a product of two ints), ``consolidate_small`` of 4
rows, ``join_table`` of one key against a batch of 4 updates, and
``merge_pair`` of two batches of 4.  Each is timed in batches of
``--calls`` calls, native and numba alternated batch by batch (which
goes first alternates too), ``--rounds`` batches each; the medians are
reported per call, with the loop's own cost per call (an empty loop of
as many turns), which they include.  numba's side is its dispatcher
(``.dispatcher()`` of a ``lazy_jit`` kernel), and, where the engine calls
a kernel through ``lazy_jit``'s wrapper, that too.  Without numba (or
once the kernels are native) its columns are skipped, with a note.

**The count** (:func:`count`): after a warm-up, ``cProfile`` counts every Python-level call (functions,
builtins, methods) made while the measured updates run; a compiled
kernel's call counts once, whatever it does inside.  The count depends
on the code, the workload and the seed, not on the machine or its load,
so a change's effect on it is read from one run before and one after, no
alternation needed.  Three things would spoil it, and the report names
them: a numba compile during the measured updates (the compiler's own
Python calls count), a kernel met for the first time there (loading it
from the cache is Python too: a longer warm-up avoids it), and a
garbage collection of the interner's codes (its calls come every so
many updates, so short runs see it or not).
The calls are listed by function, most first; the last line printed is
one JSON object.
"""
from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import json
import pstats
import statistics
import time
from typing import Callable, Iterator

import numpy as np

from bench.split import WORKLOADS, driver


@contextlib.contextmanager
def _compiles() -> Iterator[list]:
    """A list that collects the name of every numba compile (outermost only) inside the block (none without numba)."""
    names: list = []
    try:
        from numba.core import event
    except ImportError:  # nothing compiles at run time
        yield names
        return

    class Listener(event.Listener):
        depth = 0

        def on_start(self, e):
            if not Listener.depth:
                disp = (e.data or {}).get("dispatcher")
                names.append(getattr(getattr(disp, "py_func", None), "__qualname__", str(disp)))
            Listener.depth += 1

        def on_end(self, e):
            Listener.depth -= 1

    listener = Listener()
    event.register("numba:compile", listener)
    try:
        yield names
    finally:
        event.unregister("numba:compile", listener)


def count(bench: str = "reach", updates: int = 1000, warmup: int = 300, batch: int = 1, seed: int = 0,
          top: int = 20, nodes: int | None = None, edges: int | None = None) -> dict:
    """Python calls per update over ``updates`` measured updates: the total, and the ``top`` functions by calls."""
    system, run = driver(bench, seed, batch, nodes, edges)
    try:
        run(warmup)
        profile = cProfile.Profile()
        # Garbage left by earlier work (finalizers of dataflows this process closed) is collected first, and no
        # collection runs while counting: a finalizer called then would be counted.
        gc.collect()
        enabled = gc.isenabled()
        gc.disable()
        with _compiles() as compiles:
            profile.enable()
            try:
                run(updates)
            finally:
                profile.disable()
                if enabled:
                    gc.enable()
    finally:
        system.close()
    stats = pstats.Stats(profile).stats
    per_fn = sorted(((v[1] / updates, f"{k[0].rsplit('/', 1)[-1]}:{k[1]} {k[2]}") for k, v in stats.items()),
                    reverse=True)
    collected = any(name.startswith("interner.py:") and name.endswith(" collect") for _, name in per_fn)
    # A kernel's first use (lazy_jit builds its dispatcher) or a new argument type (numba loads it from its cache).
    loaded = any(name.endswith((" _compile_with", " load_overload")) for _, name in per_fn)
    return {"bench": bench, "batch": batch, "updates": updates, "seed": seed,
            "calls_per_update": sum(n for n, _ in per_fn),
            "compiles_during_measure": compiles, "loads_during_measure": loaded, "collected_codes": collected,
            "top": [[round(n, 2), name] for n, name in per_fn[:top]]}


def _boundary_cases() -> tuple[list[tuple[str, tuple, dict[str, Callable]]], list[str], list]:
    """The kernels :func:`boundary` times: ``(name, args, {column: function})``; notes on what is skipped; and the
    tables whose batches the arguments' addresses point into (the caller keeps them while it calls)."""
    from ddflow.base.interner import Interner
    from ddflow.base.native import native_module
    from ddflow.base.updates import from_rows
    from ddflow.operators.join import checked_product, join_table
    from ddflow.traces import Batch
    from ddflow.traces.layout import BatchTable
    from ddflow.traces.merge import merge_pair

    native = native_module()
    notes: list[str] = []
    try:
        import numba
    except ImportError:
        numba = None
        notes.append("numba is not installed: native calls alone")

    def numba_of(kernel, name: str) -> dict[str, Callable]:
        """numba's columns for a lazy_jit kernel: its dispatcher, and the wrapper the engine calls."""
        if numba is None:
            return {}
        dispatcher = getattr(kernel, "dispatcher", None)
        if dispatcher is None:
            notes.append(f"{name} is not a numba kernel here (the kernels are native): no numba column")
            return {}
        return {"numba": dispatcher(), "numba, lazy_jit's wrapper": kernel}

    def length(a):
        return a.shape[0]

    a = np.zeros(4, dtype=np.int64)
    rows = np.array([[3, 1, 0], [1, 2, 0], [3, 1, 0], [2, 2, 1]], dtype=np.int64)
    diffs = np.array([1, 1, -1, 2], dtype=np.int64)
    batch = Batch.from_updates(from_rows([(1, 5), (1, 6), (2, 7), (3, 8)], 0, 1, Interner(), kinds=("i", "i")))
    other = Batch.from_updates(from_rows([(1, 5), (2, 9), (3, 8), (4, 1)], 1, 1, Interner(), kinds=("i", "i")))
    table = BatchTable.of([batch], 1, 2)
    pair = BatchTable.of([batch, other], 1, 2)
    C = np.array([[1], [4]], dtype=np.int64)
    times, ddiffs = np.zeros((1, 1), dtype=np.int64), np.ones(1, dtype=np.int64)
    for x in (C, times, ddiffs):
        x.flags.writeable = False  # as the engine hands them (one numba signature)
    F = np.zeros((0, 1), dtype=np.int64)
    cases = [
        ("no work: an array's address (numba: its length)", (a,),
         {"native": native.base.address, **({"numba": numba.njit(length)} if numba else {})}),
        ("no work: checked_product of two ints", (3, 4),
         {"native": native.operators.checked_product, **({"numba": numba.njit(checked_product)} if numba else {})}),
        ("consolidate_small, 4 rows", (rows, diffs), {"native": native.base.consolidate_small}),
        ("join_table, 1 key against a batch of 4", (table.matrix, C, times, ddiffs, 2, 1, True, 1 << 22),
         {"native": native.operators.join_table, **numba_of(join_table, "join_table")}),
        ("merge_pair, two batches of 4", (pair.matrix, 0, len(batch.keys), 0, len(other.keys), F),
         {"native": native.traces.merge_pair, **numba_of(merge_pair, "merge_pair")}),
    ]
    if numba is not None:
        try:
            from ddflow.base.kernels import kernels

            cases[2][2]["numba"] = kernels().consolidate_small
        except (ImportError, AttributeError):
            notes.append("consolidate_small has no numba kernel here: no numba column")
    return cases, notes, [table, pair]


def boundary(rounds: int = 101, calls: int = 1000) -> dict:
    """Nanoseconds per call of each of :func:`_boundary_cases`' kernels, by column (native, numba, ...): medians
    of ``rounds`` batches of ``calls`` calls, the columns alternated batch by batch; and the empty loop's."""
    import gc

    cases, notes, keep = _boundary_cases()
    for _, args, impls in cases:  # warm: numba compiles (or loads) here, not while timing
        for f in impls.values():
            f(*args)
    turns = range(calls)

    def batch(f, args) -> float:
        t = time.perf_counter_ns()
        for _ in turns:
            f(*args)
        return (time.perf_counter_ns() - t) / calls

    def empty() -> float:
        t = time.perf_counter_ns()
        for _ in turns:
            pass
        return (time.perf_counter_ns() - t) / calls

    samples: dict = {name: {k: [] for k in impls} for name, _, impls in cases}
    loop = []
    enabled = gc.isenabled()
    gc.disable()
    try:
        for r in range(rounds):
            loop.append(empty())
            for name, args, impls in cases:
                order = list(impls)
                if r % 2:
                    order.reverse()
                for k in order:
                    samples[name][k].append(batch(impls[k], args))
    finally:
        if enabled:
            gc.enable()
    del keep  # the tables' batches could go now
    ns = {name: {k: round(statistics.median(v), 1) for k, v in cols.items()} for name, cols in samples.items()}
    return {"rounds": rounds, "calls": calls, "loop_ns": round(statistics.median(loop), 1), "ns_per_call": ns,
            "notes": notes}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--boundary", action="store_true", help="time the call boundary alone")
    p.add_argument("--count", action="store_true", help="count Python calls an update alone")
    p.add_argument("--rounds", type=int, default=101, help="the call boundary: batches per kernel and column")
    p.add_argument("--calls", type=int, default=1000, help="the call boundary: calls a batch")
    p.add_argument("--bench", default="reach", choices=sorted(WORKLOADS))
    p.add_argument("--updates", type=int, default=1000)
    p.add_argument("--warmup", type=int, default=300)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--top", type=int, default=20)
    args = p.parse_args(argv)
    both = not (args.boundary or args.count)
    line: dict = {}
    if args.boundary or both:
        b = boundary(args.rounds, args.calls)
        columns = list(dict.fromkeys(k for cols in b["ns_per_call"].values() for k in cols))
        print(f"Crossing into a kernel, ns a call (medians of {b['rounds']} batches of {b['calls']} calls, "
              f"alternated; the loop's own {b['loop_ns']} ns a call included):")
        print(f"  {'':46}" + "".join(f"{c:>28}" for c in columns))
        for name, cols in b["ns_per_call"].items():
            print(f"  {name:46}" + "".join(f"{cols[c]:>28,.1f}" if c in cols else f"{'-':>28}" for c in columns))
        for note in b["notes"]:
            print(f"  ({note})")
        line["boundary"] = b
    if args.count or both:
        c = count(args.bench, args.updates, args.warmup, args.batch, args.seed, args.top)
        print(f"{args.bench}, {args.batch} update(s) per advance: {c['calls_per_update']:,.0f} Python calls an update")
        if c["loads_during_measure"]:
            print("  kernels were loaded during the measured updates (the count includes it): give a longer --warmup")
        if c["collected_codes"]:
            print("  the interner collected codes during the measured updates (the count includes it)")
        if c["compiles_during_measure"]:
            print(f"  numba compiled during the measured updates (the count includes it): {c['compiles_during_measure']}")
        for n, name in c["top"]:
            print(f"  {n:9.1f}  {name}")
        line.update(c)
    print(json.dumps(line))
    return line


if __name__ == "__main__":
    main()
