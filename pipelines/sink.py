"""What every pipeline sink does: commit one run's changes of a view once, and say which run it holds.

Exactly once comes from the table format's own idempotent commit: each
commit carries the pipeline's *application id* (one per view and sink)
and the run number (Delta: an app transaction, ``txn``; Iceberg: snapshot
summary properties; a Parquet changelog: the file name), and the sources'
end positions the run read up to.  A run killed after a sink committed and
before the pipeline's own manifest is run again with the same number: the
sink says it holds that run, the pipeline reads the sources exactly up to
the recorded ends (so it computes the same changes) and skips the sink.

Modes of :meth:`Sink.commit`:

* ``"changes"``: apply the run's changes to what the table holds;
* ``"initial"``: the sink is new to a pipeline that already ran: write
  the view's whole contents (a changelog: the earlier contents as inserts,
  then the run's changes);
* ``"rebuild"``: a full refresh: replace the table's rows.
"""
from __future__ import annotations

from abc import ABC, abstractmethod

import json
from dataclasses import dataclass

from ddflow.pipelines.changes import ViewChanges

#: Commit metadata keys (Delta commitInfo, Iceberg snapshot summary, Parquet file metadata).
APP, RUN, ENDS = "ddflow.app", "ddflow.run", "ddflow.ends"
MODES = ("changes", "initial", "rebuild")


@dataclass
class SinkCommit:
    """The latest run a sink holds for one application id, and the source ends that run read up to."""

    run: int
    ends: dict


def metadata(app_id: str, run: int, ends: dict) -> dict[str, str]:
    """The commit metadata every sink writes (strings only: what every format's metadata takes).

    >>> metadata("ddflow:p:v", 3, {"orders": {"version": 7}})["ddflow.run"]
    '3'
    """
    return {APP: app_id, RUN: str(run), ENDS: json.dumps(ends, sort_keys=True)}


def read_metadata(meta: dict, app_id: str) -> SinkCommit | None:
    """The :class:`SinkCommit` of commit metadata written for ``app_id`` (None for any other's)."""
    if meta.get(APP) != app_id or RUN not in meta:
        return None
    return SinkCommit(int(meta[RUN]), json.loads(meta.get(ENDS) or "{}"))


class Sink(ABC):
    """The interface of a pipeline sink (see the module docstring)."""

    kind = "sink"

    @abstractmethod
    def describe(self) -> dict:
        """What identifies the sink (its kind and location)."""

    @abstractmethod
    def last_commit(self, app_id: str) -> SinkCommit | None:
        """The latest run committed under ``app_id`` (None: the table does not exist or holds none)."""

    @abstractmethod
    def commit(self, app_id: str, run: int, changes: ViewChanges, ends: dict, mode: str) -> int:
        """Commit one run's changes as one transaction; returns the rows written.  Only called when
        :meth:`last_commit` is below ``run``."""

    def where(self) -> str:
        d = self.describe()
        return f"{d['kind']} {d['location']}"
