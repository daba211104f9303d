"""TPC-H views under refreshes: ddflow's initial load and per-refresh time against DuckDB rerunning the query.

For each query and worker count W: the tables at ``--sf`` are loaded at
time 0 (ddflow: ingest and the first answer; DuckDB: ingest and one run of
the query).  Then RF1/RF2 refreshes (``gen.refreshes``), each at its own
data time, K per frontier advance for each K in ``--k``: ddflow applies K
refreshes and runs once to the frontier (every refresh's output change is
still at its own time), then DuckDB applies the same K refreshes one by one,
rerunning the query after each (the same per-refresh resolution, from
scratch; ``duckdb_ms`` is its apply and query, ``duckdb_query_ms`` the query), alternately, ``--repeat`` rounds of ``ceil(--refreshes / K)``
batches.  Times are per refresh (a batch's time / K), medians over batches.
At every refresh's time ddflow's view is compared with DuckDB's answer
(``oracle.compare``); a mismatch stops the run with the query, time and
rows.  A query ddflow refuses is reported as refused, with the error.

    python -m bench.tpch --sf 0.01 --k 1,10,100 --workers 1,2 --refreshes 20 --repeat 3 --queries 1,3,6

Each result is one JSON line (appended to ``--json``); ``--plot`` draws
per-refresh times against K.  DuckDB runs with as many threads as ddflow
has workers.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections import Counter, deque

from bench.tpch import gen
from bench.tpch.oracle import Duck, Views, compare
from bench.tpch.queries import QUERIES


class Mismatch(Exception):
    pass


def _ints(s: str) -> list[int]:
    return [int(x) for x in s.split(",") if x]


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.tpch", description=__doc__.split("\n\n")[0])
    p.add_argument("--sf", type=float, default=0.01)
    p.add_argument("--k", type=_ints, default=[1, 10, 100], help="refreshes per frontier advance, comma separated")
    p.add_argument("--workers", type=_ints, default=[1], help="ddflow workers W, comma separated")
    p.add_argument("--refreshes", type=int, default=20, help="refreshes per round at each K (at least K)")
    p.add_argument("--repeat", type=int, default=3, help="rounds at each K")
    p.add_argument("--queries", type=_ints, default=sorted(QUERIES))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--money", choices=("decimal", "double"), default="decimal",
                   help="type of the money columns in ddflow (double: where decimals are unsupported)")
    p.add_argument("--json", default=None, help="append the result lines to this file")
    p.add_argument("--plot", default=None, help="draw per-refresh times against K to this PNG")
    p.add_argument("--report", default=None, help="only print the table (and --plot) of this JSON lines file")
    return p.parse_args(argv)


class Checked:
    """ddflow's view of one query, accumulated from its output changes, compared with DuckDB at every time."""

    def __init__(self, views: Views, n: int, duck: Duck):
        self.views, self.n, self.duck = views, n, duck
        self.cap = views.caps[n]
        self.state: Counter = Counter()
        self.pending: deque = deque()

    def drain(self) -> None:
        self.pending.extend(sorted(self.cap.drain(), key=lambda u: u[1]))

    def check(self, t: int) -> None:
        """Apply the drained changes up to ``t`` and compare with DuckDB's current answer."""
        while self.pending and self.pending[0][1] <= t:
            row, _, d = self.pending.popleft()
            self.state[row] += d
            if not self.state[row]:
                del self.state[row]
        why = compare(self.state, self.duck, self.n)
        if why:
            raise Mismatch(f"Q{self.n}: ddflow differs from DuckDB at time {t}: {why}")


