"""Dictionary encoding of non-numeric field values into int64 codes.

Every internal column is numeric so that sorting, merging, joining and
reducing stay vectorized; strings, bytes, tuples and other hashable values
become codes here and are decoded only at outputs.  Codes are dense and
assigned in first-seen order, so they are stable for the life of a
dataflow and can be checkpointed as a plain list of values.

A multi-worker dataflow runs in several processes that each meet new
values (a ``map`` may create strings on any worker), so there codes are
*content-derived* instead (``hashed=True``): 62 bits of a BLAKE2b digest
of the pickled value.  Every process then agrees on every value's code
without talking; only the values themselves travel, beside the codes that
cross a channel (:meth:`Interner.values_for`, :meth:`Interner.register`).
Two different values with the same code raise rather than silently meet.

Codes are *collected* (dense mode only).  A stream with ever new strings
(a sliding window over fresh keys) would otherwise keep every value it
ever saw.  At a quiescent point (the end of a top-level scheduler step,
:func:`ddflow.graph.scope.collect_codes`) every node reports the object
columns it still holds (traces, pending state, queues, undrained
captures); codes no column holds are freed and reused, smallest first,
for new values, so the code space and the decode array stay within a
constant factor of the live values.  Reuse is safe because a freed code
appears in no column, so no trace sorts by it and no reader can decode
it; the decode cache is refilled for a reused slot when it is reused.  A
collection runs only when the values added since the last one are at
least as many as were live after it (and ``collect_after``, and an
eighth of the object cells marked then), so its O(cells + codes) cost is
amortized O(1) per new value or per update that grew the state, and
memory holds at most about twice the live values.  Codes of
:class:`~ddflow.base.updates.Updates` read out of a dataflow (a drained
capture) stay valid until the next ``run()``: decode them before it.

Hashed codes (several workers) are collected only all together: channels
between workers remember which codes' values they already sent, so a
process that forgot a value could later receive its code alone.  The
worker pool (:mod:`ddflow.workers.pool`) therefore has every process
collect at the same quiescent point (the start of a run, when a worker
said a collection is due) and every channel forget what it sent then.
"""
from __future__ import annotations

import hashlib
import pickle
from itertools import compress, repeat
from operator import is_
from typing import Any, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ddflow.errors import DataflowError, SchemaError


_MISSING = object()
#: Types whose equal values have one code: a dict of them groups values as the interner's keys do (strings are
#: their own keys, looked up in C without it: :meth:`Interner._encode_strings`).
_BY_EQUALITY = frozenset((bytes, tuple))
#: :meth:`Interner.encode` looks for repeats among this many values first (a quarter repeated: it deduplicates).
PROBE = 4096
_STR = frozenset((str,))
_FREE = object()  # the value slot of a freed code (dense mode)
#: Default ``collect_after``: below this many new values a collection is not worth a mark phase.
COLLECT_AFTER = 1 << 14
#: A collection also waits for one new value per this many object cells the last one marked.
HELD_PER_VALUE = 8


