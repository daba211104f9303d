"""Per-refresh time of a GROUP BY view as its table grows: diff-weighted sums against the former per-key reduce.

``python -m bench.aggregates [--sizes 10000,100000,1000000] [--refreshes 7] [--batch 100] [--type double]``

The view is ``SELECT g, COUNT(*), SUM(x), AVG(x) FROM t GROUP BY g`` over
4 groups, ``x`` a bigint (``--type double``: a double with two decimals,
summed exactly either way).  Each table size gets two dataflows, one lowered the former way
(:data:`ddflow.plan.aggregate.GENERIC`: one reduce whose Python function
re-reads each changed group's rows) and one the new way (an accumulate of
weights: O(1) state per group); both load the table, then take the same
refreshes (``--batch`` inserts and as many deletes of loaded rows, spread
over 4 data times, one advance), alternated old/new (x has distinct
values, so the former reduce's state per group is its rows).  Reported: median
wall time per refresh, and DuckDB recomputing the query from scratch over
the same table in the same run (median of as many queries).  The last line
is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import duckdb
import numpy as np
import pyarrow as pa

from bench.views import RefreshedView
from ddflow.plan import aggregate

QUERY = "SELECT g, COUNT(*) AS n, SUM(x) AS s, AVG(x) AS a FROM t GROUP BY g"


#: Column order of the table.  A SQL table checks each retraction against its accumulated rows, seeking
#: them by the first column: with ``g`` (4 values) first that seek reads the whole table every refresh,
#: whatever the view does, so by default ``x`` (distinct values) comes first (``--first g`` shows it).
FIRST = "x"
#: The SQL type of ``x``: bigint, or double.
TYPE = "bigint"


def _values(rng: np.random.Generator, n: int) -> np.ndarray:
    """Distinct values of x (the former reduce's state per group is then its rows)."""
    x = rng.integers(-10**9, 10**9, n)
    return x if TYPE == "bigint" else x / 100.0


def _table(g: np.ndarray, x: np.ndarray) -> pa.Table:
    cols = {"g": pa.array(g, pa.int64()), "x": pa.array(x, pa.int64() if TYPE == "bigint" else pa.float64())}
    return pa.table({c: cols[c] for c in ((FIRST, "g" if FIRST == "x" else "x"))})


def run(size: int, refreshes: int, batch: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    g = rng.integers(0, 4, size)
    x = _values(rng, size)
    schema = {c: "bigint" if c == "g" else TYPE for c in _table(g[:0], x[:0]).column_names}
    views = {name: RefreshedView(QUERY, schema, _table(g, x), (aggregate, "GENERIC", name == "old"))
             for name in ("old", "new")}
    con = duckdb.connect()
    con.register("src", _table(g, x))
    con.execute("CREATE TABLE t AS SELECT * FROM src")
    times: dict[str, list[float]] = {"old": [], "new": [], "duckdb": []}
    removed = 0
    for r in range(refreshes):
        ins = (rng.integers(0, 4, batch), _values(rng, batch))
        dels = (g[removed:removed + batch], x[removed:removed + batch])
        removed += batch
        for name in (("old", "new") if r % 2 == 0 else ("new", "old")):
            times[name].append(views[name].refresh(_table(*ins), _table(*dels)))
        con.register("ins", _table(*ins))
        con.execute("INSERT INTO t SELECT * FROM ins")
        start = time.perf_counter()
        con.execute(QUERY).fetchall()
        times["duckdb"].append(time.perf_counter() - start)
    assert views["old"].contents() == views["new"].contents(), "the two lowerings disagree"
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    return {"rows": size, "batch": batch, "refreshes": refreshes,
            "load_ms": {k: round(v.load_s * 1e3, 1) for k, v in views.items()},
            "refresh_ms": {k: round(v, 3) for k, v in med.items()},
            "speedup_new_vs_old": round(med["old"] / med["new"], 1),
            "new_vs_duckdb": round(med["new"] / med["duckdb"], 2),
            "old_vs_duckdb": round(med["old"] / med["duckdb"], 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--refreshes", type=int, default=7)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--first", choices=("x", "g"), default="x", help="the table's first column (see FIRST)")
    ap.add_argument("--type", choices=("bigint", "double"), default="bigint", help="the SQL type of x")
    args = ap.parse_args()
    global FIRST, TYPE
    FIRST, TYPE = args.first, args.type
    rows = []
    print(f"{'rows':>9} {'old ms':>10} {'new ms':>9} {'duckdb ms':>10} {'old/new':>8} {'new/duckdb':>11}")
    for size in (int(s) for s in args.sizes.split(",")):
        res = run(size, args.refreshes, args.batch)
        rows.append(res)
        m = res["refresh_ms"]
        print(f"{size:>9} {m['old']:>10.2f} {m['new']:>9.2f} {m['duckdb']:>10.2f} {res['speedup_new_vs_old']:>8} "
              f"{res['new_vs_duckdb']:>11}", flush=True)
    print(json.dumps({"bench": "aggregates", "query": QUERY, "type": TYPE, "first_column": FIRST, "results": rows}))


if __name__ == "__main__":
    main()
