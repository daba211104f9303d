"""``python -m ddflow.top URL-or-STATE_DIR``: a running query's operators, state, rates, lag and latency, live.

Like ``htop`` for a dataflow.  Two sources:

* a metrics endpoint (``http://127.0.0.1:PORT/metrics``, from
  ``Dataflow.serve_metrics`` or ``StreamingDataflow.serveMetrics``):
  operators with their state and rates, inputs, outputs with retractions
  and freshness percentiles, step latency, workers, dead letters and
  source lag; rates come from two scrapes;
* a streaming query's state directory: its last progress records
  (``.progress.jsonl``), which a query keeps whether or not it serves
  metrics, and which outlive it.

It refreshes every ``--interval`` seconds until Ctrl-C; ``--once`` prints
one frame and exits (scripts, CI logs).  Exit status: 0, or 2 with the
reason when the source cannot be read.  Rendering uses ``rich``.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import urllib.error
import urllib.request
from collections import defaultdict
from typing import Any

from ddflow.base.metrics import quantile_of

#: Rows of the operators' table (the busiest first); the rest are counted in its title.
TOP_OPERATORS = 25


# -- reading -----------------------------------------------------------------------------


def scrape(url: str, timeout: float = 10.0) -> dict[str, list[tuple[dict[str, str], float]]]:
    """The samples of a Prometheus text endpoint, by sample name (``_bucket`` etc. kept): ``{name: [(labels, value)]}``.

    Raises :class:`OSError` (or ``ValueError`` for a body that does not parse) naming the URL.
    """
    from prometheus_client.parser import text_string_to_metric_families

    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            body = r.read().decode("utf-8")
    except (urllib.error.URLError, OSError) as e:
        raise OSError(f"cannot read {url}: {getattr(e, 'reason', e)}") from e
    out: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    try:
        for fam in text_string_to_metric_families(body):
            for s in fam.samples:
                out[s.name].append((dict(s.labels), float(s.value)))
    except ValueError as e:
        raise ValueError(f"{url} is not a Prometheus endpoint: {e}") from e
    return dict(out)


def _by(samples: dict, name: str, key: str) -> dict[str, float]:
    """Values of sample ``name`` by the label ``key`` (summed over the other labels)."""
    out: dict[str, float] = defaultdict(float)
    for labels, v in samples.get(name, []):
        out[labels.get(key, "")] += v
    return dict(out)


def _histogram(samples: dict, name: str, key: str | None) -> dict[str, dict]:
    """Per ``key`` label value (or ``""``): count, sum, p50 and p99 of histogram ``name``."""
    buckets: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for labels, v in samples.get(name + "_bucket", []):
        le = labels.get("le", "+Inf")
        buckets[labels.get(key, "") if key else ""].append((math.inf if le in ("+Inf", "Inf") else float(le), v))
    counts = _by(samples, name + "_count", key) if key else {"": sum(v for _, v in samples.get(name + "_count", []))}
    out = {}
    for k, cum in buckets.items():
        cum.sort()
        out[k] = {"count": counts.get(k, 0.0), "p50": quantile_of(cum, 0.5), "p99": quantile_of(cum, 0.99)}
    return out


def frame_from_metrics(now: dict, before: dict | None, dt: float) -> dict:
    """What one screen shows, from a scrape (and the one ``dt`` seconds before it, for rates)."""
    def rate(name: str, key: str) -> dict[str, float | None]:
        cur = _by(now, name, key)
        if before is None or dt <= 0:
            return {k: None for k in cur}
        old = _by(before, name, key)
        return {k: max(v - old.get(k, 0.0), 0.0) / dt for k, v in cur.items()}

    kinds = {labels.get("operator", ""): labels.get("kind", "") for labels, _ in now.get("ddflow_operator_records", [])}
    records = _by(now, "ddflow_operator_records", "operator")
    nbytes = _by(now, "ddflow_operator_bytes", "operator")
    rin, rout = rate("ddflow_operator_updates_in_total", "operator"), rate("ddflow_operator_updates_out_total", "operator")
    busy = rate("ddflow_operator_busy_seconds_total", "operator")
    busy_total = _by(now, "ddflow_operator_busy_seconds_total", "operator")
    operators = [{"operator": op, "kind": kinds.get(op, ""), "records": records.get(op, 0.0),
                  "bytes": nbytes.get(op, 0.0), "in_s": rin.get(op), "out_s": rout.get(op),
                  "busy": busy.get(op), "busy_total": busy_total.get(op, 0.0)} for op in records]
    operators.sort(key=lambda r: (-(r["busy"] if r["busy"] is not None else r["busy_total"]), -r["records"]))
    inputs = {k: {"updates": v, "rate": rate("ddflow_input_updates_total", "input").get(k),
                  "rejected": _by(now, "ddflow_input_rejected_total", "input").get(k, 0.0)}
              for k, v in _by(now, "ddflow_input_updates_total", "input").items()}
    fresh = _histogram(now, "ddflow_output_freshness_seconds", "output")
    outputs = {k: {"updates": v, "rate": rate("ddflow_output_updates_total", "output").get(k),
                   "retractions": _by(now, "ddflow_output_retractions_total", "output").get(k, 0.0),
                   "freshness": fresh.get(k)}
               for k, v in _by(now, "ddflow_output_updates_total", "output").items()}
    lag = [{"source": f"{labels.get('topic')}:{labels.get('partition')}", "offsets": v}
           for labels, v in now.get("ddflow_source_lag_offsets", [])]
    lag_s = {f"{labels.get('topic')}:{labels.get('partition')}": v
             for labels, v in now.get("ddflow_source_lag_seconds", [])}
    for row in lag:
        row["seconds"] = lag_s.get(row["source"])
    return {
        "title": ", ".join(sorted({labels.get("dataflow", "") for labels, _ in now.get("ddflow_frontier", [])})),
        "frontier": sum(v for _, v in now.get("ddflow_frontier", [])),
        "runs": sum(v for _, v in now.get("ddflow_runs_total", [])),
        "runs_s": next(iter(rate("ddflow_runs_total", "dataflow").values()), None),
        "step": _histogram(now, "ddflow_step_seconds", None).get(""),
        "batch": _histogram(now, "ddflow_batch_seconds", None).get(""),
        "batches": sum(v for _, v in now.get("ddflow_batches_total", [])),
        "operators": operators, "inputs": inputs, "outputs": outputs,
        "workers": [{"worker": labels.get("worker"), "records": v} for labels, v in now.get("ddflow_worker_records", [])],
        "dead_letters": {f"{labels.get('input')} / {labels.get('reason')}": v
                         for labels, v in now.get("ddflow_dead_letters_total", [])},
        "late_rows": _by(now, "ddflow_late_rows_total", "input"),
        "lag": lag,
    }


def frame_from_progress(records: list[dict]) -> dict:
    """What one screen shows, from a streaming query's last progress records (the newest last)."""
    p = records[-1]
    operators = [{"operator": s["operatorName"], "kind": s.get("kind", ""), "records": s["numRowsTotal"],
                  "bytes": s["memoryUsedBytes"], "in_s": None, "out_s": None, "busy": None, "busy_total": 0.0}
                 for s in p.get("stateOperators", [])]
    operators.sort(key=lambda r: -r["records"])
    durations = [r["durationMs"]["triggerExecution"] / 1000.0 for r in records]
    cum = sorted(durations)
    step = {"count": float(len(cum)), "p50": cum[len(cum) // 2], "p99": cum[min(len(cum) - 1, int(len(cum) * 0.99))]}
    return {
        "title": f"{p.get('name')} (state directory; batch {p.get('batchId')} at {p.get('timestamp')})",
        "frontier": p.get("frontier"), "runs": None, "runs_s": None, "step": None, "batch": step,
        "batches": float(p.get("batchId", 0) + 1),
        "operators": operators, "inputs": {},
        "outputs": {k: {"updates": v["numOutputRows"], "rate": None, "retractions": v["numRetractions"],
                        "freshness": None} for k, v in p.get("outputs", {}).items()},
        "workers": [], "dead_letters": {"last batch": float(p.get("numDeadLetters", 0))} if p.get("numDeadLetters")
        else {},
        "late_rows": {}, "lag": [{"source": s["description"], "offsets": s.get("offsetsBehind"),
                                  "seconds": s.get("secondsBehind")} for s in p.get("sources", [])],
        "rates": {"in": p.get("inputRowsPerSecond"), "processed": p.get("processedRowsPerSecond")},
        "durations": p.get("durationMs", {}),
    }


def read_frame(source: str, before: Any = None, dt: float = 0.0) -> tuple[dict, Any]:
    """One frame from ``source`` (URL or state directory) and what to pass as ``before`` next time."""
    if source.startswith(("http://", "https://")):
        now = scrape(source)
        return frame_from_metrics(now, before, dt), now
    if not os.path.isdir(source):
        raise OSError(f"{source} is neither a metrics URL (http://...) nor a state directory")
    from ddflow.streaming.progress import read_progress

    records = read_progress(source, last=100)
    if not records:
        raise OSError(f"{source} holds no progress records yet (.progress.jsonl): has its query run a batch?")
    return frame_from_progress(records), None


# -- drawing -------------------------------------------------------------------------------


def _n(v: float | None, unit: str = "") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:.1f}{suffix}{unit}"
    return f"{v:.0f}{unit}" if float(v).is_integer() else f"{v:.1f}{unit}"


def _ms(v: float | None) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v * 1000:.2f} ms" if v < 1 else f"{v:.2f} s"


