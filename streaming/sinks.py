"""Where output changes and dead letters go: memory, Parquet files, Kafka topics.

Every sink writes per Spark batch id and is idempotent for a replayed
batch id: files are written under a batch-id name and renamed into place
atomically (a rewrite replaces them); a Kafka sink that starts (or
retries after a failed write) reads the last record of each output
partition, checks that it wrote it, and resumes a replayed batch after
it, so a plain reader sees every change exactly once (see ``KafkaSink``).

The Parquet and Kafka sinks write a batch's rows in an order that is a
function of the rows alone, so a batch replayed after a restore (whose
process may have interned strings in another order, and so computed the
same changes in another order) writes the same bytes again.
"""
from __future__ import annotations

import hmac
import json
import os
import struct
import tempfile
import zlib
from typing import Any, NamedTuple, Protocol

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ddflow.errors import DdflowError


class SinkError(DdflowError, RuntimeError):
    """Output could not be delivered (or read back) in full; the message names the topic or path."""


class Sink(Protocol):
    """What ``StreamingDataflow`` writes to: anything with ``write(batch_id, table)``."""

    def write(self, batch_id: int, table: pa.Table) -> None:
        """Take one micro-batch's changes; a replayed ``batch_id`` must not duplicate them."""


class MemorySink:
    """Keeps each batch's Arrow table, for tests and notebooks."""

    def __init__(self) -> None:
        self.batches: dict[int, pa.Table] = {}

    def write(self, batch_id: int, table: pa.Table) -> None:
        """Keep (or, for a replayed batch id, replace) the batch's table."""
        self.batches[batch_id] = table

    def table(self) -> pa.Table:
        """Every batch's changes in batch-id order."""
        tables = [self.batches[k] for k in sorted(self.batches)]
        return pa.concat_tables(tables, promote_options="default") if tables else pa.table({})

    def contents(self) -> dict[tuple, int]:
        """Record -> multiplicity after all batches (the accumulated output)."""
        return accumulate(self.table())


def accumulate(table: pa.Table) -> dict[tuple, int]:
    """Sum the ``diff`` of each record over a table of output changes."""
    if table.num_rows == 0:
        return {}
    fields = [c for c in table.column_names if c not in ("time", "diff") and not c.startswith("time_")]
    out: dict[tuple, int] = {}
    cols = [table.column(c).to_pylist() for c in fields]
    for row, d in zip(zip(*cols), table.column("diff").to_pylist()):
        n = out.get(row, 0) + d
        if n:
            out[row] = n
        else:
            out.pop(row, None)
    return out


def atomic_write(path: str, write) -> None:
    """``write(tmp)`` a temporary file beside ``path`` and rename it into place; on any error it is removed.

    The temporary file is made 0600 (``mkstemp``); a ``write`` that wants another mode sets it.  The sinks
    here and the pipeline CLI's metrics file (:mod:`ddflow.pipelines.metrics`) write through it."""
    d = os.path.dirname(path)
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def canonical_order(table: pa.Table) -> pa.Table:
    """The rows sorted by every column in turn: an order that depends on the rows only.  O(n log n).

    Columns Arrow cannot sort (nested types) sort the rows by their JSON text instead.

    >>> canonical_order(pa.table({"k": ["b", "a"], "diff": [1, -1]})).to_pylist()
    [{'k': 'a', 'diff': -1}, {'k': 'b', 'diff': 1}]
    """
    if table.num_rows < 2:
        return table
    try:
        return table.sort_by([(c, "ascending") for c in table.column_names])
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
        texts = [_json_strings(table.column(c)) for c in table.column_names]
        joined = pc.binary_join_element_wise(*[x for t in texts for x in (t, "\x00")][:-1], "")
        return table.take(pc.sort_indices(joined))


