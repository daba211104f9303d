"""Dictionary encoding of non-numeric field values into int64 codes.

Every internal column is numeric so that sorting, merging, joining and
reducing stay vectorized; strings, bytes, tuples and other hashable values
become codes here and are decoded only at outputs.  Codes are dense and
assigned in first-seen order, so they are stable for the life of a
dataflow and can be checkpointed as a plain list of values.
"""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


class Interner:
    """Two-way map between hashable Python values and int64 codes."""

    __slots__ = ("_codes", "_values", "_decoded", "_decoded_n")

    def __init__(self, values: Iterable[Any] = ()):
        self._codes: dict[Any, int] = {}
        self._values: list[Any] = []
        # Object array of the values for decode, grown by doubling as codes are added.
        self._decoded = np.empty(0, dtype=object)
        self._decoded_n = 0
        for v in values:
            self.code(v)

    def __len__(self) -> int:
        return len(self._values)

    def code(self, value: Any) -> int:
        """The code of one value, assigning a new one on first sight."""
        key = _hash_key(value)
        c = self._codes.get(key)
        if c is None:
            c = len(self._values)
            self._codes[key] = c
            self._values.append(value)
        return c

    def encode(self, values: Iterable[Any], where: str = "column") -> np.ndarray:
        """Codes for many values; raises TypeError naming ``where`` for an unhashable value."""
        codes = self._codes
        out = []
        append = out.append
        for v in values:
            try:
                key = _hash_key(v)
                c = codes.get(key)
            except TypeError:
                raise TypeError(
                    f"{where}: unsupported field value {v!r} of type {type(v).__name__} "
                    "(fields must be hashable: numbers, str, bytes, tuples, None, ...)"
                ) from None
            if c is None:
                c = self.code(v)
            append(c)
        return np.fromiter(out, dtype=np.int64, count=len(out))

    def encode_arrow(self, array: pa.Array | pa.ChunkedArray, where: str = "column") -> np.ndarray:
        """Codes for an Arrow column, touching each distinct value once in Python."""
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
        """Values for codes, as an object array."""
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
        return self._values[code]

    def values(self) -> list[Any]:
        """All values in code order (what a checkpoint stores)."""
        return list(self._values)


def _hash_key(value: Any) -> Any:
    # 1, 1.0 and True hash equal in Python; in a column of objects they are
    # different values, so the type is part of the key.
    return (type(value), value)
