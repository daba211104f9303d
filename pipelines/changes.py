"""A view's changes in one run, in the shapes sinks write: net row counts, contents, and Spark's changelog rows.

A run's output is a consolidated bag of ``(row, time, diff)``.  A contents
table needs only the net change per row over the run (a row that came and
went within the run touches nothing) and, for rows whose count changed,
their new count; a changelog table needs every change at its own data time,
``_change_type`` ``insert``/``delete`` (``update_preimage`` /
``update_postimage`` for a keyed view's row replaced at one time), its
``_commit_version`` (the data time) and ``_commit_timestamp`` (the source
commit's time).  A row of multiplicity ``n`` is ``n`` table rows.

Everything here is vectorized Arrow: a group-by per run, no Python per row.
"""
from __future__ import annotations

import decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: Spark's changelog columns (SPARK-55668, Delta's change data feed), after the view's own columns.
CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP = "_change_type", "_commit_version", "_commit_timestamp"
CHANGELOG_COLUMNS = (CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP)
#: The count column of a contents table held in memory (never written).
COUNT = "__count"


def consolidate(rows: pa.Table, columns: list[str], weight: str = "diff") -> pa.Table:
    """``rows`` added up per distinct ``columns`` (NULL equal to NULL), zero totals dropped.  O(n), hashed.

    >>> t = pa.table({"a": [1, 1, 2, None], "diff": [1, -1, 2, 1]})
    >>> consolidate(t, ["a"]).to_pylist()
    [{'a': 2, 'diff': 2}, {'a': None, 'diff': 1}]
    """
    if not rows.num_rows:
        return rows.select(columns + [weight])
    g = rows.group_by(columns, use_threads=False).aggregate([(weight, "sum")])
    g = g.rename_columns(columns + [weight])
    return g.filter(pc.not_equal(g.column(weight), 0))


def repeat(rows: pa.Table, counts: pa.ChunkedArray | pa.Array | np.ndarray) -> pa.Table:
    """Each row of ``rows`` ``counts[i]`` times (a bag as plain table rows).  O(output).

    >>> repeat(pa.table({"a": [1, 2]}), np.array([2, 1])).column("a").to_pylist()
    [1, 1, 2]
    """
    c = np.asarray(counts.to_numpy() if hasattr(counts, "to_numpy") else counts, dtype=np.int64)
    if len(c) and c.min() < 0:
        raise ValueError("a negative multiplicity cannot be written as rows")
    return rows.take(pa.array(np.repeat(np.arange(rows.num_rows), c)))


def null_safe_key(table: pa.Table, columns: list[str]) -> pa.Table:
    """Join keys for ``columns`` under which NULL equals NULL: each column with NULLs filled by a value of its
    type, plus a flag column saying it was NULL.  Arrow's joins never match NULLs; these do, exactly.  O(n).

    >>> null_safe_key(pa.table({"a": [None, 1]}), ["a"]).to_pylist()
    [{'__k0': 0, '__n0': True}, {'__k0': 1, '__n0': False}]
    """
    out = {}
    for i, c in enumerate(columns):
        col = table.column(c)
        t = col.type
        if pa.types.is_null(t):
            col = pa.array([0] * len(col), pa.int64())
        fill = _zero(col.type)
        out[f"__k{i}"] = pc.fill_null(col, fill)
        out[f"__n{i}"] = pc.is_null(col)
    return pa.table(out)


def _zero(t: pa.DataType) -> pa.Scalar:
    """A value of type ``t`` (what a NULL is filled with beside its flag; any value would do)."""
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return pa.scalar("", t)
    if pa.types.is_boolean(t):
        return pa.scalar(False)
    if pa.types.is_decimal(t):
        return pa.scalar(decimal.Decimal(0), t)
    if pa.types.is_date32(t):
        return pa.scalar(0, pa.int32()).cast(t)
    if pa.types.is_temporal(t):
        return pa.scalar(0, pa.int64()).cast(t)
    return pa.scalar(0, t)


def semi_join(table: pa.Table, keys: pa.Table, columns: list[str]) -> np.ndarray:
    """Boolean mask of the rows of ``table`` whose ``columns`` equal (NULL-safe) some row of ``keys``.  O(n + m).

    >>> semi_join(pa.table({"a": [1, None, 3]}), pa.table({"a": [None, 3]}), ["a"]).tolist()
    [False, True, True]
    """
    if not table.num_rows or not keys.num_rows:
        return np.zeros(table.num_rows, dtype=bool)
    left = null_safe_key(table, columns).append_column("__row", pa.array(np.arange(table.num_rows)))
    right = null_safe_key(keys, columns)
    names = [n for n in right.column_names]
    right = right.group_by(names, use_threads=False).aggregate([])
    hit = left.join(right, names, join_type="left semi", use_threads=False)
    mask = np.zeros(table.num_rows, dtype=bool)
    mask[hit.column("__row").to_numpy()] = True
    return mask


