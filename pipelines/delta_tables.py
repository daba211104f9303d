"""Delta Lake tables through delta-rs (the ``deltalake`` package, no JVM): a source of commits, and two sinks.

Source: each Delta version after the recorded one is one commit.

* With the change data feed on (``delta.enableChangeDataFeed``) the rows
  are read from it (``load_cdf``): the changed rows themselves, so a run
  costs what changed.
* Without it, a version's change is the difference of its files: rows of
  the files it added are inserts, rows of the files it removed are
  deletes, added up (a rewritten file's untouched rows cancel).  A run
  costs the bytes of every file a commit touched: an UPDATE of one row
  of a 100 MB file reads 200 MB.  Tables with deletion vectors need the
  change data feed (their files do not say which rows went).

The first run reads the table as it is (its current version) as one
commit.  A history that can no longer be read (VACUUM removed files the
changes need, or the log was cleaned up past the recorded version), a
table replaced under the pipeline (a new table id) or moved back before
the recorded version is refused by name: run a full refresh.

Sinks: :class:`DeltaTableSink` (the view's contents, one MERGE per run
keyed by the view's key, or the whole row) and :class:`DeltaChangelogSink`
(Spark's changelog rows, appended), each commit carrying a delta-rs app
transaction (application id, run) so that it happens once.
"""
from __future__ import annotations

import os
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ddflow.pipelines.changes import CHANGELOG_COLUMNS, ViewChanges
from ddflow.pipelines.sink import Sink, SinkCommit, metadata, read_metadata
from ddflow.pipelines.source import Commit, Progress, Read, Source, SourceError, signed
from ddflow.pipelines.types import arrow_schema, arrow_type, canonical, conform, sql_columns

REBUILD = "run the pipeline with a full refresh (`--full-refresh`, or refresh(full=True)) to rebuild its views " \
          "from the tables as they are now"


def _deltalake():
    try:
        import deltalake
    except ImportError:  # pragma: no cover - the pipelines extra installs it
        raise ImportError("Delta tables need the deltalake package: pip install 'ddflow[pipelines]'") from None
    return deltalake


def _uri(path: str) -> str:
    return path if "://" in path else os.path.abspath(path)


