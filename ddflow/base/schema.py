"""Named, typed columns with SQL NULLs, and how a row of them is laid out in engine fields.

A row ``(v_0, ..., v_(n-1))`` is stored as ``n`` value fields and one
*null mask* field: bit ``j`` of the mask is set iff ``v_j`` is NULL, and
a NULL's value field holds its kind's zero (``0``, ``0.0``, ``False``,
or ``None`` for objects).  Two stored rows are equal iff the SQL rows
are equal with NULL matching NULL (the equality of GROUP BY, DISTINCT
and set operations), and a NULL never equals a real value: the mask
tells them apart.  A schema has at most 63 columns (one mask word).

>>> s = Schema.of({"id": "bigint", "name": "string"})
>>> s.names, s.kinds
(('id', 'name'), ('i', 'o', 'i'))
>>> s.encode_row((1, None), "t"), s.decode_row((1, None, 2))
((1, None, 2), (1, None))
"""
from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import pyarrow as pa

from ddflow.errors import SchemaError

#: Spark SQL type names (and aliases) to the canonical name used here.
TYPE_ALIASES = {
    "bigint": "bigint", "long": "bigint", "int": "bigint", "integer": "bigint", "smallint": "bigint",
    "tinyint": "bigint", "short": "bigint", "byte": "bigint",
    "double": "double", "float": "double", "real": "double", "decimal": "double",
    "string": "string", "varchar": "string", "char": "string", "text": "string",
    "boolean": "boolean", "bool": "boolean",
    "date": "date", "timestamp": "timestamp",
}
#: Python types accepted in a schema, as the SQL type they stand for.
PY_TYPE_NAMES = {int: "bigint", float: "double", str: "string", bool: "boolean",
                 datetime.date: "date", datetime.datetime: "timestamp"}
#: The engine kind of each canonical type (dates and timestamps are objects: Python values, exact).
KIND = {"bigint": "i", "double": "f", "string": "o", "boolean": "b", "date": "o", "timestamp": "o"}
#: What a NULL's value field holds, per kind.
NULL_VALUE = {"i": 0, "f": 0.0, "b": False, "o": None}
ARROW = {"bigint": pa.int64(), "double": pa.float64(), "string": pa.string(), "boolean": pa.bool_(),
         "date": pa.date32(), "timestamp": pa.timestamp("us")}
MAX_COLUMNS = 63


def sql_type(t: Any, where: str) -> str:
    """The canonical SQL type name of ``t`` (a Spark SQL type name or a Python type)."""
    if isinstance(t, type) and t in PY_TYPE_NAMES:
        return PY_TYPE_NAMES[t]
    if isinstance(t, str):
        base = t.strip().lower().split("(")[0].strip()
        if base in TYPE_ALIASES:
            return TYPE_ALIASES[base]
    known = ", ".join(sorted(set(TYPE_ALIASES.values())))
    raise SchemaError(f"{where}: unknown column type {t!r} (known: {known}, or int, float, str, bool)")


def _check(v: Any, typ: str) -> bool:
    """``v`` (not None) is a value of SQL type ``typ``."""
    if typ == "bigint":
        return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) and -(1 << 63) <= v < (1 << 63)
    if typ == "double":
        return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
    if typ == "string":
        return isinstance(v, str)
    if typ == "boolean":
        return isinstance(v, (bool, np.bool_))
    if typ == "timestamp":
        return isinstance(v, datetime.datetime)
    return isinstance(v, datetime.date) and not isinstance(v, datetime.datetime)


@dataclass(frozen=True)
class Schema:
    """Column names and canonical SQL types; every column may be NULL."""

    names: tuple[str, ...]
    types: tuple[str, ...]

    def __post_init__(self):
        if len(self.names) != len(self.types):
            raise SchemaError(f"{len(self.names)} column names for {len(self.types)} types")
        if len(self.names) > MAX_COLUMNS:
            raise SchemaError(f"a table or query result has at most {MAX_COLUMNS} columns here, not {len(self.names)}")
        seen = set()
        for n in self.names:
            if n.lower() in seen:
                raise SchemaError(f"column {n!r} appears twice in {list(self.names)}")
            seen.add(n.lower())

    @classmethod
    def of(cls, spec: Mapping[str, Any], where: str = "schema") -> "Schema":
        """From ``{name: type}``; types as Spark SQL names (bigint, double, string, ...) or Python types."""
        names = tuple(str(n) for n in spec)
        return cls(names, tuple(sql_type(t, f"{where} column {n!r}") for n, t in spec.items()))

    def __len__(self) -> int:
        return len(self.names)

    @property
    def kinds(self) -> tuple[str, ...]:
        """Engine kinds of the stored fields: the values, then the null mask."""
        return tuple(KIND[t] for t in self.types) + ("i",)

    def index(self, name: str) -> int:
        """Position of column ``name`` (case-insensitive, as SQL identifiers)."""
        low = name.lower()
        for i, n in enumerate(self.names):
            if n.lower() == low:
                return i
        raise SchemaError(f"no column {name!r} among {list(self.names)}")

    def encode_row(self, row: tuple, where: str) -> tuple:
        """A SQL row as stored fields (values, then the mask); a wrong type is a SchemaError naming the column.

        O(n) per row, Python.
        """
        if not isinstance(row, tuple):
            raise SchemaError(f"{where}: rows are tuples, got {type(row).__name__} {row!r}")
        if len(row) != len(self.names):
            raise SchemaError(f"{where}: a row of {len(row)} values for the {len(self.names)} columns {list(self.names)}")
        out = []
        mask = 0
        for j, (v, typ) in enumerate(zip(row, self.types)):
            if v is None:
                mask |= 1 << j
                out.append(NULL_VALUE[KIND[typ]])
                continue
            if not _check(v, typ):
                raise SchemaError(f"{where}: column {self.names[j]!r} is {typ}, got {type(v).__name__} {v!r}")
            if typ == "double":
                v = float(v)
                if v != v:
                    raise SchemaError(f"{where}: column {self.names[j]!r} got NaN; use None for a missing value")
            out.append(v)
        out.append(mask)
        return tuple(out)

    def decode_row(self, stored: tuple) -> tuple:
        """The SQL row of stored fields: NULL as None.  O(n)."""
        mask = stored[-1]
        return tuple(None if (mask >> j) & 1 else v for j, v in enumerate(stored[:-1]))
