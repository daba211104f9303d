"""Iceberg tables through pyiceberg (any catalog it loads; a SQL catalog on SQLite is enough): source and sinks.

Source: each snapshot of the table's main branch after the recorded one
is one commit, its sequence number the version.  A snapshot's change is
the difference of its scan tasks (a data file with its delete files):
rows of tasks it added are inserts, rows of tasks it dropped are deletes,
added up, so appends, deletes (copy-on-write or merge-on-read) and
overwrites all arrive exactly.  Cost: the files of every task a snapshot
touched.  A recorded snapshot that is no longer an ancestor of the
current one (a rollback, expired snapshots) or a replaced table (a new
table UUID) is refused by name.

Sinks: :class:`IcebergTableSink` (the view's contents: per run one
transaction that deletes the changed keys' rows and appends their new
rows, or overwrites the table when more than :data:`MAX_KEYS` keys
changed) and :class:`IcebergChangelogSink` (Spark's changelog rows,
appended).  Each commit's snapshot summary carries the application id,
run and source ends; the table's snapshot history says which runs it holds.
"""
from __future__ import annotations

import warnings
from typing import Any

import pyarrow as pa

from ddflow.pipelines.changes import ViewChanges
from ddflow.pipelines.delta_tables import REBUILD, _changelog_schema, _with_nulls
from ddflow.pipelines.sink import Sink, SinkCommit, metadata, read_metadata
from ddflow.pipelines.source import Commit, Progress, Read, Source, SourceError, signed
from ddflow.pipelines.types import arrow_schema, canonical, conform, sql_columns

#: A contents sink deletes changed keys by an expression up to this many keys, and overwrites above it.
MAX_KEYS = 256


def load_catalog(catalog: Any):
    """A pyiceberg catalog: one given, or one loaded from a dict of properties (``{"type": "sql", "uri": ...,
    "warehouse": ...}``; a ``name`` key names it)."""
    if isinstance(catalog, dict):
        from pyiceberg.catalog import load_catalog as load
        props = dict(catalog)
        return load(props.pop("name", "ddflow"), **props)
    return catalog


def _catalog_name(catalog: Any) -> str:
    if isinstance(catalog, dict):
        return str(catalog.get("uri") or catalog.get("name") or "catalog")
    props = getattr(catalog, "properties", {}) or {}
    return str(props.get("uri") or getattr(catalog, "name", "catalog"))


def _summary(snapshot) -> dict:
    s = snapshot.summary
    if s is None:
        return {}
    props = getattr(s, "additional_properties", None)
    return dict(props) if props is not None else dict(s)