class DeltaSource(Source):
    """A Delta table read by commits; ``columns`` keeps only those (default: all), ``cdf`` chooses how
    changes are read: ``"auto"`` (the change data feed where the table has it on), ``True``, ``False``.

    >>> DeltaSource("/lake/orders").describe()["kind"]
    'delta'
    """

    kind = "delta"

    def __init__(self, path: str, columns: list[str] | None = None, cdf: bool | str = "auto",
                 storage_options: dict[str, str] | None = None):
        if cdf not in ("auto", True, False):
            raise ValueError(f"delta({path!r}, cdf={cdf!r}): cdf is 'auto', True or False")
        self.path = _uri(path)
        self._columns = list(columns) if columns else None
        self.cdf = cdf
        self.storage_options = storage_options

    def describe(self) -> dict:
        return {"kind": "delta", "location": self.path, "columns": self._columns}

    def where(self) -> str:
        return f"Delta table {self.path}"

    def _table(self, version: int | None = None):
        dl = _deltalake()
        try:
            if version is None:
                return dl.DeltaTable(self.path, storage_options=self.storage_options)
            return dl.DeltaTable(self.path, version=version, storage_options=self.storage_options)
        except dl.exceptions.TableNotFoundError:
            raise SourceError(f"{self.where()}: no Delta table there") from None
        except (dl.exceptions.DeltaError, OSError) as e:
            at = "" if version is None else f" at version {version}"
            raise SourceError(f"{self.where()}: cannot load the table{at} ({type(e).__name__}: {e}); its log may "
                              f"have been cleaned up past that version; {REBUILD}") from None

    def columns(self) -> dict[str, str]:
        return sql_columns(pa.schema(self._table().schema().to_arrow()), self.where(), self._columns)

    def version_of(self, position: dict | None) -> int:
        return -1 if position is None else int(position["version"])

    def latest_version(self) -> int | None:
        return int(self._table().version())

    def read(self, position: dict | None, end: dict | None, progress: Progress) -> Read:
        dt = self._table()
        tid = dt.metadata().id
        target = dt.version() if end is None else int(end["version"])
        if position is not None and position.get("table_id") != tid:
            raise SourceError(f"{self.where()}: the table was replaced (its id is {tid}, the pipeline's state "
                              f"recorded {position.get('table_id')}); {REBUILD}")
        if target > dt.version():
            raise SourceError(f"{self.where()}: a run must read up to version {target} (what its committed sinks "
                              f"hold), but the table is at {dt.version()}; {REBUILD}")
        cols = list(self.columns())
        types = self.columns()
        new = {"version": target, "table_id": tid}
        if position is None:
            snap = self._table(target)
            rows = snap.to_pyarrow_table(columns=cols)
            progress(1, 1)
            commit = Commit(target, self._timestamps(snap, target, target).get(target, 0),
                            signed(canonical(rows, types, self.where()), 1))
            return Read([commit], new)
        start = int(position["version"])
        if target < start:
            raise SourceError(f"{self.where()}: the table is at version {target}, before the version {start} the "
                              f"pipeline already read (restored to an older version, or replaced); {REBUILD}")
        if target == start:
            progress(0, 0)
            return Read([], new)
        if self._use_cdf(dt, start):
            commits = self._read_cdf(dt, start, target, types, progress)
        else:
            commits = self._read_files(start, target, types, progress)
        return Read(commits, new)

    def _use_cdf(self, dt, start: int) -> bool:
        if self.cdf is False:
            return False
        on = str(dt.metadata().configuration.get("delta.enableChangeDataFeed", "false")).lower() == "true"
        if on:  # it must have been on since the recorded version, or the feed misses commits
            then = self._table(start).metadata().configuration
            on = str(then.get("delta.enableChangeDataFeed", "false")).lower() == "true"
        if self.cdf is True and not on:
            raise SourceError(f"{self.where()}: cdf=True, but the change data feed is not on since version {start} "
                              "(ALTER TABLE ... SET TBLPROPERTIES (delta.enableChangeDataFeed = true)); or give "
                              "cdf='auto' to read the differences of its files")
        return on

    def _timestamps(self, dt, start: int, target: int) -> dict[int, int]:
        try:
            hist = dt.history(limit=max(1, dt.version() - start + 1))
        except Exception:  # noqa: BLE001 - timestamps are a nicety: a missing one is 0
            return {}
        return {int(h["version"]): int(h.get("timestamp", 0)) for h in hist if "version" in h}

    def _read_cdf(self, dt, start: int, target: int, types: dict, progress: Progress) -> list[Commit]:
        dl = _deltalake()
        try:
            reader = dt.load_cdf(starting_version=start + 1, ending_version=target, columns=list(types) + list(
                CHANGELOG_COLUMNS))
            t = pa.table(reader.read_all())
        except (dl.exceptions.DeltaError, OSError) as e:
            raise SourceError(f"{self.where()}: the change data feed from version {start + 1} to {target} cannot "
                              f"be read ({type(e).__name__}: {str(e).splitlines()[0]}); VACUUM may have removed "
                              f"files it needs; {REBUILD}") from None
        stamps = self._timestamps(dt, start, target)
        kinds = t.column("_change_type").cast(pa.string())
        diff = pc.if_else(pc.is_in(kinds, pa.array(["insert", "update_postimage"])), 1, -1).cast(pa.int64())
        t = canonical(t.select(list(types)), types, self.where()).append_column("diff", diff) \
            .append_column("__v", t.column("_commit_version").cast(pa.int64()))
        out = []
        versions = t.column("__v").to_numpy()
        for i, v in enumerate(range(start + 1, target + 1)):
            rows = t.filter(pa.array(versions == v)).drop_columns(["__v"])
            out.append(Commit(v, stamps.get(v, 0), rows))
            progress(i + 1, target - start)
        return out

    def _read_files(self, start: int, target: int, types: dict, progress: Progress) -> list[Commit]:
        import pyarrow.dataset as pds
        dl = _deltalake()
        prev = self._table(start)
        self._refuse_deletion_vectors(prev)
        stamps = self._timestamps(self._table(target), start, target)

        def fragments(table) -> dict[str, Any]:
            ds = table.to_pyarrow_dataset()
            return ds, {f.path: f for f in ds.get_fragments()}

        def rows_of(ds, frags: list) -> pa.Table:
            if not frags:
                return pa.table({n: pa.array([], ds.schema.field(n).type) for n in types})
            return pds.FileSystemDataset(frags, ds.schema, ds.format, ds.filesystem).to_table(columns=list(types))

        out = []
        try:
            prev_ds, prev_files = fragments(prev)
            for i, v in enumerate(range(start + 1, target + 1)):
                cur = self._table(v)
                self._refuse_deletion_vectors(cur)
                cur_ds, cur_files = fragments(cur)
                added = [cur_files[p] for p in sorted(cur_files.keys() - prev_files.keys())]
                removed = [prev_files[p] for p in sorted(prev_files.keys() - cur_files.keys())]
                ins = signed(canonical(rows_of(cur_ds, added), types, self.where()), 1)
                dele = signed(canonical(rows_of(prev_ds, removed), types, self.where()), -1)
                out.append(Commit(v, stamps.get(v, 0), pa.concat_tables([ins, dele])))
                prev_ds, prev_files = cur_ds, cur_files
                progress(i + 1, target - start)
        except (dl.exceptions.DeltaError, OSError) as e:
            raise SourceError(f"{self.where()}: the files of versions {start}..{target} cannot be read "
                              f"({type(e).__name__}: {str(e).splitlines()[0]}); VACUUM may have removed files the "
                              f"changes since version {start} need; {REBUILD}") from None
        return out

    def _refuse_deletion_vectors(self, table) -> None:
        features = table.protocol().reader_features or []
        if "deletionVectors" in features:
            raise SourceError(f"{self.where()}: the table uses deletion vectors, which its files' differences "
                              "cannot see; turn its change data feed on (delta.enableChangeDataFeed = true)")


