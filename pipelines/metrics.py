"""A pipeline run's metrics, as Prometheus families: what the CLI serves (``--metrics-port``) or writes for a
textfile collector (``--metrics-file``), beside the dataflow's own (:func:`ddflow.base.metrics.families`).

A pipeline run is a batch job: it ends.  Prometheus reads such jobs from
node_exporter's textfile collector (a ``.prom`` file written at the end,
atomically) or by scraping them while they run; the CLI does either.
"""
from __future__ import annotations

import os
from typing import Any, Mapping

from ddflow.base.metrics import Family, families, text_format


def run_families(pipeline: str, report: Any, flow_metrics: Mapping[str, Any] | None = None) -> list[Family]:
    """Families of one :class:`~ddflow.pipelines.pipeline.RunReport`, labelled ``pipeline``; then, when given, the
    dataflow's (``ddflow_operator_*`` and the rest, labelled ``dataflow`` with the pipeline's name).

    ``ddflow_pipeline_run`` (the run's number), ``ddflow_pipeline_run_seconds`` by ``step``,
    ``ddflow_pipeline_frontier``, ``ddflow_pipeline_state_bytes``, ``ddflow_pipeline_memory_bytes``; per
    source ``ddflow_pipeline_source_commits``, ``_changes``, ``_rejected``, ``_duplicates``, ``_version``
    (the version read to) and ``_behind`` (the lag: versions past it, where the source can say); per view ``ddflow_pipeline_view_changes_in``, ``_changes_out`` and ``_rows``.
    Cost: O(sources + views), plus the dataflow's.
    """
    p = {"pipeline": pipeline}
    out = [Family("ddflow_pipeline_run", "gauge", "The number of the last run.", [(p, report.run)]),
           Family("ddflow_pipeline_run_seconds", "gauge", "Seconds of the last run, by step ('total' for all).",
                  [({**p, "step": k}, v) for k, v in report.steps.items()] + [({**p, "step": "total"}, report.seconds)]),
           Family("ddflow_pipeline_frontier", "gauge", "The views' frontier after the last run.", [(p, report.frontier)]),
           Family("ddflow_pipeline_state_bytes", "gauge", "Bytes of the pipeline's state on disk.", [(p, report.state_bytes)]),
           Family("ddflow_pipeline_memory_bytes", "gauge", "Bytes of the views' state in memory.",
                  [(p, report.memory_bytes)])]
    for key, text in (("commits", "Commits of the source the last run applied."),
                      ("changes", "Row changes of the source the last run applied."),
                      ("rejected", "Row changes of the source the last run refused (dead letters)."),
                      ("duplicates", "Changelog events of the source the last run dropped as duplicates."),
                      ("version", "The source's version (or snapshot sequence) the views are exact at."),
                      ("behind", "Versions of the source past what the last run read (its lag; 0 when it read to "
                                 "the end).")):
        out.append(Family(f"ddflow_pipeline_source_{key}", "gauge", text,
                          [({**p, "table": t}, getattr(s, key)) for t, s in report.sources.items()
                           if getattr(s, key) is not None]))
    for key, text in (("changes_in", "Input changes of the tables the view reads, in the last run."),
                      ("changes_out", "Changes of the view the last run committed to its sinks."),
                      ("rows", "Rows of the view after the last run.")):
        out.append(Family(f"ddflow_pipeline_view_{key}", "gauge", text,
                          [({**p, "view": v}, getattr(r, key)) for v, r in report.views.items()]))
    if flow_metrics is not None:
        out += families(flow_metrics, pipeline)
    return out


def write_textfile(path: str, fams: list[Family]) -> None:
    """Write ``fams`` to ``path`` in Prometheus' text format, atomically (a collector never reads half a file),
    readable by others (0644: node_exporter runs as its own user)."""
    from ddflow.streaming.sinks import atomic_write

    text = text_format(fams)

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)

    atomic_write(os.path.abspath(path), write)
