"""A pipeline: tables that change by commits, SQL views over them kept incrementally, sinks that are tables.

Declare the tables, views and sinks once, then call :meth:`Pipeline.refresh`
as often as a schedule says (in one process, or one process per run: the
state directory carries everything between runs).  One run:

1. opens the state (``ddflow.streaming.state.StateStore``: the logged
   input, snapshots, a checked manifest) and, in a new process, rebuilds the
   views from it;
2. reads each source's commits since the position the state recorded;
3. feeds each commit at its own data time (:mod:`ddflow.pipelines.times`),
   advances the frontier once, runs;
4. commits every sink, once each (the table format's idempotent commit);
5. commits its own manifest: the input and the sources' new positions.

A run killed anywhere is run again by running again: a sink that already
holds the run is skipped, and the sources are read exactly up to the ends
that sink recorded, so the run computes the same changes; nothing is lost
or written twice.  A state directory of another pipeline (other views,
sources, columns) is refused by name; ``refresh(full=True)`` rebuilds every
view from its tables as they are, and replaces the sinks' rows.

Why this module is long: the run's five steps and the refusals that guard
them (another pipeline's state, a source rewritten under it, a sink deleted)
are one protocol, and its exactly-once argument is read here from top to
bottom.  The declarations (tables, views, sinks) and the report could move
out; they are a third of it.

>>> import tempfile, pyarrow as pa
>>> from ddflow.pipelines import Pipeline, changelog
>>> rows = pa.table({"k": [1, 2], "v": [10, 20], "_change_type": ["insert", "insert"], "_commit_version": [1, 1]})
>>> p = Pipeline(tempfile.mkdtemp())
>>> _ = p.table("t", changelog(lambda since: rows, columns={"k": "bigint", "v": "bigint"}))
>>> _ = p.view("total", "SELECT k, SUM(v) AS s FROM t GROUP BY k", key="k")
>>> p.refresh().views["total"].changes_out
2
>>> p.close()
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc

from ddflow.errors import DdflowError, UsageError
from ddflow.pipelines.changes import COUNT, ViewChanges, consolidate
from ddflow.pipelines.sink import MODES, Sink
from ddflow.pipelines.source import Progress, Read, Source, SourceError, position_from_rows, position_rows
from ddflow.pipelines.times import Timed, assign, now
from ddflow.pipelines.types import arrow_type

#: The state log's input holding the pipeline's own rows (sources' positions, sinks' runs): key, value.
POSITIONS = "__pipeline"
REBUILD = "run it with a full refresh (`python -m ddflow.pipelines run PIPELINE.py --full-refresh`, or " \
          "refresh(full=True)), which rebuilds every view from its tables as they are now, or give it another " \
          "state directory"


class PipelineError(DdflowError, RuntimeError):
    """A pipeline run cannot go on: its state belongs to another pipeline, a sink disagrees with it, ...

    The message names what and where, and says what to do.  Nothing of the run was committed to the
    pipeline's state; sinks it committed hold the run, and running again completes it.
    """


@dataclass
class ViewReport:
    """One view's run: input changes of the tables it reads, output changes, rows now, sink rows written."""

    view: str
    changes_in: int = 0
    changes_out: int = 0
    rows: int = 0
    written: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0


@dataclass
class SourceReport:
    table: str
    commits: int = 0
    changes: int = 0
    rejected: int = 0
    duplicates: int = 0
    seconds: float = 0.0
    version: int = -1
    #: Versions the table had past what the run read (0 when it read to the end; more when ``until`` held it back
    #: or commits landed while it read); None where the source cannot say.
    behind: int | None = None


