"""Columnar batches of ``(data, time, diff)`` updates, and turning rows or Arrow tables into them.

A batch holds one numpy array per record field, an ``(n, depth)`` int64
array of times and an int64 array of diffs.  Field columns are int64 or
float64; each has a *kind* (:mod:`ddflow.base.kinds`) that says how to
decode it at the outputs.  Consolidation lives in
:mod:`ddflow.base.consolidate`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from ddflow.base.interner import Interner
from ddflow.base.kinds import ARTICLE, DTYPE, DTYPE_NAMES, PY_TYPES, arrow_kind, infer_kind
from ddflow.errors import SchemaError


@dataclass(frozen=True, slots=True)
class Updates:
    """An immutable columnar batch of updates.

    One numpy array per field (``cols``), an ``(n, depth)`` int64 ``times``
    array and int64 ``diffs``; ``kinds`` says how to decode each field.
    What :meth:`ddflow.Capture.updates` returns.

    >>> it = Interner()
    >>> u = from_rows([(1, "a"), (2, "b")], times=0, diffs=1, interner=it)
    >>> len(u), u.depth, u.arity, u.kinds
    (2, 1, 2, ('i', 'o'))
    >>> u.to_rows(it)
    [((1, 'a'), 0, 1), ((2, 'b'), 0, 1)]
    """

    cols: tuple[np.ndarray, ...]
    times: np.ndarray
    diffs: np.ndarray
    kinds: tuple[str, ...]

    def __post_init__(self) -> None:
        n = len(self.diffs)
        if self.times.ndim != 2 or len(self.times) != n:
            raise SchemaError(f"times must have shape ({n}, depth), got {self.times.shape}")
        if len(self.cols) != len(self.kinds):
            raise SchemaError(f"{len(self.cols)} columns but {len(self.kinds)} kinds")
        for c in self.cols:
            if len(c) != n:
                raise SchemaError(f"column of length {len(c)} in a batch of {n} updates")

    # -- construction -------------------------------------------------------
    @classmethod
    def unchecked(cls, cols: tuple[np.ndarray, ...], times: np.ndarray, diffs: np.ndarray,
                  kinds: tuple[str, ...]) -> "Updates":
        """Updates whose shapes agree by construction (a kernel made them), without the checks.

        The constructor checks that every column and the times have one row
        per diff; a compiled step that built them in one call has no way to
        get that wrong, and at one update a step the checks cost more than
        the kernel's own dispatch (0.9 us of 1.6).  O(1).

        >>> u = Updates.unchecked((np.array([1, 2]),), np.zeros((2, 1), dtype=np.int64), np.ones(2, dtype=np.int64), ("i",))
        >>> len(u), u.arity, u.depth
        (2, 1, 1)
        """
        u = _new(cls)
        _set_cols(u, cols)
        _set_times(u, times)
        _set_diffs(u, diffs)
        _set_kinds(u, kinds)
        return u

    @classmethod
    def empty(cls, kinds: Sequence[str], depth: int) -> "Updates":
        """A batch of no updates with the given column kinds and time depth.

        >>> len(Updates.empty(("i", "f"), depth=1))
        0
        """
        return cls(
            tuple(np.zeros(0, dtype=DTYPE[k]) for k in kinds),
            np.zeros((0, depth), dtype=np.int64),
            np.zeros(0, dtype=np.int64),
            tuple(kinds),
        )

    @classmethod
    def concat(cls, parts: Sequence["Updates"]) -> "Updates":
        """One batch of all of ``parts`` in order (kinds and depths must agree); not consolidated.

        O(n) copies for n updates; a single non-empty part is returned as is.

        >>> u = from_rows([(1,)], 0, 1, Interner())
        >>> len(Updates.concat([u, u, u]))
        3
        """
        if not len(parts):
            raise SchemaError("Updates.concat needs at least one batch (for its column kinds and time depth)")
        parts = [p for p in parts if len(p)] or list(parts[:1])
        if len(parts) == 1:
            return parts[0]
        first = parts[0]
        for p in parts[1:]:
            if p.kinds != first.kinds:
                raise SchemaError(f"cannot concatenate batches with column kinds {first.kinds} and {p.kinds}")
            if p.depth != first.depth:
                raise SchemaError(f"mixed time depths: {first.depth} and {p.depth}")
        return cls(
            tuple(np.concatenate([p.cols[i] for p in parts]) for i in range(len(first.cols))),
            np.concatenate([p.times for p in parts]),
            np.concatenate([p.diffs for p in parts]),
            first.kinds,
        )

    # -- shape ----------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.diffs)

    @property
    def depth(self) -> int:
        """Coordinates per time: 1 at the top level, one more per enclosing loop."""
        return self.times.shape[1]

    @property
    def arity(self) -> int:
        """Fields per record."""
        return len(self.cols)

    def take(self, idx: np.ndarray) -> "Updates":
        """The updates at positions (or boolean mask) ``idx``, vectorized: O(len(idx)).

        >>> it = Interner(); u = from_rows([(1,), (2,), (3,)], 0, 1, it)
        >>> u.take(np.array([2, 0])).to_rows(it)
        [((3,), 0, 1), ((1,), 0, 1)]
        """
        return Updates.unchecked(tuple(c[idx] for c in self.cols), self.times[idx], self.diffs[idx], self.kinds)

    def with_times(self, times: np.ndarray) -> "Updates":
        """The same records and diffs at new ``times`` (shares the other arrays): O(1)."""
        return Updates(self.cols, times, self.diffs, self.kinds)

    def with_diffs(self, diffs: np.ndarray) -> "Updates":
        """The same records and times with new ``diffs`` (shares the other arrays): O(1).

        >>> it = Interner(); u = from_rows([(1,)], 0, 1, it)
        >>> u.with_diffs(-u.diffs).to_rows(it)
        [((1,), 0, -1)]
        """
        return Updates(self.cols, self.times, diffs, self.kinds)

    # -- conversion out ---------------------------------------------------------
    def decoded_columns(self, interner: Interner) -> list[np.ndarray]:
        """Field columns with their meaning back: objects decoded, bools as bool arrays; O(n).

        >>> it = Interner(); u = from_rows([(1, "a", True)], 0, 1, it)
        >>> [c.tolist() for c in u.decoded_columns(it)]
        [[1], ['a'], [True]]
        """
        out = []
        for c, k in zip(self.cols, self.kinds):
            if k == "o":
                out.append(interner.decode(c))
            elif k == "b":
                out.append(c.astype(bool))
            else:
                out.append(c)
        return out

    def to_rows(self, interner: Interner) -> list[tuple[tuple, tuple[int, ...] | int, int]]:
        """``[(record, time, diff)]`` with Python values; depth-1 times as ints."""
        cols = [c.tolist() for c in self.decoded_columns(interner)]
        recs = list(zip(*cols)) if cols else [()] * len(self)
        if self.depth == 1:
            times: list[Any] = self.times[:, 0].tolist()
        else:
            times = [tuple(t) for t in self.times.tolist()]
        return list(zip(recs, times, self.diffs.tolist()))

    def to_arrow(self, interner: Interner, names: Sequence[str] | None = None) -> pa.Table:
        """Fields as named columns plus ``time`` (or ``time_0..``) and ``diff``."""
        names = list(names) if names is not None else [f"c{i}" for i in range(self.arity)]
        arrays: list[pa.Array] = []
        for c, k in zip(self.decoded_columns(interner), self.kinds):
            arrays.append(pa.array(c.tolist()) if k == "o" else pa.array(c))
        if self.depth == 1:
            arrays.append(pa.array(self.times[:, 0]))
            names = names + ["time"]
        else:
            for j in range(self.depth):
                arrays.append(pa.array(self.times[:, j]))
            names = names + [f"time_{j}" for j in range(self.depth)]
        arrays.append(pa.array(self.diffs))
        return pa.Table.from_arrays(arrays, names=names + ["diff"])


# The slots' own setters: what a frozen dataclass's __init__ calls through object.__setattr__, without the lookup.
_new = object.__new__
_set_cols, _set_times = Updates.cols.__set__, Updates.times.__set__  # type: ignore[attr-defined]
_set_diffs, _set_kinds = Updates.diffs.__set__, Updates.kinds.__set__  # type: ignore[attr-defined]


# -- conversion in ------------------------------------------------------------------


def encode_column(values: Sequence[Any], kind: str, interner: Interner, where: str) -> np.ndarray:
    """Values as an internal column of ``kind``; TypeError naming ``where`` if they do not fit.

    O(n) with a Python type check per value.

    >>> encode_column([1, 2], "i", Interner(), "example").tolist()
    [1, 2]
    """
    if kind == "o":
        return interner.encode(values, where)
    # numpy would quietly parse "5" or truncate 1.5 into an int column: check types first.
    ok = PY_TYPES[kind]
    for v in values:
        if not isinstance(v, ok) or (kind != "b" and isinstance(v, (bool, np.bool_))) \
                or (kind == "i" and isinstance(v, (float, np.floating))):
            raise SchemaError(f"{where}: {v!r} of type {type(v).__name__} in {ARTICLE[kind]} column")
    try:
        if kind == "f":
            arr = np.array(values, dtype=np.float64)
        else:
            arr = np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        raise SchemaError(f"{where}: values do not fit column kind {kind!r} ({DTYPE_NAMES[kind]})") from None
    if kind == "b" and len(arr) and not np.isin(arr, (0, 1)).all():
        raise SchemaError(f"{where}: non-bool value in a bool column")
    return arr



_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


def check_diffs(diffs: Any, n: int, where: str) -> np.ndarray:
    """Diffs as int64; a non-integer diff is a TypeError naming ``where``.

    >>> check_diffs(1, 3, "example").tolist(), check_diffs([1, -1], 2, "example").tolist()
    ([1, 1, 1], [1, -1])
    """
    arr = np.asarray(diffs)
    if arr.ndim == 0:
        arr = np.full(n, arr)
    if arr.shape != (n,):
        raise SchemaError(f"{where}: {arr.shape[0] if arr.ndim else 0} diffs for {n} records")
    if n == 0:
        return np.zeros(0, dtype=np.int64)  # np.asarray([]) is float64, but there is no bad diff
    if arr.dtype.kind == "b" or arr.dtype.kind not in "iu":
        if arr.dtype.kind == "O" and all(type(d) is int for d in arr.tolist()):
            bad = [d for d in arr.tolist() if not _I64_MIN <= d <= _I64_MAX]
            if bad:
                raise SchemaError(f"{where}: the diff {bad[0]} does not fit in int64")
            return arr.astype(np.int64)
        raise SchemaError(f"{where}: diffs must be integers, got dtype {arr.dtype}")
    if arr.dtype.kind == "u" and arr.dtype.itemsize >= 8 and (arr > _I64_MAX).any():
        raise SchemaError(f"{where}: the diff {int(arr[arr > _I64_MAX][0])} does not fit in int64")
    return arr.astype(np.int64, copy=False)


def from_rows(
    rows: Sequence[tuple],
    times: Any,
    diffs: Any,
    interner: Interner,
    kinds: Sequence[str] | None = None,
    depth: int = 1,
    where: str = "collection",
) -> Updates:
    """A batch from Python tuples, one time and one diff per row.

    ``times`` and ``diffs`` are one value for all rows or one per row;
    ``kinds`` default to the narrowest kind that holds each field.
    Cost: O(n) with Python per value (type checks and interning).

    >>> it = Interner()
    >>> u = from_rows([(1, 2.5), (2, 3.0)], times=[0, 1], diffs=1, interner=it)
    >>> u.kinds, u.to_rows(it)
    (('i', 'f'), [((1, 2.5), 0, 1), ((2, 3.0), 1, 1)])
    """
    from ddflow.base.lattice import as_times

    n = len(rows)
    rows = [r if isinstance(r, tuple) else _not_tuple(r, where) for r in rows]
    arity = len(rows[0]) if n else (len(kinds) if kinds is not None else 0)
    for r in rows:
        if len(r) != arity:
            raise SchemaError(f"{where}: row {r!r} has {len(r)} fields, expected {arity}")
    columns = list(zip(*rows)) if n else [()] * arity
    if kinds is None:
        kinds = tuple(infer_kind(c) for c in columns)
    elif len(kinds) != arity:
        raise SchemaError(f"{where}: rows have {arity} fields, the collection has {len(kinds)}")
    cols = tuple(encode_column(c, k, interner, f"{where} field {i}") for i, (c, k) in enumerate(zip(columns, kinds)))
    t = as_times(np.asarray(times, dtype=np.int64), depth)
    if len(t) == 1 and n != 1:
        t = np.repeat(t, n, axis=0)
    if len(t) != n:
        raise SchemaError(f"{where}: {len(t)} times for {n} records")
    return Updates(cols, t, check_diffs(diffs, n, where), tuple(kinds))


def _not_tuple(r: Any, where: str) -> tuple:
    raise SchemaError(f"{where}: records are tuples, got {type(r).__name__} {r!r}")



def from_arrow(
    table: pa.Table | pa.RecordBatch,
    interner: Interner,
    columns: Sequence[str] | None = None,
    time: str | np.ndarray | None = None,
    diff: str | np.ndarray | int = 1,
    kinds: Sequence[str] | None = None,
    where: str = "collection",
) -> Updates:
    """A batch from an Arrow table: record fields from ``columns``, times and diffs from columns or arrays.

    Cost: O(n) vectorized for numeric columns; object columns pay one Python
    call per distinct value.

    >>> it = Interner()
    >>> u = from_arrow(pa.table({"k": [1, 2], "t": [0, 5]}), it, time="t")
    >>> u.to_rows(it)
    [((1,), 0, 1), ((2,), 5, 1)]
    """
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    named = {x for x in (time, diff) if isinstance(x, str)}
    names = list(columns) if columns is not None else [c for c in table.column_names if c not in named]
    for nm in names:
        if nm not in table.column_names:
            raise SchemaError(f"{where}: no column {nm!r} in {table.column_names}")
    if kinds is not None and len(kinds) != len(names):
        raise SchemaError(f"{where}: {len(names)} columns, the collection has {len(kinds)} fields")
    cols = []
    out_kinds = []
    for i, nm in enumerate(names):
        col = table.column(nm)
        k = arrow_kind(col.type) if kinds is None else kinds[i]
        if k == "o":
            arr = interner.encode_arrow(col, f"{where} column {nm!r}")
        else:
            if arrow_kind(col.type) == "o" or (k in "ib" and arrow_kind(col.type) == "f"):
                raise SchemaError(f"{where}: column {nm!r} has Arrow type {col.type}, expected {DTYPE_NAMES[k]}")
            if col.null_count:
                raise SchemaError(f"{where}: column {nm!r} has nulls; numeric fields cannot be null")
            if pa.types.is_timestamp(col.type) or pa.types.is_date(col.type):
                col = col.cast(pa.int64())
            arr = col.to_numpy().astype(DTYPE[k])
        cols.append(arr)
        out_kinds.append(k)
    n = table.num_rows
    if time is None:
        raise SchemaError(f"{where}: from_arrow needs a time column or array")
    if isinstance(time, str):
        tcol = table.column(time)
        if tcol.null_count:
            raise SchemaError(f"{where}: time column {time!r} has nulls")
        if pa.types.is_timestamp(tcol.type) or pa.types.is_date(tcol.type):
            tcol = tcol.cast(pa.int64())
        t = tcol.to_numpy().astype(np.int64).reshape(-1, 1)
    else:
        t = np.asarray(time, dtype=np.int64)
        t = t.reshape(-1, 1) if t.ndim == 1 else t
    if isinstance(diff, str):
        d = check_diffs(table.column(diff).to_numpy(), n, where)
    else:
        d = check_diffs(diff, n, where)
    return Updates(tuple(cols), t, d, tuple(out_kinds))
