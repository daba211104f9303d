"""Named, typed columns with SQL NULLs, and how a row of them is laid out in engine fields.

A row ``(v_0, ..., v_(n-1))`` is stored as ``n`` value fields and its
*null mask*: one int64 field for up to 63 columns, one more per 63 more
(:mod:`ddflow.base.nullmask`, the one place that knows the bits), where
column ``j``'s bit is set iff ``v_j`` is NULL, and a NULL's value field
holds its kind's zero (``0``, ``0.0``, ``False``, or ``None`` for
objects).  Two stored rows are equal iff the SQL rows are equal with
NULL matching NULL (the equality of GROUP BY, DISTINCT and set
operations), and a NULL never equals a real value: the mask tells them
apart.  A schema may have any number of columns.

>>> s = Schema.of({"id": "bigint", "name": "string"})
>>> s.names, s.kinds
(('id', 'name'), ('i', 'o', 'i'))
>>> s.encode_row((1, None), "t"), s.decode_row((1, None, 2))
((1, None, 2), (1, None))
"""
from __future__ import annotations

import datetime
import decimal
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import pyarrow as pa

from ddflow.base import nullmask
from ddflow.errors import SchemaError

#: Spark SQL type names (and aliases) to the canonical name used here.  ``int`` and the narrower integers
#: are bigint: values are int64 throughout (Spark's INT overflows at 2**31; here only past int64).
TYPE_ALIASES = {
    "bigint": "bigint", "long": "bigint", "int": "bigint", "integer": "bigint", "smallint": "bigint",
    "tinyint": "bigint", "short": "bigint", "byte": "bigint",
    "double": "double", "float": "double", "real": "double",
    "string": "string", "varchar": "string", "char": "string", "text": "string",
    "boolean": "boolean", "bool": "boolean",
    "date": "date", "timestamp": "timestamp", "timestamp_ntz": "timestamp", "datetime": "timestamp",
}
#: Python types accepted in a schema, as the SQL type they stand for.
PY_TYPE_NAMES = {int: "bigint", float: "double", str: "string", bool: "boolean",
                 datetime.date: "date", datetime.datetime: "timestamp", decimal.Decimal: "decimal(38,18)"}
#: The largest decimal precision (Spark's), and the digits an int64 unscaled value always holds.
MAX_PRECISION, INT64_DIGITS = 38, 18
_DECIMAL = re.compile(r"^\s*(?:decimal|dec|numeric)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?\s*$", re.I)
#: Decimal arithmetic context wide enough to be exact for every DECIMAL(38, s) value.
_EXACT = decimal.Context(prec=MAX_PRECISION + 2)
EPOCH = datetime.date(1970, 1, 1)
EPOCH_TS = datetime.datetime(1970, 1, 1)


def decimal_type(p: int, s: int) -> str:
    """The canonical name of DECIMAL(p, s).

    >>> decimal_type(15, 2)
    'decimal(15,2)'
    """
    if not (1 <= p <= MAX_PRECISION and 0 <= s <= p):
        raise SchemaError(f"DECIMAL({p}, {s}): the precision is 1 to {MAX_PRECISION} and the scale 0 to the precision")
    return f"decimal({p},{s})"


def decimal_ps(t: str) -> tuple[int, int] | None:
    """``(precision, scale)`` of a canonical decimal type, None for any other type.

    >>> decimal_ps("decimal(15,2)"), decimal_ps("bigint")
    ((15, 2), None)
    """
    if not t.startswith("decimal("):
        return None
    p, s = t[8:-1].split(",")
    return int(p), int(s)


def is_decimal(t: str) -> bool:
    return t.startswith("decimal(")


class _ByType(dict):
    """A table by canonical type name that also answers for every ``decimal(p,s)``."""

    def __init__(self, table: dict, decimal_value):
        super().__init__(table)
        self._decimal = decimal_value

    def __missing__(self, t):
        if isinstance(t, str) and t.startswith("decimal("):
            p, s = decimal_ps(t)
            return self._decimal(p, s)
        raise KeyError(t)

    def get(self, t, default=None):
        try:
            return self[t]
        except KeyError:
            return default

    def __contains__(self, t):
        return dict.__contains__(self, t) or (isinstance(t, str) and t.startswith("decimal("))


#: The engine kind of each canonical type.  Decimals are their unscaled int64 (value * 10**scale), dates
#: int days since 1970-01-01, timestamps int microseconds since the epoch (UTC): exact, vectorized.
KIND = _ByType({"bigint": "i", "double": "f", "string": "o", "boolean": "b", "date": "i", "timestamp": "i"},
               lambda p, s: "i")
#: What a NULL's value field holds, per kind.
NULL_VALUE = {"i": 0, "f": 0.0, "b": False, "o": None}
ARROW = _ByType({"bigint": pa.int64(), "double": pa.float64(), "string": pa.string(), "boolean": pa.bool_(),
                 "date": pa.date32(), "timestamp": pa.timestamp("us")}, lambda p, s: pa.decimal128(p, s))


