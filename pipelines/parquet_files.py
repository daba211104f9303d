"""Parquet directories: a source whose new files are inserts, and a changelog sink of one file per run.

Source: every ``*.parquet`` file under the directory (Hive partition
folders ``k=v`` give their columns; names starting with ``.`` or ``_``
are skipped, as Spark's writers leave them) is known by its size and
modification time.  Each new file is one commit (ordered by modification
time, then name), its rows inserts, its version the count of files before
it; the first run reads every file as one commit.  A
known file that disappeared or changed is refused by name, unless the
table is declared ``replace_on_change``: then the run replaces the table's
rows with the directory's (a commit of every row's difference).  Cost:
listing the directory and reading the new files; a replacement reads the
whole directory and the table's rows from the pipeline's state.

Sink: :class:`ParquetChangelogSink` writes a view's changes in Spark's
changelog shape as ``ddflow-<run>.parquet`` (written to a temporary name
and renamed, so a file is all there or not there), its metadata naming
the application id, run and source ends.
"""
from __future__ import annotations

import glob
import os
from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ddflow.pipelines.changes import ViewChanges, consolidate
from ddflow.pipelines.delta_tables import REBUILD, _changelog_schema
from ddflow.pipelines.sink import Sink, SinkCommit, metadata, read_metadata
from ddflow.pipelines.source import Commit, Progress, Read, Source, SourceError, signed
from ddflow.pipelines.types import arrow_type, canonical, conform, sql_columns


