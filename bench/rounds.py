"""The cost of a loop round itself, per worker count: coordination with (almost) no work.

    python -m bench.rounds [--workers 1,2,4,8] [--rounds 400] [--transports socketpair,tcp] [--json FILE]

A loop counts one record up to ``--rounds``, so every round carries a single
update through an exchange, an arrangement and a distinct: the time per
round is the schedule's and the exchange protocol's overhead, not data
work.  With W > 1 it is reported beside the workers' own figures: the time
from a worker's last operator step in a round to the round's agreed end
(``coord``), messages sent per round over all workers, and the CPU time a
worker spends per round (``cpu``: the same operator work at every W, plus
sending, receiving and polling).  On a machine with fewer cores than
workers the waiting figures include time-sharing; the CPU figure does not.
Several repetitions, the transports alternated within each (W > 1:
``socketpair`` on one machine, ``tcp`` as across machines); the median
is reported.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np

import ddflow


def one(workers: int, rounds: int, transport: str = "socketpair") -> dict:
    with ddflow.Dataflow(workers=workers, transport=transport) as flow:
        h, a = flow.new_collection("a", schema=("i",))
        out = a.iterate(lambda x: x.map_columns(lambda c: np.minimum(c + 1, rounds)).distinct(), name="count",
                        max_iterations=rounds + 10).capture()
        h.insert((0,), time=0)
        flow.advance_to(1)
        t0 = time.perf_counter()
        flow.run()
        wall = time.perf_counter() - t0
        assert out.contents(0) == {(rounds,): 1}
        res = {"workers": workers, "transport": transport, "rounds": rounds, "us_per_round": wall / rounds * 1e6}
        stats = flow.worker_stats()
        if stats:
            coord = np.concatenate([np.asarray(s["coord_s"]) for s in stats]) * 1e6
            res["coord_p50_us"] = float(np.percentile(coord, 50))
            res["messages_per_round"] = sum(s["messages_sent"] for s in stats) / rounds
            res["data_messages_per_round"] = sum(s["data_messages_sent"] for s in stats) / rounds
            res["cpu_us_per_round"] = float(np.mean([s["cpu_s"] for s in stats]) / rounds * 1e6)
        return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.rounds", description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", default="1,2,4,8")
    p.add_argument("--rounds", type=int, default=400)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--transports", default="socketpair")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    rows = []
    for w in [int(x) for x in args.workers.split(",")]:
        transports = args.transports.split(",") if w > 1 else ["socketpair"]
        runs: dict[str, list[dict]] = {t: [] for t in transports}
        for _ in range(args.repeat):
            for t in transports:  # alternated: the machine's speed drifts
                runs[t].append(one(w, args.rounds, t))
        for t, rs in runs.items():
            row = {k: statistics.median(r[k] for r in rs) for k in rs[0] if k != "transport"}
            row.update(workers=w, transport=t)
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
