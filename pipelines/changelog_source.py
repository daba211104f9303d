"""A source of changelog rows: Spark's changelog shape or Debezium envelopes, from any function that reads them.

The function is called with the last version the pipeline applied (None
on the first run) and returns the changes since, as a pyarrow Table, a
pandas DataFrame or a Spark DataFrame (a batch read of
``SELECT * FROM t CHANGES FROM VERSION ...``, of a Delta table's
``readChangeFeed``, or of a Kafka topic of Debezium messages).  Rows are
grouped by version into commits, in version order whatever order they
arrive in; a row at a version the pipeline already applied is a
redelivery and is dropped (counted as a duplicate), and so is a Debezium
event identical to another at the same position.  Rows that cannot be
applied (an unknown ``_change_type``, a malformed envelope) are dead
letters naming the field.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np
import pyarrow as pa

from ddflow.base.schema import sql_type
from ddflow.pipelines.envelopes import changelog_rows, debezium_rows
from ddflow.pipelines.source import Commit, Progress, Read, Source, SourceError
from ddflow.pipelines.types import canonical

FORMATS = ("spark", "debezium")


def to_arrow(data: Any) -> pa.Table:
    """A pyarrow Table of what a changelog function returned (Table, RecordBatchReader, pandas, Spark).  O(rows)."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatchReader):
        return data.read_all()
    if hasattr(data, "toArrow"):  # a Spark DataFrame (pyspark >= 4)
        return data.toArrow()
    if hasattr(data, "to_arrow"):
        return data.to_arrow()
    if hasattr(data, "__arrow_c_stream__"):
        return pa.table(data)
    try:
        import pandas as pd
        if isinstance(data, pd.DataFrame):
            return pa.Table.from_pandas(data, preserve_index=False)
    except ImportError:  # pragma: no cover
        pass
    raise TypeError("a changelog function returns a pyarrow Table, pandas or Spark DataFrame, not "
                    f"{type(data).__name__}")


class ChangelogSource(Source):
    """Changelog rows from ``read(since)`` (see the module docstring).

    ``columns``: ``{name: sql type}`` of the table.  ``format``:
    ``"spark"`` (the columns, ``_change_type``, ``_commit_version``) or
    ``"debezium"`` (envelopes in column ``value``, the version from column
    ``position``: a Kafka ``offset``, or a column holding an LSN).
    ``name``: what identifies this feed in the state (default: the
    function's qualified name).
    """

    kind = "changelog"

    def __init__(self, read: Callable[[int | None], Any], columns: Mapping[str, str], format: str = "spark",
                 position: str | None = None, value: str = "value", name: str | None = None):
        if format not in FORMATS:
            raise ValueError(f"changelog(format={format!r}): the formats are {FORMATS}")
        self.fn = read
        self._columns = {n: sql_type(t, f"changelog column {n!r}") for n, t in columns.items()}
        self.format = format
        self.position = position or ("_commit_version" if format == "spark" else "offset")
        self.value = value
        self.name = name or getattr(read, "__qualname__", type(read).__name__)

    def describe(self) -> dict:
        return {"kind": "changelog", "location": self.name, "format": self.format, "position": self.position}

    def where(self) -> str:
        return f"changelog {self.name} ({self.format})"

    def columns(self) -> dict[str, str]:
        return dict(self._columns)

    def version_of(self, position: dict | None) -> int:
        return -1 if position is None else int(position["version"])

    def read(self, position: dict | None, end: dict | None, progress: Progress) -> Read:
        since = None if position is None else int(position["version"])
        try:
            table = to_arrow(self.fn(since))
        except SourceError:
            raise
        except Exception as e:  # noqa: BLE001 - the user's function: its error, named
            raise SourceError(f"{self.where()}: reading the changes since version {since} failed: "
                              f"{type(e).__name__}: {e}") from e
        progress(table.num_rows, table.num_rows)
        rejected: list[dict] = []
        if self.format == "spark":
            missing = [c for c in self._columns if c not in table.column_names]
            if missing:
                raise SourceError(f"{self.where()}: the rows lack columns {missing} (columns: {table.column_names})")
            try:
                rows, versions, bad = changelog_rows(table, self._columns, version=self.position)
            except ValueError as e:
                raise SourceError(f"{self.where()}: {e}") from None
            rejected += [{"error": why, "row": _row(table, i)} for i, why in bad]
            duplicates = 0
        else:
            for c in (self.value, self.position):
                if c not in table.column_names:
                    raise SourceError(f"{self.where()}: no column {c!r} (columns: {table.column_names})")
            pos = table.column(self.position).cast(pa.int64()).to_numpy(zero_copy_only=False)
            keep, duplicates = _distinct_events(pos, table.column(self.value).to_pylist())
            env = debezium_rows([table.column(self.value)[int(i)].as_py() for i in keep], self._columns)
            rejected += [{"error": why, "position": int(pos[keep[i]]), "row": _row(table, int(keep[i]))}
                         for i, why in env.errors]
            rows = env.rows
            versions = pos[keep][env.event] if len(env.event) else np.zeros(0, dtype=np.int64)
        rows = canonical(rows, self._columns, self.where())
        fresh = np.ones(len(versions), dtype=bool) if since is None else versions > since
        if end is not None:
            fresh &= versions <= int(end["version"])
        duplicates += int((~fresh).sum()) if since is not None else 0
        rows, versions = rows.filter(pa.array(fresh)), versions[fresh]
        commits = []
        if len(versions):
            order = np.argsort(versions, kind="stable")
            rows, versions = rows.take(pa.array(order)), versions[order]
            cuts = np.flatnonzero(np.diff(versions)) + 1
            for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, len(versions)]):
                commits.append(Commit(int(versions[lo]), 0, rows.slice(int(lo), int(hi - lo))))
        last = commits[-1].version if commits else (since if since is not None else -1)
        if end is not None:
            last = max(last, int(end["version"]))
        return Read(commits, {"version": last}, rejected=rejected, duplicates=duplicates)


def _distinct_events(pos: np.ndarray, values: list) -> tuple[np.ndarray, int]:
    """Indices of the events to parse: one of each identical (position, message) pair; and how many were dropped."""
    seen, keep = set(), []
    for i, (p, v) in enumerate(zip(pos.tolist(), values)):
        k = (p, v if not isinstance(v, dict) else repr(sorted(v.items())))
        if k in seen:
            continue
        seen.add(k)
        keep.append(i)
    return np.asarray(keep, dtype=np.int64), len(values) - len(keep)


def _row(table: pa.Table, i: int) -> dict:
    return {k: (v if isinstance(v, (int, float, str, bool, type(None))) else str(v))
            for k, v in table.slice(i, 1).to_pylist()[0].items()}
