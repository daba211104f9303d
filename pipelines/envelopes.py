"""Change envelopes to updates: Debezium's ``op``/``before``/``after`` and Spark's changelog rows.

Debezium (its JSON converter, with or without the ``schema``/``payload``
wrapper): ``op`` ``c`` (create) and ``r`` (snapshot read) insert
``after``; ``u`` retracts ``before`` and inserts ``after`` at the same data
time; ``d`` retracts ``before``; a null message (the tombstone Kafka
compaction needs after a delete) is skipped.  An update or delete without
``before`` cannot say what it replaces (a source table whose replica
identity is not full) and is a dead letter, as is any other malformed
envelope: the reason names the field (``field 'after.price': expected a
decimal, got 'abc'``).  A retraction of a row the table does not hold
obeys the table's ``nonnegative`` policy.

Values follow Debezium's encodings: integers; decimals as JSON numbers or
strings (``decimal.handling.mode=string``), or base64 bytes with the
scale from the ``schema`` part (``precise``); dates as days since the
epoch (``io.debezium.time.Date``) or ISO strings; timestamps as epoch
integers in the unit the schema names (``Timestamp`` ms,
``MicroTimestamp`` us, ``NanoTimestamp`` ns; microseconds without a
schema) or ISO strings (``ZonedTimestamp``).

Spark's changelog rows (``_change_type`` ``insert``/``update_postimage``
+1, ``delete``/``update_preimage`` -1, ``_commit_version``) are
:func:`changelog_rows`.

Both are plain functions over Arrow columns, so the streaming builder can
take ``format="debezium"`` with :func:`parse_debezium_input`.
"""
from __future__ import annotations

import base64
import datetime
import decimal
import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ddflow.pipelines.types import arrow_type

#: A changelog's ``_change_type`` values and the diff of each.
CHANGE_DIFFS = {"insert": 1, "update_postimage": 1, "delete": -1, "update_preimage": -1}
_EPOCH_DATE = datetime.date(1970, 1, 1)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
#: Microseconds per unit of Debezium's integer timestamp encodings, by the schema's logical type name.
_TS_UNITS = {"io.debezium.time.Timestamp": ("ms", 1000), "org.apache.kafka.connect.data.Timestamp": ("ms", 1000),
             "io.debezium.time.MicroTimestamp": ("us", 1), "io.debezium.time.NanoTimestamp": ("ns", None)}


class Malformed(ValueError):
    """One envelope cannot be applied; the message names the field."""


@dataclass
class Envelopes:
    """Updates from a batch of envelopes: ``rows`` (the columns and ``diff``), ``event[i]`` the index of the
    envelope row ``i`` came from, ``errors`` ``(envelope index, reason)`` for each dead letter, and the count
    of tombstones skipped."""

    rows: pa.Table
    event: np.ndarray
    errors: list[tuple[int, str]] = field(default_factory=list)
    tombstones: int = 0


def debezium_rows(values: Sequence[Any] | pa.Array | pa.ChunkedArray, columns: Mapping[str, str]) -> Envelopes:
    """Parse Debezium envelopes (JSON bytes or strings, or already-decoded dicts) into updates of ``columns``.

    ``columns``: ``{name: sql type}`` of the table.  O(envelopes), Python
    per envelope (``json.loads`` with exact decimals).

    >>> e = debezium_rows(['{"op": "u", "before": {"id": 1, "n": "a"}, "after": {"id": 1, "n": "b"}}',
    ...                    '{"op": "d"}', None], {"id": "bigint", "n": "string"})
    >>> e.rows.to_pylist(), e.event.tolist(), e.errors, e.tombstones
    ([{'id': 1, 'n': 'a', 'diff': -1}, {'id': 1, 'n': 'b', 'diff': 1}], [0, 0], [(1, "field 'before' is missing or null: a delete needs the row it removes (give the source table a full replica identity)")], 1)
    """
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        values = values.to_pylist()
    out: dict[str, list] = {n: [] for n in columns}
    diffs, event, errors, tombstones = [], [], [], 0
    for i, raw in enumerate(values):
        if raw is None:
            tombstones += 1
            continue
        try:
            rows = _envelope(raw, columns)
        except Malformed as e:
            errors.append((i, str(e)))
            continue
        for vals, d in rows:
            for n in columns:
                out[n].append(vals[n])
            diffs.append(d)
            event.append(i)
    table = pa.table({**{n: pa.array(out[n], arrow_type(t)) for n, t in columns.items()},
                      "diff": pa.array(diffs, pa.int64())})
    return Envelopes(table, np.asarray(event, dtype=np.int64), errors, tombstones)


