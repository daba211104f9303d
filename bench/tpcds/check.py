"""Which TPC-DS queries ddflow answers: each query against DuckDB at every complete time of a random refresh stream.

For each query: a dataflow with the tables it reads (dsdgen's, less a 2%
pool of the fact tables), ``flow.sql(query)``, the load at time 0, then
refreshes (:class:`bench.tpcds.stream.Churn`: random deletes of the six
sales and returns tables' rows and inserts from the pool), one per data
time, ``--advances`` data times per frontier advance.  At every time the
view's accumulated rows are compared with DuckDB's answer on the same
accumulated tables (top-k queries: any valid top k).  Each query is
classified:

* ``equal``: equal at every time (``rows`` says how many rows the answer
  had at the end: an empty answer checks less);
* ``refused``: ``flow.sql`` refused it (the message);
* ``error``: it built but running failed (the message);
* ``wrong``: ddflow's rows differ from DuckDB's (the time and the diff);
* ``timeout``: it did not finish in ``--timeout`` seconds.

Each query runs in its own process (a crash or a runaway query stops only
itself).  ``python -m bench.tpcds.check --sf 0.01`` prints the table and
writes ``bench/results/tpcds_status.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter, defaultdict

import pyarrow as pa

from bench.tpch.oracle import compare
from bench.tpcds import data
from bench.tpcds.oracle import Duck, Views, tables_of
from bench.tpcds.queries import all_queries, duckdb_texts, name, number
from bench.tpcds.stream import Churn

#: Data times per frontier advance (one refresh per data time).
ADVANCES = (2, 3, 2)
STATUSES = ("equal", "refused", "error", "wrong", "timeout")


def first_line(message: str) -> str:
    """A message's first line (what a status table shows).

    >>> first_line("SchemaError: no\\n  SELECT x")
    'SchemaError: no'
    """
    return message.strip().splitlines()[0] if message.strip() else message


def run(queries: dict[int, str], tables: dict[str, pa.Table], *, workers: int = 1, seed: int = 0,
        advances: tuple[int, ...] = ADVANCES, fraction: float = 0.001, round_trip: bool = False) -> dict[int, dict]:
    """Check ``queries`` in one dataflow; per query a result dict (``status``, ``message``, ``rows``, ``times``).

    Raises what running the dataflow raised (the caller tells which query did it).
    """
    churn = Churn(tables, seed=seed)
    init = {**tables, **churn.initial()}
    views = Views(init, queries, workers=workers)
    duck = Duck(init, {n: queries[n] for n in views.caps}, threads=1)
    out: dict[int, dict] = {n: {"status": "refused", "message": views.errors[n]} for n in views.errors}
    for n in views.caps:
        out[n] = {"status": "equal", "message": "", "rows": 0, "times": 0}
        if round_trip:
            out[n]["round_trip"] = duck.round_trip_differs(n, duckdb_texts()[n])

    def check(t: int) -> None:
        for n, cap in views.caps.items():
            if out[n]["status"] != "equal":
                continue
            why = compare(cap.contents(t), duck, n)
            if why:
                out[n].update(status="wrong", message=f"time {t}: {why}")
            else:
                out[n]["times"] += 1
                out[n]["rows"] = len(duck.answer(n))

    try:
        views.load(init, 0)
        views.advance(1)
        check(0)
        t = 1
        for k in advances:
            batch = [churn.refresh(fraction) for _ in range(k)]
            for i, r in enumerate(batch):
                views.apply(r, t + i)
            views.advance(t + k)
            for i, r in enumerate(batch):
                duck.apply(r)
                check(t + i)
            t += k
    finally:
        views.close()
    return out


def run_each(queries: dict[int, str], tables: dict[str, pa.Table], **kw) -> dict[int, dict]:
    """All in one dataflow; if running it fails, each query alone, so an error names its query."""
    try:
        return run(queries, tables, **kw)
    except Exception as shared:  # the shared dataflow failed while running: find which views make it fail
        out = {}
        for n, q in queries.items():
            try:
                out.update(run({n: q}, tables, **kw))
            except Exception as alone:
                out[n] = {"status": "error", "message": f"{type(alone).__name__}: {alone}"}
        if len(queries) > 1 and all(r["status"] != "error" for r in out.values()):
            for r in out.values():
                r["note"] = f"together they failed: {type(shared).__name__}: {shared}"
        return out


def _one(args: argparse.Namespace) -> int:
    n = number(args.one)
    t0 = time.perf_counter()
    tables = data.load(args.sf, tables_of(all_queries()[n]))
    try:
        r = run({n: all_queries()[n]}, tables, workers=args.workers, seed=args.seed, round_trip=True)[n]
    except Exception as e:  # running failed: this query's error
        r = {"status": "error", "message": f"{type(e).__name__}: {e}"}
    r["seconds"] = round(time.perf_counter() - t0, 2)
    print("RESULT " + json.dumps(r, default=str), flush=True)
    return 0


def check_all(queries: list[int], sf: float, workers: int = 1, seed: int = 0, timeout: float = 120,
              log=print) -> dict[str, dict]:
    """Each query in its own process; query name -> result."""
    data.ensure(sf)
    data.duckdb_queries()
    out: dict[str, dict] = {}
    for n in queries:
        cmd = [sys.executable, "-m", "bench.tpcds.check", "--one", str(n), "--sf", str(sf),
               "--workers", str(workers), "--seed", str(seed)]
        t0 = time.perf_counter()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=os.environ)
            line = next((x for x in p.stdout.splitlines() if x.startswith("RESULT ")), None)
            if line:
                r = json.loads(line[len("RESULT "):])
            else:
                tail = (p.stderr or p.stdout).strip().splitlines()[-1:] or [f"exit {p.returncode}"]
                r = {"status": "error", "message": f"the process died (exit {p.returncode}): {tail[0]}"}
        except subprocess.TimeoutExpired:
            r = {"status": "timeout", "message": f"not done in {timeout:g} s"}
        r.setdefault("seconds", round(time.perf_counter() - t0, 2))
        out[name(n)] = r
        log(f"{name(n):>5} {r['status']:8} {r['seconds']:7.1f}s rows={r.get('rows', '-')} "
            f"{first_line(r.get('message', ''))[:150]}")
    return out


def table(results: dict[str, dict]) -> str:
    """The status table (markdown): one line per query."""
    lines = ["| query | status | s | rows | message |", "|---|---|---|---|---|"]
    for q, r in results.items():
        msg = first_line(r.get("message", "")).replace("|", "\\|")[:200]
        if r.get("round_trip"):
            msg += f" (DuckDB round trip: {r['round_trip']})"
        lines.append(f"| {q} | {r['status']} | {r.get('seconds', '-')} | {r.get('rows', '-')} | {msg} |")
    return "\n".join(lines)


def summary(results: dict[str, dict]) -> str:
    """Counts by status, and the refusal and error messages grouped (first line, most common first)."""
    counts = Counter(r["status"] for r in results.values())
    out = [", ".join(f"{s}: {counts[s]}" for s in STATUSES if counts[s])]
    empty = [q for q, r in results.items() if r["status"] == "equal" and not r.get("rows")]
    if empty:
        out.append(f"equal but empty at the end ({len(empty)}): {' '.join(empty)}")
    for status in ("refused", "error", "wrong", "timeout"):
        groups: dict[str, list[str]] = defaultdict(list)
        for q, r in results.items():
            if r["status"] == status:
                groups[_gist(r.get("message", ""))].append(q)
        if groups:
            out.append(f"\n{status}:")
            for msg, qs in sorted(groups.items(), key=lambda kv: -len(kv[1])):
                out.append(f"  {len(qs):3} {msg}  [{' '.join(qs)}]")
    return "\n".join(out)


def _gist(message: str) -> str:
    """A message without what varies between queries (quoted SQL, positions, counts, operator names).

    >>> _gist("SchemaError: at most 63 columns here, not 82")
    'SchemaError: at most 63 columns here, not N'
    >>> _gist("SchemaError: SQL: Rollup is not supported near line 9, column 1 (in `ROLLUP (a)`)")
    'SchemaError: SQL: Rollup is not supported'
    """
    line = first_line(message)
    line = re.sub(r"operator '.*?': ", "operator '...': ", line)
    line = re.sub(r" \(in `.*$", "", line)
    line = re.sub(r" (near |at )?line \d+, column \d+", "", line)
    line = re.sub(r"\bnot \d+\b", "not N", line)
    return line[:200]


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.tpcds.check", description=__doc__.split("\n\n")[0])
    p.add_argument("--sf", type=float, default=0.01)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--queries", default=None, help="comma separated (q1,q2 or 1,2); default all 99")
    p.add_argument("--timeout", type=float, default=120, help="seconds per query")
    p.add_argument("--json", default="bench/results/tpcds_status.json")
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.one:
        return _one(args)
    qs = [number(q) for q in args.queries.split(",")] if args.queries else sorted(duckdb_texts())
    t0 = time.perf_counter()
    results = check_all(qs, args.sf, args.workers, args.seed, args.timeout)
    print(table(results))
    print()
    print(summary(results))
    if args.json:
        doc = {"sf": args.sf, "workers": args.workers, "seed": args.seed, "advances": list(ADVANCES),
               "seconds": round(time.perf_counter() - t0, 1), "queries": results}
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
