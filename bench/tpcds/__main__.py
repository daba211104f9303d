"""TPC-DS views under refreshes: ddflow's per-refresh time against DuckDB recomputing the query, alternated in one run.

For each query: the tables it reads at ``--sf`` (dsdgen's, less a 2% pool
of the six sales and returns tables) are loaded at time 0 (ddflow: build,
ingest and the first answer; DuckDB: ingest and one run of the query).
Then ``--refreshes`` refreshes, each deleting ``--fraction`` (0.1%) of
every sales and returns table's rows and inserting as many
(:class:`bench.tpcds.stream.Churn`), one per data time and frontier
advance, alternately: ddflow applies the refresh and runs to its time,
then DuckDB applies it and reruns the query.  Times are medians per
refresh (DuckDB: apply and query; in brackets the query alone).  After
every refresh ddflow's view is compared with DuckDB's answer; a mismatch
stops the run with the query, time and rows.

    python -m bench.tpcds --sf 0.1 --queries q3,q42 --refreshes 10

Default queries: those ``bench/results/tpcds_status.json`` (written by
``python -m bench.tpcds.check``) calls equal, else all 99.  DuckDB runs
with as many threads as ddflow has workers.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import Counter, deque

from bench.tpch.oracle import compare
from bench.tpcds import data
from bench.tpcds.oracle import Duck, Views, tables_of
from bench.tpcds.queries import all_queries, duckdb_texts, name, number
from bench.tpcds.stream import Churn

STATUS = "bench/results/tpcds_status.json"


class Mismatch(Exception):
    pass


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.tpcds", description=__doc__.split("\n\n")[0])
    p.add_argument("--sf", type=float, default=0.1)
    p.add_argument("--queries", default=None, help="comma separated (q3,q42 or 3,42)")
    p.add_argument("--refreshes", type=int, default=10)
    p.add_argument("--fraction", type=float, default=0.001, help="of each sales and returns table per refresh")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="append the result lines to this file")
    p.add_argument("--report", default=None, help="only print the table of this JSON lines file")
    return p.parse_args(argv)


def default_queries() -> list[int]:
    """The queries the last status check found equal, else all."""
    if os.path.exists(STATUS):
        with open(STATUS) as f:
            st = json.load(f)["queries"]
        return [number(q) for q, r in st.items() if r["status"] == "equal"]
    return sorted(duckdb_texts())


def run_query(args: argparse.Namespace, n: int, tables: dict) -> dict:
    """One query's line: load times, per-refresh medians, or why it did not run."""
    base = {"bench": "tpcds", "query": name(n), "sf": args.sf, "workers": args.workers, "seed": args.seed,
            "fraction": args.fraction}
    q = {n: all_queries()[n]}
    churn = Churn(tables, seed=args.seed)
    init = {**tables, **churn.initial()}
    t0 = time.perf_counter()
    views = Views(init, q, workers=args.workers)
    if n in views.errors:
        views.close()
        return {**base, "refused": views.errors[n]}
    try:
        views.load(init, 0)
        views.advance(1)
        load_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        duck = Duck(init, q, threads=args.workers)
        ingest_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        duck.answer(n)
        first_s = time.perf_counter() - t0
        cap, state, pending = views.caps[n], Counter(), deque()

        def check(t: int) -> None:
            pending.extend(sorted(cap.drain(), key=lambda u: u[1]))
            while pending and pending[0][1] <= t:
                row, _, d = pending.popleft()
                state[row] += d
                if not state[row]:
                    del state[row]
            why = compare(state, duck, n)
            if why:
                raise Mismatch(f"{name(n)}: ddflow differs from DuckDB at time {t}: {why}")

        check(0)
        dd, du, dq, changed = [], [], [], []
        for t in range(1, args.refreshes + 1):
            r = churn.refresh(args.fraction)
            changed.append(r.rows())
            t0 = time.perf_counter()
            views.apply(r, t)
            views.advance(t + 1)
            dd.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            duck.apply(r)
            t1 = time.perf_counter()
            duck.answer(n)
            t2 = time.perf_counter()
            du.append(t2 - t0)
            dq.append(t2 - t1)
            check(t)
        return {**base, "ddflow_load_s": load_s, "duckdb_ingest_s": ingest_s, "duckdb_query_s": first_s,
                "refreshes": len(dd), "rows_per_refresh": statistics.median(changed),
                "ddflow_ms": 1e3 * statistics.median(dd), "duckdb_ms": 1e3 * statistics.median(du),
                "duckdb_query_ms": 1e3 * statistics.median(dq),
                "ddflow_ms_all": [round(1e3 * x, 3) for x in dd], "duckdb_ms_all": [round(1e3 * x, 3) for x in du],
                "speedup": statistics.median(du) / statistics.median(dd), "rows": len(duck.answer(n)),
                "trace_updates": views.flow.trace_size(), "correct": True}
    except Mismatch:
        raise
    except Exception as e:  # the engine failed while running this query: report it, go on with the others
        return {**base, "failed": f"{type(e).__name__}: {e}"}
    finally:
        views.close()


def table(lines: list[dict]) -> str:
    """A markdown table: load times, then per-refresh medians of ddflow and DuckDB (apply + query, and query)."""
    out = ["| query | ddflow load s | DuckDB load s | ddflow ms/refresh | DuckDB ms/refresh (query) | DuckDB / ddflow "
           "| rows |", "|---|---|---|---|---|---|---|"]
    for r in lines:
        bad = r.get("refused") or r.get("failed")
        if bad:
            kind = "refused" if "refused" in r else "failed"
            out.append(f"| {r['query']} | - | - | - | - | - | {kind}: {bad.splitlines()[0][:100]} |")
            continue
        out.append(f"| {r['query']} | {r['ddflow_load_s']:.2f} | {r['duckdb_ingest_s'] + r['duckdb_query_s']:.3f} "
                   f"| {r['ddflow_ms']:.1f} | {r['duckdb_ms']:.1f} ({r['duckdb_query_ms']:.1f}) "
                   f"| {r['speedup']:.2f} | {r['rows']} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.report:
        with open(args.report) as f:
            print(table([json.loads(x) for x in f if x.strip()]))
        return 0
    qs = [number(q) for q in args.queries.split(",")] if args.queries else default_queries()
    tables = data.load(args.sf, set().union(*(tables_of(all_queries()[n]) for n in qs)))
    lines = []
    for n in qs:
        try:
            r = run_query(args, n, tables)
        except Mismatch as e:
            print(f"MISMATCH: {e}", file=sys.stderr)
            return 1
        print(json.dumps({k: v for k, v in r.items() if not k.endswith("_all")}), flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(r) + "\n")
        lines.append(r)
    print(table(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