class _DeltaSink(Sink):
    def __init__(self, path: str, partition_by: list[str] | None = None,
                 storage_options: dict[str, str] | None = None):
        self.path = _uri(path)
        self.partition_by = partition_by
        self.storage_options = storage_options

    def describe(self) -> dict:
        return {"kind": self.kind, "location": self.path}

    def _existing(self):
        dl = _deltalake()
        if not dl.DeltaTable.is_deltatable(self.path, storage_options=self.storage_options):
            return None
        return dl.DeltaTable(self.path, storage_options=self.storage_options)

    def last_commit(self, app_id: str) -> SinkCommit | None:
        dt = self._existing()
        if dt is None:
            return None
        run = dt.transaction_version(app_id)
        if run is None:
            return None
        for limit in (64, None):
            for h in dt.history(limit=limit):
                got = read_metadata(h, app_id)
                if got is not None and got.run == run:
                    return got
        return SinkCommit(int(run), {})

    def _props(self, app_id: str, run: int, ends: dict):
        dl = _deltalake()
        return dl.CommitProperties(custom_metadata=metadata(app_id, run, ends),
                                   app_transactions=[dl.Transaction(app_id, run)])

    def _write(self, data: pa.Table, mode: str, props, schema_mode: str | None = None) -> None:
        _deltalake().write_deltalake(self.path, data, mode=mode, partition_by=self.partition_by,
                                     storage_options=self.storage_options, commit_properties=props,
                                     schema_mode=schema_mode)


