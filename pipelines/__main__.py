"""``python -m ddflow.pipelines run PIPELINE.py``: one run of a pipeline, for a scheduler.

The pipeline file is Python: it builds a :class:`ddflow.pipelines.Pipeline`
(tables, views, sinks) at module level and does not refresh it; the CLI
loads it, refreshes every pipeline it defines, prints a progress bar per
source while reading (on stderr) and one line per view (on stdout:
changes in, changes out, time, rows, state size), and exits 0 when done
or non-zero with the reason: 2 for a refusal that says what to do (a state
of another pipeline, a vacuumed history), 1 for anything else.  So Airflow,
cron or dbt need nothing but the exit status.

Why a Python file and not YAML: the views are SQL text either way, and a
source sometimes needs code (a pyiceberg catalog, a changelog-reading
function, credentials from the environment); a Python file is the same
API as the library, with nothing more to learn, as Spark Declarative
Pipelines' own Python files are.

    python -m ddflow.pipelines run pipeline.py [--full-refresh] [--quiet]
        [--metrics-file run.prom] [--metrics-port PORT [--metrics-linger SECONDS]]

``--metrics-file`` writes the run's metrics (:mod:`ddflow.pipelines.metrics`)
for node_exporter's textfile collector when the run ends;
``--metrics-port`` serves them on loopback while the CLI runs (and
``--metrics-linger`` seconds after, for a scraper to catch a short run).
"""
from __future__ import annotations

import argparse
import os
import runpy
import sys
import time
from typing import TextIO

#: Exit statuses.
OK, FAILED, REFUSED = 0, 1, 2


class Bars:
    """A progress bar per source on ``out``: redrawn in place on a terminal, one final line otherwise."""

    def __init__(self, out: TextIO, width: int = 24):
        self.out, self.width = out, width
        self.tty = out.isatty()
        self.current: str | None = None
        self.last: tuple[int, int] = (0, 0)
        self._drawn = 0.0

    def __call__(self, table: str, done: int, total: int) -> None:
        if self.current is not None and table != self.current:
            self.finish()
        self.current, self.last = table, (done, total)
        if self.tty and (time.monotonic() - self._drawn > 0.1 or done == total):
            self.out.write("\r" + self.line(table, done, total))
            self.out.flush()
            self._drawn = time.monotonic()

    def line(self, table: str, done: int, total: int) -> str:
        frac = 1.0 if total <= 0 else min(1.0, done / total)
        fill = int(round(frac * self.width))
        count = f"{done}/{total}" if total > 0 else "nothing new"
        return f"reading {table:<16} [{'#' * fill}{'.' * (self.width - fill)}] {count}"

    def finish(self) -> None:
        if self.current is None:
            return
        done, total = self.last
        self.out.write(("\r" if self.tty else "") + self.line(self.current, done, total) + "\n")
        self.out.flush()
        self.current = None


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def summary(report) -> list[str]:
    """The lines the CLI prints for a run: one per view, then one for the run."""
    lines = []
    for v in report.views.values():
        lines.append(f"view {v.view}: {v.changes_in:,} changes in, {v.changes_out:,} out, {report.steps['run']:.2f} s "
                     f"(sinks {v.seconds:.2f} s), {v.rows:,} rows; state {_size(report.state_bytes)} on disk, "
                     f"{_size(report.memory_bytes)} in memory")
    steps = ", ".join(f"{k} {s:.2f}" for k, s in report.steps.items())
    resumed = " (completed a run that was killed after committing a sink)" if report.resumed else ""
    lines.append(f"run {report.run}{' (full refresh)' if report.full else ''} done in {report.seconds:.2f} s: "
                 f"{len(report.timeline)} commits applied, frontier {report.frontier}{resumed}; {steps}")
    return lines


def load(path: str) -> list:
    """The pipelines a pipeline file defines at module level (in definition order)."""
    from ddflow.pipelines.pipeline import Pipeline
    if not os.path.exists(path):
        raise FileNotFoundError(f"no pipeline file {path}")
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    found = runpy.run_path(path, run_name="__ddflow_pipeline__")
    pipes = []
    for v in found.values():
        if isinstance(v, Pipeline) and all(v is not p for p in pipes):
            pipes.append(v)
    if not pipes:
        raise ValueError(f"{path} defines no ddflow.pipelines.Pipeline at module level")
    return pipes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ddflow.pipelines", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a pipeline file once")
    run.add_argument("pipeline", help="a Python file that defines a ddflow.pipelines.Pipeline")
    run.add_argument("--full-refresh", action="store_true",
                     help="rebuild every view from its tables as they are now, and replace the sinks' rows")
    run.add_argument("--quiet", action="store_true", help="no progress bars")
    run.add_argument("--metrics-file", default=None,
                     help="write the run's metrics here (Prometheus text format, for a textfile collector)")
    run.add_argument("--metrics-port", type=int, default=None,
                     help="serve the metrics at http://127.0.0.1:PORT/metrics while the CLI runs")
    run.add_argument("--metrics-linger", type=float, default=0.0,
                     help="with --metrics-port: seconds to keep serving after the runs")
    args = ap.parse_args(argv)
    try:
        pipes = load(args.pipeline)
    except (OSError, ValueError, SyntaxError) as e:
        print(f"ddflow pipelines: cannot load {args.pipeline}: {type(e).__name__}: {e}", file=sys.stderr)
        return FAILED
    published: dict[str, list] = {}  # pipeline name -> its families, from its last run
    server = None
    if args.metrics_port is not None:
        from ddflow.base.endpoint import MetricsServer

        server = MetricsServer(lambda: [f for fams in list(published.values()) for f in fams], args.metrics_port)
        print(f"ddflow pipelines: metrics at {server.url}", file=sys.stderr)
    try:
        status = _run_all(pipes, args, published)
        if args.metrics_file is not None:
            from ddflow.pipelines.metrics import write_textfile

            write_textfile(args.metrics_file, [f for fams in published.values() for f in fams])
        if server is not None and args.metrics_linger > 0:
            time.sleep(args.metrics_linger)
    finally:
        if server is not None:
            server.close()
    return status


def _run_all(pipes: list, args: argparse.Namespace, published: dict[str, list]) -> int:
    """Refresh each pipeline, print its summary, publish its metrics; the exit status."""
    from ddflow.errors import DdflowError
    from ddflow.pipelines.metrics import run_families

    status = OK
    for p in pipes:
        bars = Bars(sys.stderr)
        try:
            report = p.refresh(full=args.full_refresh, progress=None if args.quiet else bars)
            bars.finish()
            published[p.name] = run_families(p.name, report, p.metrics())
        except DdflowError as e:
            bars.finish()
            print(f"ddflow pipelines: {p.name}: {e}", file=sys.stderr)
            status = REFUSED
            continue
        except Exception as e:  # noqa: BLE001 - any other failure: the reason, and a non-zero status
            bars.finish()
            import traceback
            traceback.print_exc()
            print(f"ddflow pipelines: {p.name}: failed: {type(e).__name__}: {e}", file=sys.stderr)
            status = FAILED if status == OK else status
            continue
        finally:
            p.close()
        for line in summary(report):
            print(line)
    return status


if __name__ == "__main__":
    sys.exit(main())
