"""Micro-batch rows -> input updates and dead letters.

A Spark micro-batch arrives as one Arrow table (Kafka's rows or any
DataFrame's columns).  :func:`parse_input` turns it into the updates of one
ddflow input: its fields, a ``time`` and a ``diff`` column, plus the
message's provenance (topic, partition, offset, value) so that a row that
cannot become an update, now or later in the driver, becomes a dead letter
that names where it came from.  One bad message never stops the query.

Field values must fit one column kind (:mod:`ddflow.base.kinds`): times
and diffs are integers; a data field takes the kind its input already
holds, else the most common kind in the batch.  A table's ``decimal(p,s)``
field takes a JSON number or a numeric string exactly, from its digits
(never through a float), when it fits the scale and precision
(:func:`json_decimal`); its ``date`` and ``timestamp`` fields take
integers (days, microseconds since 1970-01-01) within years 1 to 9999.
"""
from __future__ import annotations

import decimal
import io
import json
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from ddflow.base.kinds import ARROW_TYPES, KINDS
from ddflow.base.schema import decimal_array, decimal_ps, stored_ints
from ddflow.errors import SchemaError

__all__ = ["DEAD_LETTER_SCHEMA", "PROVENANCE", "InputSpec", "dead_letters", "json_decimal", "parse_input"]

#: What a dead-letter sink receives: which input, why, and the message itself (to find or replay it).
DEAD_LETTER_SCHEMA = pa.schema([("input", pa.string()), ("error", pa.string()), ("topic", pa.string()),
                                ("partition", pa.int64()), ("offset", pa.int64()), ("value", pa.binary())])

#: Columns :func:`parse_input` adds beside the fields, time and diff: where each row came from.
PROVENANCE = ("__topic", "__partition", "__offset", "__value")

#: JSON nested deeper than this (arrays and objects) is a dead letter before any parser sees it:
#: Python's parser raises RecursionError on deep nesting, and Arrow's reader crashes the process.
MAX_NESTING = 64


def nesting_depth(value: bytes) -> int:
    """How deeply arrays and objects nest in a JSON text (brackets inside strings do not count).

    O(n) Python over the bytes: callers run it only on messages with more
    than ``MAX_NESTING`` brackets in all (see :func:`too_deep`).

    >>> nesting_depth(b'{"a": [1, {"b": "[["}]}')
    3
    """
    depth = deepest = 0
    in_string = escaped = False
    for ch in value:
        if in_string:
            if escaped:
                escaped = False
            elif ch == 0x5C:  # backslash
                escaped = True
            elif ch == 0x22:  # quote
                in_string = False
        elif ch == 0x22:
            in_string = True
        elif ch in (0x5B, 0x7B):
            depth += 1
            deepest = max(deepest, depth)
        elif ch in (0x5D, 0x7D):
            depth -= 1
    return deepest


def too_deep(value: bytes) -> bool:
    """``value`` nests arrays and objects deeper than ``MAX_NESTING``.  O(n), C speed for most messages."""
    return value.count(b"[") + value.count(b"{") > MAX_NESTING and nesting_depth(value) > MAX_NESTING

#: How a dead letter names the JSON type a field needed, per column kind.
JSON_TYPE_WORDS = {"i": "an integer", "f": "a number", "b": "a boolean", "o": "a string"}

#: A table's date and timestamp fields in JSON are integers (days, microseconds since 1970-01-01), in the range of
#: Spark's dates and timestamps (years 1 to 9999): (lowest, highest, unit).
JSON_INT_RANGES = {"date": (-719_162, 2_932_896, "days"),
                   "timestamp": (-62_135_596_800_000_000, 253_402_300_799_999_999, "microseconds")}

#: A number with an exponent somewhere in a message (or text that looks like one: then the slow path is only slower).
EXPONENT = r"[0-9.][eE][-+]?[0-9]"

