"""Data times of lakehouse commits: a view is exact at every version of every source.

A pipeline's data time after a commit is the sum of its sources' versions,
plus the number of sources minus one (a source not read yet counts as
version -1).  With one source the data time *is* the source's version, so
a changelog's ``_commit_version`` reads as the table's version.  Every
commit raises its source's version, so the data time strictly increases
along any order of the commits: one run with many commits is many data
times, and the view's output carries each change at the time of the
commit that caused it.  Commits of several sources are ordered by their
commit timestamps (ties: the order the tables were declared, then the
version).
"""
from __future__ import annotations

from dataclasses import dataclass

from ddflow.pipelines.source import Commit


@dataclass
class Timed:
    """A commit of source ``table`` at pipeline data time ``time``, with every source's version after it."""

    time: int
    table: str
    commit: Commit
    versions: dict[str, int]


def now(versions: dict[str, int]) -> int:
    """The data time of a state where each source stands at ``versions`` (-1: not read yet).

    >>> now({"orders": 7}), now({"a": 2, "b": -1}), now({"a": 2, "b": 0})
    (7, 2, 3)
    """
    return sum(versions.values()) + len(versions) - 1


def assign(versions: dict[str, int], commits: dict[str, list[Commit]]) -> list[Timed]:
    """Order the commits of all sources and give each its data time, starting from ``versions``.

    ``versions``: each source's version before these commits (every source
    of the pipeline, in declaration order).  Each source's commits must
    have increasing versions above its recorded one.  O(c log c).

    >>> import pyarrow as pa
    >>> c = lambda v, ts: Commit(v, ts, pa.table({"a": []}))
    >>> [(t.time, t.table) for t in assign({"a": -1, "b": 4}, {"a": [c(0, 5)], "b": [c(5, 1), c(6, 9)]})]
    [(5, 'b'), (6, 'a'), (7, 'b')]
    """
    order = {name: i for i, name in enumerate(versions)}
    cur = dict(versions)
    for name, cs in commits.items():
        last = cur[name]
        for c in cs:
            if c.version <= last:
                raise ValueError(f"source {name!r}: commit version {c.version} is not after {last}")
            last = c.version
    flat = sorted(((c.timestamp_ms, order[name], c.version, name, c) for name, cs in commits.items() for c in cs),
                  key=lambda x: x[:3])
    # Timestamps may disagree with versions within one source (clock skew): each source keeps its version order.
    queues = {name: list(cs) for name, cs in commits.items()}
    out = []
    for _, _, _, name, _ in flat:
        c = queues[name].pop(0)
        cur[name] = c.version
        out.append(Timed(now(cur), name, c, dict(cur)))
    return out
