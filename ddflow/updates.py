"""Columnar batches of ``(data, time, diff)`` updates and their consolidation.

A batch holds one numpy array per record field, an ``(n, depth)`` int64
array of times and an int64 array of diffs.  Field columns are int64 or
float64; each has a *kind* that says how to decode it at the outputs:
``i`` int, ``f`` float, ``b`` bool (stored 0/1), ``o`` interned object code.

Consolidation (sort by data then time, add up equal, drop zeros) is the
workhorse of the whole system, so it packs all sort columns into a single
int64 key whenever their value ranges allow and falls back to ``lexsort``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np
import pyarrow as pa

from ddflow.interner import Interner

KINDS = ("i", "f", "b", "o")
_DTYPE = {"i": np.int64, "f": np.float64, "b": np.int64, "o": np.int64}


@dataclass(frozen=True, slots=True)
class Updates:
    """An immutable columnar batch of updates."""

    cols: tuple[np.ndarray, ...]
    times: np.ndarray
    diffs: np.ndarray
    kinds: tuple[str, ...]

    def __post_init__(self) -> None:
        n = len(self.diffs)
        if self.times.ndim != 2 or len(self.times) != n:
            raise ValueError(f"times must have shape ({n}, depth), got {self.times.shape}")
        if len(self.cols) != len(self.kinds):
            raise ValueError(f"{len(self.cols)} columns but {len(self.kinds)} kinds")
        for c in self.cols:
            if len(c) != n:
                raise ValueError(f"column of length {len(c)} in a batch of {n} updates")

    # -- construction -------------------------------------------------------
    @classmethod
    def empty(cls, kinds: Sequence[str], depth: int) -> "Updates":
        return cls(
            tuple(np.zeros(0, dtype=_DTYPE[k]) for k in kinds),
            np.zeros((0, depth), dtype=np.int64),
            np.zeros(0, dtype=np.int64),
            tuple(kinds),
        )

    @classmethod
    def concat(cls, parts: Sequence["Updates"]) -> "Updates":
        if not len(parts):
            raise ValueError("Updates.concat needs at least one batch (for its column kinds and time depth)")
        parts = [p for p in parts if len(p)] or list(parts[:1])
        if len(parts) == 1:
            return parts[0]
        first = parts[0]
        for p in parts[1:]:
            if p.kinds != first.kinds:
                raise TypeError(f"cannot concatenate batches with column kinds {first.kinds} and {p.kinds}")
            if p.depth != first.depth:
                raise ValueError(f"mixed time depths: {first.depth} and {p.depth}")
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
        return self.times.shape[1]

    @property
    def arity(self) -> int:
        return len(self.cols)

    def take(self, idx: np.ndarray) -> "Updates":
        return Updates(tuple(c[idx] for c in self.cols), self.times[idx], self.diffs[idx], self.kinds)

    def with_times(self, times: np.ndarray) -> "Updates":
        return Updates(self.cols, times, self.diffs, self.kinds)

    def with_diffs(self, diffs: np.ndarray) -> "Updates":
        return Updates(self.cols, self.times, diffs, self.kinds)

    def consolidate(self) -> "Updates":
        return consolidate(self)

    # -- conversion out ---------------------------------------------------------
    def decoded_columns(self, interner: Interner) -> list[np.ndarray]:
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


# -- conversion in ------------------------------------------------------------------


def infer_kind(values: Sequence[Any]) -> str:
    """The column kind that holds every value exactly."""
    kind = None
    for v in values:
        t = type(v)
        if t is bool or t is np.bool_:
            k = "b"
        elif (t is int or isinstance(v, np.integer)) and -(1 << 63) <= v < (1 << 63):
            k = "i"
        elif t is float or isinstance(v, np.floating):
            k = "f"
        else:
            return "o"
        if kind is None:
            kind = k
        elif kind != k:
            if {kind, k} == {"i", "f"}:
                kind = "f"
            else:
                return "o"
    return kind or "i"


def encode_column(values: Sequence[Any], kind: str, interner: Interner, where: str) -> np.ndarray:
    """Values as an internal column of ``kind``; TypeError naming ``where`` if they do not fit."""
    if kind == "o":
        return interner.encode(values, where)
    # numpy would quietly parse "5" or truncate 1.5 into an int column: check types first.
    ok = _KIND_TYPES[kind]
    for v in values:
        if not isinstance(v, ok) or (kind != "b" and isinstance(v, (bool, np.bool_))) \
                or (kind == "i" and isinstance(v, (float, np.floating))):
            raise TypeError(f"{where}: {v!r} of type {type(v).__name__} in {_KIND_ARTICLE[kind]} column")
    try:
        if kind == "f":
            arr = np.array(values, dtype=np.float64)
        else:
            arr = np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        raise TypeError(f"{where}: values do not fit column kind {kind!r} ({_KIND_NAMES[kind]})") from None
    if kind == "b" and len(arr) and not np.isin(arr, (0, 1)).all():
        raise TypeError(f"{where}: non-bool value in a bool column")
    return arr


_KIND_NAMES = {"i": "int64", "f": "float64", "b": "bool", "o": "object"}
_KIND_ARTICLE = {"i": "an int", "f": "a float", "b": "a bool"}
_KIND_TYPES = {
    "i": (int, np.integer),
    "f": (int, float, np.integer, np.floating),
    "b": (bool, np.bool_, int, np.integer),
}


def check_diffs(diffs: Any, n: int, where: str) -> np.ndarray:
    """Diffs as int64; a non-integer diff is a TypeError naming ``where``."""
    arr = np.asarray(diffs)
    if arr.ndim == 0:
        arr = np.full(n, arr)
    if arr.shape != (n,):
        raise ValueError(f"{where}: {arr.shape[0] if arr.ndim else 0} diffs for {n} records")
    if n == 0:
        return np.zeros(0, dtype=np.int64)  # np.asarray([]) is float64, but there is no bad diff
    if arr.dtype.kind == "b" or arr.dtype.kind not in "iu":
        if arr.dtype.kind == "O" and all(type(d) is int for d in arr.tolist()):
            return arr.astype(np.int64)
        raise TypeError(f"{where}: diffs must be integers, got dtype {arr.dtype}")
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
    """A batch from Python tuples, one time and one diff per row."""
    from ddflow.lattice import as_times

    n = len(rows)
    rows = [r if isinstance(r, tuple) else _not_tuple(r, where) for r in rows]
    arity = len(rows[0]) if n else (len(kinds) if kinds is not None else 0)
    for r in rows:
        if len(r) != arity:
            raise ValueError(f"{where}: row {r!r} has {len(r)} fields, expected {arity}")
    columns = list(zip(*rows)) if n else [()] * arity
    if kinds is None:
        kinds = tuple(infer_kind(c) for c in columns)
    elif len(kinds) != arity:
        raise ValueError(f"{where}: rows have {arity} fields, the collection has {len(kinds)}")
    cols = tuple(encode_column(c, k, interner, f"{where} field {i}") for i, (c, k) in enumerate(zip(columns, kinds)))
    t = as_times(np.asarray(times, dtype=np.int64), depth)
    if len(t) == 1 and n != 1:
        t = np.repeat(t, n, axis=0)
    if len(t) != n:
        raise ValueError(f"{where}: {len(t)} times for {n} records")
    return Updates(cols, t, check_diffs(diffs, n, where), tuple(kinds))


def _not_tuple(r: Any, where: str) -> tuple:
    raise TypeError(f"{where}: records are tuples, got {type(r).__name__} {r!r}")


def arrow_kind(typ: pa.DataType) -> str:
    if pa.types.is_boolean(typ):
        return "b"
    if pa.types.is_integer(typ) or pa.types.is_timestamp(typ) or pa.types.is_date(typ):
        return "i"
    if pa.types.is_floating(typ):
        return "f"
    return "o"


def from_arrow(
    table: pa.Table | pa.RecordBatch,
    interner: Interner,
    columns: Sequence[str] | None = None,
    time: str | np.ndarray | None = None,
    diff: str | np.ndarray | int = 1,
    kinds: Sequence[str] | None = None,
    where: str = "collection",
) -> Updates:
    """A batch from an Arrow table: record fields from ``columns``, times and diffs from columns or arrays."""
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    named = {x for x in (time, diff) if isinstance(x, str)}
    names = list(columns) if columns is not None else [c for c in table.column_names if c not in named]
    for nm in names:
        if nm not in table.column_names:
            raise ValueError(f"{where}: no column {nm!r} in {table.column_names}")
    if kinds is not None and len(kinds) != len(names):
        raise ValueError(f"{where}: {len(names)} columns, the collection has {len(kinds)} fields")
    cols = []
    out_kinds = []
    for i, nm in enumerate(names):
        col = table.column(nm)
        k = arrow_kind(col.type) if kinds is None else kinds[i]
        if k == "o":
            arr = interner.encode_arrow(col, f"{where} column {nm!r}")
        else:
            if arrow_kind(col.type) == "o" or (k in "ib" and arrow_kind(col.type) == "f"):
                raise TypeError(f"{where}: column {nm!r} has Arrow type {col.type}, expected {_KIND_NAMES[k]}")
            if col.null_count:
                raise TypeError(f"{where}: column {nm!r} has nulls; numeric fields cannot be null")
            if pa.types.is_timestamp(col.type) or pa.types.is_date(col.type):
                col = col.cast(pa.int64())
            arr = col.to_numpy().astype(_DTYPE[k])
        cols.append(arr)
        out_kinds.append(k)
    n = table.num_rows
    if time is None:
        raise ValueError(f"{where}: from_arrow needs a time column or array")
    if isinstance(time, str):
        tcol = table.column(time)
        if tcol.null_count:
            raise TypeError(f"{where}: time column {time!r} has nulls")
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


# -- sorting and consolidation ---------------------------------------------------------


#: Below this many rows sorting skips key packing (fixed per-call costs dominate).
SMALL_SORT = 64


def sort_order(
    cols: Sequence[np.ndarray], times: np.ndarray | None = None, runs: bool = False
) -> tuple[np.ndarray, np.ndarray | None]:
    """Permutation sorting lexicographically by ``cols`` then ``times``.

    Returns the permutation and, when every column packs into one int64
    key, that packed key in sorted order (callers use it to find groups
    without comparing columns one by one).  ``runs`` says the input is a
    concatenation of a few sorted runs (a merge): a stable sort then
    merges the runs in linear time instead of sorting from scratch.
    """
    keys = list(cols)
    if times is not None:
        keys.extend(times[:, j] for j in range(times.shape[1]))
    if not keys:
        return np.zeros(0, dtype=np.int64), None
    n = len(keys[0])
    if n <= SMALL_SORT and len(keys) > 1:
        # Packing costs a dozen numpy calls; on a few rows lexsort is cheaper, runs or not.
        return np.lexsort(keys[::-1]), None
    packed = pack_keys(keys)
    kind = "stable" if runs else None
    if packed is not None:
        order = np.argsort(packed, kind=kind)
        return order, packed[order]
    if len(keys) == 1:
        return np.argsort(keys[0], kind=kind), None
    if runs:
        # A structured view compares field by field; timsort merges the runs.
        rec = np.empty(n, dtype=[(f"k{i}", k.dtype) for i, k in enumerate(keys)])
        for i, k in enumerate(keys):
            rec[f"k{i}"] = k
        return np.argsort(rec, kind="stable"), None
    return np.lexsort(keys[::-1]), None


def pack_keys(keys: Sequence[np.ndarray]) -> np.ndarray | None:
    """One order-preserving int64 per row if the integer columns' ranges fit in 63 bits."""
    if not keys or len(keys[0]) == 0:
        return None
    if any(k.dtype.kind not in "iub" for k in keys):
        return None
    if len(keys) == 1:
        return keys[0].astype(np.int64, copy=False)
    los, spans = [], []
    bits = 0
    for k in keys:
        lo, hi = int(k.min()), int(k.max())
        span = hi - lo + 1
        bits += max(span - 1, 1).bit_length()
        if bits > 62:
            return None
        los.append(lo)
        spans.append(span)
    # In place, without temporaries; intermediate wrap-around cancels out because
    # the final value fits.
    packed = keys[0].astype(np.int64, copy=True)
    packed -= los[0]
    for k, lo, span in zip(keys[1:], los[1:], spans[1:]):
        packed *= span
        packed += k.astype(np.int64, copy=False)
        packed -= lo
    return packed