class ParquetSink:
    """One Parquet file per batch id in a directory; a replayed batch replaces its file."""

    def __init__(self, path: str):
        self.path = path

    def write(self, batch_id: int, table: pa.Table) -> None:
        """Write ``batch-<id>.parquet`` atomically, rows in :func:`canonical_order`; an empty batch writes nothing."""
        if table.num_rows == 0:
            return
        table = canonical_order(table)
        atomic_write(os.path.join(self.path, f"batch-{batch_id:012d}.parquet"), lambda p: pq.write_table(table, p))

    def table(self) -> pa.Table:
        """Every file's changes in batch-id order (reading back, for tests and checks)."""
        if not os.path.isdir(self.path):
            return pa.table({})
        files = sorted(f for f in os.listdir(self.path) if f.endswith(".parquet"))
        tables = [pq.read_table(os.path.join(self.path, f)) for f in files]
        return pa.concat_tables(tables, promote_options="default") if tables else pa.table({})


class JsonLinesSink:
    """One JSON-lines file per batch id (used for dead letters)."""

    def __init__(self, path: str):
        self.path = path

    def write(self, batch_id: int, table: pa.Table) -> None:
        """Write ``batch-<id>.jsonl`` atomically, one JSON object per row (bytes as text), in the table's order.

        (Dead letters come in the order of the batch's input, which a replay reads again in the same order.)
        """
        if table.num_rows == 0:
            return
        text = "".join(json.dumps(r, default=_json_default) + "\n" for r in table.to_pylist())

        def write(p: str) -> None:
            with open(p, "w") as f:
                f.write(text)

        atomic_write(os.path.join(self.path, f"batch-{batch_id:012d}.jsonl"), write)

    def rows(self) -> list[dict]:
        """Every row of every file, in batch-id order."""
        if not os.path.isdir(self.path):
            return []
        out = []
        for f in sorted(os.listdir(self.path)):
            if f.endswith(".jsonl"):
                with open(os.path.join(self.path, f)) as fh:
                    out.extend(json.loads(line) for line in fh if line.strip())
        return out


def _json_default(v: Any) -> Any:
    if isinstance(v, bytes):
        return v.decode("utf-8", errors="replace")
    return str(v)


#: The header that carries a KafkaSink record's authenticator.
AUTH_HEADER = "ddflow_auth"
_SINK_KEY_DOMAIN = b"ddflow KafkaSink records 1"


def sink_key(state_key: bytes) -> bytes:
    """The key a KafkaSink signs its records with, derived from the query's state key (never the key itself)."""
    return hmac.digest(state_key, _SINK_KEY_DOMAIN, "sha256")


def authenticator(key: bytes, topic: str, partition: int, batch_id: int, seq: int, rec_key: bytes,
                  value: bytes) -> bytes:
    """HMAC-SHA256 (hex) of one record under a sink key: its topic, partition, batch id, seq, key and value.

    >>> a = authenticator(b"k" * 32, "out", 0, 7, 3, b"1", b'{"record": [1], "time": 0, "diff": 1}')
    >>> len(a), a == authenticator(b"k" * 32, "out", 0, 7, 4, b"1", b'{"record": [1], "time": 0, "diff": 1}')
    (64, False)
    """
    head = topic.encode() + b"\0" + struct.pack(">iqqq", partition, batch_id, seq, len(rec_key))
    return hmac.digest(key, head + rec_key + value, "sha256").hex().encode()