#: A decimal in a JSON string as Spark's ``from_json`` reads it: ``java.math.BigDecimal``'s grammar once the
#: commas are dropped ("1.25", "+1.25", ".5", "5.", "1e2", "1,234.5"), no spaces, no NaN or Infinity.
DECIMAL_TEXT = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def json_decimal(x: Any, typ: str) -> int:
    """The unscaled value (``x * 10**s``) of a JSON value for a ``decimal(p,s)`` column, exactly; else ValueError.

    ``x`` is what ``json.loads(text, parse_float=decimal.Decimal)`` gives:
    an int or a Decimal for a JSON number (its digits, never a float), or
    a str, read as Spark's ``from_json`` reads a decimal string (commas
    dropped, ``java.math.BigDecimal``'s grammar).  A value with more
    fractional digits than the scale, or more digits than the precision,
    does not fit (Spark would round the first HALF_UP and make the second
    NULL: here neither is a value the producer sent).  The error names
    the value and the type.  O(digits).

    >>> json_decimal(decimal.Decimal("1.25"), "decimal(10,2)"), json_decimal("1,234.5", "decimal(10,2)")
    (125, 123450)
    >>> json_decimal(decimal.Decimal("1.255"), "decimal(10,2)")
    Traceback (most recent call last):
    ...
    ValueError: 1.255 does not fit decimal(10,2) (more than 2 digits after the point)
    """
    p, s = decimal_ps(typ)
    if isinstance(x, bool) or not isinstance(x, (int, decimal.Decimal, str)):
        raise ValueError(f"{json.dumps(_floats(x))} is not a number or a numeric string for {typ}")
    shown = json.dumps(x) if isinstance(x, str) else str(x)
    if isinstance(x, str):
        text = x.replace(",", "")
        if not DECIMAL_TEXT.fullmatch(text):
            raise ValueError(f"{shown} is not a number for {typ}")
        x = decimal.Decimal(text)
    sign, digits, exp = decimal.Decimal(x).as_tuple()
    if not isinstance(exp, int):  # NaN or Infinity (Python's json reads the bare words as floats: refused above)
        raise ValueError(f"{shown} is not a number for {typ}")
    n = int("".join(map(str, digits)))
    if n == 0:
        return 0
    while n % 10 == 0:  # trailing zeros are no digits of the value: 1.250 fits decimal(10,2)
        n //= 10
        exp += 1
    if exp + s < 0:
        raise ValueError(f"{shown} does not fit {typ} (more than {s} digits after the point)")
    if len(str(n)) + exp > p - s:
        raise ValueError(f"{shown} does not fit {typ} (more than {p - s} digits before the point)")
    q = n * 10 ** (exp + s)
    q = -q if sign else q
    if not -(1 << 63) <= q < (1 << 63):
        raise ValueError(f"{shown} needs more than 18 digits; ddflow stores decimals in int64")
    return q


@dataclass
class InputSpec:
    """How to read one ddflow input from a micro-batch (``StreamingDataflow.input`` builds it)."""

    name: str
    fields: list[str]
    format: str = "columns"  # "columns": DataFrame columns; "json": fields of a JSON value column
    # (with "json", a name is a key of the JSON value; "kafka.offset", "kafka.timestamp"... name the DataFrame's
    # own columns: see InputSpec.source)
    value_column: str = "value"
    time: str = "offset"
    diff: str | None = None
    op: tuple[str, Mapping[Any, int]] | None = None
    topic: str | None = None  # only rows of this Kafka topic (one query, several inputs)
    late: str = "dead-letter"  # or "error"
    nullable: bool = False  # a SQL table's fields: a missing or null field is NULL, not a dead letter
    on_error: str = "fail"  # or "dead-letter": a row-wise function raising on this input's records
    lateness: int | None = None  # event time: microseconds the frontier (watermark) stays behind the latest event

    def source(self, name: str) -> tuple[str, str]:
        """Where a field, time or diff name is read: ``("json", key)`` or ``("column", DataFrame column)``.

        With ``format="json"`` a name is a key of the JSON value, and
        ``kafka.<column>`` one of the micro-batch's own columns (Kafka's
        ``key``, ``offset``, ``timestamp``...); ``json.<key>`` says the JSON key
        explicitly.  With ``format="columns"`` every name is a column.
        """
        if self.format != "json":
            return "column", name[len("kafka."):] if name.startswith("kafka.") else name
        if name.startswith("kafka."):
            return "column", name[len("kafka."):]
        if name.startswith("json."):
            return "json", name[len("json."):]
        return "json", name


