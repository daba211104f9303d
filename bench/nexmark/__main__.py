"""Nexmark on ddflow: generated events streamed into event-time tables, each query a view, checked against DuckDB.

For each query: a fresh ``ddflow.Dataflow`` with ``person``, ``auction``
and ``bid`` as event-time tables (``event_time="date_time"``, so each
row's data time is its timestamp) and the query's view captured.  The
generator's events arrive in arrival order (``--disorder-us`` of
out-of-orderness), ``--batch`` events at a time; after each batch the
frontier moves to (largest event time seen - ``--lateness-us``) and the
dataflow runs to it: ``ddflow_ms`` is that batch's update, advance and
run.  Generation is not timed.

At ``--checkpoints`` evenly spaced batches (and after the last, when the
frontier moves past every event) the view's changes before the frontier
F, accumulated, are compared with DuckDB's answer on the events before F
(``oracle.Duck``: Spark's windows translated); a mismatch is reported
with rows and makes the run exit 1.  ``duckdb_s`` is that from-scratch
query's time: the baseline.  ``ratio`` is ``duckdb_s`` over ddflow's
median batch time since the previous checkpoint: how many batches ddflow
keeps its view current for in the time DuckDB answers once.

A query ddflow refuses (or fails to build) is reported as refused, with
the error, and the others go on; one that fails while running, as failed.

    python -m bench.nexmark --events 100000 --batch 1000 --queries q0,q5,q12 --json bench/results/nexmark.jsonl

Each result is one JSON line (appended to ``--json``), then a table.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter, deque

import numpy as np
import pyarrow as pa

import ddflow
from bench.nexmark import generator as gen
from bench.nexmark import oracle
from bench.nexmark.queries import LEFT_OUT, QUERIES


def _names(s: str) -> list[str]:
    names = [x.strip().lower() for x in s.split(",") if x.strip()]
    for n in names:
        if n not in QUERIES:
            why = f" (left out: {LEFT_OUT[n]})" if n in LEFT_OUT else ""
            raise argparse.ArgumentTypeError(f"no query {n!r}{why}; the queries: {','.join(QUERIES)}")
    return names


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.nexmark", description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=100_000, help="events in all (persons, auctions, bids 1:3:46)")
    p.add_argument("--batch", type=int, default=1_000, help="events per frontier advance")
    p.add_argument("--queries", type=_names, default=list(QUERIES), help="comma separated, e.g. q0,q5,q12")
    p.add_argument("--rate", type=float, default=10_000, help="events per second of event time")
    p.add_argument("--disorder-us", type=int, default=1_000_000, help="arrival delay bound (out-of-orderness)")
    p.add_argument("--lateness-us", type=int, default=None,
                   help="frontier = largest event time seen - lateness (default: --disorder-us, the safe least)")
    p.add_argument("--checkpoints", type=int, default=3, help="oracle checks, evenly spaced (the last at the end)")
    p.add_argument("--workers", type=int, default=1, help="ddflow workers (DuckDB gets as many threads)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="append the result lines to this file")
    p.add_argument("--report", default=None, help="only print the table of this JSON lines file")
    args = p.parse_args(argv)
    if args.lateness_us is None:
        args.lateness_us = args.disorder_us
    return args


class View:
    """ddflow's view of one query: its output changes accumulated up to a frontier."""

    def __init__(self, cap):
        self.cap = cap
        self.state: Counter = Counter()
        self.pending: deque = deque()

    def upto(self, frontier: int) -> Counter:
        """The view's rows at ``frontier - 1``: every change at a time before the frontier applied."""
        self.pending.extend(sorted(self.cap.drain(), key=lambda u: u[1]))
        while self.pending and self.pending[0][1] < frontier:
            row, _, d = self.pending.popleft()
            row = tuple(oracle.normalize(v) for v in row)
            self.state[row] += d
            if not self.state[row]:
                del self.state[row]
        return self.state


def _max_time(tables: dict[str, pa.Table]) -> int | None:
    ts = [int(np.max(t.column("date_time").cast(pa.int64()).to_numpy())) for t in tables.values() if t.num_rows]
    return max(ts) if ts else None


def _checkpoints(n_batches: int, k: int) -> set[int]:
    """Batch indices (0-based) after which to check: ``k`` evenly spaced, the last one always."""
    return {max(0, round(n_batches * (i + 1) / max(k, 1)) - 1) for i in range(max(k, 1))}