class DeltaTableSink(_DeltaSink):
    """A Delta table holding a view's current rows, one transaction per run.

    A run's changes are one MERGE: for every key whose rows changed (the
    view's key, or the whole row), the rows there are deleted and the
    key's new rows inserted.  Cost: delta-rs's MERGE scans the table's
    files (the ones its statistics cannot rule out) and rewrites those
    holding a changed key.  A new table takes the default types
    (:mod:`ddflow.pipelines.types`); an existing one keeps its own.
    """

    kind = "delta-table"

    def commit(self, app_id: str, run: int, changes: ViewChanges, ends: dict, mode: str) -> int:
        props = self._props(app_id, run, ends)
        dt = self._existing()
        target = pa.schema(dt.schema().to_arrow()) if dt is not None else arrow_schema(changes.columns)
        where = f"sink {self.where()} of view {changes.view!r}"
        if dt is None or mode in ("initial", "rebuild"):
            target, schema_mode = _replacing(target, arrow_schema(changes.columns), mode)
            rows = conform(changes.rows_after(), target, where)
            self._write(rows, "overwrite" if dt is not None else "error", props, schema_mode)
            return rows.num_rows
        keys = changes.touched()
        if not keys.num_rows:
            return 0
        new = conform(changes.rows_after(keys), target, where)
        markers = conform(_with_nulls(keys, changes), target, where)
        source = pa.concat_tables([markers.append_column("__ins", pa.array([False] * markers.num_rows, pa.bool_())),
                                   new.append_column("__ins", pa.array([True] * new.num_rows, pa.bool_()))])
        # Each term in parentheses: delta-rs parses `a IS NOT DISTINCT FROM b AND c ...` as `... FROM (b AND c)`.
        on = " AND ".join(f"(t.{_q(c)} IS NOT DISTINCT FROM s.{_q(c)})" for c in _names(target, changes.key_columns))
        (dt.merge(source, f"s.__ins = false AND {on}", source_alias="s", target_alias="t", commit_properties=props)
         .when_matched_delete()
         .when_not_matched_insert(updates={_q(f.name): f"s.{_q(f.name)}" for f in target}, predicate="s.__ins = true")
         .execute())
        return new.num_rows + markers.num_rows


class DeltaChangelogSink(_DeltaSink):
    """A Delta table of a view's changes in Spark's changelog shape, appended once per run.

    Columns: the view's, then ``_change_type``, ``_commit_version`` (the
    pipeline's data time: the source's version for a one-source pipeline)
    and ``_commit_timestamp``.  Reading it up to a version and adding up
    inserts minus deletes gives the view as of that version.
    """

    kind = "delta-changelog"

    def commit(self, app_id: str, run: int, changes: ViewChanges, ends: dict, mode: str) -> int:
        rows = changes.changelog(initial_version=changes.initial_version if mode == "initial" else None)
        if not rows.num_rows and mode == "changes":
            return 0
        dt = self._existing()
        target = pa.schema(dt.schema().to_arrow()) if dt is not None else _changelog_schema(changes.columns)
        schema_mode = None
        if dt is not None and mode != "changes":
            target, schema_mode = _replacing(target, _changelog_schema(changes.columns), mode)
        rows = conform(rows, target, f"sink {self.where()} of view {changes.view!r}")
        self._write(rows, "overwrite" if (dt is not None and mode != "changes") else "append", self._props(
            app_id, run, ends), schema_mode)
        return rows.num_rows


def _changelog_schema(columns: dict[str, str]) -> pa.Schema:
    return pa.schema(list(arrow_schema(columns)) + [pa.field("_change_type", pa.string()),
                                                    pa.field("_commit_version", pa.int64()),
                                                    pa.field("_commit_timestamp", arrow_type("timestamp"))])


def _replacing(existing: pa.Schema, view: pa.Schema, mode: str) -> tuple[pa.Schema, str | None]:
    """The schema a replacing write (a new sink, a full refresh) uses: the table's own types when it has the
    view's columns, otherwise (a rebuilt view with other columns) the view's, replacing the table's schema."""
    if sorted(n.lower() for n in existing.names) == sorted(n.lower() for n in view.names):
        return existing, None
    return view, "overwrite"


def _names(target: pa.Schema, columns: list[str]) -> list[str]:
    low = {f.name.lower(): f.name for f in target}
    return [low[c.lower()] for c in columns]


def _with_nulls(keys: pa.Table, changes: ViewChanges) -> pa.Table:
    """Key rows widened to the view's columns, NULL outside the key (the MERGE's delete markers)."""
    cols = {}
    for n in changes.names:
        if n in keys.column_names:
            cols[n] = keys.column(n)
        else:
            cols[n] = pa.nulls(keys.num_rows, changes.after.schema.field(n).type)
    return pa.table(cols)


def _q(name: str) -> str:
    """A column name quoted for delta-rs's SQL predicates (DataFusion's double quotes)."""
    return '"' + name.replace('"', '""') + '"'