def render(frame: dict) -> Any:
    """The frame as a rich renderable (a group of tables)."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    head = [f"[bold]{frame['title'] or 'ddflow'}[/]", f"frontier {frame['frontier']}"]
    if frame.get("runs") is not None:
        head.append(f"runs {_n(frame['runs'])}" + (f" ({frame['runs_s']:.1f}/s)" if frame.get("runs_s") else ""))
    if frame.get("step"):
        head.append(f"step p50 {_ms(frame['step']['p50'])} p99 {_ms(frame['step']['p99'])}")
    if frame.get("batch") and frame["batch"]["count"]:
        head.append(f"batches {_n(frame['batches'])}, p50 {_ms(frame['batch']['p50'])} p99 {_ms(frame['batch']['p99'])}")
    if frame.get("rates"):
        head.append(f"in {_n(frame['rates']['in'])} rows/s, processed {_n(frame['rates']['processed'])} rows/s")
    parts: list[Any] = [Text.from_markup("  |  ".join(head))]
    ops = frame["operators"]
    t = Table(title=f"operators ({len(ops)}; {min(len(ops), TOP_OPERATORS)} shown, busiest first)",
              title_justify="left", expand=True)
    for col, just in (("operator", "left"), ("kind", "left"), ("state rows", "right"), ("state bytes", "right"),
                      ("in/s", "right"), ("out/s", "right"), ("busy", "right")):
        t.add_column(col, justify=just, overflow="ellipsis", no_wrap=True)
    for r in ops[:TOP_OPERATORS]:
        busy = f"{100 * r['busy']:.1f}%" if r["busy"] is not None else (_ms(r["busy_total"]) if r["busy_total"] else "-")
        t.add_row(r["operator"], r["kind"], _n(r["records"]), _n(r["bytes"], "B"), _n(r["in_s"]), _n(r["out_s"]), busy)
    parts.append(t)
    if frame["inputs"]:
        t = Table(title="inputs", title_justify="left", expand=True)
        for col in ("input", "updates", "updates/s", "rejected"):
            t.add_column(col, justify="left" if col == "input" else "right")
        for k, v in sorted(frame["inputs"].items()):
            t.add_row(k, _n(v["updates"]), _n(v["rate"]), _n(v["rejected"]))
        parts.append(t)
    if frame["outputs"]:
        t = Table(title="outputs", title_justify="left", expand=True)
        for col in ("output", "changes", "changes/s", "retractions", "freshness p50", "freshness p99"):
            t.add_column(col, justify="left" if col == "output" else "right")
        for k, v in sorted(frame["outputs"].items()):
            f = v["freshness"] or {}
            t.add_row(k, _n(v["updates"]), _n(v["rate"]), _n(v["retractions"]), _ms(f.get("p50")), _ms(f.get("p99")))
        parts.append(t)
    if frame["lag"]:
        t = Table(title="source lag", title_justify="left", expand=True)
        for col in ("partition", "offsets behind", "seconds behind"):
            t.add_column(col, justify="left" if col == "partition" else "right")
        for r in frame["lag"]:
            t.add_row(r["source"], _n(r["offsets"]), "-" if r["seconds"] is None else f"{r['seconds']:.1f}")
        parts.append(t)
    if frame["dead_letters"] or frame["late_rows"]:
        t = Table(title="dead letters", title_justify="left", expand=True)
        t.add_column("input / reason")
        t.add_column("count", justify="right")
        for k, v in sorted(frame["dead_letters"].items()):
            t.add_row(k, _n(v))
        for k, v in sorted(frame["late_rows"].items()):
            t.add_row(f"{k} / late rows dropped", _n(v))
        parts.append(t)
    if frame["workers"]:
        t = Table(title="workers", title_justify="left")
        t.add_column("worker")
        t.add_column("state rows", justify="right")
        for w in frame["workers"]:
            t.add_row(str(w["worker"]), _n(w["records"]))
        parts.append(t)
    return Group(*parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ddflow.top", description=__doc__.split("\n\n")[0])
    ap.add_argument("source", help="a metrics URL (http://127.0.0.1:PORT/metrics) or a streaming state directory")
    ap.add_argument("--interval", type=float, default=2.0, help="seconds between refreshes (default 2)")
    ap.add_argument("--once", action="store_true", help="print one frame and exit")
    ap.add_argument("--json", action="store_true", help="with --once: the frame as JSON instead of tables")
    args = ap.parse_args(argv)
    from rich.console import Console
    from rich.live import Live

    console = Console()
    try:
        if args.once:
            frame, before = read_frame(args.source)
            if not args.json and args.source.startswith("http"):
                time.sleep(min(args.interval, 1.0))  # a second scrape, for rates
                frame, _ = read_frame(args.source, before, min(args.interval, 1.0))
            if args.json:
                print(json.dumps(frame, default=str, indent=1))
            else:
                console.print(render(frame))
            return 0
        frame, before = read_frame(args.source)
        at = time.monotonic()
        with Live(render(frame), console=console, refresh_per_second=4, screen=False) as live:
            while True:
                time.sleep(args.interval)
                now = time.monotonic()
                frame, before = read_frame(args.source, before, now - at)
                at = now
                live.update(render(frame))
    except KeyboardInterrupt:
        return 0
    except (OSError, ValueError) as e:
        print(f"ddflow.top: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
