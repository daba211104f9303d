"""Soak: event-time views over a long stream, state and memory sampled as it runs (not run in CI).

    python -m bench.soak_eventtime [--events 10_000_000] [--batch 20_000] [--rate 20_000] [--every 5]
                                   [--json FILE] [--plot FILE]

Bids ``(auction, price, ts)`` arrive in event-time order with up to one
second of disorder, ``--rate`` events per second of event time, and the
frontier follows the latest event minus the lateness (as the streaming
driver's watermark).  Three views run at once:

- a hopping-window count and max per auction (10 s windows every 5 s),
- a session window per bidder (gap 2 s; ``--bidders`` of them, each bidding
  every ``bidders / rate`` seconds on average, so sessions close) with its count,
- a temporal filter (the last 30 s of bids above a price).

Every ``--every`` seconds of wall time one JSON line reports the events
so far, the process's RSS, ``flow.trace_size()`` and the records held by
the largest operators (``flow.stats()``).  Bounded state means: after the
first windows close, the trace size and RSS stay flat however many events
pass.  ``--plot`` draws both against events processed.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import pyarrow as pa

import ddflow
from bench.soak_strings import rss_mb

S = 1_000_000
T0 = 1_767_225_600 * S
LATENESS = S

VIEWS = {
    "hopping": "SELECT auction, window.start AS ws, window.end AS we, COUNT(*) AS n, MAX(price) AS top "
               "FROM bids GROUP BY auction, window(ts, '10 seconds', '5 seconds')",
    "sessions": "SELECT bidder, session_window.start AS ss, session_window.end AS se, COUNT(*) AS n "
                "FROM bids GROUP BY bidder, session_window(ts, '2 seconds')",
    "recent": "SELECT auction, price, ts FROM bids WHERE price > 900 AND ts > now() - INTERVAL 30 SECONDS",
}


def batches(events: int, batch: int, rate: int, auctions: int, bidders: int, seed: int = 0):
    """Arrow batches of bids, event time advancing at ``rate`` per second, disordered within the lateness."""
    rng = np.random.default_rng(seed)
    step = S / rate
    for lo in range(0, events, batch):
        n = min(batch, events - lo)
        ts = T0 + (np.arange(lo, lo + n) * step).astype(np.int64) - rng.integers(0, LATENESS // 2, n)
        yield pa.table({"auction": pa.array(rng.integers(0, auctions, n)),
                        "bidder": pa.array(rng.integers(0, bidders, n)),
                        "price": pa.array(rng.integers(1, 1000, n)),
                        "ts": pa.array(ts, pa.timestamp("us"))}), int(ts.max())


def soak(events: int, batch: int, rate: int, auctions: int, bidders: int, every: float) -> list[dict]:
    flow = ddflow.Dataflow()
    bids_in, _ = flow.new_collection("bids", schema={"auction": "bigint", "bidder": "bigint", "price": "bigint",
                                                     "ts": "timestamp"}, event_time="ts")
    outs = {name: flow.sql(sql).capture() for name, sql in VIEWS.items()}
    samples: list[dict] = []
    t0 = time.perf_counter()
    next_at, done, latest = t0, 0, T0
    for table, hi in batches(events, batch, rate, auctions, bidders):
        bids_in.update(table)
        latest = max(latest, hi)
        flow.advance_to(latest - LATENESS)
        flow.run()
        for c in outs.values():
            c.drain_updates()
        done += table.num_rows
        if time.perf_counter() >= next_at or done >= events:
            top = sorted(flow.stats(), key=lambda s: -s["records"])[:4]
            s = {"elapsed_s": round(time.perf_counter() - t0, 1), "events": done,
                 "event_time_s": round((latest - T0) / S, 1), "rss_mb": round(rss_mb(), 1),
                 "trace_size": flow.trace_size(),
                 "largest": {o["operator"][:60]: o["records"] for o in top}}
            samples.append(s)
            print(json.dumps(s), flush=True)
            next_at = time.perf_counter() + every
    return samples


def plot(samples: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ev = [s["events"] / 1e6 for s in samples]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.plot(ev, [s["trace_size"] / 1e3 for s in samples], label="trace size (k records)")
    ax.set_xlabel("events processed (millions)")
    ax.set_ylabel("k records held")
    ax2 = ax.twinx()
    ax2.plot(ev, [s["rss_mb"] for s in samples], color="tab:red", label="RSS (MiB)")
    ax2.set_ylabel("RSS MiB")
    ax.set_ylim(bottom=0)
    ax2.set_ylim(bottom=0)
    fig.legend(loc="lower right")
    ax.set_title("event-time soak: hopping count + sessions + temporal filter")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--events", type=int, default=10_000_000)
    p.add_argument("--batch", type=int, default=20_000)
    p.add_argument("--rate", type=int, default=20_000, help="events per second of event time")
    p.add_argument("--auctions", type=int, default=1_000)
    p.add_argument("--bidders", type=int, default=100_000)
    p.add_argument("--every", type=float, default=5.0)
    p.add_argument("--json")
    p.add_argument("--plot")
    a = p.parse_args(argv)
    samples = soak(a.events, a.batch, a.rate, a.auctions, a.bidders, a.every)
    if a.json:
        with open(a.json, "a") as f:
            for s in samples:
                f.write(json.dumps(s) + "\n")
    if a.plot:
        plot(samples, a.plot)
    first = next((s for s in samples if s["event_time_s"] > 30), samples[0])
    print(json.dumps({"summary": {"after_first_windows": first, "last": samples[-1]}}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