class IcebergSource(Source):
    """An Iceberg table ``identifier`` (``"db.orders"``) of ``catalog`` read by snapshots."""

    kind = "iceberg"

    def __init__(self, identifier: str, catalog: Any, columns: list[str] | None = None):
        self.identifier = identifier
        self.catalog = catalog
        self._columns = list(columns) if columns else None

    def describe(self) -> dict:
        return {"kind": "iceberg", "location": f"{_catalog_name(self.catalog)}#{self.identifier}",
                "columns": self._columns}

    def where(self) -> str:
        return f"Iceberg table {self.identifier} ({_catalog_name(self.catalog)})"

    def _table(self):
        try:
            return load_catalog(self.catalog).load_table(self.identifier)
        except Exception as e:  # noqa: BLE001 - pyiceberg's NoSuchTableError and the catalog's own errors
            raise SourceError(f"{self.where()}: cannot load it ({type(e).__name__}: {e})") from None

    def columns(self) -> dict[str, str]:
        return sql_columns(self._table().schema().as_arrow(), self.where(), self._columns)

    def version_of(self, position: dict | None) -> int:
        return -1 if position is None else int(position["sequence"])

    def latest_version(self) -> int | None:
        snap = self._table().current_snapshot()
        return -1 if snap is None else int(snap.sequence_number)

    def read(self, position: dict | None, end: dict | None, progress: Progress) -> Read:
        tbl = self._table()
        uuid = str(tbl.metadata.table_uuid)
        types = self.columns()
        if position is not None and position.get("table_uuid") != uuid:
            raise SourceError(f"{self.where()}: the table was replaced (its UUID is {uuid}, the pipeline's state "
                              f"recorded {position.get('table_uuid')}); {REBUILD}")
        current = tbl.current_snapshot()
        if end is not None and end.get("snapshot_id") is not None:
            current = tbl.snapshot_by_id(int(end["snapshot_id"]))
            if current is None:
                raise SourceError(f"{self.where()}: snapshot {end['snapshot_id']} (what the committed sinks hold) no "
                                  f"longer exists; {REBUILD}")
        if current is None:
            progress(0, 0)
            return Read([], {"snapshot_id": None, "sequence": 0, "table_uuid": uuid})
        new = {"snapshot_id": current.snapshot_id, "sequence": current.sequence_number, "table_uuid": uuid}
        if position is None:
            rows = tbl.scan(snapshot_id=current.snapshot_id, selected_fields=tuple(types)).to_arrow()
            progress(1, 1)
            return Read([Commit(current.sequence_number, current.timestamp_ms,
                                signed(canonical(rows, types, self.where()), 1))], new)
        chain = self._chain(tbl, position.get("snapshot_id"), current)
        commits = []
        prev_tasks = self._tasks(tbl, position.get("snapshot_id"), types)
        for i, snap in enumerate(chain):
            tasks = self._tasks(tbl, snap.snapshot_id, types)
            added = [tasks[k] for k in sorted(tasks.keys() - prev_tasks.keys())]
            removed = [prev_tasks[k] for k in sorted(prev_tasks.keys() - tasks.keys())]
            ins = signed(canonical(self._rows(tbl, added, types), types, self.where()), 1)
            dele = signed(canonical(self._rows(tbl, removed, types), types, self.where()), -1)
            commits.append(Commit(snap.sequence_number, snap.timestamp_ms, pa.concat_tables([ins, dele])))
            prev_tasks = tasks
            progress(i + 1, len(chain))
        if not chain:
            progress(0, 0)
        return Read(commits, new)

    def _chain(self, tbl, start: int | None, current) -> list:
        """The snapshots after ``start`` up to ``current``, oldest first, along ``current``'s parents."""
        out, snap = [], current
        while snap is not None and snap.snapshot_id != start:
            out.append(snap)
            parent = snap.parent_snapshot_id
            snap = tbl.snapshot_by_id(parent) if parent is not None else None
            if snap is None and start is not None:
                raise SourceError(f"{self.where()}: snapshot {start}, where the pipeline last read it, is no longer an "
                                  "ancestor of the current snapshot (the table was rolled back, or its snapshots "
                                  f"expired); {REBUILD}")
        return out[::-1]

    def _tasks(self, tbl, snapshot_id: int | None, types: dict) -> dict:
        if snapshot_id is None:
            return {}
        try:
            tasks = tbl.scan(snapshot_id=snapshot_id, selected_fields=tuple(types)).plan_files()
        except Exception as e:  # noqa: BLE001 - a missing manifest (expired snapshot) and pyiceberg's own errors
            raise SourceError(f"{self.where()}: the files of snapshot {snapshot_id} cannot be listed "
                              f"({type(e).__name__}: {e}); {REBUILD}") from None
        return {(t.file.file_path, tuple(sorted(d.file_path for d in t.delete_files))): t for t in tasks}

    def _rows(self, tbl, tasks: list, types: dict) -> pa.Table:
        from pyiceberg.expressions import AlwaysTrue
        from pyiceberg.io.pyarrow import ArrowScan
        schema = tbl.schema().select(*types)
        if not tasks:
            return schema.as_arrow().empty_table()
        try:
            return ArrowScan(tbl.metadata, tbl.io, schema, AlwaysTrue()).to_table(tasks)
        except (OSError, FileNotFoundError) as e:
            raise SourceError(f"{self.where()}: a data file cannot be read ({type(e).__name__}: {e}); {REBUILD}") \
                from None