def run_query(args: argparse.Namespace, n: int, workers: int, tables: dict) -> list[dict]:
    """One query at one W: the load line and one line per K."""
    base = {"bench": "tpch", "query": n, "sf": args.sf, "workers": workers, "seed": args.seed, "money": args.money}
    money = gen.MONEY if args.money == "decimal" else "double"
    t0 = time.perf_counter()
    views = Views({n: QUERIES[n]}, workers=workers, money=money)
    build_s = time.perf_counter() - t0
    if n in views.errors:
        views.close()
        return [{**base, "refused": views.errors[n]}]
    out = []
    try:
        t0 = time.perf_counter()
        views.load(tables, 0)
        views.advance(1)
        load_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        duck = Duck(tables, {n: QUERIES[n]})
        duck.con.execute(f"SET threads TO {workers}")
        ingest_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        duck.answer(n)
        first_s = time.perf_counter() - t0
        checked = Checked(views, n, duck)
        checked.drain()
        checked.check(0)
        out.append({**base, "phase": "load", "ddflow_build_s": build_s, "ddflow_load_s": load_s,
                    "duckdb_ingest_s": ingest_s, "duckdb_query_s": first_s, "duckdb_load_s": ingest_s + first_s,
                    "rows": len(checked.state), "trace_updates": views.flow.trace_size()})
        stream = gen.refreshes(tables, args.sf, args.seed)
        t = 1
        for k in args.k:
            dd, du, dq = [], [], []
            for _ in range(args.repeat):
                for _ in range(max(1, math.ceil(args.refreshes / k))):
                    batch = [next(stream) for _ in range(k)]
                    t0 = time.perf_counter()
                    for i, r in enumerate(batch):
                        views.apply(r, t + i)
                    views.advance(t + k)
                    dd.append((time.perf_counter() - t0) / k)
                    checked.drain()
                    spent = querying = 0.0
                    for i, r in enumerate(batch):
                        t0 = time.perf_counter()
                        duck.apply(r)
                        t1 = time.perf_counter()
                        duck.answer(n)
                        t2 = time.perf_counter()
                        spent += t2 - t0
                        querying += t2 - t1
                        checked.check(t + i)
                    du.append(spent / k)
                    dq.append(querying / k)
                    t += k
            out.append({**base, "phase": "refresh", "k": k, "refreshes": len(dd) * k,
                        "ddflow_ms": 1e3 * statistics.median(dd), "duckdb_ms": 1e3 * statistics.median(du),
                        "duckdb_query_ms": 1e3 * statistics.median(dq),
                        "ddflow_ms_all": [round(1e3 * x, 4) for x in dd], "duckdb_ms_all": [round(1e3 * x, 4) for x in du],
                        "speedup": statistics.median(du) / statistics.median(dd), "rows": len(checked.state),
                        "trace_updates": views.flow.trace_size(), "correct": True})
    except Mismatch:
        raise
    except StopIteration:
        out.append({**base, "failed": "the refresh stream ran out of initial orders to delete: fewer --refreshes"})
    except Exception as e:  # the engine failed while running this query: report it, go on with the others
        out.append({**base, "failed": f"{type(e).__name__}: {e}"})
    finally:
        views.close()
    return out


def plot(lines: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ws = sorted({r["workers"] for r in lines})
    fig, axes = plt.subplots(1, len(ws), figsize=(6 * len(ws), 4.5), squeeze=False)
    for ax, w in zip(axes[0], ws):
        rows = [r for r in lines if r["workers"] == w and r.get("phase") == "refresh"]
        for i, q in enumerate(sorted({r["query"] for r in rows})):
            rs = sorted((r for r in rows if r["query"] == q), key=lambda r: r["k"])
            color = f"C{i % 10}"
            ax.plot([r["k"] for r in rs], [r["ddflow_ms"] for r in rs], "o-", color=color, label=f"Q{q} ddflow")
            ax.plot([r["k"] for r in rs], [r["duckdb_ms"] for r in rs], "x--", color=color, label=f"Q{q} DuckDB")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("refreshes per frontier advance (K)")
        ax.set_ylabel("ms per refresh (median)")
        sf = rows[0]["sf"] if rows else "?"
        ax.set_title(f"TPC-H SF {sf}, W={w}: ddflow (solid) vs DuckDB rerun (dashed)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def table(lines: list[dict]) -> str:
    """A markdown table: load times, then per refresh at each K ddflow's ms and DuckDB's (apply + query / query)."""
    ks = sorted({r["k"] for r in lines if "k" in r})
    out = ["| Q | W | ddflow load s | DuckDB load s | " + " | ".join(
        f"K={k}: ddflow ms | DuckDB ms (query)" for k in ks) + " |", "|---" * (4 + 2 * len(ks)) + "|"]
    for (q, w) in sorted({(r["query"], r["workers"]) for r in lines}):
        rs = [r for r in lines if r["query"] == q and r["workers"] == w]
        bad = next((r.get("refused") or r.get("failed") for r in rs if "refused" in r or "failed" in r), None)
        load = next((r for r in rs if r.get("phase") == "load"), None)
        cells = [f"Q{q}", str(w), f"{load['ddflow_load_s']:.2f}" if load else "-",
                 f"{load['duckdb_load_s']:.3f}" if load else "-"]
        for k in ks:
            r = next((r for r in rs if r.get("k") == k), None)
            cells += [f"{r['ddflow_ms']:.1f}", f"{r['duckdb_ms']:.1f} ({r['duckdb_query_ms']:.1f})"] if r else ["-", "-"]
        if bad:
            cells[-1] += f" ({'refused' if any('refused' in r for r in rs) else 'failed'}: {bad[:80]})"
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.report:
        with open(args.report) as f:
            lines = [json.loads(x) for x in f if x.strip()]
        print(table(lines))
        if args.plot:
            plot(lines, args.plot)
        return 0
    tables = gen.generate(args.sf, args.seed)
    lines: list[dict] = []
    for w in args.workers:
        for n in args.queries:
            try:
                rs = run_query(args, n, w, tables)
            except Mismatch as e:
                print(f"MISMATCH (W={w}): {e}", file=sys.stderr)
                return 1
            for r in rs:
                print(json.dumps({k: v for k, v in r.items() if not k.endswith("_all")}), flush=True)
                if args.json:
                    with open(args.json, "a") as f:
                        f.write(json.dumps(r) + "\n")
            lines += rs
    print(table(lines))
    if args.plot:
        plot(lines, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
