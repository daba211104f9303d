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
"""
from __future__ import annotations

import hashlib
import pickle
from typing import Any, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ddflow.errors import DataflowError, SchemaError


class Interner:
    """Two-way map between hashable Python values and int64 codes.

    >>> it = Interner()
    >>> it.encode(["a", "b", "a"]).tolist(), it.decode(np.array([1, 0])).tolist()
    ([0, 1, 0], ['b', 'a'])
    """

    __slots__ = ("_codes", "_values", "_decoded", "_decoded_n", "hashed", "_by_code")

    def __init__(self, values: Iterable[Any] = (), hashed: bool = False):
        self._codes: dict[Any, int] = {}
        self._values: list[Any] = []
        # Object array of the values for decode, grown by doubling as codes are added.
        self._decoded = np.empty(0, dtype=object)
        self._decoded_n = 0
        self.hashed = hashed
        self._by_code: dict[int, Any] = {}  # hashed mode: code -> value
        for v in values:
            self.code(v)

    def __len__(self) -> int:
        return len(self._values)

    def code(self, value: Any) -> int:
        """The code of one value, assigning a new one on first sight."""
        key = _hash_key(value)
        c = self._codes.get(key)
        if c is None:
            if self.hashed:
                c = content_code(value)
                self._add_hashed(c, key, value)
                return c
            c = len(self._values)
            self._codes[key] = c
            self._values.append(value)
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
        """Codes for many values; raises TypeError naming ``where`` for an unhashable value.

        O(n), one dict lookup in Python per value.
        """
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
        uniq = self.encode(enc.dictionary.to_pylist(), where)
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
            for i in range(done, n):  # element by element: tuples must stay objects
                arr[i] = self._values[i]
            self._decoded, self._decoded_n = arr, n
        return self._decoded[:n][np.asarray(codes, dtype=np.int64)]

    def value(self, code: int) -> Any:
        """The value of one code.  O(1).

        >>> it = Interner(["x", "y"]); it.value(1)
        'y'
        """
        return self._by_code[code] if self.hashed else self._values[code]

    def values(self) -> list[Any]:
        """All values in code order (what a checkpoint stores)."""
        return list(self._values)


_MISSING = object()
_CODE_MASK = (1 << 62) - 1


def content_code(value: Any) -> int:
    """A code every process derives alike from the value itself (62 bits, non-negative)."""
    try:
        data = pickle.dumps(value, protocol=4)
    except Exception as e:
        raise SchemaError(f"multi-worker dataflows need picklable field values; {value!r} is not: {e}") from None
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little") & _CODE_MASK


def _hash_key(value: Any) -> Any:
    # 1, 1.0 and True hash equal in Python; in a column of objects they are
    # different values, so the type is part of the key.
    return (type(value), value)