def envelope_field(raw: Any, path: str) -> Any:
    """The value at a dotted ``path`` (``source.lsn``, ``ts_ms``) of one envelope's payload, None if absent.

    >>> envelope_field('{"payload": {"source": {"lsn": 7}}}', "source.lsn")
    7
    """
    env = _payload(_decoded(raw))[0] if raw is not None else None
    for part in path.split("."):
        if not isinstance(env, dict):
            return None
        env = env.get(part)
    return env


def _decoded(raw: Any) -> Any:
    if isinstance(raw, (bytes, bytearray, memoryview)):
        raw = bytes(raw).decode("utf-8", errors="strict")
    if isinstance(raw, str):
        try:
            return json.loads(raw, parse_float=decimal.Decimal)
        except ValueError as e:
            raise Malformed(f"not JSON ({e})") from None
    return raw


def _payload(env: Any) -> tuple[Any, dict]:
    """The envelope without its ``schema``/``payload`` wrapper, and the logical types its schema names."""
    types: dict = {}
    if isinstance(env, dict) and "payload" in env and set(env) <= {"schema", "payload"}:
        for f in (env.get("schema") or {}).get("fields") or []:
            if isinstance(f, dict) and f.get("field") in ("before", "after"):
                for c in f.get("fields") or []:
                    if isinstance(c, dict) and "field" in c:
                        types[c["field"]] = c
        env = env["payload"]
    return env, types


def _envelope(raw: Any, columns: Mapping[str, str]) -> list[tuple[dict, int]]:
    env, types = _payload(_decoded(raw))
    if not isinstance(env, dict):
        raise Malformed(f"the envelope is {type(env).__name__}, not an object")
    if "op" not in env:
        raise Malformed("field 'op' is missing")
    op = env["op"]
    if op == "t":
        raise Malformed("field 'op' is 't' (a truncate), which cannot be applied row by row")
    if op not in ("c", "r", "u", "d"):
        raise Malformed(f"field 'op' is {op!r}, not c, r, u or d")
    out = []
    if op in ("u", "d"):
        before = env.get("before")
        if not isinstance(before, dict):
            what = "an update needs the row it replaces" if op == "u" else "a delete needs the row it removes"
            raise Malformed(f"field 'before' is missing or null: {what} (give the source table a full replica "
                            "identity)")
        out.append((_row(before, "before", columns, types), -1))
    if op in ("c", "r", "u"):
        after = env.get("after")
        if not isinstance(after, dict):
            raise Malformed(f"field 'after' is missing or null (op {op!r} inserts it)")
        out.append((_row(after, "after", columns, types), 1))
    return out


def _row(obj: dict, side: str, columns: Mapping[str, str], types: dict) -> dict:
    row = {}
    for name, typ in columns.items():
        if name not in obj:
            raise Malformed(f"field '{side}.{name}' is missing")
        v = obj[name]
        row[name] = None if v is None else _value(v, typ, f"{side}.{name}", types.get(name) or {})
    return row