class ParquetSource(Source):
    """A directory of Parquet files (see the module docstring)."""

    kind = "parquet"

    def __init__(self, path: str, columns: list[str] | None = None, replace_on_change: bool = False):
        self.path = os.path.abspath(path)
        self._columns = list(columns) if columns else None
        self.replace_on_change = replace_on_change
        #: Set by the pipeline: the table's rows now (its columns and ``diff``), for a replacement.
        self.contents: Callable[[], pa.Table] | None = None

    def describe(self) -> dict:
        return {"kind": "parquet", "location": self.path, "columns": self._columns,
                "replace_on_change": self.replace_on_change}

    def where(self) -> str:
        return f"Parquet directory {self.path}"

    def _listing(self) -> dict[str, str]:
        if not os.path.isdir(self.path):
            raise SourceError(f"{self.where()}: no such directory")
        out = {}
        for root, dirs, files in os.walk(self.path):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
            for f in files:
                if f.endswith(".parquet") and not f.startswith((".", "_")):
                    p = os.path.join(root, f)
                    st = os.stat(p)
                    out[os.path.relpath(p, self.path)] = f"{st.st_size}:{st.st_mtime_ns}"
        return out

    def _dataset(self, files: list[str]):
        import pyarrow.dataset as pds
        return pds.dataset([os.path.join(self.path, f) for f in files], format="parquet", partitioning="hive",
                           partition_base_dir=self.path)

    def columns(self) -> dict[str, str]:
        files = sorted(self._listing())
        if not files:
            raise SourceError(f"{self.where()}: no Parquet files yet, so no columns; add one before the first run")
        return sql_columns(self._dataset(files[:1]).schema, self.where(), self._columns)

    def version_of(self, position: dict | None) -> int:
        return -1 if position is None else int(position["version"])

    def _read(self, files: list[str], types: dict) -> pa.Table:
        if not files:
            return canonical(pa.schema([(n, arrow_type(t)) for n, t in types.items()]).empty_table(), types,
                             self.where())
        try:
            t = self._dataset(files).to_table(columns=list(types))
        except (OSError, pa.ArrowInvalid) as e:
            raise SourceError(f"{self.where()}: cannot read {files[0] if len(files) == 1 else 'its files'} "
                              f"({type(e).__name__}: {e}); if a file is still being written, run again once it is "
                              "complete") from None
        return canonical(t, types, self.where())

    def read(self, position: dict | None, end: dict | None, progress: Progress) -> Read:
        types = self.columns()
        now = self._listing()
        known = dict((position or {}).get("files") or {})
        version = self.version_of(position)
        if end is not None:
            return self._read_pinned(known, version, end, now, types, progress)
        gone = sorted(f for f in known if now.get(f) != known[f])
        if gone:
            if not self.replace_on_change:
                f = gone[0]
                what = "disappeared" if f not in now else f"changed (size:mtime {known[f]} -> {now[f]})"
                raise SourceError(f"{self.where()}: file {f} {what} since the last run; a Parquet source only grows "
                                  "by new files. Declare it parquet(..., replace_on_change=True) to take a changed "
                                  f"directory as a replacement of its rows, or {REBUILD}")
            return self._replace(version, now, types, progress)
        new = sorted((f for f in now if f not in known), key=lambda f: (int(now[f].split(":")[1]), f))
        if position is None:  # the directory as it is: one commit, at the version its files count to
            rows = self._read(new, types)
            progress(len(new), len(new))
            pos = {"version": len(new) - 1, "files": now}
            stamp = max((int(now[f].split(":")[1]) // 1_000_000 for f in new), default=0)
            return Read([Commit(len(new) - 1, stamp, signed(rows, 1))], pos,
                        end={"version": len(new) - 1, "added": now})
        commits = []
        for i, f in enumerate(new):
            commits.append(Commit(version + i + 1, int(now[f].split(":")[1]) // 1_000_000,
                                  signed(self._read([f], types), 1)))
            progress(i + 1, len(new))
        files = {**known, **{f: now[f] for f in new}}
        pos = {"version": version + len(new), "files": files}
        return Read(commits, pos, end={"version": pos["version"], "added": {f: now[f] for f in new}})

    def _replace(self, version: int, now: dict, types: dict, progress: Progress) -> Read:
        if self.contents is None:
            raise SourceError(f"{self.where()}: a replacement needs the table's rows, which only a pipeline gives")
        files = sorted(now)
        rows = self._read(files, types)
        progress(len(files), len(files))
        old = self.contents()  # the table's rows now, each retracted
        gone = old.select(list(types)).append_column("diff", pc.negate(old.column("diff")))
        both = pa.concat_tables([signed(rows, 1), gone.cast(signed(rows, 1).schema)])
        change = consolidate(both, list(types))
        stamp = max((int(v.split(":")[1]) // 1_000_000 for v in now.values()), default=0)
        pos = {"version": version + 1, "files": now}
        return Read([Commit(version + 1, stamp, change)], pos, end={"version": version + 1, "replace": now})

    def _read_pinned(self, known: dict, version: int, end: dict, now: dict, types: dict, progress: Progress) -> Read:
        """Read exactly what a run that committed a sink read: the files ``end`` names, unchanged."""
        want = end.get("replace") or end.get("added") or {}
        for f, st in want.items():
            if now.get(f) != st:
                raise SourceError(f"{self.where()}: file {f}, which a committed sink's run read, "
                                  f"{'disappeared' if f not in now else 'changed'} since; {REBUILD}")
        if "replace" in end:
            return self._replace(version, want, types, progress)
        if version < 0:
            rows = self._read(sorted(want), types)
            progress(len(want), len(want))
            stamp = max((int(v.split(":")[1]) // 1_000_000 for v in want.values()), default=0)
            v = int(end["version"])
            return Read([Commit(v, stamp, signed(rows, 1))], {"version": v, "files": dict(want)}, end=end)
        new = sorted(want, key=lambda f: (int(want[f].split(":")[1]), f))
        commits = [Commit(version + i + 1, int(want[f].split(":")[1]) // 1_000_000, signed(self._read([f], types), 1))
                   for i, f in enumerate(new)]
        progress(len(new), len(new))
        return Read(commits, {"version": version + len(new), "files": {**known, **want}}, end=end)


class ParquetChangelogSink(Sink):
    """A directory of a view's changes in Spark's changelog shape, one file per run with changes."""

    kind = "parquet-changelog"

    def __init__(self, path: str):
        self.path = os.path.abspath(path)

    def describe(self) -> dict:
        return {"kind": self.kind, "location": self.path}

    def _files(self) -> list[str]:
        return sorted(glob.glob(os.path.join(self.path, "ddflow-*.parquet")))

    def last_commit(self, app_id: str) -> SinkCommit | None:
        best = None
        for f in self._files():
            meta = pq.read_schema(f).metadata or {}
            got = read_metadata({k.decode(): v.decode() for k, v in meta.items()}, app_id)
            if got is not None and (best is None or got.run > best.run):
                best = got
        return best

    def commit(self, app_id: str, run: int, changes: ViewChanges, ends: dict, mode: str) -> int:
        rows = changes.changelog(initial_version=changes.initial_version if mode == "initial" else None)
        if not rows.num_rows and mode == "changes":
            return 0
        schema = _changelog_schema(changes.columns)
        rows = conform(rows, schema, f"sink {self.where()} of view {changes.view!r}")
        rows = rows.replace_schema_metadata(metadata(app_id, run, ends))
        os.makedirs(self.path, exist_ok=True)
        old = self._files() if mode != "changes" else []
        path = os.path.join(self.path, f"ddflow-{run:012d}.parquet")
        tmp = os.path.join(self.path, f".ddflow-{run:012d}.parquet.tmp")
        pq.write_table(rows, tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
        for f in old:  # a rebuild or a new changelog starts over: the earlier files go once the new one is there
            if f != path:
                os.unlink(f)
        return rows.num_rows