@dataclass
class RunReport:
    """What one :meth:`Pipeline.refresh` did."""

    run: int
    full: bool
    sources: dict[str, SourceReport]
    views: dict[str, ViewReport]
    #: ``(data time, {table: version})`` of every commit applied, in order.
    timeline: list[tuple[int, dict[str, int]]]
    frontier: int
    seconds: float
    #: Seconds in each step: ``restore``, ``read``, ``run``, ``sinks``, ``state``.
    steps: dict[str, float]
    state_bytes: int
    memory_bytes: int
    #: True when the run was already committed to a sink by a run that was killed, and was completed now.
    resumed: bool = False


@dataclass
class _Table:
    name: str
    source: Source
    nonnegative: str


@dataclass
class _View:
    name: str
    sql: str
    key: list[str] | None
    sinks: list[Sink] = field(default_factory=list)
    tables: set[str] = field(default_factory=set)


class Pipeline:
    """Tables, views and sinks with their state under ``state`` (a directory; see the module docstring).

    ``name`` goes into every sink's application id (default: the state
    directory's name), so two pipelines never take each other's commits.
    ``dead_letters``: a directory for changelog rows that cannot be applied
    (malformed, duplicate, out of order), one JSON-lines file per run;
    without it such a row fails the run.  ``snapshot_every``: runs between
    compactions of the state's log.  ``workers``: the dataflow's workers.
    """

    def __init__(self, state: str, name: str | None = None, dead_letters: str | None = None,
                 snapshot_every: int = 20, workers: int = 1):
        self.state = os.path.abspath(state)
        self.name = name or os.path.basename(self.state.rstrip("/")) or "pipeline"
        self.dead_letters = dead_letters
        self.snapshot_every = snapshot_every
        self.workers = workers
        self.tables: dict[str, _Table] = {}
        self.views: dict[str, _View] = {}
        #: Test hook (kill tests only): called as ``fault(point, run)`` at each step of a run.
        self._fault: Callable[[str, int], None] | None = None
        self._flow = None
        self._handles: dict[str, Any] = {}
        self._captures: dict[str, Any] = {}
        self._contents: dict[str, pa.Table] = {}
        self._store = None
        self._rows: dict[str, str] = {}
        self._columns: dict[str, dict[str, str]] = {}
        self._lock_fd: int | None = None

    # -- declaring ------------------------------------------------------------------------------------

    def table(self, name: str, source: Source, nonnegative: str = "error") -> "Pipeline":
        """Declare table ``name``, read from ``source`` (:func:`ddflow.pipelines.delta_tables`, ``iceberg``,
        ``parquet``, ``changelog``).  ``nonnegative``: what a delete of a row the table does not hold does
        (``"error"``: the run fails naming it; ``"dead-letter"``; None).  O(1)."""
        if not isinstance(source, Source):
            raise UsageError(f"table {name!r}: the source must be a ddflow.pipelines source (delta(...), iceberg(...), "
                             f"parquet(...), changelog(...)), not {type(source).__name__}")
        if name.startswith("__") or not name.replace("_", "a").isalnum():
            raise UsageError(f"table {name!r}: a table's name is a SQL identifier (letters, digits, _), "
                             "not starting with __")
        if name.lower() in {n.lower() for n in [*self.tables, *self.views]}:
            raise UsageError(f"there is already a table or view {name!r}")
        self._check_open("table")
        if hasattr(source, "bind"):  # a source that keeps files beside the state (an SDP feed)
            source.bind(self.state, name)
        self.tables[name] = _Table(name, source, nonnegative)
        return self

    def view(self, name: str, sql: str, key: list[str] | str | None = None) -> "Pipeline":
        """Declare view ``name``: a Spark SQL query over the tables and earlier views.  ``key``: the columns
        that identify a row (a GROUP BY's), so contents sinks merge by key and changelogs pair updates;
        without one a row is its own key.  The SQL is checked at the first refresh.  O(1)."""
        if name.lower() in {n.lower() for n in [*self.tables, *self.views]}:
            raise UsageError(f"there is already a table or view {name!r}")
        self._check_open("view")
        self.views[name] = _View(name, sql, [key] if isinstance(key, str) else (list(key) if key else None))
        return self

    def sink(self, view: str, sink: Sink) -> "Pipeline":
        """Write ``view`` to ``sink`` (:func:`ddflow.pipelines.delta_table`, ``delta_changelog``,
        ``iceberg_table``, ``iceberg_changelog``, ``parquet_changelog``) at every run.  O(1)."""
        if view not in self.views:
            raise UsageError(f"sink for {view!r}: no view {view!r} (views: {sorted(self.views)})")
        if not isinstance(sink, Sink):
            raise UsageError(f"sink for {view!r}: not a ddflow.pipelines sink: {type(sink).__name__}")
        self.views[view].sinks.append(sink)
        return self

    def _check_open(self, what: str) -> None:
        if self._flow is not None:
            raise UsageError(f"declare every {what} before the first refresh()")

    def metrics(self) -> dict | None:
        """The views' dataflow's :meth:`~ddflow.Dataflow.metrics` (operators, inputs, outputs, runs) while it is
        open (after a refresh, before :meth:`close`); None otherwise.  Cost: as the dataflow's."""
        return self._flow.metrics() if self._flow is not None and not self._flow.closed else None

    def app_id(self, view: str, index: int) -> str:
        """The application id of a view's sink: the pipeline's name, the view, the sink's place."""
        return f"ddflow:{self.name}:{view}:{index}"

    # -- running --------------------------------------------------------------------------------------

    def refresh(self, full: bool = False, progress: Callable[[str, int, int], None] | None = None,
                wait: float = 0.0, until: dict[str, dict] | None = None) -> RunReport:
        """One run (see the module docstring); ``full`` rebuilds everything from the tables as they are.

        ``progress(table, done, total)`` is called while each source is
        read.  ``wait``: seconds to wait for another run of this state
        to end (default: refuse at once).  ``until``: read a table only up
        to this end (``{"orders": {"version": 12}}`` for Delta, ``{"snapshot_id":
        ...}`` for Iceberg), to catch up in steps or replay a history.
        Cost: reading what changed (see each source), running the
        views over it, one commit per sink with changes, and writing the
        run's input to the state; in a new process, also rebuilding the
        views from the state first (O(state)).  Raises
        :class:`PipelineError` or :class:`~ddflow.pipelines.source.SourceError`
        naming what to do; then nothing of this run is in the state.
        """
        if not self.views:
            raise UsageError("a pipeline needs at least one view")
        t0 = time.perf_counter()
        steps = {"restore": 0.0, "read": 0.0, "run": 0.0, "sinks": 0.0, "state": 0.0}
        self._lock(wait)
        try:
            self._settle_rebuild()
            if full:
                self._close_flow()
            try:
                report = self._run(full, steps, progress or (lambda table, done, total: None), until or {})
            except BaseException:
                self._close_flow()  # fed but not committed: the next refresh rebuilds from the state
                raise
        finally:
            self._unlock()
        report.seconds = time.perf_counter() - t0
        return report

    def _run(self, full: bool, steps: dict, progress, until: dict) -> RunReport:
        t = time.perf_counter()
        store, identity = self._open_store(full)
        held = store.manifest.batch_id
        if self._flow is None:
            self._build_flow()
            if not full:
                self._restore(store)
        steps["restore"] = time.perf_counter() - t
        sinks = self._sinks()
        run = held + 1
        if full:
            run = max([run] + [c.run + 1 for _, _, c in sinks if c is not None])
        modes, pinned = self._check_sinks(sinks, run, full)
        self._at("opened", run)

        # Read every source's commits since its position (or exactly up to what a committed sink holds).
        t = time.perf_counter()
        reads: dict[str, Read] = {}
        sources: dict[str, SourceReport] = {}
        versions: dict[str, int] = {}
        for name, tab in self.tables.items():
            ts = time.perf_counter()
            if hasattr(tab.source, "contents"):  # a source that may replace its rows asks for them
                tab.source.contents = lambda n=name: self._table_rows(store, n)
            pos = None if full else position_from_rows(name, self._rows)
            versions[name] = tab.source.version_of(pos)
            end = pinned.get(name) if pinned is not None else until.get(name)
            reads[name] = tab.source.read(pos, end, lambda done, total, n=name: progress(n, done, total))
            r = reads[name]
            read_to = tab.source.version_of(r.position)
            latest = tab.source.latest_version()
            sources[name] = SourceReport(name, len(r.commits), sum(c.changes.num_rows for c in r.commits),
                                         len(r.rejected), r.duplicates, time.perf_counter() - ts, read_to,
                                         None if latest is None else max(latest - read_to, 0))
        timed = assign(versions, {n: r.commits for n, r in reads.items()})
        self._dead_letters(run, reads)
        steps["read"] = time.perf_counter() - t
        self._at("read", run)

        # Feed each commit at its data time; advance once; run.
        t = time.perf_counter()
        frontier = store.manifest.frontier if not full else 0
        logged = self._feed(timed)
        if timed:
            frontier = max(frontier, timed[-1].time + 1)
            self._flow.advance_to(frontier)
        self._flow.run()
        stamps = {x.time: x.commit.timestamp_ms for x in timed}
        outputs = self._outputs(stamps, frontier, full)
        steps["run"] = time.perf_counter() - t
        self._at("ran", run)

        # Sinks, once each.
        t = time.perf_counter()
        ends = {n: r.end if r.end is not None else _end(r.position) for n, r in reads.items()}
        views = {}
        new_rows = dict(self._rows) if not full else {}
        for name, v in self.views.items():
            ch = outputs[name]
            rep = ViewReport(name, sum(sources[tn].changes for tn in v.tables if tn in sources),
                             int(pc.sum(pc.abs(ch.changes.column("diff"))).as_py() or 0) if ch.changes.num_rows else 0,
                             int(pc.sum(ch.after.column(COUNT)).as_py() or 0) if ch.after.num_rows else 0)
            tv = time.perf_counter()
            for i, sink in enumerate(v.sinks):
                key = f"sink/{name}/{i}"
                mode = modes[key]
                self._at(f"sink_begin:{name}:{i}", run)
                if mode != "done":
                    written = sink.commit(self.app_id(name, i), run, ch, ends, mode)
                    rep.written[sink.where()] = written
                    committed = written > 0 or mode != "changes"
                else:
                    committed = True
                if committed:
                    new_rows[key] = json.dumps({"run": run})
                self._at(f"sink_done:{name}:{i}", run)
            rep.seconds = time.perf_counter() - tv
            views[name] = rep
        steps["sinks"] = time.perf_counter() - t

        # The pipeline's own manifest: the run's input, the new positions and sink runs.
        t = time.perf_counter()
        for name, r in reads.items():
            for k in [k for k in new_rows if k == f"source/{name}" or k.startswith(f"source/{name}/")]:
                del new_rows[k]
            new_rows.update(position_rows(name, r.position))
        self._at("state_begin", run)
        tables = dict(logged)
        tables[POSITIONS] = _row_changes({} if full else self._rows, new_rows, max(frontier - 1, 0))
        if full:
            self._commit_rebuild(run, frontier, tables, identity)
            store = None
        else:
            store.commit(run, frontier, tables)
        self._rows = new_rows
        for name in self.views:
            self._contents[name] = outputs[name].after
        steps["state"] = time.perf_counter() - t
        self._at("state_done", run)
        return RunReport(run, full, sources, views, [(x.time, x.versions) for x in timed], frontier, 0.0, steps,
                         _dir_bytes(self.state), int(self._flow.trace_bytes()), resumed=pinned is not None)

    def _at(self, point: str, run: int) -> None:
        if self._fault is not None:
            self._fault(point, run)

    # -- state ----------------------------------------------------------------------------------------

    def _identity(self) -> dict:
        inputs = {}
        for name, tab in self.tables.items():
            cols = self._columns.get(name)
            if cols is None:
                cols = self._columns[name] = tab.source.columns()
            inputs[name] = {"source": tab.source.describe(), "columns": cols}
        views = {n: {"sql": v.sql, "key": v.key} for n, v in self.views.items()}
        return {"inputs": inputs, "dataflow": {"pipeline": self.name, "views": views}}

    def _open_store(self, full: bool):
        from ddflow.streaming.state import StateError, StateStore
        identity = self._identity()
        if full:
            return _EmptyStore(), identity
        try:
            probe = StateStore(self.state, self.snapshot_every)
            self._check_identity(probe.manifest.identity, identity, probe.manifest.batch_id)
            self._store = StateStore(self.state, self.snapshot_every, identity)
        except StateError as e:
            raise PipelineError(f"{e} (for a pipeline: {REBUILD})") from None
        return self._store, identity

    def _check_identity(self, held: dict, mine: dict, batch: int) -> None:
        """Refuse the state of another pipeline, naming the first table or view that differs."""
        if batch < 0 or not held:
            return
        where = f"ddflow pipeline state {self.state}"
        hv, mv = held.get("dataflow", {}), mine["dataflow"]
        if hv.get("pipeline") != mv["pipeline"]:
            raise PipelineError(f"{where} belongs to pipeline {hv.get('pipeline')!r}, not {mv['pipeline']!r}; "
                                f"{REBUILD}")
        for kind, h, m in (("table", held.get("inputs", {}), mine["inputs"]),
                           ("view", hv.get("views", {}), mv["views"])):
            for name in sorted(set(h) | set(m)):
                if name not in m:
                    raise PipelineError(f"{where} holds {kind} {name!r}, which this pipeline does not declare; "
                                        f"{REBUILD}")
                if name not in h:
                    raise PipelineError(f"{where} has no {kind} {name!r} (it was added since the state was made); "
                                        f"{REBUILD}")
                if h[name] != m[name]:
                    diff = next(k for k in sorted(set(h[name]) | set(m[name])) if h[name].get(k) != m[name].get(k))
                    raise PipelineError(f"{where}: {kind} {name!r} changed its {diff}: the state has "
                                        f"{_show(h[name].get(diff))}, this pipeline {_show(m[name].get(diff))}; "
                                        f"{REBUILD}")

    def _build_flow(self) -> None:
        import ddflow
        flow = ddflow.Dataflow(workers=self.workers)
        self._handles, self._captures, self._contents = {}, {}, {}
        for name, tab in self.tables.items():
            self._handles[name], _ = flow.new_collection(name, schema=self._columns[name],
                                                         nonnegative=tab.nonnegative)
        known = set(self.tables)
        for name, v in self.views.items():
            *setup, last = _statements(v.sql)
            for stmt in setup:  # a script's leading statements (TPC-H Q15's CREATE VIEW)
                flow.sql(stmt)
            coll = flow.sql(f"CREATE OR REPLACE TEMP VIEW {name} AS {last}")
            self._captures[name] = coll.capture()
            direct = _tables_of(v.sql)
            v.tables = {t for t in self.tables if t.lower() in direct}
            for other in self.views.values():
                if other.name != name and other.name.lower() in direct and other.name in known:
                    v.tables |= other.tables
            known.add(name)
            cols = dict(zip(coll.schema.names, coll.schema.types))
            for k in v.key or []:
                if k not in cols:
                    raise UsageError(f"view {name!r}: key column {k!r} is not one of its columns {list(cols)}")
            self._contents[name] = _empty_contents(cols)
        self._flow = flow
        self._rows = {}

    def _restore(self, store) -> None:
        """Rebuild the views from the state: feed every logged update, run to the saved frontier."""
        from ddflow.streaming.state import StateError
        try:
            logged = store.verify()
        except StateError as e:
            raise PipelineError(f"{e} (for a pipeline: {REBUILD})") from None
        rows = logged.pop(POSITIONS, None)
        self._rows = _rows_of(rows) if rows is not None else {}
        for name, t in logged.items():
            if name not in self._handles:
                raise PipelineError(f"ddflow pipeline state {self.state}: the log holds table {name!r}, which this "
                                    f"pipeline does not declare; {REBUILD}")
            self._handles[name].update(t.drop_columns(["time", "diff"]), times=t.column("time").to_numpy(),
                                       diffs=t.column("diff").to_numpy())
        frontier = store.manifest.frontier
        if frontier > 0:
            self._flow.advance_to(frontier)
        self._flow.run()
        for name, cap in self._captures.items():
            t = cap.to_arrow()
            cap.drain_updates()
            if t.num_rows:
                empty = self._contents[name]
                cols = list(empty.schema.names[:-1])
                t = consolidate(_retype(t, empty).drop_columns(["time"]), cols)
                self._contents[name] = t.rename_columns(cols + [COUNT]).cast(empty.schema)

    def _table_rows(self, store, name: str) -> pa.Table:
        """Table ``name``'s rows as the state holds them (its columns and ``diff``).  O(state): read from disk."""
        from ddflow.pipelines.types import arrow_schema
        cols = list(self._columns[name])
        t = store.verify().get(name)
        if t is None:
            return arrow_schema(self._columns[name]).empty_table().append_column("diff", pa.array([], pa.int64()))
        return consolidate(t.select(cols + ["diff"]), cols)

    def _feed(self, timed: list[Timed]) -> dict[str, pa.Table]:
        """Feed each commit's rows at its data time; returns the logged input per table."""
        per: dict[str, list[pa.Table]] = {}
        for x in timed:
            c = x.commit.changes
            if not c.num_rows:
                continue
            per.setdefault(x.table, []).append(c.append_column("time", pa.array([x.time] * c.num_rows, pa.int64())))
        logged = {}
        for name, parts in per.items():
            t = pa.concat_tables(parts)
            cols = list(self._columns[name])
            t = t.select(cols + ["time", "diff"])
            self._handles[name].update(t.select(cols), times=t.column("time").to_numpy(),
                                       diffs=t.column("diff").to_numpy())
            logged[name] = t
        return logged

    def _outputs(self, stamps: dict[int, int], frontier: int, full: bool) -> dict[str, ViewChanges]:
        out = {}
        for name, cap in self._captures.items():
            t = cap.to_arrow()
            cap.drain_updates()
            before = self._contents[name] if not full else _empty_contents_like(self._contents[name])
            cols = {n: before.schema.field(n).type for n in before.schema.names[:-1]}
            sql_cols = dict(zip(cols, self._view_types(name)))
            if t.num_rows:
                t = _retype(t, before)
            out[name] = ViewChanges(name, sql_cols, t, before, self.views[name].key, stamps,
                                    initial_version=max(frontier - 1, 0))
        return out

    def _view_types(self, name: str) -> list[str]:
        return list(self._captures[name].schema.types)

    def _sinks(self) -> list[tuple[str, Sink, Any]]:
        out = []
        for name, v in self.views.items():
            for i, s in enumerate(v.sinks):
                out.append((f"sink/{name}/{i}", s, s.last_commit(self.app_id(name, i))))
        return out

    def _check_sinks(self, sinks, run: int, full: bool) -> tuple[dict[str, str], dict | None]:
        """Each sink's mode for this run, and the ends a sink that already holds the run read up to."""
        modes, pinned = {}, None
        for key, sink, last in sinks:
            recorded = self._rows.get(key)
            w = json.loads(recorded)["run"] if recorded else None
            where = f"sink {sink.where()} (view {key.split('/')[1]!r})"
            if last is not None and last.run == run:
                modes[key] = "done"
                if pinned is not None and pinned != last.ends:
                    raise PipelineError(f"{where} holds run {run} read up to {last.ends}, another sink up to "
                                        f"{pinned}: the sinks disagree; {REBUILD}")
                pinned = last.ends
                continue
            if last is not None and last.run > run:
                raise PipelineError(f"{where} holds run {last.run}, but the pipeline's state is at run {run - 1}: "
                                    f"the table was written by a newer state of this pipeline; {REBUILD}")
            if full:
                modes[key] = "rebuild"
            elif w is None and last is None:
                modes[key] = "initial"
            elif w is None:
                raise PipelineError(f"{where} holds run {last.run} of this pipeline, but the state at {self.state} "
                                    f"has no record of it (the state was deleted or is another copy); {REBUILD}")
            elif last is None:
                raise PipelineError(f"{where} no longer holds this pipeline's commits (the state recorded run {w}): "
                                    f"it was deleted or replaced; {REBUILD}")
            elif last.run != w:
                raise PipelineError(f"{where} holds run {last.run} of this pipeline, the state recorded run {w} "
                                    f"(the table or the state was restored from a copy); {REBUILD}")
            else:
                modes[key] = "changes"
        assert all(m in MODES or m == "done" for m in modes.values())
        return modes, pinned

    def _dead_letters(self, run: int, reads: dict[str, Read]) -> None:
        bad = [{"table": n, **r} for n, read in reads.items() for r in read.rejected]
        if not bad:
            return
        if self.dead_letters is None:
            first = bad[0]
            raise PipelineError(f"table {first['table']!r}: {len(bad)} rows cannot be applied (first: "
                                f"{first['error']}); give Pipeline(dead_letters=DIR) to set them aside")
        os.makedirs(self.dead_letters, exist_ok=True)
        path = os.path.join(self.dead_letters, f"run-{run:012d}.jsonl")
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            for r in bad:
                f.write(json.dumps(r, default=str, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    # -- full refresh: a new state beside the old one, then swapped in --------------------------------

    def _rebuild_dir(self) -> str:
        return self.state.rstrip("/") + ".rebuild"

    def _old_dir(self) -> str:
        return self.state.rstrip("/") + ".old"

    def _commit_rebuild(self, run: int, frontier: int, tables: dict, identity: dict) -> None:
        from ddflow.streaming.state import StateStore
        new = self._rebuild_dir()
        shutil.rmtree(new, ignore_errors=True)
        StateStore(new, self.snapshot_every, identity).commit(run, frontier, tables)
        self._at("rebuild_written", run)
        if os.path.exists(self.state):
            os.rename(self.state, self._old_dir())
        os.rename(new, self.state)
        shutil.rmtree(self._old_dir(), ignore_errors=True)
        self._store = None

    def _settle_rebuild(self) -> None:
        """Finish (or undo) a full refresh's swap of state directories that a kill interrupted."""
        state, new, old = self.state, self._rebuild_dir(), self._old_dir()
        if os.path.exists(state):
            shutil.rmtree(new, ignore_errors=True)
            shutil.rmtree(old, ignore_errors=True)
        elif os.path.exists(os.path.join(new, "manifest.json")):
            os.rename(new, state)
            shutil.rmtree(old, ignore_errors=True)
        elif os.path.exists(old):
            os.rename(old, state)
            shutil.rmtree(new, ignore_errors=True)

    # -- resources ------------------------------------------------------------------------------------

    def _lock(self, wait: float = 0.0) -> None:
        parent = os.path.dirname(self.state.rstrip("/")) or "."
        os.makedirs(parent, exist_ok=True)
        fd = os.open(self.state.rstrip("/") + ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise PipelineError(f"ddflow pipeline state {self.state}: another run holds it (lock "
                                        f"{self.state}.lock); wait for it to end") from None
                time.sleep(0.2)
        self._lock_fd = fd

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    def _close_flow(self) -> None:
        if self._flow is not None:
            self._flow.close()
        self._flow = None
        self._store = None

    def close(self) -> None:
        """Release the dataflow (its workers, if any).  The state stays on disk; a later refresh reopens it."""
        self._close_flow()

    def __enter__(self) -> "Pipeline":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _EmptyStore:
    """The state a full refresh starts from: nothing."""

    class manifest:  # noqa: N801 - mirrors StateStore.manifest's fields
        batch_id = -1
        frontier = 0


def _end(position: dict) -> dict:
    """What a sink records of a source's position: enough to read exactly up to it again (no file lists)."""
    return {k: v for k, v in position.items() if k != "files"}


def _row_changes(old: dict[str, str], new: dict[str, str], t: int) -> pa.Table:
    keys, values, diffs = [], [], []
    for k in sorted(set(old) | set(new)):
        if old.get(k) == new.get(k):
            continue
        if k in old:
            keys.append(k), values.append(old[k]), diffs.append(-1)
        if k in new:
            keys.append(k), values.append(new[k]), diffs.append(1)
    return pa.table({"key": pa.array(keys, pa.string()), "value": pa.array(values, pa.string()),
                     "time": pa.array([t] * len(keys), pa.int64()), "diff": pa.array(diffs, pa.int64())})


def _rows_of(t: pa.Table) -> dict[str, str]:
    g = consolidate(t.select(["key", "value", "diff"]), ["key", "value"])
    out = {}
    for k, v, d in zip(g.column("key").to_pylist(), g.column("value").to_pylist(), g.column("diff").to_pylist()):
        if d != 1 or k in out:
            raise PipelineError(f"pipeline state: its own row {k!r} adds up to {d} (a damaged state); {REBUILD}")
        out[k] = v
    return out


def _empty_contents(columns: dict[str, str]) -> pa.Table:
    return pa.table({**{n: pa.array([], arrow_type(t)) for n, t in columns.items()}, COUNT: pa.array([], pa.int64())})


def _empty_contents_like(t: pa.Table) -> pa.Table:
    return t.schema.empty_table()


def _retype(t: pa.Table, like: pa.Table) -> pa.Table:
    """A capture's Arrow output in the contents' types (timestamps with their UTC zone), then time and diff."""
    cols = []
    for f in like.schema:
        if f.name == COUNT:
            continue
        c = t.column(f.name)
        if pa.types.is_timestamp(f.type) and c.type.tz is None:
            c = c.cast(pa.timestamp(c.type.unit, tz="UTC"))
        cols.append(c.cast(f.type))
    return pa.Table.from_arrays(cols + [t.column("time"), t.column("diff")],
                                names=[f.name for f in like.schema if f.name != COUNT] + ["time", "diff"])


def _statements(sql: str) -> list[str]:
    """A view's SQL split into its statements (a script's ``;``), the last one the view's query."""
    import sqlglot
    try:
        stmts = [st for st in sqlglot.parse(sql, read="spark") if st is not None]
    except sqlglot.errors.ParseError:
        return [sql]  # ddflow's own front end names the error
    if len(stmts) <= 1:
        return [sql.strip().rstrip(";")]
    return [st.sql(dialect="spark") for st in stmts]


def _tables_of(sql: str) -> set[str]:
    """The lower-cased names of the tables and views a query reads (sqlglot, Spark dialect).  O(query)."""
    import sqlglot
    from sqlglot import exp
    try:
        return {t.name.lower() for stmt in sqlglot.parse(sql, read="spark") if stmt is not None
                for t in stmt.find_all(exp.Table)}
    except sqlglot.errors.ParseError:
        return set()  # ddflow's own front end names the error when the view is built


def _show(v: Any) -> str:
    text = json.dumps(v, sort_keys=True, default=str)
    return text if len(text) <= 160 else text[:157] + "..."


def _dir_bytes(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total
