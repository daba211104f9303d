"""TPC-H views in a pipeline: ddflow's refresh by change against Spark's and DuckDB's recompute.

The eight TPC-H tables at ``--scale`` are written as Delta tables (change
data feed on), and as Parquet for Spark.  Each of the 22 queries is a
view of its own ddflow pipeline (its tables, one Delta contents sink).
Run 0 is the full build; each later run applies one TPC-H refresh (RF1,
then RF2: 0.1% of the orders inserted and 0.1% deleted, with their lines)
to the Delta tables, as two commits each, and then refreshes the view:

* ``ddflow_ms``: one ``Pipeline.refresh()``: read the new commits (the
  change data feed), update the view, commit its Delta table;
* ``spark_ms``: the query recomputed by Spark SQL over the tables as
  Parquet (what a Spark Declarative Pipelines materialized view does on
  each run), collected;
* ``duckdb_ms``: the query recomputed by DuckDB (in-memory tables, one thread).

``correct`` is true when ddflow's Delta table holds DuckDB's answer
(``bench.tpch.oracle.compare``).  One JSON line per view and run goes to
``--json`` (default ``bench/results/pipelines.jsonl``), with ``vs_spark``
(``spark_ms / ddflow_ms``), ``vs_duckdb`` and where ddflow's time went
(``steps``).  The Delta history is written once, before any view runs; a
view's pipeline reads it run by run up to each run's versions
(``refresh(until=...)``), so every view sees the same commits.

    python -m bench.pipelines --scale 0.1 --runs 3 [--queries 1,3,6] [--no-spark]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.tpch import gen
from bench.tpch.oracle import Duck, compare
from bench.tpch.queries import QUERIES

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "pipelines.jsonl")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.pipelines", description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", type=float, default=0.1, help="TPC-H scale factor (1 is about 8.7 M rows)")
    p.add_argument("--runs", type=int, default=3, help="refresh runs after the full build")
    p.add_argument("--queries", type=lambda s: [int(x) for x in s.split(",") if x], default=sorted(QUERIES))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--work", default=None, help="directory for the tables and states (default: a temporary one)")
    p.add_argument("--json", default=RESULTS)
    p.add_argument("--no-spark", action="store_true", help="leave Spark out (spark_ms null)")
    p.add_argument("--report", default=None, help="only print the tables of this JSON lines file")
    return p.parse_args(argv)


def write_history(tables: dict[str, pa.Table], scale: float, runs: int, seed: int,
                  work: str) -> tuple[list[dict], list]:
    """The Delta tables, then ``runs`` refreshes (RF1 + RF2, a commit per table each); returns each run's
    Delta versions, and writes each run's tables as Parquet (``work/parquet/<run>/<table>``)."""
    from deltalake import DeltaTable, write_deltalake
    for name, t in tables.items():
        write_deltalake(f"{work}/delta/{name}", t, configuration={"delta.enableChangeDataFeed": "true"})
    versions = [{name: {"version": 0} for name in tables}]
    current = {name: tables[name] for name in ("orders", "lineitem")}
    stream = gen.refreshes(tables, scale, seed)
    refreshes = []
    _parquet(work, 0, tables)
    for run in range(1, runs + 1):
        pair = [next(stream), next(stream)]
        refreshes.append(pair)
        for r in pair:
            for name, t in r.tables().items():
                if r.diff > 0:
                    write_deltalake(f"{work}/delta/{name}", t, mode="append")
                    current[name] = pa.concat_tables([current[name], t])
                else:
                    key = "o_orderkey" if name == "orders" else "l_orderkey"
                    keys = sorted(set(t.column(key).to_pylist()))
                    DeltaTable(f"{work}/delta/{name}").delete(f"{key} IN ({', '.join(map(str, keys))})")
                    current[name] = current[name].filter(pc.invert(pc.is_in(current[name].column(key),
                                                                            pa.array(keys, pa.int64()))))
        versions.append({name: {"version": DeltaTable(f"{work}/delta/{name}").version()} for name in tables})
        _parquet(work, run, {**tables, **current})
    return versions, refreshes


def _parquet(work: str, run: int, tables: dict[str, pa.Table]) -> None:
    for name, t in tables.items():
        path = f"{work}/parquet/{run}/{name}"
        prev = f"{work}/parquet/{run - 1}/{name}"
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if run and name not in ("orders", "lineitem"):
            os.symlink(prev, path)  # unchanged tables: the same files
        else:
            os.makedirs(path)
            pq.write_table(t, f"{path}/part-0.parquet")


def tables_of(sql: str) -> list[str]:
    from ddflow.pipelines.pipeline import _tables_of
    used = _tables_of(sql)
    return [t for t in gen.TABLES if t in used]