#: The columns of a Kafka micro-batch: a bare name in a JSON input that is one of these could mean either.
KAFKA_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType")


def check_names(name: str, fmt: str, names: Sequence[str], table: bool = False) -> None:
    """Refuse a name that could mean a JSON key or a Kafka column (``format="json"``), saying how to choose.

    A table's columns are its JSON keys, so only its time, diff and op
    names are checked.
    """
    if fmt != "json":
        return
    for n in names:
        if n in KAFKA_COLUMNS:
            raise ValueError(f"input {name!r}: {n!r} could mean the JSON field or Kafka's {n!r} column; write "
                             f"'json.{n}' for the field or 'kafka.{n}' for the column")
        if n.startswith("kafka.") and n[len("kafka."):] not in KAFKA_COLUMNS:
            raise ValueError(f"input {name!r}: {n!r} names no Kafka column (they are {', '.join(KAFKA_COLUMNS)})")


def dead_letters(input_name: str, errors: str | list[str], rows: pa.Table) -> pa.Table:
    """Dead letters (``DEAD_LETTER_SCHEMA``) for ``rows``, which carry the ``PROVENANCE`` columns.

    ``errors`` is one reason for all rows or one per row.  The original
    message travels along so a dead letter can be found in Kafka or replayed.
    """
    n = rows.num_rows
    errs = errors if isinstance(errors, list) else [errors] * n
    topic, partition, offset, value = (rows.column(c) for c in PROVENANCE)
    return pa.table({"input": [input_name] * n, "error": errs, "topic": topic, "partition": partition,
                     "offset": offset, "value": value}, schema=DEAD_LETTER_SCHEMA)


def parse_input(spec: InputSpec, table: pa.Table, kinds: Sequence[str] | None = None,
                types: Sequence[str] | None = None) -> tuple[pa.Table, pa.Table | None]:
    """The rows of one input as fields + ``time`` + ``diff`` + ``PROVENANCE``, and the dead letters.

    ``kinds`` are the column kinds the input already holds (its handle's),
    so a JSON field keeps one kind across batches; ``types`` the SQL types
    of a table's fields (a JSON value for a ``decimal(p,s)`` field becomes
    a ``decimal128(p, s)`` column, exactly, or a dead letter naming the
    value and the type).  Messages that do not
    parse, or whose fields are missing or of the wrong kind, are returned
    as dead letters (None if there are none).  With ``format="columns"``
    a missing or mistyped column is the query's bug and raises ``TypeError``.
    """
    n = table.num_rows
    if spec.topic is not None and "topic" in table.column_names:
        table = table.filter(pc.equal(table.column("topic"), spec.topic))
        n = table.num_rows
    names = table.column_names
    prov = {
        "__topic": table.column("topic") if "topic" in names else pa.nulls(n, pa.string()),
        "__partition": table.column("partition").cast(pa.int64()) if "partition" in names else pa.nulls(n, pa.int64()),
        "__offset": table.column("offset").cast(pa.int64()) if "offset" in names else pa.nulls(n, pa.int64()),
        "__value": table.column(spec.value_column).cast(pa.binary()) if spec.value_column in names
        else pa.nulls(n, pa.binary()),
    }
    if spec.format == "json":
        by_field = ({spec.source(f)[1]: k for f, k in zip(spec.fields, kinds)}
                    if kinds and len(kinds) == len(spec.fields) else None)
        decimals = ({spec.source(f)[1]: t for f, t in zip(spec.fields, types) if decimal_ps(t) is not None}
                    if types and len(types) == len(spec.fields) else {})
        src, ok, errors = _parse_json(table.column(spec.value_column), spec, n, by_field, decimals)
    else:
        src, ok, errors = table, np.ones(n, dtype=bool), [None] * n
    cols: dict[str, Any] = {}
    try:
        for f in spec.fields:
            cols[f] = _column(src, table, f, spec)
        cols["time"] = _time_column(src, table, spec.time, spec)
        cols["diff"] = _diff_column(src, table, spec)
    except (KeyError, TypeError, ValueError, pa.ArrowInvalid) as e:
        if spec.format == "columns":
            raise TypeError(f"input {spec.name!r}: {e}") from e
        raise
    # Rows whose fields are missing or of the wrong type are dead letters too.
    source_names = {"time": spec.time, "diff": spec.diff or (spec.op[0] if spec.op else "diff")}
    for name, c in cols.items():
        if spec.nullable and name not in ("time", "diff"):
            continue
        if c.null_count:
            nulls = c.is_null().to_numpy(zero_copy_only=False)
            for i in np.flatnonzero(nulls & ok):
                errors[i] = f"field {source_names.get(name, name)!r} is missing or null"
            ok &= ~nulls
    if spec.format == "json" and types and len(types) == len(spec.fields):
        for f, typ in zip(spec.fields, types):
            c = cols[f]
            if typ in JSON_INT_RANGES and pa.types.is_integer(c.type):  # a date or timestamp as a JSON integer
                lo, hi, unit = JSON_INT_RANGES[typ]
                v = c.fill_null(0).to_numpy(zero_copy_only=False)
                outside = (v < lo) | (v > hi)
                for i in np.flatnonzero(outside & ok):
                    errors[i] = (f"field {f!r} has value {int(v[i])}, outside the {typ} range (years 1 to 9999: "
                                 f"{lo} to {hi} {unit} since 1970-01-01)")
                ok &= ~outside
    out = pa.table({**cols, **prov})
    bad = None
    if not ok.all():
        idx = np.flatnonzero(~ok)
        bad = dead_letters(spec.name, [errors[i] or "malformed" for i in idx], pa.table(prov).take(idx))
        out = out.filter(pa.array(ok))
    return out, bad