def group_starts(sorted_cols: Sequence[np.ndarray], packed: np.ndarray | None = None) -> np.ndarray:
    """Start indices of runs of equal rows in sorted columns."""
    if packed is not None:
        n = len(packed)
        change = packed[1:] != packed[:-1]
    else:
        n = len(sorted_cols[0]) if sorted_cols else 0
        change = row_changes(sorted_cols)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    return starts_of(change)


def row_changes(sorted_cols: Sequence[np.ndarray], out: np.ndarray | None = None) -> np.ndarray:
    """``change[i]``: row ``i + 1`` differs from row ``i`` in some column (NaN equals NaN).

    ``out``: changes already known (for a prefix of the columns), updated in place.
    """
    n = len(sorted_cols[0]) if sorted_cols else (len(out) + 1 if out is not None else 0)
    change = out if out is not None else np.zeros(max(n - 1, 0), dtype=bool)
    for c in sorted_cols:
        ne = c[1:] != c[:-1]
        if c.dtype.kind == "f":
            # NaN != NaN, but the sort puts all NaNs together: they are one value.
            nan = np.isnan(c)
            ne &= ~(nan[1:] & nan[:-1])
        change |= ne
    return change


def starts_of(change: np.ndarray) -> np.ndarray:
    """Group start indices from a :func:`row_changes` mask."""
    starts = np.empty(int(np.count_nonzero(change)) + 1, dtype=np.int64)
    starts[0] = 0
    starts[1:] = np.flatnonzero(change)
    starts[1:] += 1
    return starts