def sql_type(t: Any, where: str) -> str:
    """The canonical SQL type name of ``t`` (a Spark SQL type name or a Python type).

    >>> sql_type("DECIMAL(15, 2)", "t"), sql_type("decimal", "t"), sql_type("int", "t")
    ('decimal(15,2)', 'decimal(10,0)', 'bigint')
    """
    if isinstance(t, type) and t in PY_TYPE_NAMES:
        return PY_TYPE_NAMES[t]
    if isinstance(t, str):
        m = _DECIMAL.match(t)
        if m:  # Spark: DECIMAL alone is DECIMAL(10, 0), DECIMAL(p) is DECIMAL(p, 0)
            return decimal_type(int(m.group(1) or 10), int(m.group(2) or 0))
        base = t.strip().lower()
        if base in TYPE_ALIASES:
            return TYPE_ALIASES[base]
        if "(" in base and base.split("(")[0].strip() in ("varchar", "char", "string"):
            return "string"
    known = ", ".join(sorted(set(TYPE_ALIASES.values()))) + ", decimal(p,s)"
    raise SchemaError(f"{where}: unknown column type {t!r} (known: {known}, or int, float, str, bool)")


def to_unscaled(v: Any, s: int, p: int, where: str) -> int:
    """A Python value as the unscaled integer of DECIMAL(p, s); an inexact or too wide value is an error."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer, decimal.Decimal, str)):
        raise SchemaError(f"{where}: expected a decimal.Decimal, an int or a numeric string for decimal({p},{s}), "
                          f"got {type(v).__name__} {v!r} (a float is not exact)")
    try:
        d = decimal.Decimal(v) if not isinstance(v, decimal.Decimal) else v
    except decimal.InvalidOperation:
        raise SchemaError(f"{where}: {v!r} is not a number for decimal({p},{s})") from None
    if not d.is_finite():
        raise SchemaError(f"{where}: {v!r} is not a finite decimal")
    scaled = d.scaleb(s, decimal.Context(prec=len(d.as_tuple().digits) + s + 2))  # exact, however long
    q = int(scaled.to_integral_value(rounding=decimal.ROUND_HALF_UP))
    if q != scaled:
        raise SchemaError(f"{where}: {v!r} has more than {s} decimal places for decimal({p},{s})")
    if abs(q) >= 10 ** p:
        raise SchemaError(f"{where}: {v!r} does not fit decimal({p},{s})")
    if not -(1 << 63) <= q < (1 << 63):
        raise SchemaError(f"{where}: {v!r} needs more than 18 digits; ddflow stores decimals in int64")
    return q


def from_unscaled(q: int, s: int) -> decimal.Decimal:
    """The Decimal of unscaled integer ``q`` at scale ``s``.

    >>> from_unscaled(1234, 2)
    Decimal('12.34')
    """
    return decimal.Decimal(int(q)).scaleb(-s, _EXACT)  # the default context's 28 digits would round 38


def date_days(v: datetime.date) -> int:
    return (v - EPOCH).days


def timestamp_micros(v: datetime.datetime) -> int:
    if v.tzinfo is not None:
        v = v.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    d = v - EPOCH_TS
    return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds


def from_days(n: int) -> datetime.date:
    return EPOCH + datetime.timedelta(days=int(n))


def from_micros(n: int) -> datetime.datetime:
    return EPOCH_TS + datetime.timedelta(microseconds=int(n))


def _check(v: Any, typ: str) -> bool:
    """``v`` (not None) is a value of SQL type ``typ`` (decimals are checked by :func:`to_unscaled`)."""
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
    #: A table's event-time column, whose values are its rows' data times (see ``new_collection``); not part of equality.
    event_time: str | None = field(default=None, compare=False)

    def __post_init__(self):
        if len(self.names) != len(self.types):
            raise SchemaError(f"{len(self.names)} column names for {len(self.types)} types")
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
        """Engine kinds of the stored fields: the values, then the null mask's words."""
        return tuple(KIND[t] for t in self.types) + ("i",) * nullmask.words(len(self.types))

    @property
    def width(self) -> int:
        """Stored fields of a row: the values, then the null mask's words (one for up to 63 columns)."""
        return nullmask.width(len(self.types))

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
        out, nulls = [], []
        for j, (v, typ) in enumerate(zip(row, self.types)):
            if v is None:
                nulls.append(j)
                out.append(NULL_VALUE[KIND[typ]])
                continue
            ps = decimal_ps(typ)
            if ps is not None:
                out.append(to_unscaled(v, ps[1], ps[0], f"{where}: column {self.names[j]!r}"))
                continue
            if not _check(v, typ):
                raise SchemaError(f"{where}: column {self.names[j]!r} is {typ}, got {type(v).__name__} {v!r}")
            if typ == "double":
                v = float(v)
                if v != v:
                    raise SchemaError(f"{where}: column {self.names[j]!r} got NaN; use None for a missing value")
            elif typ == "date":
                v = date_days(v)
            elif typ == "timestamp":
                v = timestamp_micros(v)
            out.append(v)
        out.extend(nullmask.row_of_nulls(nulls, len(row)))
        return tuple(out)

    def decode_row(self, stored: tuple) -> tuple:
        """The SQL row of stored fields: NULL as None.  O(n)."""
        n = len(self.types)
        masks = stored[n:]
        return tuple(None if nullmask.row_null(masks, j) else decode_value(v, t)
                     for j, (v, t) in enumerate(zip(stored[:n], self.types)))