# -- JSON values ----------------------------------------------------------------------------


def _json_kind(x: Any) -> str | None:
    """The column kind of a JSON scalar (None for lists, objects and out-of-range integers).

    Not ``kinds.infer_kind``: a JSON list or object fits no kind here, it is a dead letter.
    """
    if isinstance(x, bool):
        return "b"
    if isinstance(x, int):
        return "i" if -(1 << 63) <= x < (1 << 63) else None
    if isinstance(x, float):
        return "f"
    if isinstance(x, str):
        return "o"
    return None


def _json_arrow_kind(typ: pa.DataType) -> str | None:
    """The column kind of a type Arrow's JSON reader chose, None if no JSON scalar gives it.

    Not ``kinds.arrow_kind``: the reader turns ISO date strings into
    timestamps, which must not pass as integers; lists and structs fit no kind.
    """
    if pa.types.is_boolean(typ):
        return "b"
    if pa.types.is_integer(typ):
        return "i"
    if pa.types.is_floating(typ):
        return "f"
    if pa.types.is_string(typ):
        return "o"
    return None


def _wanted_kind(k: str, spec: InputSpec, kinds: Mapping[str, str] | None) -> str | None:
    """The kind field ``k`` must have: times and diffs are integers, a known field keeps its kind."""
    if any(name is not None and spec.source(name) == ("json", k) for name in (spec.time, spec.diff)):
        return "i"
    if kinds and kinds.get(k) in KINDS:
        return kinds[k]
    return None


