"""Column kinds: the one table of how a field is stored and what it decodes to.

A field column is int64 or float64 numpy; its kind says what it means:
``i`` int, ``f`` float, ``b`` bool (stored 0/1 in int64), ``o`` an
interned object (int64 code, see :mod:`ddflow.base.interner`).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pyarrow as pa

KINDS = ("i", "f", "b", "o")
#: Storage dtype of each kind.
DTYPE = {"i": np.int64, "f": np.float64, "b": np.int64, "o": np.int64}
#: Storage and meaning, as error messages name them.
DTYPE_NAMES = {"i": "int64", "f": "float64", "b": "bool", "o": "object"}
#: A user-facing name for each kind.
NAMES = {"i": "int", "f": "float", "b": "bool", "o": "object"}
ARTICLE = {"i": "an int", "f": "a float", "b": "a bool", "o": "an object"}
#: Python values each non-object kind accepts as it is.
PY_TYPES = {
    "i": (int, np.integer),
    "f": (int, float, np.integer, np.floating),
    "b": (bool, np.bool_, int, np.integer),
}
#: The kind of a numpy array by its dtype kind (anything else is an object column).
OF_DTYPE = {"i": "i", "u": "i", "f": "f", "b": "b"}
#: Arrow storage types for each kind, for schemas written out.
ARROW_TYPES = {"i": pa.int64(), "f": pa.float64(), "b": pa.bool_(), "o": pa.string()}

def infer_kind(values: Sequence[Any]) -> str:
    """The column kind that holds every value exactly.  O(n), Python per value.

    >>> infer_kind([1, 2]), infer_kind([1, 2.5]), infer_kind([True]), infer_kind(["a"])
    ('i', 'f', 'b', 'o')
    """
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


def arrow_kind(typ: pa.DataType) -> str:
    """The column kind of an Arrow type: timestamps and dates are ints, anything else non-numeric an object.

    >>> arrow_kind(pa.int32()), arrow_kind(pa.timestamp("s")), arrow_kind(pa.string())
    ('i', 'i', 'o')
    """
    if pa.types.is_boolean(typ):
        return "b"
    if pa.types.is_integer(typ) or pa.types.is_timestamp(typ) or pa.types.is_date(typ):
        return "i"
    if pa.types.is_floating(typ):
        return "f"
    return "o"
