"""Column types between lakehouse tables (Arrow, Delta, Iceberg, Parquet) and ddflow's SQL types, exactly.

A source's Arrow schema becomes a ddflow table schema (``{name: sql type}``):
every integer width is ``bigint`` (ddflow computes in int64), floats are
``double``, ``decimal128(p, s)`` is ``decimal(p,s)``, dates are ``date``,
timestamps of any unit or zone are ``timestamp`` (microseconds, UTC),
strings and booleans are themselves, and every column may be NULL.  A
type with no exact counterpart (binary, nested, a nanosecond timestamp
with a non-zero sub-microsecond part) is refused by name, never rounded.

Back, a view's rows are written in the sink table's own types when the
table exists (a checked cast: an int64 that does not fit an ``int`` column
is an error naming the column, never a wrapped value), otherwise in the
default types :data:`DEFAULT_ARROW` gives.

>>> import pyarrow as pa
>>> s = pa.schema([("id", pa.int32()), ("price", pa.decimal128(15, 2)), ("at", pa.timestamp("ns", "UTC"))])
>>> sql_columns(s, "t")
{'id': 'bigint', 'price': 'decimal(15,2)', 'at': 'timestamp'}
>>> arrow_schema({"id": "bigint", "d": "date"})
id: int64
d: date32[day]
"""
from __future__ import annotations

from typing import Mapping

import pyarrow as pa

from ddflow.errors import SchemaError

#: The Arrow type a ddflow SQL type is written as when the sink table does not exist yet: Spark's types
#: (``timestamp`` is Spark's TIMESTAMP, an instant: Delta's and Iceberg's ``timestamp`` with a UTC zone).
DEFAULT_ARROW = {"bigint": pa.int64(), "double": pa.float64(), "string": pa.string(), "boolean": pa.bool_(),
                 "date": pa.date32(), "timestamp": pa.timestamp("us", tz="UTC")}


def sql_type_of(t: pa.DataType, where: str) -> str:
    """The ddflow SQL type of an Arrow type; one with no exact counterpart is a SchemaError naming ``where``.

    O(1).

    >>> sql_type_of(pa.int16(), "c"), sql_type_of(pa.large_string(), "c"), sql_type_of(pa.date64(), "c")
    ('bigint', 'string', 'date')
    """
    if pa.types.is_integer(t):
        if pa.types.is_uint64(t):
            raise SchemaError(f"{where}: uint64 does not fit ddflow's int64 exactly; cast it to a signed type")
        return "bigint"
    if pa.types.is_floating(t):
        return "double"
    if pa.types.is_decimal(t):
        if t.precision > 38:
            raise SchemaError(f"{where}: {t} has more than 38 digits (Spark's and ddflow's largest decimal)")
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_dictionary(t):
        return sql_type_of(t.value_type, where)
    raise SchemaError(f"{where}: Arrow type {t} has no exact ddflow type (bigint, double, decimal(p,s), date, "
                      "timestamp, string, boolean); leave the column out with columns=[...]")


def sql_columns(schema: pa.Schema, where: str, columns: list[str] | None = None) -> dict[str, str]:
    """``{name: sql type}`` of an Arrow schema (only ``columns``, in their order, when given).

    O(columns).  A column named in ``columns`` that the schema lacks is a SchemaError.
    """
    names = list(schema.names) if columns is None else list(columns)
    out = {}
    for n in names:
        if n not in schema.names:
            raise SchemaError(f"{where}: no column {n!r} (columns: {schema.names})")
        out[n] = sql_type_of(schema.field(n).type, f"{where} column {n!r}")
    return out


def arrow_type(sql: str) -> pa.DataType:
    """The default Arrow type of a ddflow SQL type (:data:`DEFAULT_ARROW`, decimals as ``decimal128``).

    >>> arrow_type("decimal(15,2)"), arrow_type("timestamp")
    (Decimal128Type(decimal128(15, 2)), TimestampType(timestamp[us, tz=UTC]))
    """
    if sql.startswith("decimal("):
        p, s = sql[8:-1].split(",")
        return pa.decimal128(int(p), int(s))
    return DEFAULT_ARROW[sql]


def arrow_schema(columns: Mapping[str, str]) -> pa.Schema:
    """The default Arrow schema of ``{name: sql type}``, every column nullable.  O(columns)."""
    return pa.schema([pa.field(n, arrow_type(t)) for n, t in columns.items()])


def canonical(table: pa.Table, columns: Mapping[str, str], where: str) -> pa.Table:
    """``table``'s ``columns`` in their canonical Arrow types (what ddflow's inputs and the state log hold).

    Integers widen to int64, floats to float64, timestamps become
    microseconds UTC (a nanosecond value that is not a whole microsecond
    is an error), dates date32, dictionary columns are decoded; other
    columns are dropped.  O(rows), vectorized; extra columns of
    ``table`` (``diff``) are kept as they are.

    >>> t = pa.table({"a": pa.array([1], pa.int8()), "diff": [1]})
    >>> canonical(t, {"a": "bigint"}, "t").schema.types
    [DataType(int64), DataType(int64)]
    """
    arrays, names = [], []
    for n, typ in columns.items():
        col = table.column(n)
        want = arrow_type(typ)
        if typ == "timestamp":
            want = pa.timestamp("us", tz="UTC")
            if col.type.tz is None:
                col = col.cast(pa.timestamp(col.type.unit, tz="UTC"))
        try:
            col = col.cast(want, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise SchemaError(f"{where} column {n!r}: {col.type} to {want}: {e}") from None
        arrays.append(col)
        names.append(n)
    for n in table.column_names:
        if n not in columns:
            arrays.append(table.column(n))
            names.append(n)
    return pa.Table.from_arrays(arrays, names=names)


def conform(table: pa.Table, target: pa.Schema, where: str) -> pa.Table:
    """A view's rows in a sink table's own types, by checked casts (never a wrapped or rounded value).

    ``target`` names the sink's columns; the view's columns must be the same
    names (case-insensitive), in any order.  O(rows), vectorized.

    >>> t = pa.table({"n": pa.array([5], pa.int64())})
    >>> conform(t, pa.schema([("n", pa.int32())]), "sink").schema.types
    [DataType(int32)]
    """
    by_low = {n.lower(): n for n in table.column_names}
    missing = [f.name for f in target if f.name.lower() not in by_low]
    extra = sorted(set(by_low) - {f.name.lower() for f in target})
    if missing or extra:
        raise SchemaError(f"{where}: the table's columns {target.names} are not the view's {table.column_names} "
                          f"(missing {missing}, extra {extra}); drop the table or give the view matching columns")
    arrays = []
    for f in target:
        col = table.column(by_low[f.name.lower()])
        zones_differ = pa.types.is_timestamp(col.type) and (f.type.tz is None) != (col.type.tz is None)
        if pa.types.is_timestamp(f.type) and zones_differ:
            col = col.cast(pa.timestamp(col.type.unit, tz=f.type.tz))  # the same microseconds, the table's zone form
        try:
            col = col.cast(f.type, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise SchemaError(f"{where} column {f.name!r}: the view's {col.type} does not fit the table's {f.type}: "
                              f"{e}") from None
        arrays.append(col)
    return pa.Table.from_arrays(arrays, schema=target)

