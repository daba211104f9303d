"""Python calls an update: issue 24's count (fewer than 2,000 per single update of reach), exact where timings are not.

    python -m bench.calls                              # reach, one update per advance
    python -m bench.calls --bench components --updates 1000 --top 30

After a warm-up, ``cProfile`` counts every Python-level call (functions,
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
from typing import Iterator

from bench.split import WORKLOADS, driver


@contextlib.contextmanager
def _compiles() -> Iterator[list]:
    """A list that collects the name of every numba compile (outermost only) inside the block."""
    from numba.core import event

    names: list = []

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


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bench", default="reach", choices=sorted(WORKLOADS))
    p.add_argument("--updates", type=int, default=1000)
    p.add_argument("--warmup", type=int, default=300)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--top", type=int, default=20)
    args = p.parse_args(argv)
    line = count(args.bench, args.updates, args.warmup, args.batch, args.seed, args.top)
    print(f"{args.bench}, {args.batch} update(s) per advance: {line['calls_per_update']:,.0f} Python calls an update")
    if line["loads_during_measure"]:
        print("  kernels were loaded during the measured updates (the count includes it): give a longer --warmup")
    if line["collected_codes"]:
        print("  the interner collected codes during the measured updates (the count includes it)")
    if line["compiles_during_measure"]:
        print(f"  numba compiled during the measured updates (the count includes it): {line['compiles_during_measure']}")
    for n, name in line["top"]:
        print(f"  {n:9.1f}  {name}")
    print(json.dumps(line))
    return line


if __name__ == "__main__":
    main()