def run_query(args: argparse.Namespace, name: str) -> tuple[list[dict], bool]:
    """One query: a line per checkpoint and a summary (or one refused/failed line); False on a mismatch."""
    base = {"bench": "nexmark", "query": name, "events": args.events, "batch": args.batch, "rate": args.rate,
            "disorder_us": args.disorder_us, "lateness_us": args.lateness_us, "workers": args.workers,
            "seed": args.seed}
    flow = ddflow.Dataflow(workers=args.workers)
    inputs = {t: flow.new_collection(t, schema=s, event_time="date_time")[0] for t, s in gen.SCHEMAS.items()}
    try:
        t0 = time.perf_counter()
        view = View(flow.sql(QUERIES[name]).capture())
        build_s = time.perf_counter() - t0
    except Exception as e:  # a refusal (SchemaError) or any other failure to build: reported, the others go on
        flow.close()
        return [{**base, "refused": f"{type(e).__name__}: {e}"}], True
    duck = oracle.Duck(threads=args.workers)
    n_batches = -(-args.events // args.batch)
    checks = _checkpoints(n_batches, args.checkpoints)
    out: list[dict] = []
    times: list[float] = []
    seen: int | None = None
    frontier = 0
    done = 0
    ok = True
    try:
        for i, batch in enumerate(gen.batches(args.events, args.batch, args.seed, args.rate, args.disorder_us)):
            t0 = time.perf_counter()
            for t, rows in batch.items():
                if rows.num_rows:
                    inputs[t].update(rows)
            top = _max_time(batch)
            seen = top if seen is None else max(seen, top if top is not None else seen)
            last = i == n_batches - 1
            # At the end of the stream every event is final: the frontier passes them all.
            target = seen + 1 if last else seen - args.lateness_us
            if target > frontier:
                frontier = target
                flow.advance_to(frontier)
            flow.run()
            times.append(time.perf_counter() - t0)
            done += sum(t.num_rows for t in batch.values())
            t0 = time.perf_counter()
            duck.append(batch)
            ingest_s = time.perf_counter() - t0
            if i not in checks:
                continue
            got = view.upto(frontier)
            duck.cutoff(frontier)
            t0 = time.perf_counter()
            want = duck.query(QUERIES[name])
            duck_s = time.perf_counter() - t0
            why = oracle.compare(got, want)
            seg = times[-max(1, n_batches // max(args.checkpoints, 1)):]
            p50 = statistics.median(seg)
            line = {**base, "phase": "checkpoint", "events_done": done, "frontier_us": frontier - gen.BASE_TIME_US,
                    "ddflow_batch_ms": 1e3 * p50, "ddflow_batch_ms_max": 1e3 * max(seg),
                    "ddflow_events_per_s": done / sum(times), "duckdb_s": duck_s, "duckdb_ingest_s": ingest_s,
                    "ratio": duck_s / p50 if p50 > 0 else None, "rows": len(want),
                    "trace_updates": flow.trace_size(), "correct": why is None}
            if why:
                line["mismatch"] = why
                ok = False
            out.append(line)
            if why:
                break
        out.append({**base, "phase": "total", "ddflow_build_s": build_s, "ddflow_s": sum(times),
                    "ddflow_events_per_s": done / sum(times) if times else None,
                    "ddflow_batch_ms_all": [round(1e3 * x, 3) for x in times], "correct": ok})
    except Exception as e:  # the engine failed while running this query: reported, the others go on
        out.append({**base, "failed": f"{type(e).__name__}: {e}", "events_done": done})
    finally:
        flow.close()
    return out, ok


def table(lines: list[dict]) -> str:
    """A markdown table: per query its last checkpoint (or why it did not run)."""
    out = ["| query | events | batch | ddflow events/s | ddflow ms/batch (p50) | DuckDB s (from scratch) | ratio "
           "| rows | trace updates | status |", "|---" * 10 + "|"]
    for q in dict.fromkeys(r["query"] for r in lines):
        rs = [r for r in lines if r["query"] == q]
        bad = next((r for r in reversed(rs) if "refused" in r or "failed" in r), None)
        cps = [r for r in rs if r.get("phase") == "checkpoint"]
        if bad is not None and cps and rs.index(bad) < rs.index(cps[-1]):
            bad = None  # an earlier run refused or failed; the latest one ran
        if bad and not cps:
            kind = "refused" if "refused" in bad else "failed"
            out.append(f"| {q} | {bad['events']} | {bad['batch']} | - | - | - | - | - | - | {kind}: "
                       f"{bad[kind][:100]} |")
            continue
        c = cps[-1]
        status = "correct" if c["correct"] else f"MISMATCH: {c.get('mismatch', '')[:100]}"
        if bad:
            status = f"failed: {bad.get('failed', bad.get('refused', ''))[:100]}"
        ratio = f"{c['ratio']:.1f}" if c.get("ratio") is not None else "-"
        out.append(f"| {q} | {c['events_done']} | {c['batch']} | {c['ddflow_events_per_s']:.0f} | "
                   f"{c['ddflow_batch_ms']:.1f} | {c['duckdb_s']:.3f} | {ratio} | {c['rows']} | "
                   f"{c['trace_updates']} | {status} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.report:
        with open(args.report) as f:
            print(table([json.loads(x) for x in f if x.strip()]))
        return 0
    lines: list[dict] = []
    ok = True
    for name in args.queries:
        rs, good = run_query(args, name)
        ok &= good
        for r in rs:
            print(json.dumps({k: v for k, v in r.items() if not k.endswith("_all")}), flush=True)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps(r) + "\n")
        lines += rs
    print(table(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