class KafkaSink:
    """Output changes as JSON records on a Kafka topic, exactly once for any reader.

    Value: ``{"record": [...], "time": t, "diff": d}``; key: the record's
    first field; partition: CRC-32 of the key modulo the topic's
    partitions (chosen here, not by the client, so a replay puts every
    record where it went before).  A batch's records are written in the
    order of their values' bytes, a function of the data alone (not of
    how the process that computed them happened to intern strings), and
    headers ``batch_id``, ``seq`` (the record's index in that order) and
    ``ddflow_auth`` (:func:`authenticator`: an HMAC of topic, partition,
    batch id, seq, key and value under a key derived from the query's
    state key) identify each record.

    Exactly once without the reader's help: a batch replayed after a crash
    produces the same records, hence the same order, and the idempotent
    producer appends each partition's records in ``seq`` order with no
    duplicates, so what a crash left on a partition is a prefix.  Before
    its first write, and after a failed one, the sink reads the last
    record of each partition: one this sink did not sign (a foreign or
    forged record, or one signed under another state key), one of a batch
    later than the one being written, or one of this batch that is not the
    record this replay has at its ``seq``, stops the sink with a
    :class:`SinkError` naming topic, partition and offset.  Otherwise it
    skips exactly the records at or before that ``seq`` in that
    partition.  Cost: one read of each partition's last record per
    restart, one HMAC per record.  The topic must be written by this sink
    only.

    The key: a :class:`~ddflow.streaming.driver.StreamingDataflow` hands
    the sink its state key when the query opens (:meth:`bind`); outside
    one, pass ``key=`` (bytes, at least 16).  Without a key it refuses to
    write.

    Kafka transactions are not used: the broker this project embeds (Tansu)
    commits them but still delivers the records of an *aborted* transaction
    to ``read_committed`` consumers (measured; see :mod:`ddflow.streaming.broker`).
    """

    def __init__(self, bootstrap: str, topic: str, producer_config: dict | None = None,
                 key: bytes | str | None = None):
        self.bootstrap = bootstrap
        self.topic = topic
        self.config = dict(producer_config or {})
        if isinstance(key, str):
            key = key.encode()
        if key is not None and len(key) < 16:
            raise ValueError(f"KafkaSink {topic!r}: key needs at least 16 bytes, got {len(key)}")
        self._given = key is not None
        self._key = sink_key(key) if key is not None else None
        self._producer = None
        self._partitions: int | None = None
        #: partition -> the last record on it; None: not read since start or a failure; {}: nothing to resume.
        self._tails: dict[int, Tail] | None = None
        self.skipped = 0  # records of replayed batches found already written (tests, metrics)

    def bind(self, state_key: bytes) -> None:
        """Sign (and check) records with a key derived from the query's state key, unless ``key=`` was given.

        The driver calls it when the query opens.  Cost: one HMAC.
        """
        if not self._given:
            self._key = sink_key(state_key)

    def _get(self):
        if self._producer is None:
            from confluent_kafka import Producer

            from ddflow.streaming.broker import client_logger, topic_partitions

            self._producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5, "logger": client_logger,
                                       "enable.idempotence": True, **self.config})
            self._partitions = len(topic_partitions(self._producer, self.topic, self.bootstrap))
        return self._producer

    def write(self, batch_id: int, table: pa.Table) -> None:
        """Produce the batch's records not yet on the topic and wait for delivery; any failed delivery raises."""
        if table.num_rows == 0:
            return
        key = self._key
        if key is None:
            raise SinkError(f"Kafka sink {self.topic!r} has no key to sign its records with: use it in a "
                            "StreamingDataflow with a state location (which hands it the query's state key), or "
                            "pass KafkaSink(..., key=...)")
        p = self._get()
        values, keys = encode_records(table)
        n_parts = self._partitions
        parts = [zlib.crc32(k) % n_parts for k in keys]
        if self._tails is None:
            self._tails = last_records(self.bootstrap, self.topic)
        resume = self._resume(batch_id, values, keys, parts, self._tails)
        bid = str(batch_id).encode()
        errors: list = []

        def done(err, msg):
            if err is not None:
                errors.append(err)

        produce, topic = p.produce, self.topic
        self._tails = None  # until this write is known complete
        for seq, (value, k, part) in enumerate(zip(values, keys, parts)):
            if seq <= resume.get(part, -1):
                self.skipped += 1
                continue
            headers = [("batch_id", bid), ("seq", str(seq).encode()),
                       (AUTH_HEADER, authenticator(key, topic, part, batch_id, seq, k, value))]
            while True:
                try:
                    produce(topic, value=value, key=k, partition=part, on_delivery=done, headers=headers)
                    break
                except BufferError:
                    p.poll(0.05)
            if seq % 1000 == 0:
                p.poll(0)
        remaining = p.flush(30)
        if remaining or errors:
            raise SinkError(f"Kafka sink {self.topic!r}: {len(errors)} delivery errors, {remaining} undelivered "
                            f"for batch {batch_id}: {errors[:3]}")
        self._tails = {}  # complete: every later batch id is past whatever the topic holds

    def _resume(self, batch_id: int, values: list[bytes], keys: list[bytes], parts: list[int],
                tails: dict[int, "Tail"]) -> dict[int, int]:
        """partition -> the last seq of this batch already on it; raises on any record that is not ours."""
        resume = {}
        for part, t in sorted(tails.items()):
            where = f"Kafka topic {self.topic!r} partition {part} offset {t.offset}"
            b, s = self.check(t)
            if b < batch_id:
                continue
            if b > batch_id:
                raise SinkError(f"{where}: the last record is of batch {b}, later than batch {batch_id} that the "
                                "sink is writing: the topic is ahead of the query's state (a state restored from "
                                "an older copy, or another query writing this topic); nothing was written")
            if s >= len(values) or parts[s] != part or values[s] != (t.value or b"") or keys[s] != (t.key or b""):
                raise SinkError(f"{where}: record seq={s} of batch {b} is not the record this replay of batch {b} "
                                f"has at seq {s}: the replay's output differs from the first run's (is a function "
                                "in the dataflow nondeterministic?); nothing was skipped or written")
            resume[part] = s
        return resume

    def check(self, t: "Tail") -> tuple[int, int]:
        """``(batch_id, seq)`` of a record on the topic that this sink signed; a SinkError naming it otherwise."""
        where = f"Kafka topic {self.topic!r} partition {t.partition} offset {t.offset}"
        h = dict(t.headers or [])
        try:
            b, s, auth = int(h["batch_id"]), int(h["seq"]), h[AUTH_HEADER]
        except (KeyError, ValueError, TypeError):
            raise SinkError(f"{where}: a record without this sink's batch_id, seq and {AUTH_HEADER} headers: not "
                            "written by a KafkaSink (a foreign producer, or a ddflow before records were signed); "
                            "a KafkaSink topic must be written by its sink only") from None
        want = authenticator(self._key, self.topic, t.partition, b, s, t.key or b"", t.value or b"")
        if not hmac.compare_digest(want, auth or b""):
            raise SinkError(f"{where}: a record claiming batch_id={b} seq={s} whose {AUTH_HEADER} is not this "
                            "query's (a forged or copied record, or one written under another state key); it is "
                            "never a reason to skip output, so the sink stops")
        return b, s

    def close(self) -> None:
        """Flush and close the producer (a later ``write`` makes a new one and reads the tails again)."""
        if self._producer is not None:
            producer, self._producer = self._producer, None
            self._tails = None
            try:
                producer.flush(10)
            finally:
                producer.close()

    def __enter__(self) -> "KafkaSink":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __getstate__(self):
        d = dict(self.__dict__)
        d["_producer"] = None
        d["_tails"] = None
        return d


