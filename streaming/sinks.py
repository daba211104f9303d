"""Where output changes and dead letters go: memory, Parquet files, Kafka topics.

Every sink writes per Spark batch id and is idempotent for a replayed
batch id: files are written under a batch-id name and renamed into place
atomically (a rewrite replaces them); a Kafka sink that starts (or
retries after a failed write) reads the last record of each output
partition and resumes a replayed batch after it, so a plain reader sees
every change exactly once (see ``KafkaSink``).
"""
from __future__ import annotations

import json
import os
import tempfile
import zlib
from typing import Any, Protocol

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


def _atomic_write(path: str, write) -> None:
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


class ParquetSink:
    """One Parquet file per batch id in a directory; a replayed batch replaces its file."""

    def __init__(self, path: str):
        self.path = path

    def write(self, batch_id: int, table: pa.Table) -> None:
        """Write ``batch-<id>.parquet`` atomically; an empty batch writes nothing."""
        if table.num_rows == 0:
            return
        _atomic_write(os.path.join(self.path, f"batch-{batch_id:012d}.parquet"), lambda p: pq.write_table(table, p))

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
        """Write ``batch-<id>.jsonl`` atomically, one JSON object per row (bytes as text)."""
        if table.num_rows == 0:
            return
        rows = table.to_pylist()
        text = "".join(json.dumps(r, default=_json_default) + "\n" for r in rows)
        _atomic_write(os.path.join(self.path, f"batch-{batch_id:012d}.jsonl"), lambda p: open(p, "w").write(text))

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


class KafkaSink:
    """Output changes as JSON records on a Kafka topic, exactly once for any reader.

    Value: ``{"record": [...], "time": t, "diff": d}``; key: the record's
    first field; partition: CRC-32 of the key modulo the topic's
    partitions (chosen here, not by the client, so a replay puts every
    record where it went before).  Headers ``batch_id`` and ``seq`` (the
    record's index in its batch) identify each record.

    Exactly once without the reader's help: processing is deterministic,
    so a batch replayed after a crash produces the same records in the same
    order, and the idempotent producer appends each partition's records in
    ``seq`` order with no duplicates, so what a crash left on a partition is
    a prefix.  Before its first write, and after a failed one, the sink
    reads the last record of each partition and skips every record at or
    before that ``(batch_id, seq)``.  Cost: one read of each partition's
    last record per restart.  The topic must be written by this sink only.

    Kafka transactions are not used: the broker this project embeds (Tansu)
    commits them but still delivers the records of an *aborted* transaction
    to ``read_committed`` consumers (measured; see :mod:`ddflow.streaming.broker`).
    """

    def __init__(self, bootstrap: str, topic: str, producer_config: dict | None = None):
        self.bootstrap = bootstrap
        self.topic = topic
        self.config = dict(producer_config or {})
        self._producer = None
        self._partitions: int | None = None
        #: partition -> the (batch_id, seq) of its last record; None: not read since start or a failure.
        self._written: dict[int, tuple[int, int]] | None = None
        self.skipped = 0  # records of replayed batches found already written (tests, metrics)

    def _get(self):
        if self._producer is None:
            from confluent_kafka import Producer

            from ddflow.streaming.broker import topic_partitions

            self._producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5,
                                       "enable.idempotence": True, **self.config})
            self._partitions = len(topic_partitions(self._producer, self.topic, self.bootstrap))
        return self._producer

    def write(self, batch_id: int, table: pa.Table) -> None:
        """Produce the batch's records not yet on the topic and wait for delivery; any failed delivery raises."""
        if table.num_rows == 0:
            return
        p = self._get()
        if self._written is None:
            self._written = last_ids(self.bootstrap, self.topic)
        fields = [c for c in table.column_names if c not in ("time", "diff")]
        # JSON text per column, joined per record by Arrow: no Python string formatting per record.
        texts = [_json_strings(table.column(c)) for c in fields]
        pieces: list = ['{"record": [']
        for i, t in enumerate(texts):
            pieces += ([", "] if i else []) + [t]
        pieces += ['], "time": ', _json_strings(table.column("time")), ', "diff": ', _json_strings(table.column("diff")), "}"]
        values = pc.binary_join_element_wise(*pieces, "").cast(pa.binary()).to_pylist()
        keys = texts[0].cast(pa.binary()).to_pylist() if texts else [b""] * len(values)
        n_parts = self._partitions
        parts = [zlib.crc32(k) % n_parts for k in keys]
        written = self._written
        bid = str(batch_id).encode()
        errors: list = []

        def done(err, msg):
            if err is not None:
                errors.append(err)

        produce, topic = p.produce, self.topic
        self._written = None  # until this write is known complete
        for seq, (value, key, part) in enumerate(zip(values, keys, parts)):
            last = written.get(part)
            if last is not None and (batch_id, seq) <= last:
                self.skipped += 1
                continue
            while True:
                try:
                    produce(topic, value=value, key=key, partition=part, on_delivery=done,
                            headers=[("batch_id", bid), ("seq", str(seq).encode())])
                    break
                except BufferError:
                    p.poll(0.05)
            if seq % 1000 == 0:
                p.poll(0)
        remaining = p.flush(30)
        if remaining or errors:
            raise SinkError(f"Kafka sink {self.topic!r}: {len(errors)} delivery errors, {remaining} undelivered "
                            f"for batch {batch_id}: {errors[:3]}")
        self._written = {}  # complete: every later batch id is past whatever the topic holds

    def close(self) -> None:
        """Flush and drop the producer (a later ``write`` makes a new one and reads the tails again)."""
        if self._producer is not None:
            self._producer.flush(10)
            self._producer = None
            self._written = None

    def __getstate__(self):
        d = dict(self.__dict__)
        d["_producer"] = None
        d["_written"] = None
        return d