def consolidate(u: Updates, runs: bool = False) -> Updates:
    """Sort by (data, time), add up diffs of equal (data, time), drop zeros.

    ``runs``: the input is a few sorted runs (see :func:`sort_order`).
    """
    n = len(u)
    if n == 0:
        return u
    order, packed = sort_order(u.cols, u.times, runs)
    if packed is not None:
        # Groups come from the packed key alone: gather the columns once, at the end.
        starts = group_starts((), packed)
        diffs = u.diffs[order]
        if len(starts) == n:
            sel, sums = order, diffs
        else:
            sums = np.add.reduceat(diffs, starts)
            sel = order[starts]
        keep = sums != 0
        if not keep.all():
            sel, sums = sel[keep], sums[keep]
        return Updates(tuple(c[sel] for c in u.cols), u.times[sel], sums, u.kinds)
    cols = tuple(c[order] for c in u.cols)
    times = u.times[order]
    diffs = u.diffs[order]
    starts = group_starts(list(cols) + [times[:, j] for j in range(times.shape[1])])
    if len(starts) == n:
        keep = diffs != 0
        if keep.all():
            return Updates(cols, times, diffs, u.kinds)
        return Updates(tuple(c[keep] for c in cols), times[keep], diffs[keep], u.kinds)
    sums = np.add.reduceat(diffs, starts)
    keep = sums != 0
    idx = starts[keep]
    return Updates(tuple(c[idx] for c in cols), times[idx], sums[keep], u.kinds)
