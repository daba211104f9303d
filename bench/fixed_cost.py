"""The fixed cost of an advance: a 30-operator dataflow, one change (or none) per advance.

``python -m bench.fixed_cost [--advances N] [--repeats R] [--json FILE]``
prints one JSON line: the median microseconds per advance that changes
nothing and per advance with one change, over ``R`` repeats of ``N``
advances.  Written to measure what the engine's metrics counters cost
(issue 63: "a few integer adds a step"): run it on two trees, alternated,
and compare the medians (``bench/README.md``, "Metrics").  Only the
public API, so it runs unchanged on older trees.  Issue 62's target for
the same dataflow is 20 us (nothing) and 200 us (one change).
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import ddflow

#: Stateless operators in the chain; with the input, the arrangement, the count and the capture: 30.
CHAIN = 26


def build() -> tuple[ddflow.Dataflow, ddflow.InputHandle]:
    flow = ddflow.Dataflow()
    e_in, e = flow.new_collection("e", schema=["i", "i"])
    c = e
    for _ in range(CHAIN):
        c = c.project(1, 0)  # a swap: each one a real operator (an even number of them leaves (key, value))
    c.project(0).count().capture()
    return flow, e_in


def per_advance(n: int, change: bool) -> float:
    """Seconds per advance, over ``n`` advances after a warm-up."""
    flow, e_in = build()
    e_in.update([(k, k) for k in range(100)], times=0)
    flow.advance_to(1)
    flow.run()
    t = 1
    for _ in range(50):  # warm-up
        t += 1
        if change:
            e_in.update([(t % 100, t)], times=t - 1)
        flow.advance_to(t)
        flow.run()
    t0 = time.perf_counter()
    for _ in range(n):
        t += 1
        if change:
            e_in.update([(t % 100, t)], times=t - 1)
        flow.advance_to(t)
        flow.run()
    out = (time.perf_counter() - t0) / n
    flow.close()
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--advances", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", default=None, help="append the result line to this file")
    args = ap.parse_args(argv)
    idle = [per_advance(args.advances, False) for _ in range(args.repeats)]
    one = [per_advance(args.advances, True) for _ in range(args.repeats)]
    rec = {"bench": "fixed_cost", "operators": CHAIN + 4, "advances": args.advances, "repeats": args.repeats,
           "idle_us": round(statistics.median(idle) * 1e6, 2), "one_change_us": round(statistics.median(one) * 1e6, 2)}
    line = json.dumps(rec)
    print(line)
    if args.json:
        with open(args.json, "a") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
