"""Immutable columnar trie batches: the unit of storage of a trace.

A batch holds consolidated updates of a keyed collection in three layers,
each a set of plain numpy arrays so it can be shared between readers
without copying and written to Arrow IPC as it is:

* keys: unique, sorted (one column);
* values: sorted within each key (zero or more columns), ``key_offs``
  (len keys + 1) gives each key's range of value rows;
* updates: ``times`` (n, depth) and ``diffs``, ``val_offs`` (len values + 1)
  gives each value row's range of updates, sorted by time.

A key-only collection has no value columns and exactly one value row per
key.  ``lower``/``upper`` say which times the batch covers (lower <= t and
not upper <= t) and ``since`` to which frontier its times were advanced.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import BinaryIO, Sequence

import numpy as np
import pyarrow as pa

from ddflow.base.consolidate import consolidate, overflow_detail
from ddflow.base.kernels import kernels, key_matrix
from ddflow.base.lattice import Antichain, advance_by
from ddflow.base.updates import Updates
from ddflow.errors import SchemaError, UsageError

from .layout import all_int, batch_row, trie_with_row
from .merge import merge_pair, merge_rows


@dataclass(frozen=True, slots=True)
class Description:
    """The time interval a batch covers and the frontier its times were advanced to."""

    lower: Antichain
    upper: Antichain
    since: Antichain

    @classmethod
    def covering(cls, depth: int, lower: Antichain | None = None, upper: Antichain | None = None) -> "Description":
        """``lower`` (default: all times) to ``upper`` (default: none left), times not advanced.

        >>> Description.covering(1)
        Description(lower=Antichain({0}), upper=Antichain({}), since=Antichain({0}))
        """
        if lower is None and upper is None:  # what every untiled insert asks for: one shared (frozen) description
            d = _COVERING.get(depth)
            if d is None:
                d = _COVERING[depth] = cls(Antichain.minimum(depth), Antichain.empty(depth), Antichain.minimum(depth))
            return d
        low = lower if lower is not None else Antichain.minimum(depth)
        return cls(low, upper if upper is not None else Antichain.empty(depth), Antichain.minimum(depth))


_COVERING: dict[int, Description] = {}


def shrunk(kept: int, room: int) -> bool:
    """Whether ``kept`` updates, the first rows of arrays made with room for ``room``, should be copied out.

    Merges and consolidations return their updates as the first rows of
    buffers sized for their input; when most of the input cancelled, a
    batch that kept those views would hold memory sized for the peak it
    came from.  Copied when fewer than half the rows are used, so a
    batch's updates take at most twice their own size.  O(1).

    >>> shrunk(10, 2_000_000), shrunk(900, 1000)
    (True, False)
    """
    return 2 * kept < room


def offset_dtype(n: int) -> type:
    """Offsets into ``n`` rows: 32 bits while they fit (a third less memory per update than 64)."""
    return np.int32 if n < 2**31 else np.int64



class Batch:
    """An immutable trie of consolidated updates with its description.

    >>> from ddflow.base.interner import Interner
    >>> from ddflow.base.updates import from_rows
    >>> it = Interner()
    >>> b = Batch.from_updates(from_rows([(1, 10), (1, 11), (2, 20)], 0, 1, it))
    >>> b.keys.tolist(), b.key_offs.tolist(), len(b)
    ([1, 2], [0, 2, 3], 3)
    >>> b.flatten().to_rows(it)
    [((1, 10), 0, 1), ((1, 11), 0, 1), ((2, 20), 0, 1)]
    """

    __slots__ = ("keys", "vals", "key_offs", "val_offs", "times", "diffs", "desc", "kinds", "_row", "_outer",
                 "_since_outer", "_negatives")

    def __init__(
        self,
        keys: np.ndarray,
        vals: tuple[np.ndarray, ...],
        key_offs: np.ndarray,
        val_offs: np.ndarray,
        times: np.ndarray,
        diffs: np.ndarray,
        desc: Description,
        kinds: tuple[str, ...],
        check: bool = True,
    ):
        self.keys = keys
        self.vals = vals
        self.key_offs = key_offs
        self.val_offs = val_offs
        self.times = times
        self.diffs = diffs
        self.desc = desc
        self.kinds = kinds
        self._row = None
        self._outer: tuple[int, int] | None = None
        self._since_outer: int | None = None
        self._negatives: int | None = None
        for a in (keys, key_offs, val_offs, times, diffs, *vals):
            a.setflags(write=False)
        if check:
            self._check()

    def _check(self) -> None:
        d = self.desc
        depth = self.times.shape[1]
        for name, f in (("lower", d.lower), ("upper", d.upper), ("since", d.since)):
            if f.depth != depth:
                raise SchemaError(f"batch {name} frontier has depth {f.depth}, its times depth {depth} (mixed time depths)")
        if len(self.times) == 0:
            return
        beyond_lower = d.lower.less_equal_many(self.times)
        if not beyond_lower.all():
            t = self.times[np.flatnonzero(~beyond_lower)[0]]
            raise UsageError(f"batch time {tuple(t.tolist())} is not beyond its lower frontier {d.lower}")
        # Times advanced to `since` may pass `upper`; only unadvanced batches are checked against it.
        if len(d.upper) and len(d.since) == 1 and not d.since.elements.any():
            at_upper = d.upper.less_equal_many(self.times)
            if at_upper.any():
                t = self.times[np.flatnonzero(at_upper)[0]]
                raise UsageError(f"batch time {tuple(t.tolist())} is not before its upper frontier {d.upper}")

    # -- construction ---------------------------------------------------------
    @classmethod
    def from_updates(cls, u: Updates, desc: Description | None = None, consolidated: bool = False,
                     runs: bool = False, check: bool = True) -> "Batch":
        """Build from updates whose first column is the key and the rest the value.

        Cost: O(n log n) to consolidate n updates; O(n) with ``consolidated``
        (already sorted and consolidated) or ``runs`` (a few sorted runs).
        ``check=False`` skips checking the times against ``desc``: for
        merges, whose inputs were checked and whose advancing only moves
        times forward.
        """
        if u.arity < 1:
            raise SchemaError("a batch needs at least a key column")
        if desc is None:
            desc = Description.covering(u.depth)
        if not consolidated:
            u = consolidate(u, runs)
        key = u.cols[0]
        vals = tuple(u.cols[1:])
        n = len(u)
        if n == 0:
            return cls.empty(u.kinds, u.depth, desc, key.dtype, [v.dtype for v in vals])
        if n < 2**31 and all(c.dtype == np.int64 for c in u.cols):
            return cls._from_ints(u, desc, check)
        return cls._from_any(u, desc, check)

    @classmethod
    def _from_ints(cls, u: Updates, desc: Description, check: bool, kernel=trie_with_row) -> "Batch":
        """From consolidated updates whose columns are all int64: the trie and its table row in one call.

        What a trace's table describes; :meth:`_from_any` is the reference.  O(n m).
        """
        times, diffs = np.ascontiguousarray(u.times), np.ascontiguousarray(u.diffs)
        keys, key_offs, V, val_offs, row = kernel(key_matrix(u.cols), times, diffs)
        return cls.with_row(keys, V, key_offs, val_offs, times, diffs, desc, u.kinds, row, check)

    @classmethod
    def with_row(cls, keys: np.ndarray, V: np.ndarray, key_offs: np.ndarray, val_offs: np.ndarray, times: np.ndarray,
                 diffs: np.ndarray, desc: Description, kinds: tuple[str, ...], row: np.ndarray,
                 check: bool = True) -> "Batch":
        """A batch of trie arrays as ``traces.layout.build_trie`` returns them, with the table row it made for them.

        The value columns are the rows of ``V``; ``row`` points at exactly
        these arrays, so it is kept as the batch's row.  O(arity).
        """
        b = cls(keys, tuple(V), key_offs, val_offs, times, diffs, desc, kinds, check)
        b._row = (row, [])
        return b

    @classmethod
    def _from_any(cls, u: Updates, desc: Description, check: bool) -> "Batch":
        """From consolidated non-empty updates of any column kinds (one grouping kernel, then numpy).  O(n m)."""
        key, vals, n = u.cols[0], tuple(u.cols[1:]), len(u)
        off = offset_dtype(n)
        kstarts, vstarts, key_offs = kernels().trie_starts(key_matrix(u.cols))
        key_offs = key_offs.astype(off)
        val_offs = np.empty(len(vstarts) + 1, dtype=off)
        val_offs[:-1] = vstarts
        val_offs[-1] = n
        flat_k = len(kstarts) == n
        flat_v = len(vstarts) == n
        return cls(
            key if flat_k else key[kstarts],
            vals if flat_v else tuple(v[vstarts] for v in vals),
            key_offs, val_offs, u.times, u.diffs, desc, u.kinds, check,
        )

    @classmethod
    def empty(cls, kinds: Sequence[str], depth: int, desc: Description | None = None,
              key_dtype=np.int64, val_dtypes=None) -> "Batch":
        """A batch of no updates (its description may still cover a time interval)."""
        val_dtypes = val_dtypes if val_dtypes is not None else [np.float64 if k == "f" else np.int64 for k in kinds[1:]]
        return cls(
            np.zeros(0, dtype=key_dtype),
            tuple(np.zeros(0, dtype=dt) for dt in val_dtypes),
            np.zeros(1, dtype=np.int32),
            np.zeros(1, dtype=np.int32),
            np.zeros((0, depth), dtype=np.int64),
            np.zeros(0, dtype=np.int64),
            desc if desc is not None else Description.covering(depth),
            tuple(kinds),
        )

    # -- shape ----------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.diffs)

    def outer_range(self) -> tuple[int, int]:
        """``(least, greatest)`` first time coordinate of the updates; ``(0, -1)`` when empty.

        What the spine's settling asks of every large batch at every step:
        O(n) once (the batch is immutable), then O(1).
        """
        if self._outer is None:
            outer = self.times[:, 0]
            self._outer = (int(outer.min()), int(outer.max())) if len(outer) else (0, -1)
        return self._outer

    def since_outer(self) -> int:
        """The greatest first coordinate of ``desc.since``'s elements (-1: none): how far settling advanced it.

        O(1) after the first call (the description is immutable).
        """
        if self._since_outer is None:
            self._since_outer = int(self.desc.since.elements[:, 0].max(initial=-1))
        return self._since_outer

    def negatives(self) -> int:
        """How many updates have a negative diff: what the spine's idle rule weighs (:meth:`traces.spine.Spine.exert_idle`).

        O(n) once (the batch is immutable), then O(1).

        >>> from ddflow.base.interner import Interner
        >>> from ddflow.base.updates import from_rows
        >>> Batch.from_updates(from_rows([(1,), (2,), (3,)], 0, [1, -1, -2], Interner())).negatives()
        2
        """
        if self._negatives is None:
            self._negatives = int(np.count_nonzero(self.diffs < 0))
        return self._negatives

    def table_row(self) -> np.ndarray:
        """This batch's row of a :class:`traces.layout.BatchTable` (made once: the batch is immutable).  O(arity)."""
        if self._row is None:
            keep: list = []
            self._row = (batch_row(self, keep), keep)
        return self._row[0]

    def __repr__(self) -> str:
        return f"Batch({len(self.keys)} keys, {len(self.val_offs) - 1} values, {len(self)} updates, {self.desc.lower}..{self.desc.upper})"

    @property
    def depth(self) -> int:
        """Coordinates per time."""
        return self.times.shape[1]

    @property
    def nbytes(self) -> int:
        """Bytes of the batch's numpy arrays (shared arrays counted in full)."""
        return sum(a.nbytes for a in (self.keys, self.key_offs, self.val_offs, self.times, self.diffs, *self.vals))

    def flatten(self) -> Updates:
        """The batch as flat update-level columns (key, *vals), times, diffs, in trie order.

        O(n); a layer with one row per update is shared, not copied.
        """
        n = len(self)
        nvals = len(self.val_offs) - 1
        # A layer with one row per update is already flat: share it instead of repeating it.
        if len(self.keys) == n:
            key = self.keys
        else:
            key = np.repeat(self.keys, np.diff(self.val_offs[self.key_offs]))
        if nvals == n:
            vals = self.vals
        else:
            vcounts = np.diff(self.val_offs)
            vals = tuple(np.repeat(v, vcounts) for v in self.vals)
        return Updates((key, *vals), self.times, self.diffs, self.kinds)

    # -- merging ----------------------------------------------------------------
    def merge(self, other: "Batch", frontier: Antichain | None = None,
              keys: tuple[tuple[int, int], tuple[int, int]] | None = None) -> "Batch":
        """Merge with the next batch in time, advancing times by ``frontier`` and consolidating.

        The (key, value) rows of both are sorted, so they merge linearly,
        and each row's updates are advanced and consolidated in place
        (:func:`ddflow.traces.merge.merge_rows`).  Batches of int64 columns
        are read through their table rows and come back built, with their
        own row, in one compiled call (:func:`ddflow.traces.merge.merge_pair`);
        others take :meth:`merge_by_rows`, the reference.  ``keys``:
        ``((lo, hi), (lo2, hi2))``, the key positions of this batch and of
        ``other`` to merge (a merge in progress merges a key range at a
        time); all of both by default.  Keys whose updates all cancel
        disappear; a sum of diffs past int64 is a
        :class:`~ddflow.errors.SchemaError`.  Cost: O(n + m) for the two
        batches' sizes when advancing keeps each row's times in order,
        O(m log m) at worst.

        >>> from ddflow.base.interner import Interner
        >>> from ddflow.base.updates import from_rows
        >>> it = Interner()
        >>> a = Batch.from_updates(from_rows([(1, 10), (2, 20)], 0, 1, it))
        >>> b = Batch.from_updates(from_rows([(2, 20), (3, 30)], 1, [-1, 1], it))
        >>> a.merge(b, Antichain.from_time(2)).flatten().to_rows(it)
        [((1, 10), 2, 1), ((3, 30), 2, 1)]
        >>> a.merge(b, keys=((1, 2), (0, 1))).flatten().to_rows(it)
        [((2, 20), 0, 1), ((2, 20), 1, -1)]
        """
        if self.kinds != other.kinds:
            raise SchemaError(f"cannot merge batches with column kinds {self.kinds} and {other.kinds}")
        (a0, a1), (b0, b1) = keys if keys is not None else ((0, len(self.keys)), (0, len(other.keys)))
        if not (all_int(self) and all_int(other) and len(self) + len(other) < 2**31):
            a = self if keys is None else self.slice_keys(a0, a1)
            b = other if keys is None else other.slice_keys(b0, b1)
            return a.merge_by_rows(b, frontier)
        desc, F = self._merged_description(other, frontier)
        ra = self.table_row()
        T = np.empty((2, len(ra)), dtype=np.int64)
        T[0], T[1] = ra, other.table_row()
        bk, key_offs, V, val_offs, times, diffs, row, overflow = merge_pair(T, a0, a1, b0, b1, F)
        if overflow:
            self.slice_keys(a0, a1)._merge_overflow(other.slice_keys(b0, b1), frontier)
        if not len(diffs):
            return Batch.empty(self.kinds, self.depth, desc)
        if shrunk(len(diffs), self._updates_of(a0, a1) + other._updates_of(b0, b1)):
            # The updates are the first rows of buffers sized for both inputs: keep a copy, not the buffers
            # (its table row is made again when asked for, from the copies).
            return Batch(bk, tuple(V), key_offs, val_offs, times.copy(), diffs.copy(), desc, self.kinds, check=False)
        return Batch.with_row(bk, V, key_offs, val_offs, times, diffs, desc, self.kinds, row, check=False)

    def _updates_of(self, lo: int, hi: int) -> int:
        """How many updates keys ``[lo, hi)`` hold.  O(1)."""
        if lo == 0 and hi == len(self.keys):
            return len(self.diffs)
        return int(self.val_offs[self.key_offs[hi]]) - int(self.val_offs[self.key_offs[lo]])

    def _merged_description(self, other: "Batch", frontier: Antichain | None) -> tuple[Description, np.ndarray]:
        """The description of this batch merged with the next, ``other``, and the frontier's elements.  O(1)."""
        if frontier is not None and len(frontier):
            since, F = frontier, frontier.elements
        else:
            since = self.desc.since if self.desc.since == other.desc.since else self.desc.since.glb(other.desc.since)
            # The empty frontier's own elements: read-only as a frontier's are, so the merge kernels
            # compile for one array type, not two (a writable one cost a user 13 s of compiling).
            F = Antichain.empty(self.depth).elements
        return Description(self.desc.lower, other.desc.upper, since), F

    def _merge_overflow(self, other: "Batch", frontier: Antichain | None) -> None:
        """Raise the ``SchemaError`` naming the record and time whose sum left int64 in a merge with ``other``."""
        both = Updates.concat([self.flatten(), other.flatten()])
        if frontier is not None and len(frontier):
            both = both.with_times(advance_by(both.times, frontier))
        raise SchemaError(f"merging batches of {self.kinds}: {overflow_detail(both)}")

    def merge_by_rows(self, other: "Batch", frontier: Antichain | None = None) -> "Batch":
        """:meth:`merge` for columns of any kind: the rows made in numpy, merged in one call.

        What :meth:`merge` does in one call for int64 columns, and the
        reference it is tested against.  O(n + m) as :meth:`merge`.
        """
        desc, F = self._merged_description(other, frontier)
        a_cols, b_cols = self.row_columns(), other.row_columns()
        pick, voffs, kstarts, times, diffs, overflow = merge_rows(
            key_matrix(a_cols), self.val_offs, self.times, self.diffs,
            key_matrix(b_cols), other.val_offs, other.times, other.diffs, F)
        if overflow:
            self._merge_overflow(other, frontier)
        n = len(diffs)
        if n == 0:
            return Batch.empty(self.kinds, self.depth, desc, self.keys.dtype, [v.dtype for v in self.vals])
        if shrunk(n, len(self.diffs) + len(other.diffs)):  # as :meth:`merge`: not the buffers sized for both
            times, diffs = times.copy(), diffs.copy()
        if not len(other.keys):
            cols = tuple(c[pick] for c in a_cols)
        elif not len(self.keys):
            cols = tuple(c[pick - len(self.val_offs) + 1] for c in b_cols)
        else:
            cols = tuple(np.concatenate([ca, cb])[pick] for ca, cb in zip(a_cols, b_cols))
        off = offset_dtype(n)
        key_offs = np.empty(len(kstarts) + 1, dtype=off)
        key_offs[:-1] = kstarts
        key_offs[-1] = len(pick)
        return Batch(cols[0][kstarts], cols[1:], key_offs, voffs.astype(off), times, diffs, desc, self.kinds, check=False)

    def described(self, desc: Description) -> "Batch":
        """This batch's arrays, and its table row if it has one, under another description.  O(1)."""
        b = Batch(self.keys, self.vals, self.key_offs, self.val_offs, self.times, self.diffs, desc, self.kinds,
                  check=False)
        b._row = self._row
        return b

    def slice_keys(self, lo: int, hi: int) -> "Batch":
        """The sub-trie of keys ``[lo, hi)`` as a batch with the same description: views, no copies.  O(arity)."""
        v0, v1 = int(self.key_offs[lo]), int(self.key_offs[hi])
        u0, u1 = int(self.val_offs[v0]), int(self.val_offs[v1])
        return Batch(self.keys[lo:hi], tuple(v[v0:v1] for v in self.vals), self.key_offs[lo : hi + 1] - v0,
                     self.val_offs[v0 : v1 + 1] - u0, self.times[u0:u1], self.diffs[u0:u1], self.desc, self.kinds,
                     check=False)

    def row_columns(self) -> tuple[np.ndarray, ...]:
        """One entry per (key, value) row: the key repeated for each of its values, then the value columns.  O(rows)."""
        nrows = len(self.val_offs) - 1
        key = self.keys if len(self.keys) == nrows else np.repeat(self.keys, np.diff(self.key_offs))
        return (key, *self.vals)

    # -- Arrow IPC ----------------------------------------------------------------
    def to_arrow(self) -> pa.RecordBatch:
        """The trie as one Arrow record batch of keys with nested value and update lists."""
        depth = self.depth
        upd_fields = [pa.array(self.times[:, j]) for j in range(depth)] + [pa.array(self.diffs)]
        upd_names = [f"t{j}" for j in range(depth)] + ["diff"]
        updates = pa.StructArray.from_arrays(upd_fields, names=upd_names)
        upd_lists = pa.ListArray.from_arrays(pa.array(self.val_offs.astype(np.int32) if len(self) < 2**31 else self.val_offs), updates)
        val_fields = [pa.array(v) for v in self.vals] + [upd_lists]
        val_names = [f"v{i}" for i in range(len(self.vals))] + ["updates"]
        values = pa.StructArray.from_arrays(val_fields, names=val_names)
        val_lists = pa.ListArray.from_arrays(pa.array(self.key_offs.astype(np.int32)), values)
        meta = {
            "ddflow.kinds": json.dumps(list(self.kinds)),
            "ddflow.depth": str(depth),
            "ddflow.lower": json.dumps([list(t) for t in self.desc.lower]),
            "ddflow.upper": json.dumps([list(t) for t in self.desc.upper]),
            "ddflow.since": json.dumps([list(t) for t in self.desc.since]),
        }
        schema = pa.schema([pa.field("key", pa.array(self.keys).type), pa.field("values", val_lists.type)], metadata=meta)
        return pa.RecordBatch.from_arrays([pa.array(self.keys), val_lists], schema=schema)

    @classmethod
    def from_arrow(cls, rb: pa.RecordBatch) -> "Batch":
        """The batch that :meth:`to_arrow` wrote (kinds, depth and description from the schema metadata).

        O(n), mostly zero-copy.
        """
        meta = {k.decode(): v.decode() for k, v in (rb.schema.metadata or {}).items()}
        depth = int(meta["ddflow.depth"])
        kinds = tuple(json.loads(meta["ddflow.kinds"]))

        def anti(name: str) -> Antichain:
            return Antichain(np.array(json.loads(meta[name]), dtype=np.int64).reshape(-1, depth), depth=depth)

        keys = rb.column(0).to_numpy(zero_copy_only=False)
        val_lists = rb.column(1)
        key_offs = val_lists.offsets.to_numpy()
        values = val_lists.values
        nvals = len(values.type) - 1
        vals = tuple(values.field(i).to_numpy(zero_copy_only=False) for i in range(nvals))
        upd_lists = values.field(nvals)
        val_offs = upd_lists.offsets.to_numpy()
        updates = upd_lists.values
        if len(updates):
            times = np.stack([updates.field(j).to_numpy(zero_copy_only=False) for j in range(depth)], axis=1)
        else:
            times = np.zeros((0, depth), dtype=np.int64)
        diffs = updates.field(depth).to_numpy(zero_copy_only=False)
        desc = Description(anti("ddflow.lower"), anti("ddflow.upper"), anti("ddflow.since"))
        return cls(keys, vals, key_offs, val_offs, times.astype(np.int64), diffs.astype(np.int64), desc, kinds)

    def write_ipc(self, sink: str | BinaryIO) -> None:
        """Write the batch as an Arrow IPC file to a path or a binary file object.  O(n)."""
        rb = self.to_arrow()
        if isinstance(sink, str):
            with pa.OSFile(sink, "wb") as f, pa.ipc.new_file(f, rb.schema) as w:
                w.write_batch(rb)
            return
        out = pa.BufferOutputStream()
        with pa.ipc.new_file(out, rb.schema) as w:
            w.write_batch(rb)
        sink.write(out.getvalue().to_pybytes())

    @classmethod
    def read_ipc(cls, source: str | BinaryIO) -> "Batch":
        """Read a batch that :meth:`write_ipc` wrote (a path is memory-mapped).  O(n).

        >>> import io
        >>> from ddflow.base.interner import Interner
        >>> from ddflow.base.updates import from_rows
        >>> b = Batch.from_updates(from_rows([(1, 10), (2, 20)], 0, 1, Interner()))
        >>> buf = io.BytesIO(); b.write_ipc(buf); _ = buf.seek(0)
        >>> Batch.read_ipc(buf).keys.tolist()
        [1, 2]
        """
        if isinstance(source, str):
            with pa.memory_map(source, "r") as f:
                return cls.from_arrow(pa.ipc.open_file(f).get_batch(0))
        return cls.from_arrow(pa.ipc.open_file(pa.py_buffer(source.read())).get_batch(0))