def _value(v: Any, typ: str, where: str, schema: dict) -> Any:
    def bad(expected: str) -> Malformed:
        return Malformed(f"field '{where}': expected {expected}, got {json.dumps(v, default=str)[:80]}")

    if typ == "bigint":
        if isinstance(v, bool) or not isinstance(v, int) or not -(1 << 63) <= v < (1 << 63):
            raise bad("an integer (int64)")
        return v
    if typ == "double":
        if isinstance(v, bool) or not isinstance(v, (int, float, decimal.Decimal)):
            raise bad("a number")
        return float(v)
    if typ == "string":
        if not isinstance(v, str):
            raise bad("a string")
        return v
    if typ == "boolean":
        if not isinstance(v, bool):
            raise bad("a boolean")
        return v
    if typ == "date":
        if isinstance(v, int) and not isinstance(v, bool):
            return _EPOCH_DATE + datetime.timedelta(days=v)
        if isinstance(v, str):
            try:
                return datetime.date.fromisoformat(v[:10])
            except ValueError:
                pass
        raise bad("a date (days since 1970-01-01, or 'YYYY-MM-DD')")
    if typ == "timestamp":
        if isinstance(v, int) and not isinstance(v, bool):
            unit, scale = _TS_UNITS.get(schema.get("name"), ("us", 1))
            micros = v // 1000 if scale is None else v * scale
            if scale is None and v % 1000:
                raise bad("a timestamp in whole microseconds (ddflow's resolution)")
            return _EPOCH + datetime.timedelta(microseconds=micros)
        if isinstance(v, str):
            try:
                t = datetime.datetime.fromisoformat(v.replace("Z", "+00:00"))
            except ValueError:
                raise bad("a timestamp (epoch integer or ISO 8601)") from None
            return t if t.tzinfo is not None else t.replace(tzinfo=datetime.timezone.utc)
        raise bad("a timestamp (epoch integer or ISO 8601)")
    if typ.startswith("decimal("):
        p, s = (int(x) for x in typ[8:-1].split(","))
        if isinstance(v, str) and schema.get("name") == "org.apache.kafka.connect.data.Decimal":
            try:
                raw = base64.b64decode(v, validate=True)
            except ValueError:
                raise bad("a base64 decimal") from None
            scale = int((schema.get("parameters") or {}).get("scale", s))
            d = decimal.Decimal(int.from_bytes(raw, "big", signed=True)).scaleb(-scale)
        elif isinstance(v, (int, decimal.Decimal)) and not isinstance(v, bool):
            d = decimal.Decimal(v)
        elif isinstance(v, str):
            try:
                d = decimal.Decimal(v)
            except decimal.InvalidOperation:
                raise bad(f"a decimal({p},{s})") from None
        else:
            raise bad(f"a decimal({p},{s})")
        if not d.is_finite() or d.scaleb(s) != d.scaleb(s).to_integral_value() or abs(d.scaleb(s)) >= 10 ** p:
            raise bad(f"a decimal({p},{s}) (at most {p - s} digits before the point and {s} after)")
        return d
    raise bad(typ)


def changelog_rows(table: pa.Table, columns: Mapping[str, str], version: str = "_commit_version",
                   change_type: str = "_change_type") -> tuple[pa.Table, np.ndarray, list[tuple[int, str]]]:
    """Spark's changelog rows as updates: the ``columns`` and ``diff``, each row's version, and the rows that
    cannot be applied ``(row index, reason)`` (they are left out).  O(rows), vectorized.

    >>> t = pa.table({"k": [1, 1, 2], "_change_type": ["insert", "delete", "upsert"], "_commit_version": [3, 4, 4]})
    >>> rows, versions, bad = changelog_rows(t, {"k": "bigint"})
    >>> rows.to_pylist(), versions.tolist(), bad
    ([{'k': 1, 'diff': 1}, {'k': 1, 'diff': -1}], [3, 4], [(2, "field '_change_type' is 'upsert', not insert, delete, update_preimage or update_postimage")])
    """
    for c in (change_type, version):
        if c not in table.column_names:
            raise ValueError(f"changelog rows need a {c!r} column (columns: {table.column_names})")
    kinds = table.column(change_type).cast(pa.string())
    vers = table.column(version)
    if not pa.types.is_integer(vers.type):
        raise ValueError(f"changelog column {version!r} is {vers.type}, not an integer")
    diff = pc.fill_null(pc.if_else(pc.is_in(kinds, pa.array(["insert", "update_postimage"])), 1,
                                   pc.if_else(pc.is_in(kinds, pa.array(["delete", "update_preimage"])), -1, 0)), 0)
    diff = diff.to_numpy(zero_copy_only=False).astype(np.int64)
    vnull = vers.is_null().to_numpy(zero_copy_only=False).astype(bool)
    bad = []
    for i in np.flatnonzero((diff == 0) | vnull):
        if vnull[i]:
            bad.append((int(i), f"field {version!r} is null"))
        else:
            bad.append((int(i), f"field {change_type!r} is {kinds[int(i)].as_py()!r}, not insert, delete, "
                                "update_preimage or update_postimage"))
    ok = (diff != 0) & ~vnull
    idx = pa.array(np.flatnonzero(ok))
    rows = table.select(list(columns)).take(idx).append_column("diff", pa.array(diff[ok]))
    return rows, vers.take(idx).to_numpy(zero_copy_only=False).astype(np.int64), bad


