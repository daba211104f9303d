"""Plots and a results table from ``bench.reach`` JSON lines.

    python -m bench.report results.jsonl --out bench/plots

Writes latency CDFs per checkpoint (if latency does not drift the curves
lie on top of each other), throughput against batch size per worker
count and system, trace size and RSS against updates processed, the
per-round coordination cost against the worker count (multi-worker runs),
plus ``table.md`` with one row per run.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np


def load(path: str) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def table(runs: list[dict]) -> str:
    head = ("| system | batch | workers | updates | updates/s | p50 ms | p99 ms | max ms | trace updates | RSS MiB | correct |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|\n")
    rows = []
    for r in runs:
        cp = r["checkpoints"][-1] if r["checkpoints"] else {}
        rows.append(f"| {r['system']} | {r['batch']} | {r['workers']} | {r['updates']} | {r['updates_per_s']:.0f} | "
                    f"{cp.get('p50_ms', float('nan')):.2f} | {cp.get('p99_ms', float('nan')):.2f} | "
                    f"{cp.get('max_ms', float('nan')):.2f} | {cp.get('trace_updates', 0)} | "
                    f"{cp.get('rss_bytes', 0) / 2**20:.0f} | {r['correct']} |")
    return head + "\n".join(rows) + "\n"


def coordination_table(runs: list[dict]) -> str:
    """Per multi-worker run: loop rounds, and per round the coordination, waiting and busy time per worker."""
    head = ("| workers | batch | rounds | coordination p50 ms | p90 ms | mean ms | wait/round ms | busy/round ms "
            "| messages/round | CPU/round ms |\n|---|---|---|---|---|---|---|---|---|---|\n")
    rows = []
    for r in sorted(runs, key=lambda r: (r["batch"], r["workers"])):
        c = r.get("coordination") or {}
        if not c:
            continue
        rows.append(f"| {r['workers']} | {r['batch']} | {c['rounds']} | {c['coord_p50_ms']:.2f} | {c['coord_p90_ms']:.2f} | "
                    f"{c['coord_mean_ms']:.2f} | {c['wait_per_round_ms']:.2f} | {c['busy_per_round_ms']:.2f} | "
                    f"{c['messages_per_round']:.1f} | {c.get('cpu_per_round_ms', float('nan')):.2f} |")
    return head + "\n".join(rows) + "\n" if rows else ""


def plot(runs: list[dict], out: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(out, exist_ok=True)
    written = []
    # Latency at each checkpoint (a log-normal-ish CDF from the recorded percentiles).
    for r in runs:
        if len(r["checkpoints"]) < 2:
            continue
        fig, ax = plt.subplots(figsize=(6, 4))
        for cp in r["checkpoints"]:
            xs = cp["quantiles_ms"]
            ax.plot(xs, np.linspace(0, 1, len(xs)), label=f"after {cp['updates']:,} updates")
        ax.set_xscale("log")
        ax.set_xlabel(f"latency per {'update' if r['batch'] == 1 else 'batch of %d' % r['batch']} (ms)")
        ax.set_ylabel("fraction of the last 1,000")
        ax.set_title(f"{r['system']} reachability, batch {r['batch']}: latency over the last 1,000")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        name = os.path.join(out, f"latency_{r['system']}_b{r['batch']}_w{r['workers']}.png")
        fig.savefig(name, dpi=100)
        plt.close(fig)
        written.append(name)
    # Throughput against batch size.
    fig, ax = plt.subplots(figsize=(6, 4))
    groups: dict[tuple, list] = {}
    for r in runs:
        groups.setdefault((r["system"], r["workers"]), []).append((r["batch"], r["updates_per_s"]))
    for (system, workers), pts in sorted(groups.items()):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{system}, {workers} worker(s)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("updates per frontier advance (each at its own data time)")
    ax.set_ylabel("updates/s")
    ax.set_title("reachability throughput, full resolution")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    name = os.path.join(out, "throughput.png")
    fig.savefig(name, dpi=100)
    plt.close(fig)
    written.append(name)
    # State against updates processed.
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    for r in runs:
        if r["system"] != "ddflow" or len(r["checkpoints"]) < 2:
            continue
        u = [cp["updates"] for cp in r["checkpoints"]]
        lab = f"batch {r['batch']}" + (f", {r['workers']} workers" if r.get("workers", 1) > 1 else "")
        a1.plot(u, [cp["trace_updates"] for cp in r["checkpoints"]], marker="o", label=lab)
        a2.plot(u, [cp["rss_bytes"] / 2**20 for cp in r["checkpoints"]], marker="o", label=lab)
    for a, lab in ((a1, "updates held in traces"), (a2, "RSS (MiB)")):
        a.set_xscale("log")
        a.set_xlabel("updates processed")
        a.set_ylabel(lab)
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    fig.tight_layout()
    name = os.path.join(out, "state.png")
    fig.savefig(name, dpi=100)
    plt.close(fig)
    written.append(name)
    # Coordination per loop round against the worker count: time (inflated on 2 cores past W=2 by
    # time-sharing) and messages each worker sends, which do not depend on the machine.
    coord: dict[int, list] = {}
    for r in runs:
        c = r.get("coordination") or {}
        if c:
            collectives = (c["messages_per_round"] - c.get("data_messages_per_round", np.nan)) / r["workers"]
            coord.setdefault(r["batch"], []).append((r["workers"], c["coord_p50_ms"], c["coord_mean_ms"], collectives))
    if coord:
        fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4))
        for batch, pts in sorted(coord.items()):
            pts.sort()
            ws = [p[0] for p in pts]
            ax.plot(ws, [p[1] for p in pts], marker="o", label=f"batch {batch}: median")
            ax.plot(ws, [p[2] for p in pts], marker="x", linestyle=":", label=f"batch {batch}: mean")
            base = pts[0][1] / max(np.log2(pts[0][0]), 1)
            ax.plot(ws, [base * max(np.log2(w), 1) for w in ws], color="grey", linestyle="--", linewidth=0.8)
            if np.isnan(pts[0][3]):
                continue  # a run from before data messages were counted apart
            bx.plot(ws, [p[3] for p in pts], marker="o", label=f"batch {batch}")
            m2 = pts[0][3] / max(np.log2(pts[0][0]), 1)  # scaled to the smallest W
            bx.plot(ws, [m2 * np.log2(w) for w in ws], color="grey", linestyle="--", linewidth=0.8)
            bx.plot(ws, [m2 * (w - 1) for w in ws], color="grey", linestyle=":", linewidth=0.8)
        for a in (ax, bx):
            a.set_xscale("log", base=2)
            a.set_xlabel("workers (2 cores: 4 and 8 are oversubscribed)")
            a.legend(fontsize=8)
            a.grid(alpha=0.3, which="both")
        ax.set_ylabel("ms from a worker's last work to the round's end")
        ax.set_title("coordination per loop round (grey: log2 W)")
        bx.set_ylabel("collective messages sent per worker per round")
        bx.set_title("coordination messages (grey: log2 W dashed, W - 1 dotted)")
        fig.tight_layout()
        name = os.path.join(out, "coordination.png")
        fig.savefig(name, dpi=100)
        plt.close(fig)
        written.append(name)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.report")
    ap.add_argument("results", help="JSON lines written by python -m bench.reach --json")
    ap.add_argument("--out", default="bench/plots")
    args = ap.parse_args(argv)
    runs = load(args.results)
    if not runs:
        print(f"no runs in {args.results}", file=sys.stderr)
        return 1
    files = plot(runs, args.out)
    md = table(runs) + ("\n" + coordination_table(runs) if coordination_table(runs) else "")
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(md)
    print(md)
    for f in files:
        print("wrote", f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
