"""What every pipeline source gives: its columns, and its commits since a recorded position.

A source is a table that changes by commits (a Delta version, an Iceberg
snapshot, a new Parquet file, a changelog's commit version).  A run asks
each source for the commits after the position the state recorded, up to
the table's current one (or up to a given end, when a run that was killed
after committing a sink is run again and must read exactly what it read
before).  Each commit is one data time of the pipeline, so a view is exact
at every version; the pipeline turns the versions into data times
(:func:`ddflow.pipelines.times.assign`).

A position is a small JSON-able dict the source alone understands; ``files``
in it (a Parquet directory's listing) is stored one row per file, so a run
logs only the files it added.
"""
from __future__ import annotations

from abc import ABC, abstractmethod

import json
from dataclasses import dataclass, field
from typing import Any, Callable

import pyarrow as pa

from ddflow.errors import DdflowError

#: ``progress(done, total)`` in units the source chooses (commits or files); total may be 0 when unknown.
Progress = Callable[[int, int], None]


class SourceError(DdflowError, RuntimeError):
    """A source cannot give the changes a run needs (its history was vacuumed, the table was replaced, ...).

    The message names the source and says what to do (usually: run again with a full refresh).
    """


@dataclass
class Commit:
    """One commit of a source: its version, its time (ms since the epoch) and its rows with a ``diff`` column."""

    version: int
    timestamp_ms: int
    changes: pa.Table


@dataclass
class Read:
    """What one run read from a source: its commits in version order and the position after them."""

    commits: list[Commit]
    position: dict
    #: Rows set aside (a changelog's malformed or duplicate events), with the reason: dicts for the dead letters.
    rejected: list[dict] = field(default_factory=list)
    #: Events dropped because the state already holds their version (a re-delivered changelog), counted only.
    duplicates: int = 0
    #: What a sink records to read exactly up to here again (default: the position without its file list).
    end: dict | None = None


class Source(ABC):
    """The interface of a pipeline source (see the module docstring).

    Subclasses set ``kind`` and implement :meth:`describe`, :meth:`columns`,
    :meth:`read` and :meth:`version_of`.
    """

    kind = "source"

    @abstractmethod
    def describe(self) -> dict:
        """What identifies the source in the pipeline's state (its kind, where it is, options that change rows)."""

    @abstractmethod
    def columns(self) -> dict[str, str]:
        """``{name: sql type}`` of the rows the source gives (read from the table's own schema)."""

    @abstractmethod
    def read(self, position: dict | None, end: dict | None, progress: Progress) -> Read:
        """The commits after ``position`` (None: the table as it is now, as one commit) up to ``end`` (None:
        the current version), and the position after them."""

    @abstractmethod
    def version_of(self, position: dict | None) -> int:
        """The version a position stands at (-1 for none): the pipeline's data times are sums of these."""

    def latest_version(self) -> int | None:
        """The version the table is at now, on :meth:`version_of`'s scale (None where the source cannot say):
        what a run's lag is counted against.  Cost: one look at the table's metadata."""
        return None

    def where(self) -> str:
        """How messages name the source: ``Delta table /lake/orders``."""
        d = self.describe()
        return f"{d.get('kind', self.kind)} {d.get('location', '')}".strip()


def position_rows(name: str, position: dict | None) -> dict[str, str]:
    """A source's position as state rows: ``name`` -> JSON of the position without ``files``, and one
    ``name/file/<path>`` row per entry of ``files``.  O(files).

    >>> position_rows("t", {"version": 3, "files": {"a.parquet": "10:5"}})
    {'source/t': '{"version": 3}', 'source/t/file/a.parquet': '10:5'}
    """
    if position is None:
        return {}
    rest = {k: v for k, v in position.items() if k != "files"}
    rows = {f"source/{name}": json.dumps(rest, sort_keys=True)}
    for f, v in (position.get("files") or {}).items():
        rows[f"source/{name}/file/{f}"] = v
    return rows


def position_from_rows(name: str, rows: dict[str, str]) -> dict | None:
    """The inverse of :func:`position_rows` (None when the state holds no position for ``name``).  O(rows).

    >>> position_from_rows("t", {'source/t': '{"version": 3}', 'source/t/file/a.parquet': '10:5'})
    {'version': 3, 'files': {'a.parquet': '10:5'}}
    """
    head = rows.get(f"source/{name}")
    if head is None:
        return None
    pos: dict[str, Any] = json.loads(head)
    prefix = f"source/{name}/file/"
    files = {k[len(prefix):]: v for k, v in rows.items() if k.startswith(prefix)}
    if files:
        pos["files"] = files
    return pos


def signed(rows: pa.Table, diff: int) -> pa.Table:
    """``rows`` with a ``diff`` column of ``diff`` on every row.  O(rows).

    >>> signed(pa.table({"a": [1, 2]}), -1).column("diff").to_pylist()
    [-1, -1]
    """
    return rows.append_column("diff", pa.array([diff] * rows.num_rows, pa.int64()))