def _parse_json(values: pa.ChunkedArray, spec: InputSpec, n: int, kinds: Mapping[str, str] | None = None,
                decimals: Mapping[str, str] | None = None) -> tuple[pa.Table, np.ndarray, list]:
    """Parse JSON object values; one bad message never spoils the rest.

    Each field's values must share one kind: times and diffs are integers;
    a data field has the kind its input already holds (``kinds``) or else the
    most common kind in this batch (an integer is fine where a number is
    expected); a ``decimals`` field (JSON key -> ``decimal(p,s)``) takes what
    :func:`json_decimal` takes.  Values of any other kind make their message
    a dead letter.  Returns the fields' columns, which rows are fine, and
    each bad row's reason.
    """
    decimals = decimals or {}
    vals = values.to_pylist()
    named = [*spec.fields, spec.time, *([spec.diff] if spec.diff else []), *([spec.op[0]] if spec.op else [])]
    # Names of the message's own columns (kafka.offset, kafka.timestamp, ...) come from those columns.
    wanted = list(dict.fromkeys(key for kind, key in map(spec.source, named) if kind == "json"))
    deep = {i for i, v in enumerate(vals) if v is not None and too_deep(v)}
    fast = _parse_json_arrow(vals, wanted, spec, kinds, decimals) if not deep else None
    if fast is not None:
        return fast, np.ones(n, dtype=bool), [None] * n
    # A decimal field's fractions are read from their digits; every other field's as Python reads a float.
    exact = {"parse_float": decimal.Decimal} if any(k in decimals for k in wanted) else {}
    records: list[dict] = []
    ok = np.ones(n, dtype=bool)
    errors: list[str | None] = [None] * n
    for i, v in enumerate(vals):
        try:
            if v is None:
                raise ValueError("null value")
            if i in deep:
                raise ValueError(f"nested deeper than {MAX_NESTING} levels")
            obj = json.loads(v, **exact)
            if not isinstance(obj, dict):
                raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
            records.append({k: obj.get(k) if k in decimals or not exact else _floats(obj.get(k)) for k in wanted})
        except Exception as e:  # noqa: BLE001 - one message, whatever it does to the parser, is a dead letter
            ok[i] = False
            errors[i] = f"unparseable JSON: {type(e).__name__ if not str(e) else e}"
            records.append({k: None for k in wanted})
    cols = {}
    for k in wanted:
        col = [r[k] for r in records]
        if k in decimals:
            cols[k] = _decimal_column(k, col, decimals[k], ok, errors)
            continue
        got = [None if x is None else _json_kind(x) for x in col]
        want = _wanted_kind(k, spec, kinds)
        if want is None:
            present = [g for g in got if g is not None]
            want = max(set(present), key=present.count) if present else "o"
        arr = []
        for i, (x, g) in enumerate(zip(col, got)):
            if x is not None and g != want and not (want == "f" and g == "i"):
                if ok[i]:
                    ok[i] = False
                    errors[i] = (f"field {k!r} has value {x!r}, outside the 64-bit integer range" if g is None and
                                 isinstance(x, int) else f"field {k!r} has value {x!r} of type {type(x).__name__}, "
                                 f"expected {JSON_TYPE_WORDS[want]}")
                x = None
            arr.append(x)
        cols[k] = pa.array(arr, ARROW_TYPES[want])
    return pa.table(cols) if cols else pa.table({"_": pa.nulls(n)}), ok, errors


def _floats(x: Any) -> Any:
    """A JSON value read with ``parse_float=Decimal``, its Decimals back to the floats ``json.loads`` gives.

    Exact: ``float(Decimal(text))`` is ``float(text)``, both correctly
    rounded.  Nesting is bounded (:data:`MAX_NESTING`, checked before).
    """
    if isinstance(x, decimal.Decimal):
        return float(x)
    if isinstance(x, list):
        return [_floats(v) for v in x]
    if isinstance(x, dict):
        return {k: _floats(v) for k, v in x.items()}
    return x


def _decimal_column(k: str, col: list, typ: str, ok: np.ndarray, errors: list) -> pa.Array:
    """Field ``k``'s JSON values as a ``decimal128(p, s)`` column (:func:`json_decimal`); misfits are dead letters."""
    p, s = decimal_ps(typ)
    unscaled = np.zeros(len(col), dtype=np.int64)
    null = np.zeros(len(col), dtype=bool)
    for i, x in enumerate(col):
        if x is None:
            null[i] = True
            continue
        try:
            unscaled[i] = json_decimal(x, typ)
        except ValueError as e:
            null[i] = True
            if ok[i]:
                ok[i] = False
                errors[i] = f"field {k!r}: {e}"
    return decimal_array(unscaled, null, p, s)