class Tail(NamedTuple):
    """The last record of one partition of a topic."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list | None


def encode_records(table: pa.Table) -> tuple[list[bytes], list[bytes]]:
    """A batch's KafkaSink values and keys, in the order of the values' bytes (a function of the data alone).

    O(n log n): JSON text per column, joined per record by Arrow, sorted by Arrow.

    >>> encode_records(pa.table({"k": ["b", "a"], "time": [0, 0], "diff": [1, 1]}))[0]
    [b'{"record": ["a"], "time": 0, "diff": 1}', b'{"record": ["b"], "time": 0, "diff": 1}']
    """
    fields = [c for c in table.column_names if c not in ("time", "diff")]
    texts = [_json_strings(table.column(c)) for c in fields]
    pieces: list = ['{"record": [']
    for i, t in enumerate(texts):
        pieces += ([", "] if i else []) + [t]
    pieces += ['], "time": ', _json_strings(table.column("time")), ', "diff": ', _json_strings(table.column("diff")), "}"]
    values = pc.binary_join_element_wise(*pieces, "").cast(pa.binary())
    order = pc.sort_indices(values)
    keys = texts[0].cast(pa.binary()).take(order).to_pylist() if texts else [b""] * len(values)
    return values.take(order).to_pylist(), keys


def last_records(bootstrap: str, topic: str, timeout: float = 30.0) -> dict[int, Tail]:
    """The last record of each non-empty partition of ``topic``.  O(partitions): one record per partition."""
    from ddflow.streaming.broker import end_offsets

    ends = {p: e - 1 for p, e in end_offsets(bootstrap, topic, timeout).items() if e > 0}
    return {part: Tail(part, offset, key, value, headers)
            for part, offset, key, value, headers in _read(bootstrap, topic, ends, timeout, "the last records of ")}


def last_ids(bootstrap: str, topic: str, timeout: float = 30.0) -> dict[int, tuple[int, int]]:
    """``{partition: (batch_id, seq)}`` of the last record of each non-empty partition, as its headers say.

    Not authenticated (:meth:`KafkaSink.check` is); for tests and tools.
    """
    out: dict[int, tuple[int, int]] = {}
    for part, t in last_records(bootstrap, topic, timeout).items():
        h = dict(t.headers or [])
        try:
            out[part] = (int(h["batch_id"]), int(h["seq"]))
        except (KeyError, ValueError):
            raise SinkError(f"Kafka topic {topic!r} partition {part} offset {t.offset}: a record without "
                            "batch_id/seq headers; a KafkaSink topic must be written by the sink only") from None
    return out


def _json_strings(col: pa.ChunkedArray) -> pa.Array:
    """Each value of an Arrow column as JSON text, as an Arrow string array."""
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    typ = col.type
    if (pa.types.is_integer(typ) or pa.types.is_boolean(typ)) and not col.null_count:
        return pc.cast(col, pa.string())  # ints as digits, bools as true/false: already JSON
    return pa.array([json.dumps(v, default=_json_default) for v in col.to_pylist()], pa.string())


def read_changes(bootstrap: str, topic: str, state_key: bytes | None = None) -> list[dict]:
    """Every change on a KafkaSink topic, read plainly; a record written twice (same batch_id, seq) is an error.

    With ``state_key`` (the query's, :attr:`ddflow.streaming.state.StateStore.key`) every record's
    authenticator is checked too: a record the query's sinks did not write is an error naming it.
    """
    checker = KafkaSink(bootstrap, topic, key=state_key) if state_key is not None else None
    seen = set()
    out = []
    for part, offset, key, value, headers in _read_all(bootstrap, topic):
        if checker is not None:
            checker.check(Tail(part, offset, key, value, headers))
        hdr = dict(headers or [])
        ident = (hdr.get("batch_id"), hdr.get("seq"))
        if ident in seen:
            raise SinkError(f"Kafka topic {topic!r}: record batch_id={ident[0]!r} seq={ident[1]!r} is on it twice")
        seen.add(ident)
        out.append(json.loads(value))
    return out


def read_topic(bootstrap: str, topic: str, timeout: float = 30.0) -> list[tuple[bytes, list]]:
    """(value, headers) of every record of ``topic`` from the beginning to the current end."""
    return [(v, h) for _, _, _, v, h in _read_all(bootstrap, topic, timeout)]


def _read_all(bootstrap: str, topic: str, timeout: float = 30.0) -> list[tuple[int, int, bytes, bytes, list]]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer

    from ddflow.streaming.broker import consumer_config, topic_partitions

    c = Consumer(consumer_config(bootstrap))
    try:
        parts = topic_partitions(c, topic, bootstrap)
    finally:
        c.close()
    return _read(bootstrap, topic, dict.fromkeys(parts, OFFSET_BEGINNING), timeout)


def _read(bootstrap: str, topic: str, starts: dict[int, int], timeout: float,
          what: str = "") -> list[tuple[int, int, bytes, bytes, list]]:
    """(partition, offset, key, value, headers) of the records of ``topic`` from ``starts[partition]`` to the end."""
    import time

    from confluent_kafka import Consumer, KafkaError, TopicPartition

    from ddflow.streaming.broker import consumer_config, drain_events

    if not starts:
        return []
    c = Consumer(consumer_config(bootstrap))
    try:
        c.assign([TopicPartition(topic, p, o) for p, o in starts.items()])
        open_parts = set(starts)
        out = []
        deadline = time.monotonic() + timeout
        while open_parts:
            if time.monotonic() > deadline:
                raise SinkError(f"reading {what}Kafka topic {topic!r} did not reach the end within {timeout}s")
            for m in drain_events(c, 0.2):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        open_parts.discard(m.partition())
                        continue
                    raise SinkError(f"reading {what}Kafka topic {topic!r}: {err}")
                out.append((m.partition(), m.offset(), m.key(), m.value(), m.headers()))
        return out
    finally:
        c.close()