def last_ids(bootstrap: str, topic: str, timeout: float = 30.0) -> dict[int, tuple[int, int]]:
    """``{partition: (batch_id, seq)}`` of the last record of each non-empty partition of a KafkaSink topic.

    O(partitions): reads one record per partition, from the end offset - 1.
    """
    from ddflow.streaming.broker import end_offsets

    ends = {p: e - 1 for p, e in end_offsets(bootstrap, topic, timeout).items() if e > 0}
    out: dict[int, tuple[int, int]] = {}
    for part, offset, _, headers in _read(bootstrap, topic, ends, timeout, "the last records of "):
        h = dict(headers or [])
        try:
            out[part] = (int(h["batch_id"]), int(h["seq"]))
        except (KeyError, ValueError):
            raise SinkError(f"Kafka topic {topic!r} partition {part} offset {offset}: a record without "
                            "batch_id/seq headers; a KafkaSink topic must be written by the sink only") from None
    return out


def _json_strings(col: pa.ChunkedArray) -> pa.Array:
    """Each value of an Arrow column as JSON text, as an Arrow string array."""
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    typ = col.type
    if (pa.types.is_integer(typ) or pa.types.is_boolean(typ)) and not col.null_count:
        return pc.cast(col, pa.string())  # ints as digits, bools as true/false: already JSON
    return pa.array([json.dumps(v, default=_json_default) for v in col.to_pylist()], pa.string())


def read_changes(bootstrap: str, topic: str) -> list[dict]:
    """Every change on a KafkaSink topic, read plainly; a record written twice (same batch_id, seq) is an error."""
    seen = set()
    out = []
    for value, headers in read_topic(bootstrap, topic):
        hdr = dict(headers or [])
        ident = (hdr.get("batch_id"), hdr.get("seq"))
        if ident in seen:
            raise SinkError(f"Kafka topic {topic!r}: record batch_id={ident[0]!r} seq={ident[1]!r} is on it twice")
        seen.add(ident)
        out.append(json.loads(value))
    return out


def read_topic(bootstrap: str, topic: str, timeout: float = 30.0) -> list[tuple[bytes, list]]:
    """(value, headers) of every record of ``topic`` from the beginning to the current end."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer

    from ddflow.streaming.broker import consumer_config, topic_partitions

    c = Consumer(consumer_config(bootstrap))
    try:
        parts = topic_partitions(c, topic, bootstrap)
    finally:
        c.close()
    return [(v, h) for _, _, v, h in _read(bootstrap, topic, dict.fromkeys(parts, OFFSET_BEGINNING), timeout)]


def _read(bootstrap: str, topic: str, starts: dict[int, int], timeout: float,
          what: str = "") -> list[tuple[int, int, bytes, list]]:
    """(partition, offset, value, headers) of the records of ``topic`` from ``starts[partition]`` to the end."""
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
                out.append((m.partition(), m.offset(), m.value(), m.headers()))
        return out
    finally:
        c.close()