def parse_debezium_input(spec: Any, table: pa.Table, types: Mapping[str, str] | None = None,
                         kinds: Sequence[str] | None = None) -> tuple[pa.Table, pa.Table | None]:
    """The streaming builder's ``format="debezium"``: the contract of ``ddflow.streaming.parse.parse_input``.

    ``spec`` is the input's ``InputSpec``: its ``fields`` are the table's
    columns, its ``value_column`` holds the envelopes, its ``time`` is a
    Kafka column (``kafka.offset``, the default) or a dotted field of the
    envelope (``source.lsn``, ``ts_ms``).  ``types``: the table's SQL
    types (default: from ``kinds``).  Returns the rows as fields +
    ``time`` + ``diff`` + provenance, and the dead letters (None if none).
    O(messages), Python per message.
    """
    from ddflow.streaming.parse import PROVENANCE, dead_letters
    kind_types = {"i": "bigint", "f": "double", "b": "boolean", "o": "string"}
    if types is None:
        types = {f: kind_types[k] for f, k in zip(spec.fields, kinds or ["o"] * len(spec.fields))}
    n = table.num_rows
    names = table.column_names
    prov = pa.table({
        "__topic": table.column("topic") if "topic" in names else pa.nulls(n, pa.string()),
        "__partition": table.column("partition").cast(pa.int64()) if "partition" in names else pa.nulls(n, pa.int64()),
        "__offset": table.column("offset").cast(pa.int64()) if "offset" in names else pa.nulls(n, pa.int64()),
        "__value": table.column(spec.value_column).cast(pa.binary()),
    })
    values = table.column(spec.value_column).to_pylist()
    env = debezium_rows(values, {f: types[f] for f in spec.fields})
    errors = dict(env.errors)
    time_name = spec.time
    column = time_name[len("kafka."):] if time_name.startswith("kafka.") else (
        time_name if time_name in names else None)
    if column is not None:
        times = table.column(column).cast(pa.int64()).to_numpy(zero_copy_only=False)
        event_times = times[env.event] if len(env.event) else np.zeros(0, dtype=np.int64)
    else:
        per = {}
        for i in sorted(set(env.event.tolist())):
            t = envelope_field(values[i], time_name)
            if isinstance(t, bool) or not isinstance(t, int):
                errors[i] = f"field {time_name!r} is {'missing' if t is None else repr(t)}, not an integer time"
            else:
                per[i] = t
        keep = np.array([i in per for i in env.event.tolist()], dtype=bool)
        env = Envelopes(env.rows.filter(pa.array(keep)), env.event[keep], env.errors, env.tombstones)
        event_times = np.array([per[i] for i in env.event.tolist()], dtype=np.int64)
    out = env.rows.drop_columns(["diff"]).append_column("time", pa.array(event_times, pa.int64())) \
        .append_column("diff", env.rows.column("diff"))
    taken = prov.take(pa.array(env.event))
    for c in PROVENANCE:
        out = out.append_column(c, taken.column(c))
    bad = None
    if errors:
        idx = sorted(errors)
        bad = dead_letters(spec.name, [errors[i] for i in idx], prov.take(pa.array(idx)))
    return out, bad