def decode_value(v: Any, typ: str) -> Any:
    """The Python value of a stored (non-NULL) field of SQL type ``typ``: Decimal, date and datetime decoded."""
    if typ == "date":
        return from_days(v)
    if typ == "timestamp":
        return from_micros(v)
    if typ.startswith("decimal("):
        return from_unscaled(v, decimal_ps(typ)[1])
    return v


def stored_ints(col: "pa.Array | pa.ChunkedArray", typ: str, where: str) -> np.ndarray:
    """An Arrow column of a date, timestamp or decimal type as its stored int64 values (NULLs as 0).

    Dates are days, timestamps microseconds (UTC), decimals the unscaled
    value at the column's scale; a decimal too wide for int64 or with more
    places than the scale is an error naming ``where``.  O(n), vectorized.

    >>> stored_ints(pa.array([decimal.Decimal("1.5"), None]), "decimal(4,2)", "t").tolist()
    [150, 0]
    """
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    t = col.type
    n = len(col)
    if pa.types.is_null(t):
        return np.zeros(n, dtype=np.int64)
    try:
        if typ == "date":
            if not (pa.types.is_date(t) or pa.types.is_timestamp(t)):
                raise SchemaError(f"{where} is date, the Arrow column is {t}")
            vals = col.cast(pa.date32()).cast(pa.int32())
        elif typ == "timestamp":
            if not (pa.types.is_timestamp(t) or pa.types.is_date(t)):
                raise SchemaError(f"{where} is timestamp, the Arrow column is {t}")
            if pa.types.is_timestamp(t) and t.tz is not None:
                col = col.cast(pa.timestamp(t.unit))  # the stored values are UTC already
            vals = col.cast(pa.timestamp("us")).cast(pa.int64())
        else:
            p, s = decimal_ps(typ)
            if pa.types.is_integer(t):
                col = col.cast(pa.decimal128(min(MAX_PRECISION, max(p, 19 + s)), s))
            elif not pa.types.is_decimal(t):
                raise SchemaError(f"{where} is {typ}, the Arrow column is {t} (give decimal128 or integers: "
                                  "a float is not exact)")
            col = col.cast(pa.decimal128(MAX_PRECISION, s))  # Arrow refuses a rescale that loses digits
            return _unscaled_int64(col, p, where)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
        raise SchemaError(f"{where} is {typ}: {err}") from None
    return vals.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)


def _unscaled_int64(col: pa.Array, p: int, where: str) -> np.ndarray:
    """The unscaled values of a decimal128 array as int64, checked to fit (and to fit precision ``p``)."""
    n = len(col)
    words = np.frombuffer(col.buffers()[1], dtype=np.int64, count=2 * (n + col.offset))[2 * col.offset:].reshape(n, 2)
    lo, hi = words[:, 0], words[:, 1]
    valid = ~col.is_null().to_numpy(zero_copy_only=False).astype(bool)
    ok = hi == (lo >> 63)
    if not ok[valid].all():
        raise SchemaError(f"{where}: a value needs more than 18 digits; ddflow stores decimals in int64")
    out = np.where(valid, lo, 0)
    if p < 19:
        big = np.abs(out) >= 10 ** p
        if big.any():
            raise SchemaError(f"{where}: {from_unscaled(int(out[big][0]), col.type.scale)} does not fit decimal({p},"
                              f"{col.type.scale})")
    return out


def decimal_array(unscaled: np.ndarray, null: np.ndarray, p: int, s: int) -> pa.Array:
    """A decimal128(p, s) Arrow array of int64 unscaled values.  O(n), vectorized.

    >>> decimal_array(np.array([150, -1]), np.array([False, False]), 4, 2).to_pylist()
    [Decimal('1.50'), Decimal('-0.01')]
    """
    v = np.ascontiguousarray(unscaled, dtype=np.int64)
    words = np.empty((len(v), 2), dtype=np.int64)
    words[:, 0], words[:, 1] = v, v >> 63
    validity = pa.array(~np.asarray(null, dtype=bool)).buffers()[1] if np.any(null) else None
    return pa.Array.from_buffers(pa.decimal128(p, s), len(v), [validity, pa.py_buffer(words.tobytes())])