def _parse_json_arrow(vals: list, wanted: list[str], spec: InputSpec, kinds: Mapping[str, str] | None,
                      decimals: Mapping[str, str]) -> pa.Table | None:
    """All messages at once with Arrow's JSON reader, or None if any message needs a closer look.

    The common batch (every message a JSON object with every field, of the
    right kind) never touches Python per message; anything else falls back
    to the per-message parser, which finds the culprits for the dead letters.
    A decimal field of JSON integers is cast; one with fractions is read a
    second time with a ``decimal128`` schema, which Arrow parses from the
    digits and refuses past the scale, unless a message has a number with
    an exponent, which Arrow's decimal parse does not always read exactly
    (strings go to the per-message parser too, which reads them as Spark
    does); either way the values are checked against the precision, and a
    misfit means the per-message parser.
    """
    if not vals or any(v is None or b"\n" in v for v in vals):
        return None
    buf = b"\n".join(vals)

    def read(schema: pa.Schema | None = None) -> pa.Table | None:
        try:
            t = pa_json.read_json(io.BytesIO(buf), read_options=pa_json.ReadOptions(
                use_threads=False, block_size=max(len(buf) + 1, 1 << 16)),
                parse_options=pa_json.ParseOptions(explicit_schema=schema))
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            return None
        return t if t.num_rows == len(vals) else None

    t = read()
    if t is None:
        return None
    fractions = [k for k in wanted if k in decimals and k in t.column_names and pa.types.is_floating(t.column(k).type)]
    if fractions and pc.any(pc.match_substring_regex(pa.array(vals, pa.binary()), EXPONENT)).as_py():
        return None  # Arrow's decimal parse of an exponent can lose digits (1.0e-38 became 0): Python reads them
    exact = read(pa.schema([(k, pa.decimal128(38, decimal_ps(decimals[k])[1])) for k in fractions])) \
        if fractions else t
    if exact is None:
        return None
    cols = {}
    for k in wanted:
        if k not in t.column_names:
            return None
        c = t.column(k)
        if c.null_count:
            return None
        if k in decimals:
            c = exact.column(k)
            if not (pa.types.is_integer(c.type) or pa.types.is_decimal(c.type)):
                return None
            try:
                unscaled = stored_ints(c, decimals[k], k)  # checks the precision and int64
            except SchemaError:
                return None
            p, s = decimal_ps(decimals[k])
            cols[k] = decimal_array(unscaled, np.zeros(len(unscaled), dtype=bool), p, s)
            continue
        kind = _json_arrow_kind(c.type)
        if kind is None:
            return None
        want = _wanted_kind(k, spec, kinds) or kind
        if kind != want and not (want == "f" and kind == "i"):
            return None
        cols[k] = c.cast(ARROW_TYPES[want])
    return pa.table(cols)


# -- columns --------------------------------------------------------------------------------


def _column(src: pa.Table, table: pa.Table, name: str, spec: InputSpec) -> pa.ChunkedArray | pa.Array:
    """Field ``name`` from the parsed JSON fields or the micro-batch's own columns, as :meth:`InputSpec.source` says."""
    kind, key = spec.source(name)
    if kind == "json" and key in src.column_names:
        return src.column(key)
    if kind == "column" and key in table.column_names:
        return table.column(key)
    raise KeyError(f"input {spec.name!r}: no {'JSON field' if kind == 'json' else 'column'} {key!r} "
                   f"(columns: {table.column_names})")


def _time_column(src: pa.Table, table: pa.Table, name: str, spec: InputSpec) -> pa.Array:
    """Data times as int64: integers as they are, timestamps in microseconds since the epoch."""
    c = _column(src, table, name, spec)
    if pa.types.is_timestamp(c.type):
        # Data times in microseconds since the epoch, whatever the timestamp unit.
        c = c.cast(pa.timestamp("us")).cast(pa.int64())
    elif not pa.types.is_integer(c.type):
        if pa.types.is_null(c.type):
            return pa.nulls(len(c), pa.int64())
        raise TypeError(f"input {spec.name!r}: time field {name!r} has type {c.type}, expected integers or timestamps")
    return c.cast(pa.int64())


def _diff_column(src: pa.Table, table: pa.Table, spec: InputSpec) -> pa.Array:
    """Diffs as int64: from an op field through its mapping (unmapped ops are null), a diff field, or +1."""
    n = src.num_rows
    if spec.op is not None:
        field_name, mapping = spec.op
        raw = _column(src, table, field_name, spec).to_pylist()
        return pa.array([mapping.get(v) for v in raw], pa.int64())
    if spec.diff is not None:
        c = _column(src, table, spec.diff, spec)
        if not pa.types.is_integer(c.type) and not pa.types.is_null(c.type):
            raise TypeError(f"input {spec.name!r}: diff field {spec.diff!r} has type {c.type}, expected integers")
        return c.cast(pa.int64())
    return pa.array(np.ones(n, dtype=np.int64))