class Interner:
    """Two-way map between hashable Python values and int64 codes.

    >>> it = Interner()
    >>> it.encode(["a", "b", "a"]).tolist(), it.decode(np.array([1, 0])).tolist()
    ([0, 1, 0], ['b', 'a'])

    Only code 1 is still held, so "a" is freed and its code reused:

    >>> it.collect([np.array([1])]), it.encode(["c"]).tolist(), it.decode(np.array([0, 1])).tolist()
    (1, [0], ['c', 'b'])
    """

    __slots__ = ("_codes", "_values", "_decoded", "_decoded_n", "hashed", "_by_code", "_free",
                 "collect_after", "collections", "_live_after", "_held_after", "_released")

    def __init__(self, values: Iterable[Any] = (), hashed: bool = False, collect_after: int | None = COLLECT_AFTER):
        self._codes: dict[Any, int] = {}
        # Dense mode: the value of each code, ``_FREE`` at a freed code.
        self._values: list[Any] = []
        # Object array of the values for decode, grown by doubling as codes are added;
        # entries below ``_decoded_n`` are filled (None at a freed code).
        self._decoded = np.empty(0, dtype=object)
        self._decoded_n = 0
        self.hashed = hashed
        self._by_code: dict[int, Any] = {}  # hashed mode: code -> value
        #: Freed codes, largest first: ``pop()`` reuses the smallest, so the code space stays compact.
        self._free: list[int] = []
        #: Collect only once at least this many values were added since the last collection; None: never.
        self.collect_after = collect_after
        #: Collections run so far.
        self.collections = 0
        self._live_after = 0  # live values after the last collection
        self._held_after = 0  # object cells marked by the last collection
        self._released = 0  # object cells the state let go of since (:meth:`release`)
        for v in values:
            self.code(v)

    def __len__(self) -> int:
        """Values with a code now (freed ones do not count).  O(1)."""
        return len(self._codes)

    def __contains__(self, value: Any) -> bool:
        """Whether ``value`` has a code now (not freed).  O(1)."""
        return _hash_key(value) in self._codes

    @property
    def capacity(self) -> int:
        """Dense mode: every code is below this (live and free codes); the decode array's length.  O(1)."""
        return len(self._values)

    def code(self, value: Any) -> int:
        """The code of one value, assigning a new one on first sight (the smallest free one, if any).  O(1)."""
        key = _hash_key(value)
        c = self._codes.get(key)
        if c is None:
            value = key if type(key) is str else key[1]  # the canonical value (one NaN, 0.0 for -0.0) is the one decoded
            if self.hashed:
                c = content_code(value)
                self._add_hashed(c, key, value)
                return c
            if self._free:
                c = self._free.pop()
                self._values[c] = value
                if c < self._decoded_n:
                    self._decoded[c] = value  # the cache must not decode the slot's previous value
            else:
                c = len(self._values)
                self._values.append(value)
            self._codes[key] = c
        return c

    def _add_hashed(self, c: int, key: Any, value: Any) -> None:
        had = self._by_code.get(c, _MISSING)
        if had is not _MISSING and _hash_key(had) != key:
            raise DataflowError(f"interner: values {had!r} and {value!r} have the same code {c}; "
                             "rename one of them (a 62-bit digest collision)")
        self._by_code[c] = value
        self._codes[key] = c
        self._values.append(value)

    def register(self, codes: Iterable[int], values: Iterable[Any]) -> None:
        """Learn values (with their codes) that another process interned (hashed mode)."""
        for c, v in zip(codes, values):
            c = int(c)
            if c not in self._by_code:
                self._add_hashed(c, _hash_key(v), v)
            elif _hash_key(self._by_code[c]) != _hash_key(v):
                raise DataflowError(f"interner: values {self._by_code[c]!r} and {v!r} have the same code {c}")

    def values_for(self, codes: np.ndarray) -> list[Any]:
        """The values of (known) codes, in order (hashed mode)."""
        by = self._by_code
        return [by[c] for c in codes.tolist()]

    def encode(self, values: Iterable[Any], where: str = "column") -> np.ndarray:
        """Codes for many values; raises SchemaError naming ``where`` for an unhashable value.

        O(n).  A column of strings is looked up in C
        (:meth:`_encode_strings`).  A column of only bytes or only tuples
        (what SQL's keys of several columns make) that repeats values goes
        to Python once per distinct value, and otherwise runs in C: equal
        ones are found by a dict, which groups them as the interner's keys
        do (for tuples, Python's equality; each distinct one is then made
        canonical).  Whether it repeats is judged on its first ``PROBE``
        values.  Other columns: one dict lookup in Python per value.

        >>> Interner().encode([("a", 1), ("b", 2), ("a", 1)]).tolist()
        [0, 1, 0]
        """
        values = values if isinstance(values, list) else list(values)
        if len(values) > 1 and type(values[0]) in _BY_EQUALITY:
            try:
                probe = values[:PROBE]
                distinct = dict.fromkeys(probe)
                repeats = 4 * len(distinct) < 3 * len(probe)
                if repeats and len(kinds := set(map(type, values))) == 1 and kinds <= _BY_EQUALITY:
                    if len(probe) < len(values):
                        distinct = dict.fromkeys(values)
                    code_of = dict(zip(distinct, self._encode_each(list(distinct), where).tolist()))
                    return np.fromiter(map(code_of.__getitem__, values), dtype=np.int64, count=len(values))
            except TypeError:  # a tuple holding an unhashable value: the per-value path names it
                pass
        return self._encode_each(values, where)

    def _encode_each(self, values: list, where: str) -> np.ndarray:
        """:meth:`encode`, one dict lookup in Python per value (strings: :meth:`_encode_strings`).  O(n)."""
        if values and type(values[0]) is str and set(map(type, values)) == _STR:
            return self._encode_strings(values)
        codes = self._codes
        out = []
        append = out.append
        for v in values:
            try:
                key = _hash_key(v)
                c = codes.get(key)
            except TypeError:
                raise SchemaError(
                    f"{where}: unsupported field value {v!r} of type {type(v).__name__} "
                    "(fields must be hashable: numbers, str, bytes, tuples, None, ...)"
                ) from None
            if c is None:
                c = self.code(v)
            append(c)
        return np.fromiter(out, dtype=np.int64, count=len(out))

    def _encode_strings(self, values: list) -> np.ndarray:
        """Codes for a list of strings, looked up in C (a string is its own key).  O(n).

        Only new strings go to Python, one at a time where free codes are
        reused or codes are content-derived (several workers); otherwise
        they take the next codes in one pass in C, in first-seen order, as
        :meth:`code` would give them.
        """
        codes = self._codes
        got = list(map(codes.get, values))
        if None in got:
            new = dict.fromkeys(compress(values, map(is_, got, repeat(None))))
            if self.hashed or self._free:
                for v in new:
                    self.code(v)
            else:
                base = len(self._values)
                self._values.extend(new)
                codes.update(zip(new, range(base, base + len(new))))
            got = list(map(codes.get, values))
        return np.fromiter(got, dtype=np.int64, count=len(got))

    def encode_arrow(self, array: pa.Array | pa.ChunkedArray, where: str = "column") -> np.ndarray:
        """Codes for an Arrow column, touching each distinct value once in Python.

        O(n) vectorized plus Python per distinct value; nulls become ``None``.

        >>> Interner().encode_arrow(pa.array(["a", None, "a"])).tolist()
        [0, 1, 0]
        """
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        if len(array) == 0:
            return np.zeros(0, dtype=np.int64)
        enc = pc.dictionary_encode(array)
        uniq = self._encode_each(enc.dictionary.to_pylist(), where)  # distinct already
        idx = enc.indices
        if idx.null_count:
            none_code = self.code(None)
            idx = pc.fill_null(idx, -1)
            ii = idx.to_numpy(zero_copy_only=False).astype(np.int64)
            out = np.where(ii < 0, none_code, uniq[np.maximum(ii, 0)] if len(uniq) else none_code)
            return out.astype(np.int64)
        return uniq[idx.to_numpy(zero_copy_only=False)]

    def decode(self, codes: np.ndarray) -> np.ndarray:
        """Values for codes, as an object array.

        O(n) vectorized (hashed mode: Python per distinct code).
        """
        if self.hashed:
            codes = np.asarray(codes, dtype=np.int64)
            uniq, inv = np.unique(codes, return_inverse=True)
            vals = np.empty(len(uniq), dtype=object)
            by = self._by_code
            for i, c in enumerate(uniq.tolist()):  # element by element: tuples must stay objects
                try:
                    vals[i] = by[c]
                except KeyError:
                    raise KeyError(f"interner: no value for code {c} in this process") from None
            return vals[inv.reshape(-1)]
        n = len(self._values)
        if self._decoded_n != n:
            arr, done = self._decoded, self._decoded_n
            if len(arr) < n:
                arr = np.empty(max(n, 2 * len(arr)), dtype=object)
                arr[:done] = self._decoded[:done]
            values = self._values
            for i in range(done, n):  # element by element: tuples must stay objects
                v = values[i]
                arr[i] = None if v is _FREE else v
            self._decoded, self._decoded_n = arr, n
        return self._decoded[:n][np.asarray(codes, dtype=np.int64)]

    def value(self, code: int) -> Any:
        """The value of one code; a KeyError for a freed one.  O(1).

        >>> it = Interner(["x", "y"]); it.value(1)
        'y'
        """
        if self.hashed:
            return self._by_code[code]
        v = self._values[code]
        if v is _FREE:
            raise KeyError(f"interner: code {code} was freed")
        return v

    def values(self) -> list[Any]:
        """All values in code order (dense mode: None at a freed code; hashed: first-seen order)."""
        return [None if v is _FREE else v for v in self._values]

    # -- collection ---------------------------------------------------------------------
    def due(self) -> bool:
        """Whether a collection would pay for itself now (see the module docstring).  O(1).

        Values added since the last collection must be at least
        ``collect_after``, the values live after it and an eighth of the
        object cells it marked: the next collection's work is then paid by
        the additions (or by the updates that grew the marked state).  Or
        the state let go of (:meth:`release`) at least ``collect_after``
        and half the cells the last one marked: a dataflow whose state
        shrank a lot, with no new values since (its input deleted), gives
        the values back.  Always False with ``collect_after=None``.
        """
        if self.collect_after is None:
            return False
        added = len(self._codes) - self._live_after
        return (added >= max(self.collect_after, self._live_after, self._held_after // HELD_PER_VALUE, 1)
                or self._released >= max(self.collect_after, self._held_after // 2, 1))

    def release(self, cells: int) -> None:
        """The dataflow's state let go of about ``cells`` object cells (merged away): a collection may be due.  O(1).

        >>> it = Interner(["a"], collect_after=2); it.due()
        False
        >>> it.release(3); it.due()
        True
        """
        self._released += cells

    def collect(self, held: Iterable[np.ndarray]) -> int:
        """Free every code that appears in none of the ``held`` code arrays; return how many were freed.

        ``held`` must be every column of codes anything may still decode or
        compare (the caller's mark phase): a code left out is reused for
        another value.  Freed values are dropped from the dict, the value
        list and the decode cache; trailing free codes are cut off (the
        decode array shrinks with them) and the rest wait, smallest first,
        for new values.  Hashed mode: the unheld values are forgotten (codes
        are content-derived, so there is nothing to reuse); only call it
        where every channel forgets what it sent (see the module docstring).
        Cost: O(c) vectorized for the c codes in ``held``, O(capacity) numpy
        and O(1) Python per freed value.
        """
        if self.hashed:
            return self._collect_hashed(held)
        values, codes = self._values, self._codes
        n = len(values)
        live = np.zeros(n, dtype=bool)
        cells = 0
        for col in held:
            if len(col):
                live[col] = True  # an IndexError here: a column holds a code this interner never gave
                cells += len(col)
        free = np.array(self._free, dtype=np.int64)
        if len(free) and live[free].any():
            c = int(free[live[free]][0])
            raise DataflowError(f"interner: code {c} is held somewhere but was freed earlier (internal error)")
        had = np.ones(n, dtype=bool)
        had[free] = False
        dead = np.flatnonzero(had & ~live)
        for c in dead.tolist():
            del codes[_hash_key(values[c])]
            values[c] = _FREE
        if len(dead) > len(codes):
            self._codes = dict(codes)  # a fresh dict: deleting never shrinks a dict's table
        # Trailing free codes are cut off; the rest are reused smallest first.
        top = int(np.flatnonzero(live)[-1]) + 1 if live.any() else 0
        del values[top:]
        self._free = np.flatnonzero(~live[:top])[::-1].tolist()
        cached = dead[dead < self._decoded_n]
        self._decoded[cached] = None  # drop the cache's references too
        self._decoded_n = min(self._decoded_n, top)
        if len(self._decoded) > 2 * max(top, 16):
            self._decoded = self._decoded[:top].copy()
        self._live_after, self._held_after, self._released = len(self._codes), cells, 0
        self.collections += 1
        return len(dead)

    def _collect_hashed(self, held: Iterable[np.ndarray]) -> int:
        cols = [np.asarray(c, dtype=np.int64) for c in held if len(c)]
        keep = np.unique(np.concatenate(cols)) if cols else np.zeros(0, dtype=np.int64)
        by, codes = self._by_code, self._codes
        known = np.fromiter(by.keys(), dtype=np.int64, count=len(by))
        dead = known[~np.isin(known, keep)]
        for c in dead.tolist():
            del codes[_hash_key(by.pop(c))]
        if len(dead) > len(codes):  # fresh dicts: deleting never shrinks a dict's table
            self._by_code, self._codes = dict(by), dict(codes)
        self._values = list(self._by_code.values())
        self._live_after, self._held_after, self._released = len(self._codes), sum(len(c) for c in cols), 0
        self.collections += 1
        return len(dead)

    def _check(self) -> None:
        """Assert the internal invariants (for tests; O(capacity) Python)."""
        if self.hashed:
            assert not self._free, "hashed mode frees nothing"
            assert len(self._codes) == len(self._by_code) == len(self._values)
            for key, c in self._codes.items():
                assert _hash_key(self._by_code[c]) == key, (key, c)
            return
        values, n = self._values, len(self._values)
        free = set(self._free)
        assert len(free) == len(self._free), "free list has duplicates"
        assert self._free == sorted(self._free, reverse=True), "free list is not largest first"
        for c in self._free:
            assert 0 <= c < n and values[c] is _FREE, f"free code {c} holds a value"
        assert sum(v is _FREE for v in values) == len(free), "a freed slot is not in the free list"
        assert len(self._codes) + len(free) == n, "dict and value list disagree on the live codes"
        for key, c in self._codes.items():
            assert 0 <= c < n and c not in free, f"value {key} has code {c} outside the live codes"
            assert _hash_key(values[c]) == key, f"code {c} decodes to {values[c]!r}, the dict says {key}"
        assert not n or values[-1] is not _FREE, "trailing free codes were not cut off"
        assert 0 <= self._decoded_n <= n and len(self._decoded) >= self._decoded_n
        for i in range(self._decoded_n):
            want = None if values[i] is _FREE else values[i]
            assert self._decoded[i] is want, f"decode cache of code {i} is {self._decoded[i]!r}, not {want!r}"


_CODE_MASK = (1 << 62) - 1


def content_code(value: Any) -> int:
    """A code every process derives alike from the value itself (62 bits, non-negative)."""
    try:
        data = pickle.dumps(value, protocol=4)
    except Exception as e:
        raise SchemaError(f"multi-worker dataflows need picklable field values; {value!r} is not: {e}") from None
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little") & _CODE_MASK


_NAN = float("nan")
#: Types whose values are their own canonical representatives (a tuple of only these is one too).
_AS_THEY_ARE = frozenset((int, bool, str, bytes, type(None)))


def canonical(value: Any) -> Any:
    """The one representative of values an object column treats as equal: every NaN is one NaN, -0.0 is 0.0.

    Float columns already compare NaN equal to itself and -0.0 to 0.0
    (their sort keys); an object column must agree, or an inserted NaN
    could never be retracted (two NaN objects are never ``==``).

    >>> canonical(float("-0.0")), canonical(float("nan")) is canonical(float("nan"))
    (0.0, True)
    """
    t = type(value)
    if t is float or isinstance(value, np.floating):
        if value != value:
            return _NAN
        if value == 0.0:
            return 0.0
        return float(value) if t is not float else value
    if t is tuple:
        if _AS_THEY_ARE.issuperset(map(type, value)):  # no float inside: the tuple is its own representative
            return value
        return tuple(canonical(v) for v in value)
    return value


def _hash_key(value: Any) -> Any:
    # 1, 1.0 and True hash equal in Python; in a column of objects they are
    # different values, so the type is part of the key.  Floats (and tuples,
    # which may hold them) are canonical first: one NaN, and 0.0 for -0.0.
    t = type(value)
    if t is str:  # a string is its own key (no other key is a string): looked up without building one
        return value
    if t is float or t is tuple or isinstance(value, np.floating):
        value = canonical(value)
        t = type(value)
    return (t, value)