def bench_view(n: int, work: str, versions: list[dict], refreshes: list, tables: dict, spark, args) -> list[dict]:
    from deltalake import DeltaTable

    from ddflow.pipelines import Pipeline, delta, delta_table
    sql = QUERIES[n]
    p = Pipeline(f"{work}/state/q{n}", name=f"tpch-q{n}")
    used = tables_of(sql)
    for t in used:
        p.table(t, delta(f"{work}/delta/{t}"))
    p.view(f"q{n}", sql)
    p.sink(f"q{n}", delta_table(f"{work}/out/q{n}"))
    duck = Duck(tables, {n: sql})
    lines = []
    try:
        for run, until in enumerate(versions):
            if run:
                for r in refreshes[run - 1]:
                    duck.apply(r)
            t0 = time.perf_counter()
            report = p.refresh(until={t: until[t] for t in used})
            ddflow_ms = (time.perf_counter() - t0) * 1000
            got = Counter(tuple(r.values()) for r in DeltaTable(f"{work}/out/q{n}").to_pyarrow_table().to_pylist())
            t0 = time.perf_counter()
            duck.answer(n)
            duckdb_ms = (time.perf_counter() - t0) * 1000
            spark_ms = None if spark is None else spark_query(spark, work, run, used, sql)
            why = compare(got, duck, n)
            line = {"view": f"q{n}", "run": run, "kind": "build" if run == 0 else "refresh", "scale": args.scale,
                    "correct": why is None, "ddflow_ms": round(ddflow_ms, 1),
                    "spark_ms": None if spark_ms is None else round(spark_ms, 1), "duckdb_ms": round(duckdb_ms, 1),
                    "vs_spark": None if spark_ms is None else round(spark_ms / ddflow_ms, 2),
                    "vs_duckdb": round(duckdb_ms / ddflow_ms, 3),
                    "changes_in": report.views[f"q{n}"].changes_in, "changes_out": report.views[f"q{n}"].changes_out,
                    "rows": report.views[f"q{n}"].rows,
                    "steps": {k: round(v * 1000, 1) for k, v in report.steps.items()},
                    "memory_bytes": report.memory_bytes, "state_bytes": report.state_bytes}
            if why is not None:
                line["mismatch"] = why[:500]
            print(json.dumps(line), flush=True)
            lines.append(line)
    except Exception as e:  # noqa: BLE001 - a query ddflow refuses or fails: reported, the others go on
        line = {"view": f"q{n}", "run": len(lines), "scale": args.scale, "correct": False, "error":
                f"{type(e).__name__}: {str(e)[:300]}", "ddflow_ms": None, "spark_ms": None, "duckdb_ms": None,
                "vs_spark": None}
        print(json.dumps(line), flush=True)
        lines.append(line)
    finally:
        p.close()
        duck.con.close()
    return lines


def spark_query(spark, work: str, run: int, used: list[str], sql: str) -> float:
    """Spark SQL recomputing the query from the run's Parquet tables (read, plan, run, collect), in ms."""
    t0 = time.perf_counter()
    for t in used:
        spark.read.parquet(f"{work}/parquet/{run}/{t}").createOrReplaceTempView(t)
    stmts = [s for s in sql.split(";") if s.strip()]
    for s in stmts[:-1]:  # Q15's view: a temporary one (a permanent view cannot read temporary ones)
        spark.sql(re.sub(r"^\s*create\s+view", "create or replace temp view", s, flags=re.I))
    spark.sql(stmts[-1]).collect()
    return (time.perf_counter() - t0) * 1000


def table(lines: list[dict]) -> str:
    """Markdown tables: the build (run 0) and the median refresh per view."""
    by: dict[str, list[dict]] = {}
    for x in lines:
        by.setdefault(x["view"], []).append(x)
    out = ["| view | correct | build ddflow ms | build Spark ms | build DuckDB ms | refresh ddflow ms | Spark ms | "
           "DuckDB ms | vs Spark | vs DuckDB | ddflow read / run / sinks / state ms |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]

    def med(xs, k):
        vals = [x[k] for x in xs if x.get(k) is not None]
        return statistics.median(vals) if vals else None

    def f(v, digits=0):
        return "-" if v is None else (f"{v:,.{digits}f}")

    for view in sorted(by, key=lambda v: int(v[1:])):
        xs = by[view]
        build = next((x for x in xs if x.get("run") == 0 and x.get("ddflow_ms") is not None), {})
        ref = [x for x in xs if x.get("run", 0) > 0 and x.get("ddflow_ms") is not None]
        if any("error" in x for x in xs):
            out.append(f"| {view} | error: {next(x['error'] for x in xs if 'error' in x)[:80]} |" + " |" * 10)
            continue
        steps = " / ".join(f(statistics.median([x["steps"][k] for x in ref]) if ref else None)
                           for k in ("read", "run", "sinks", "state"))
        out.append(f"| {view} | {all(x['correct'] for x in xs)} | {f(build.get('ddflow_ms'))} | "
                   f"{f(build.get('spark_ms'))} | {f(build.get('duckdb_ms'), 1)} | {f(med(ref, 'ddflow_ms'))} | "
                   f"{f(med(ref, 'spark_ms'))} | {f(med(ref, 'duckdb_ms'), 1)} | {f(med(ref, 'vs_spark'), 2)} | "
                   f"{f(med(ref, 'vs_duckdb'), 3)} | {steps} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.report:
        with open(args.report) as fh:
            print(table([json.loads(x) for x in fh if x.strip()]))
        return 0
    work = args.work or tempfile.mkdtemp(prefix="ddflow-bench-pipelines-")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    t0 = time.perf_counter()
    tables = gen.generate(args.scale, seed=args.seed)
    versions, refreshes = write_history(tables, args.scale, args.runs, args.seed, work)
    print(f"tables and history written in {time.perf_counter() - t0:.1f} s under {work}", file=sys.stderr)
    spark = None
    if not args.no_spark:
        from ddflow.streaming.spark import local_session
        spark = local_session("ddflow-bench-pipelines", "local[2]")
    lines = []
    try:
        for n in args.queries:
            got = bench_view(n, work, versions, refreshes, tables, spark, args)
            lines += got
            if args.json:
                os.makedirs(os.path.dirname(args.json), exist_ok=True)
                with open(args.json, "a") as fh:
                    fh.writelines(json.dumps(x) + "\n" for x in got)
    finally:
        if spark is not None:
            spark.stop()
    print(table(lines))
    return 0 if all(x["correct"] for x in lines) else 1


if __name__ == "__main__":
    sys.exit(main())