class _IcebergSink(Sink):
    def __init__(self, identifier: str, catalog: Any):
        self.identifier = identifier
        self.catalog = catalog

    def describe(self) -> dict:
        return {"kind": self.kind, "location": f"{_catalog_name(self.catalog)}#{self.identifier}"}

    def _existing(self):
        cat = load_catalog(self.catalog)
        if not cat.table_exists(self.identifier):
            return None
        return cat.load_table(self.identifier)

    def _create(self, schema: pa.Schema):
        cat = load_catalog(self.catalog)
        ns = tuple(self.identifier.split(".")[:-1])
        if ns:
            cat.create_namespace_if_not_exists(ns)
        return cat.create_table(self.identifier, schema=schema)

    def last_commit(self, app_id: str) -> SinkCommit | None:
        tbl = self._existing()
        if tbl is None:
            return None
        best = None
        for snap in tbl.snapshots():
            got = read_metadata(_summary(snap), app_id)
            if got is not None and (best is None or got.run > best.run):
                best = got
        return best


class IcebergTableSink(_IcebergSink):
    """An Iceberg table holding a view's current rows (see the module docstring)."""

    kind = "iceberg-table"

    def commit(self, app_id: str, run: int, changes: ViewChanges, ends: dict, mode: str) -> int:
        props = metadata(app_id, run, ends)
        tbl = self._existing()
        where = f"sink {self.where()} of view {changes.view!r}"
        if tbl is None:
            tbl = self._create(arrow_schema(changes.columns))
        target = tbl.schema().as_arrow()
        keys = changes.touched()
        if mode != "changes" or keys.num_rows > MAX_KEYS:
            rows = conform(changes.rows_after(), target, where)
            with tbl.transaction() as tx, warnings.catch_warnings():
                warnings.filterwarnings("ignore", "Delete operation did not match any records")  # an empty table
                tx.overwrite(rows, snapshot_properties=props)
            return rows.num_rows
        if not keys.num_rows:
            return 0
        new = conform(changes.rows_after(keys), target, where)
        markers = conform(_with_nulls(keys, changes), target, where)
        names = [f.name for f in target if f.name.lower() in {c.lower() for c in changes.key_columns}]
        with tbl.transaction() as tx, warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Delete operation did not match any records")  # a new key
            tx.delete(_matching(markers, names), snapshot_properties=props)
            if new.num_rows:
                tx.append(new, snapshot_properties=props)
        return new.num_rows + markers.num_rows


class IcebergChangelogSink(_IcebergSink):
    """An Iceberg table of a view's changes in Spark's changelog shape, appended once per run."""

    kind = "iceberg-changelog"

    def commit(self, app_id: str, run: int, changes: ViewChanges, ends: dict, mode: str) -> int:
        rows = changes.changelog(initial_version=changes.initial_version if mode == "initial" else None)
        if not rows.num_rows and mode == "changes":
            return 0
        tbl = self._existing()
        if tbl is None:
            tbl = self._create(_changelog_schema(changes.columns))
        rows = conform(rows, tbl.schema().as_arrow(), f"sink {self.where()} of view {changes.view!r}")
        props = metadata(app_id, run, ends)
        with tbl.transaction() as tx, warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Delete operation did not match any records")
            if mode == "changes":
                tx.append(rows, snapshot_properties=props)
            else:
                tx.overwrite(rows, snapshot_properties=props)
        return rows.num_rows


def _matching(keys: pa.Table, names: list[str]):
    """A pyiceberg filter matching the rows whose ``names`` equal one row of ``keys`` (NULL matches NULL)."""
    from pyiceberg.expressions import And, EqualTo, IsNull, Or
    terms = []
    for row in keys.select(names).to_pylist():
        parts = [IsNull(n) if row[n] is None else EqualTo(n, _literal(row[n])) for n in names]
        term = parts[0]
        for p in parts[1:]:
            term = And(term, p)
        terms.append(term)
    out = terms[0]
    for t in terms[1:]:
        out = Or(out, t)
    return out


def _literal(v: Any) -> Any:
    """A Python value as pyiceberg's literals take it (dates and timestamps as ISO strings)."""
    import datetime
    if isinstance(v, datetime.datetime):
        return v.isoformat()
    if isinstance(v, datetime.date):
        return v.isoformat()
    return v