class ViewChanges:
    """One view's output in one run, and its contents before and after, as Arrow tables.

    ``changes``: the view's columns, ``time``, ``diff`` (consolidated).
    ``before``: the contents before the run, the view's columns and
    :data:`COUNT`.  ``key``: the view's key columns (None: the whole row).
    ``timestamps``: data time -> the source commit's time in ms.
    ``initial_version``: the data time a changelog that starts now gives
    the contents before the run (the last complete time).
    """

    def __init__(self, view: str, columns: dict[str, str], changes: pa.Table, before: pa.Table,
                 key: list[str] | None, timestamps: dict[int, int], initial_version: int = 0):
        self.view = view
        self.initial_version = initial_version
        self.columns = columns
        self.names = list(columns)
        self.changes = changes
        self.before = before
        self.key = list(key) if key else None
        self.timestamps = timestamps
        self.net = consolidate(changes.drop_columns(["time"]), self.names) if changes.num_rows else \
            changes.select(self.names + ["diff"])
        both = pa.concat_tables([before.rename_columns(self.names + ["diff"]), self.net.cast(
            before.rename_columns(self.names + ["diff"]).schema)])
        after = consolidate(both, self.names)
        if after.num_rows and pc.min(after.column("diff")).as_py() < 0:
            raise ValueError(f"view {view!r}: a row's count would go below zero in its contents; the state does "
                             "not match the view's output (a damaged state: run a full refresh)")
        self.after = after.rename_columns(self.names + [COUNT])
        if self.key:
            self._check_key()

    def _check_key(self) -> None:
        g = self.after.group_by(self.key, use_threads=False).aggregate([(COUNT, "sum")])
        dup = g.filter(pc.greater(g.column(f"{COUNT}_sum"), 1))
        if dup.num_rows:
            first = dup.slice(0, 1).select(self.key).to_pylist()[0]
            raise ValueError(f"view {self.view!r}: key {self.key} is not unique: {dup.num_rows} keys have more than "
                             f"one row (first: {first}); declare the view's real key, or none")

    @property
    def key_columns(self) -> list[str]:
        """The columns a contents sink matches rows on: the key, or every column."""
        return self.key or self.names

    def touched(self) -> pa.Table:
        """The distinct keys (:attr:`key_columns`) whose rows changed in the run.  O(net)."""
        k = self.net.select(self.key_columns)
        return k.group_by(self.key_columns, use_threads=False).aggregate([]) if k.num_rows else k

    def rows_after(self, keys: pa.Table | None = None) -> pa.Table:
        """The contents after the run as plain rows (a row per multiplicity), only of ``keys`` when given."""
        after = self.after
        if keys is not None:
            after = after.filter(pa.array(semi_join(after, keys, self.key_columns)))
        return repeat(after.select(self.names), after.column(COUNT))

    def rows_before(self) -> pa.Table:
        """The contents before the run as plain rows."""
        return repeat(self.before.select(self.names), self.before.column(COUNT))

    def changelog(self, initial_version: int | None = None) -> pa.Table:
        """The run's changes in Spark's changelog shape: the view's columns, ``_change_type``,
        ``_commit_version``, ``_commit_timestamp``, ordered by version.

        ``initial_version``: also the contents before the run, as inserts at
        that version (a changelog table that starts after the view did).
        O(changes log changes).
        """
        parts = []
        if initial_version is not None and self.before.num_rows:
            b = self.rows_before()
            parts.append(self._shape(b, np.full(b.num_rows, initial_version), np.ones(b.num_rows, dtype=np.int64),
                                     None))
        ch = self.changes
        if ch.num_rows:
            ch = ch.take(pc.sort_indices(ch, [("time", "ascending"), ("diff", "ascending")]))
            ch = repeat(ch, pc.abs(ch.column("diff")))
            times = ch.column("time").to_numpy()
            signs = np.sign(ch.column("diff").to_numpy())
            parts.append(self._shape(ch.select(self.names), times, signs, self._updates(ch, times, signs)))
        if not parts:
            return self._shape(pa.table({n: pa.array([], self.before.schema.field(n).type) for n in self.names}),
                               np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), None)
        return pa.concat_tables(parts)

    def _updates(self, ch: pa.Table, times: np.ndarray, signs: np.ndarray) -> np.ndarray | None:
        """Rows that are half of an update: a keyed view's key removed and added at one data time."""
        if not self.key:
            return None
        k = null_safe_key(ch, self.key).append_column("time", pa.array(times)).append_column("s", pa.array(signs))
        names = [c for c in k.column_names if c != "s"]
        g = k.group_by(names, use_threads=False).aggregate([("s", "min"), ("s", "max")])
        both = g.filter(pc.and_(pc.equal(g.column("s_min"), -1), pc.equal(g.column("s_max"), 1))).select(names)
        if not both.num_rows:
            return None
        return semi_join(k, both, names)

    def _shape(self, rows: pa.Table, times: np.ndarray, signs: np.ndarray, update: np.ndarray | None) -> pa.Table:
        kind = np.where(signs > 0, "insert", "delete").astype(object)
        if update is not None:
            kind[update & (signs > 0)] = "update_postimage"
            kind[update & (signs < 0)] = "update_preimage"
        uniq, inverse = np.unique(np.asarray(times, dtype=np.int64), return_inverse=True)
        ms = np.array([self.timestamps.get(int(t), 0) for t in uniq], dtype=np.int64)
        stamps = ms[inverse] * 1000
        return rows.append_column(CHANGE_TYPE, pa.array(kind.tolist(), pa.string())) \
            .append_column(COMMIT_VERSION, pa.array(times, pa.int64())) \
            .append_column(COMMIT_TIMESTAMP, pa.array(stamps, pa.int64()).cast(pa.timestamp("us", tz="UTC")))
