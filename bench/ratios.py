"""ddflow against each benchmark's from-scratch baseline: alternated runs, medians, ratios.

The machine's absolute speed changes between days and within one, so
speed is reported as a ratio against the baseline run in the same session:
for every benchmark and batch size, ddflow and ``--system naive`` run
alternately (each in a fresh interpreter, as a user runs them) ``--runs``
times on the same workload, and the table gives the median updates/s of
each and their ratio.

    python -m bench.ratios --runs 3
    python -m bench.ratios --runs 5 --only reach --batches 1000 --json bench/results/ratios.jsonl

The last line printed is one JSON object (also appended to ``--json``).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

#: Updates per run at each batch size: enough batches for a stable median, short enough to repeat.
SIZES = {
    "reach": {1: 300, 100: 3000, 1000: 6000},
    "sssp": {1: 300, 100: 3000, 1000: 6000},
    "components": {1: 300, 100: 3000, 1000: 6000},
    "topk": {1: 1000, 100: 6000, 1000: 6000},
}


def one(bench: str, system: str, batch: int, updates: int, extra: list[str]) -> dict:
    cmd = [sys.executable, "-m", f"bench.{bench}", "--system", system, "--batch", str(batch),
           "--updates", str(updates), "--checkpoints", str(updates), *extra]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.ratios", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--only", default="reach,sssp,components,topk", help="benchmarks, comma separated")
    p.add_argument("--batches", default="1,1000", help="batch sizes K, comma separated")
    p.add_argument("--updates", type=int, default=None, help="updates per run (default: SIZES)")
    p.add_argument("--json", default=None, help="append the result line to this file")
    args = p.parse_args(argv)
    rows = []
    print("| bench | K | updates | ddflow upd/s | naive upd/s | ddflow / naive | ddflow p50 ms | trace updates |")
    print("|---|---|---|---|---|---|---|---|")
    for bench in args.only.split(","):
        for batch in (int(b) for b in args.batches.split(",")):
            updates = args.updates or SIZES[bench].get(batch, 3000)
            runs: dict[str, list[dict]] = {"ddflow": [], "naive": []}
            for _ in range(args.runs):
                for system in ("ddflow", "naive"):
                    runs[system].append(one(bench, system, batch, updates, []))
            if not all(r["correct"] for rs in runs.values() for r in rs):
                raise SystemExit(f"{bench} K={batch}: a run failed its correctness check")
            med = {s: statistics.median(r["updates_per_s"] for r in rs) for s, rs in runs.items()}
            p50 = statistics.median(r["checkpoints"][-1]["p50_ms"] for r in runs["ddflow"])
            trace = statistics.median(r["checkpoints"][-1]["trace_updates"] for r in runs["ddflow"])
            row = {"bench": bench, "batch": batch, "updates": updates, "runs": args.runs,
                   "ddflow_updates_per_s": med["ddflow"], "naive_updates_per_s": med["naive"],
                   "ratio": med["ddflow"] / med["naive"], "ddflow_p50_ms": p50, "trace_updates": trace,
                   "ddflow_all": [r["updates_per_s"] for r in runs["ddflow"]],
                   "naive_all": [r["updates_per_s"] for r in runs["naive"]]}
            rows.append(row)
            print(f"| {bench} | {batch} | {updates} | {med['ddflow']:.0f} | {med['naive']:.0f} | "
                  f"{row['ratio']:.2f} | {p50:.1f} | {trace:.0f} |", flush=True)
    line = json.dumps({"ratios": rows})
    if args.json:
        with open(args.json, "a") as f:
            f.write(line + "\n")
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
