"""Metrics: histograms of latencies, and the named, labelled families a monitoring stack scrapes.

The engine keeps plain integer and float counters on its operators, inputs
and outputs (a few adds a step, nothing more); what a user reads is built
from them when asked: :meth:`ddflow.Dataflow.metrics` as a dict, and
:func:`families` turns such a dict into Prometheus' families (name, kind,
help, labelled samples), which :mod:`ddflow.base.endpoint` serves and
``python -m ddflow.top`` reads back.  One vocabulary, three views.

Histograms have fixed buckets (Prometheus' cumulative ``le`` buckets), so
observing costs a bisection and two adds, and histograms of several
workers add up bucket by bucket.
"""
from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Seconds: 1, 2.5 and 5 times each power of ten from 10 us to 100 s.  Step latencies and freshness.
SECONDS_BOUNDS: tuple[float, ...] = tuple(float(f"{m}e{e}") for e in range(-5, 3) for m in (1, 2.5, 5)
                                          if float(f"{m}e{e}") <= 100.0)


class Histogram:
    """Observations counted in fixed buckets, with their sum and count.

    ``bounds`` are the buckets' upper bounds (inclusive, as Prometheus'
    ``le``); a last bucket takes what is above them all.  Cost: O(log
    buckets) an observation; O(buckets) to merge or read.

    >>> h = Histogram((0.001, 0.01, 0.1))
    >>> for v in (0.0005, 0.002, 0.003, 0.05): h.observe(v)
    >>> h.count, round(h.sum, 4), h.cumulative()
    (4, 0.0555, [(0.001, 1), (0.01, 3), (0.1, 4), (inf, 4)])
    >>> round(h.quantile(0.5), 4)
    0.0055
    """

    __slots__ = ("bounds", "count", "counts", "sum")

    def __init__(self, bounds: Sequence[float] = SECONDS_BOUNDS):
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        """Count one observation (NaN is not counted: it has no bucket)."""
        if math.isnan(value):
            return
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value
        self.count += 1

    def merge(self, other: "Histogram") -> "Histogram":
        """Add ``other``'s observations (same buckets) to this one; returns self."""
        if other.bounds != self.bounds:
            raise ValueError("histograms with different buckets do not add up")
        self.counts = [a + b for a, b in zip(self.counts, other.counts)]
        self.sum += other.sum
        self.count += other.count
        return self

    def cumulative(self) -> list[tuple[float, int]]:
        """``(upper bound, observations at or below it)`` per bucket, the last bound ``inf``."""
        out, total = [], 0
        for bound, n in zip((*self.bounds, math.inf), self.counts):
            total += n
            out.append((bound, total))
        return out

    def quantile(self, q: float) -> float:
        """The ``q``-quantile, interpolated inside its bucket as Prometheus' ``histogram_quantile``; NaN when empty.

        A quantile in the last (unbounded) bucket is the largest bound.
        """
        return quantile_of(self.cumulative(), q)

    def as_dict(self) -> dict:
        """What :meth:`ddflow.Dataflow.metrics` shows: count, sum, p50, p90, p99 and the cumulative buckets."""
        return {"count": self.count, "sum": self.sum, "p50": self.quantile(0.5), "p90": self.quantile(0.9),
                "p99": self.quantile(0.99), "buckets": self.cumulative()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Histogram":
        """The histogram :meth:`as_dict` showed (to add up several workers' or processes')."""
        cum = d["buckets"]
        h = cls(tuple(b for b, _ in cum[:-1]))
        prev = 0
        for i, (_, total) in enumerate(cum):
            h.counts[i] = total - prev
            prev = total
        h.sum, h.count = d["sum"], d["count"]
        return h


def quantile_of(cumulative: Sequence[tuple[float, float]], q: float) -> float:
    """The ``q``-quantile of cumulative bucket counts ``(upper bound, count)``, the last bound ``inf``.

    >>> quantile_of([(1.0, 2), (2.0, 4), (math.inf, 4)], 0.75)
    1.5
    >>> math.isnan(quantile_of([(1.0, 0), (math.inf, 0)], 0.5))
    True
    """
    if not cumulative or cumulative[-1][1] <= 0:
        return math.nan
    rank = q * cumulative[-1][1]
    lower, below = 0.0, 0.0
    for bound, total in cumulative:
        if total >= rank:
            if math.isinf(bound):
                return lower
            inside = total - below
            return bound if inside <= 0 else min(bound, lower + (bound - lower) * (rank - below) / inside)
        lower, below = bound, total
    return lower


@dataclass
class Family:
    """One metric: a Prometheus name, its kind (``counter``, ``gauge``, ``histogram``), help, and samples.

    Each sample is ``(labels, value)``; a histogram's value is a
    :class:`Histogram`.  Counters' names end in ``_total``.
    """

    name: str
    kind: str
    help: str
    samples: list[tuple[dict[str, str], Any]] = field(default_factory=list)

    def add(self, labels: Mapping[str, Any], value: Any) -> None:
        self.samples.append(({k: str(v) for k, v in labels.items()}, value))


def families(metrics: Mapping[str, Any], dataflow: str = "ddflow") -> list[Family]:
    """The Prometheus families of what :meth:`ddflow.Dataflow.metrics` returned, each labelled ``dataflow``.

    Names (all prefixed ``ddflow_``): per operator ``operator_records``,
    ``operator_bytes``, ``operator_updates_in_total``,
    ``operator_updates_out_total``, ``operator_busy_seconds_total``; per
    input ``input_updates_total``, ``input_rejected_total``; per output
    ``output_updates_total``, ``output_retractions_total`` and the
    ``output_freshness_seconds`` histogram; the dataflow's ``frontier``,
    ``runs_total`` and ``step_seconds`` histogram; per worker
    ``worker_records`` and ``worker_busy_seconds_total``.  Streaming
    queries add their own (:mod:`ddflow.streaming.progress`).  Cost: O(operators).

    >>> fams = families({"frontier": 3, "runs": 1, "operators": {}, "inputs": {"e": {"updates": 2, "rejected": 0}},
    ...                  "outputs": {}, "workers": []})
    >>> [(f.name, f.samples) for f in fams if f.name in ("ddflow_input_updates_total", "ddflow_frontier")]
    [('ddflow_input_updates_total', [({'dataflow': 'ddflow', 'input': 'e'}, 2)]), ('ddflow_frontier', [({'dataflow': 'ddflow'}, 3)])]
    """
    base = {"dataflow": dataflow}
    out = {}

    def fam(name: str, kind: str, text: str) -> Family:
        out[name] = f = out.get(name) or Family(f"ddflow_{name}", kind, text)
        return f

    op_specs = (("records", "operator_records", "gauge", "Updates the operator holds as state (its traces)."),
                ("bytes", "operator_bytes", "gauge", "Bytes of the operator's state."),
                ("updates_in", "operator_updates_in_total", "counter", "Updates the operator received."),
                ("updates_out", "operator_updates_out_total", "counter", "Updates the operator emitted."),
                ("busy_s", "operator_busy_seconds_total", "counter", "Seconds spent in the operator's steps."))
    for key, name, kind, text in op_specs:
        f = fam(name, kind, text)
        for op, s in metrics.get("operators", {}).items():
            f.add({**base, "operator": op, "kind": s.get("kind", "")}, s.get(key, 0))
    counters = (("inputs", "input", "updates", "input_updates_total", "Updates fed to the input."),
                ("inputs", "input", "rejected", "input_rejected_total",
                 "Updates the input refused (a removal of an absent record, a sum past int64)."),
                ("outputs", "output", "updates", "output_updates_total", "Changes delivered to the output."),
                ("outputs", "output", "retractions", "output_retractions_total",
                 "Changes with a negative diff delivered to the output (rows taken back)."))
    for section, label, key, name, text in counters:
        f = fam(name, "counter", text)
        for who, s in metrics.get(section, {}).items():
            f.add({**base, label: who}, s.get(key, 0))
    f = fam("output_freshness_seconds", "histogram",
            "Seconds from the oldest input of a run arriving to the run delivering its output's changes.")
    for o, s in metrics.get("outputs", {}).items():
        if s.get("freshness_seconds"):
            f.add({**base, "output": o}, Histogram.from_dict(s["freshness_seconds"]))
    fam("frontier", "gauge", "The input frontier: every earlier data time is complete.").add(base,
                                                                                        metrics.get("frontier", 0))
    fam("runs_total", "counter", "Runs (frontier advances processed).").add(base, metrics.get("runs", 0))
    if metrics.get("step_seconds"):
        fam("step_seconds", "histogram", "Seconds a run took, from its start to every output final.").add(
            base, Histogram.from_dict(metrics["step_seconds"]))
    for w in metrics.get("workers", []):
        fam("worker_records", "gauge", "Updates a worker holds as state.").add({**base, "worker": w["worker"]},
                                                                                w.get("records", 0))
        fam("worker_busy_seconds_total", "counter", "Seconds a worker spent in operator steps.").add(
            {**base, "worker": w["worker"]}, w.get("busy_s", 0.0))
    return list(out.values())


def text_format(fams: Iterable[Family]) -> str:
    """Prometheus' text exposition format (0.0.4) of ``fams``, for a file or a scrape without the endpoint.

    >>> print(text_format([Family("ddflow_frontier", "gauge", "The frontier.", [({"dataflow": "q"}, 7)])]), end="")
    # HELP ddflow_frontier The frontier.
    # TYPE ddflow_frontier gauge
    ddflow_frontier{dataflow="q"} 7
    """
    lines = []
    for f in fams:
        lines += [f"# HELP {f.name} {_escape_help(f.help)}", f"# TYPE {f.name} {f.kind}"]
        for labels, v in f.samples:
            if isinstance(v, Histogram):
                for bound, total in v.cumulative():
                    le = "+Inf" if math.isinf(bound) else repr(float(bound))
                    lines.append(f"{f.name}_bucket{_labels({**labels, 'le': le})} {total}")
                lines.append(f"{f.name}_sum{_labels(labels)} {_number(v.sum)}")
                lines.append(f"{f.name}_count{_labels(labels)} {v.count}")
            else:
                lines.append(f"{f.name}{_labels(labels)} {_number(v)}")
    return "\n".join(lines) + "\n"


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _labels(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape_value(v)}"' for k, v in labels.items()) + "}"


def _escape_value(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(v: Any) -> str:
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, int):
        return str(v)
    v = float(v)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(v)
