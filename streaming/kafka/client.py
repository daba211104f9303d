"""The Kafka side of the ``ddkafka`` source, with no PySpark: options, offsets, reading ranges.

Everything here speaks ``confluent-kafka`` (imported lazily) and Arrow;
:mod:`ddflow.streaming.kafka.source` wraps it in Spark's Python Data Source
classes.  Kept apart so the offset arithmetic and the record reader can be
used and tested without starting Spark, and so that importing this module
never imports PySpark.

Offsets are Kafka partition offsets as Spark stores them,
``{"topic": {"0": 12, "1": 7}}``: the next offset to read per partition,
string keys.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Optional, Protocol

import pyarrow as pa

from ddflow.errors import DdflowError
from ddflow.streaming.broker import (
    BrokerError,
    consumer_config,
    drain_events,
    probe_end_offsets,
    topic_partitions,
)

__all__ = ["ARROW_SCHEMA", "KafkaSourceError", "Offsets", "OffsetRange"]

_log = logging.getLogger("ddflow.streaming.kafka")

#: Spark's Kafka source schema in Arrow: what Spark expects from ``read()`` (it checks equality).
ARROW_SCHEMA = pa.schema([
    ("key", pa.binary()),
    ("value", pa.binary()),
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("offset", pa.int64()),
    ("timestamp", pa.timestamp("us", tz="UTC")),
    ("timestampType", pa.int32()),
])

#: Offsets as Spark stores them: {topic: {str(partition): next_offset}}.
Offsets = dict[str, dict[str, int]]

_EARLIEST, _LATEST = -2, -1
_BATCH_ROWS = 10_000  # an Arrow batch is emitted once this many rows are buffered
# kafka.* options that would break offset tracking.
_FORBIDDEN_KAFKA_CONF = {
    "group.id", "auto.offset.reset", "enable.auto.commit", "enable.auto.offset.store",
    "enable.partition.eof", "key.deserializer", "value.deserializer",
}
_UNSUPPORTED_OPTIONS = {"assign", "subscribepattern", "includeheaders"}


class KafkaSourceError(DdflowError, RuntimeError):
    """A problem with the ddkafka options, topics, offsets or broker."""


class OffsetRange(Protocol):
    """Offsets ``[start, end)`` of one topic-partition (``source.KafkaInputPartition`` is one)."""

    topic: str
    partition: int
    start: int
    end: int


# --------------------------------------------------------------------------
# Options and offsets
# --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Options:
    """The source's options, checked once on the driver; small and picklable for the executors."""

    bootstrap: str
    topics: tuple[str, ...]
    starting: str
    ending: str
    max_offsets: Optional[int]
    timeout: float
    kafka_conf: tuple[tuple[str, str], ...]
    fail_on_data_loss: bool = True

    @classmethod
    def parse(cls, options: Mapping[str, str], streaming: bool) -> "_Options":
        """Spark's ``.option(...)`` values (case-insensitive keys); bad ones raise ``KafkaSourceError``."""
        opts = {k.lower(): v for k, v in options.items()}
        bootstrap = opts.get("kafka.bootstrap.servers", "").strip()
        if not bootstrap:
            raise KafkaSourceError("ddkafka: option 'kafka.bootstrap.servers' is required")
        bad = sorted(_UNSUPPORTED_OPTIONS & opts.keys())
        if bad:
            raise KafkaSourceError(f"ddkafka: unsupported option(s) {bad}; use 'subscribe'")
        fail_on_data_loss = opts.get("failondataloss", "true").strip().lower()
        if fail_on_data_loss not in ("true", "false"):
            raise KafkaSourceError(f"ddkafka: failOnDataLoss must be 'true' or 'false', got "
                                   f"{opts['failondataloss']!r}")
        topics = tuple(t.strip() for t in opts.get("subscribe", "").split(",") if t.strip())
        if not topics:
            raise KafkaSourceError(
                "ddkafka: option 'subscribe' (comma-separated topics) is required"
            )
        if len(set(topics)) != len(topics):
            raise KafkaSourceError(f"ddkafka: 'subscribe' lists a topic twice: {list(topics)}")
        max_offsets = opts.get("maxoffsetspertrigger")
        if max_offsets is not None:
            try:
                max_offsets = int(max_offsets)
            except ValueError:
                max_offsets = 0
            if max_offsets <= 0:
                raise KafkaSourceError(
                    f"ddkafka: maxOffsetsPerTrigger must be a positive integer, "
                    f"got {opts['maxoffsetspertrigger']!r}"
                )
        if not streaming and max_offsets is not None:
            raise KafkaSourceError("ddkafka: maxOffsetsPerTrigger applies to streaming reads only")
        if streaming and "endingoffsets" in opts:
            raise KafkaSourceError("ddkafka: endingOffsets applies to batch reads only")
        try:
            timeout = int(opts.get("kafkaconsumer.polltimeoutms", "30000")) / 1000.0
        except ValueError:
            raise KafkaSourceError(
                "ddkafka: kafkaConsumer.pollTimeoutMs must be an integer"
            ) from None
        conf = {}
        for k, v in opts.items():
            if k.startswith("kafka.") and k != "kafka.bootstrap.servers":
                name = k[len("kafka."):]
                if name in _FORBIDDEN_KAFKA_CONF:
                    raise KafkaSourceError(
                        f"ddkafka: option {k!r} is not allowed: the source tracks offsets itself"
                    )
                conf[name] = v
        return cls(
            bootstrap=bootstrap,
            topics=topics,
            starting=opts.get("startingoffsets", "latest" if streaming else "earliest").strip(),
            ending=opts.get("endingoffsets", "latest").strip(),
            max_offsets=max_offsets,
            timeout=timeout,
            kafka_conf=tuple(sorted(conf.items())),
            fail_on_data_loss=fail_on_data_loss == "true",
        )

    def consumer_conf(self) -> dict:
        """librdkafka settings for a group-less consumer with the user's ``kafka.*`` options."""
        return consumer_config(self.bootstrap, **dict(self.kafka_conf))


def _canonical(offsets: Mapping[str, Mapping[Any, Any]]) -> Offsets:
    """Sorted topics and numerically sorted partitions.

    Spark compares offsets as JSON text, so the same offsets must always be
    spelled the same way or an idle stream would look like it had new data.
    """
    return {
        t: {str(p): int(o) for p, o in sorted(offsets[t].items(), key=lambda kv: int(kv[0]))}
        for t in sorted(offsets)
    }


def _limit(begin: Offsets, end: Offsets, max_rows: int) -> Offsets:
    """Move ``end`` back so at most ``max_rows`` offsets are admitted in all.

    Each partition gets a share proportional to its backlog (largest
    remainders get the leftover), so no partition starves; offsets (not
    records) are counted, so records <= ``max_rows`` even with gaps.
    """
    lags = {
        (t, p): end[t][p] - begin[t][p]
        for t in end for p in end[t] if end[t][p] > begin[t][p]
    }
    total = sum(lags.values())
    if total <= max_rows:
        return end
    share = {tp: lag * max_rows // total for tp, lag in lags.items()}
    leftover = max_rows - sum(share.values())
    by_remainder = sorted(lags, key=lambda tp: (-(lags[tp] * max_rows % total), tp[0], int(tp[1])))
    for tp in by_remainder[:leftover]:
        share[tp] += 1
    limited = {t: dict(ps) for t, ps in end.items()}
    for (t, p), n in share.items():
        limited[t][p] = begin[t][p] + n
    return limited


@contextmanager
def _errors(context: str) -> Iterator[None]:
    """Re-raise a broker helper's ``BrokerError`` as a ``KafkaSourceError`` saying what the source was doing."""
    try:
        yield
    except KafkaSourceError:
        raise
    except BrokerError as e:
        raise KafkaSourceError(f"ddkafka: {context}: {e}") from e


# --------------------------------------------------------------------------
# Planner side: one consumer answers offset questions
# --------------------------------------------------------------------------


class _Kafka:
    """Planner-side Kafka access through one lazily created consumer."""

    def __init__(self, opts: _Options) -> None:
        from confluent_kafka import Consumer

        self.opts = opts
        self.consumer = Consumer(opts.consumer_conf())
        self._seen_latest: Offsets = {}  # the end offsets next_end last found (ranges trusts ends up to them)

    def close(self) -> None:
        self.consumer.close()

    def partitions(self) -> dict[str, list[int]]:
        """Partition ids of every subscribed topic."""
        with _errors("looking up partitions"):
            return {
                t: topic_partitions(self.consumer, t, self.opts.bootstrap, self.opts.timeout)
                for t in self.opts.topics
            }

    def earliest(self, topic: str, parts: Sequence[int]) -> dict[str, int]:
        """The first available offset of each of ``parts``."""
        from confluent_kafka import KafkaException, TopicPartition

        out = {}
        for p in parts:
            try:
                lo, _ = self.consumer.get_watermark_offsets(
                    TopicPartition(topic, p), timeout=self.opts.timeout
                )
            except KafkaException as e:
                raise KafkaSourceError(
                    f"ddkafka: cannot read the earliest offset of topic {topic!r} partition {p} "
                    f"on {self.opts.bootstrap}: {e.args[0]}"
                ) from e
            out[str(p)] = lo
        return out

    def latest(self, topic: str, parts: Sequence[int], floor: Optional[Mapping[str, int]] = None) -> dict[str, int]:
        """The end offset of each of ``parts`` (probed: see ``broker.probe_end_offsets``)."""
        with _errors("finding the latest offsets"):
            ends = probe_end_offsets(
                self.consumer, topic, parts, self.opts.bootstrap, self.opts.timeout,
                floor={int(p): o for p, o in (floor or {}).items()},
            )
        return {str(p): o for p, o in ends.items()}

    def latest_all(self, floor: Optional[Offsets] = None) -> Offsets:
        """End offsets of every partition of every subscribed topic, never below ``floor``."""
        floor = floor or {}
        return _canonical({t: self.latest(t, ps, floor.get(t)) for t, ps in self.partitions().items()})

    def resolve(self, spec: str, what: str) -> Offsets:
        """Offsets for an ``earliest``/``latest``/JSON option value."""
        parts = self.partitions()
        earliest = _canonical({t: self.earliest(t, ps) for t, ps in parts.items()})
        latest = _canonical({t: self.latest(t, ps) for t, ps in parts.items()})
        if spec.lower() == "earliest":
            return earliest
        if spec.lower() == "latest":
            return latest
        try:
            given = json.loads(spec)
            if not isinstance(given, dict) or not all(isinstance(v, dict) for v in given.values()):
                raise ValueError("not an object of objects")
            given = {t: {str(int(p)): int(o) for p, o in ps.items()} for t, ps in given.items()}
        except (ValueError, TypeError) as e:
            raise KafkaSourceError(
                f"ddkafka: {what} must be 'earliest', 'latest' or JSON like "
                f'{{"topic": {{"0": 23}}}}, got {spec!r} ({e})'
            ) from None
        extra = sorted(set(given) - set(self.opts.topics))
        if extra:
            raise KafkaSourceError(
                f"ddkafka: {what} names topics not in 'subscribe': {extra}"
            )
        out: Offsets = {}
        for t in self.opts.topics:
            want, have = set(given.get(t, {})), set(latest[t])
            if want != have:
                raise KafkaSourceError(
                    f"ddkafka: {what} must list every partition of topic {t!r}: "
                    f"it has partitions {sorted(have, key=int)}, {what} gives "
                    f"{sorted(want, key=int)}"
                )
            out[t] = {}
            for p, o in given[t].items():
                lo, hi = earliest[t][p], latest[t][p]
                if o == _EARLIEST:
                    o = lo
                elif o == _LATEST:
                    o = hi
                elif not lo <= o <= hi:
                    raise KafkaSourceError(
                        f"ddkafka: {what} offset {o} for topic {t!r} partition {p} is out of "
                        f"range: available offsets are {lo}..{hi} on {self.opts.bootstrap}"
                    )
                out[t][p] = o
        return _canonical(out)

    def next_end(self, start: Offsets, target: Optional[Offsets] = None,
                 max_rows: Optional[int] = None) -> Offsets:
        """Where the micro-batch after ``start`` ends (``latestOffset``).

        The latest offsets, but not past ``target`` (``Trigger.AvailableNow``'s
        snapshot; partitions new since then get nothing) and at most
        ``max_rows`` offsets in all (``maxOffsetsPerTrigger``).  A partition
        that shrank below ``start``, lost offsets ``start`` had not read yet,
        or disappeared, is data loss (:meth:`_data_loss`).
        """
        start = _canonical(start)
        latest = self.latest_all(start)
        self._seen_latest = latest
        begin: Offsets = {}
        end: Offsets = {}
        losses: list[str] = []
        for t in self.opts.topics:
            begin[t], end[t] = {}, {}
            known = start.get(t, {})
            earliest = self.earliest(t, [int(p) for p in latest[t]])
            for p, hi in latest[t].items():
                b = known[p] if p in known else earliest[p]
                b = self._data_loss(losses, t, p, b, earliest[p], hi)
                if target is not None:
                    # availableNow: nothing past the snapshot (new partitions: nothing at all).
                    hi = min(hi, max(target.get(t, {}).get(p, b), b))
                begin[t][p], end[t][p] = b, hi
            gone = sorted(set(known) - set(latest[t]), key=int)
            if gone:
                losses.append(f"topic {t!r} partitions {gone} disappeared (they were read up to "
                              f"{', '.join(str(known[p]) for p in gone)})")
        self._report(losses)
        if max_rows is not None:
            end = _limit(begin, end, max_rows)
        # Keep partitions of `start` that may be missing from this answer.
        merged = {t: {**start.get(t, {}), **end.get(t, {})} for t in set(start) | set(end)}
        return _canonical(merged)

    def _data_loss(self, losses: list[str], topic: str, p: str, begin: int, lo: int, hi: int) -> int:
        """Where partition ``p`` is read from: ``begin``, unless offsets the query still needs are gone.

        Then the loss is noted in ``losses`` and, with ``failOnDataLoss=false``, the partition is read from
        its earliest available offset ``lo`` (``hi`` is its end).
        """
        if hi < begin:
            losses.append(f"topic {topic!r} partition {p} ends at offset {hi} but the query has read up to "
                          f"offset {begin} (the topic was deleted and recreated, or truncated)")
        elif lo > begin:
            losses.append(f"topic {topic!r} partition {p} starts at offset {lo} but the query has read only up to "
                          f"offset {begin}: offsets {begin}..{lo - 1} were deleted before they were read")
        else:
            return begin
        return lo

    def _report(self, losses: list[str]) -> None:
        """Fail naming every loss (``failOnDataLoss=true``, the default), or log it and go on."""
        text = f"ddkafka: data loss on {self.opts.bootstrap}: " + "; ".join(losses)
        if losses and self.opts.fail_on_data_loss:
            raise KafkaSourceError(text + ". Set the option failOnDataLoss=false to go on from the earliest "
                                          "available offsets (the lost records are skipped)")
        if losses:
            _log.warning("%s; failOnDataLoss=false: going on from the earliest available offsets", text)

    def ranges(self, start: Offsets, end: Offsets) -> list[tuple[str, int, int, int]]:
        """The non-empty ``(topic, partition, start, end)`` ranges between two offsets, one per Spark task.

        Offsets that are gone (a batch planned before the topic shrank, replayed after a restart) are data
        loss, as in :meth:`next_end`.
        """
        out = []
        losses: list[str] = []
        seen = self._seen_latest
        for t in sorted(end):
            known = start.get(t, {})
            # Partitions with something to read (a partition gone from the topic kept its start as its end).
            parts = sorted((p for p in end[t] if end[t][p] != known.get(p)), key=int)
            if not parts:
                continue
            earliest = self.earliest(t, [int(p) for p in parts])
            confirmed = all(end[t][p] <= seen.get(t, {}).get(p, -1) for p in parts)  # by next_end's last look
            latest = seen[t] if confirmed else self.latest(t, [int(p) for p in parts])
            for p in parts:
                # A partition that appeared after `start` was taken is read from its beginning.
                s, e = known.get(p, earliest[p]), end[t][p]
                lo, hi = earliest[p], latest[p]
                if e < s:  # planned so by next_end after a loss (failOnDataLoss=false): from the earliest offset
                    s = lo
                reported = len(losses)
                s = self._data_loss(losses, t, p, s, lo, hi)
                if e > hi:
                    if len(losses) == reported:
                        losses.append(f"topic {t!r} partition {p} ends at offset {hi} but the micro-batch reads "
                                      f"up to offset {e} (the topic was deleted and recreated, or truncated)")
                    e = hi
                if e > s:
                    out.append((t, int(p), s, e))
        self._report(losses)
        return out


class _KafkaUser:
    """Lazy, unpicklable Kafka client handling shared by the readers.

    Readers are built on the driver's Python planner and pickled to
    executors: construction must stay cheap and clients must not travel.
    """

    _opts: _Options
    _kafka_client: Optional[_Kafka] = None

    @property
    def _kafka(self) -> _Kafka:
        if self._kafka_client is None:
            self._kafka_client = _Kafka(self._opts)
        return self._kafka_client

    def _close(self) -> None:
        if self._kafka_client is not None:
            self._kafka_client.close()
            self._kafka_client = None

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state.pop("_kafka_client", None)
        return state


# --------------------------------------------------------------------------
# Executor side: read one offset range into Arrow
# --------------------------------------------------------------------------

# Python workers are reused across tasks; keeping idle consumers saves a
# connection (~60 ms) per task. A consumer is checked out while in use.
_idle_lock = threading.Lock()
_idle_consumers: dict[tuple, list] = {}


def _checkout(opts: _Options) -> Any:
    """An idle consumer for these options, or a new one."""
    from confluent_kafka import Consumer

    key = (opts.bootstrap, opts.kafka_conf)
    with _idle_lock:
        idle = _idle_consumers.get(key)
        if idle:
            return idle.pop()
    return Consumer(opts.consumer_conf())


def _checkin(opts: _Options, consumer: Any) -> None:
    """Keep a healthy consumer for the next task in this worker."""
    with _idle_lock:
        _idle_consumers.setdefault((opts.bootstrap, opts.kafka_conf), []).append(consumer)


def _record_batch(
    topic: str, partition: int, keys: list, values: list, offsets: list, kinds: list, ts: list
) -> pa.RecordBatch:
    """Columns of one offset range as a RecordBatch with ARROW_SCHEMA."""
    import pyarrow.compute as pc

    n = len(offsets)
    kind = pa.array(kinds, pa.int32())
    # confluent-kafka kinds 0/1/2 = none/CreateTime/LogAppendTime; Kafka (and
    # Spark) ids are -1/0/1. No timestamp -> null rather than epoch - 1 ms.
    missing = pc.equal(kind, 0)
    ts_us = pc.multiply(pa.array(ts, pa.int64()), 1000)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(keys, pa.binary()),
            pa.array(values, pa.binary()),
            pa.array([topic] * n, pa.string()),
            pa.array([partition] * n, pa.int32()),
            pa.array(offsets, pa.int64()),
            pc.if_else(missing, None, ts_us).cast(pa.timestamp("us", tz="UTC")),
            pc.subtract(kind, 1).cast(pa.int32()),
        ],
        schema=ARROW_SCHEMA,
    )


def _stuck_error(
    consumer: Any, opts: _Options, part: OffsetRange, pos: int
) -> KafkaSourceError:
    """Explain why a read made no progress (runs only once a read has failed)."""
    where = f"topic {part.topic!r} partition {part.partition} on {opts.bootstrap}"
    timeout = min(opts.timeout, 5.0)
    try:
        consumer.unassign()
        topic_partitions(consumer, part.topic, opts.bootstrap, timeout)
        now_end = probe_end_offsets(
            consumer, part.topic, [part.partition], opts.bootstrap, timeout
        )[part.partition]
    except BrokerError as e:  # missing topic or unreachable broker
        return KafkaSourceError(f"ddkafka: reading {where} failed: {e}")
    if now_end < part.end:
        why = (f"the partition ends at offset {now_end}, so offsets up to {part.end} are "
               f"gone (data lost or topic recreated?)")
    else:
        why = "is the broker overloaded or a transaction open?"
    return KafkaSourceError(
        f"ddkafka: no records from {where} for {opts.timeout:.0f}s while reading offsets "
        f"{part.start}..{part.end} (stuck at {pos}); {why}"
    )


def _read_range(opts: _Options, part: OffsetRange) -> Iterator[pa.RecordBatch]:
    """Yield the records at offsets ``[part.start, part.end)`` as Arrow batches.

    Offsets may have gaps (transaction markers), so the range ends at the
    first record at or past ``end`` or at partition EOF past ``end``, not
    after a record count. The per-record loop is the hot path (~1 us/record
    matters at 10^6 records), hence the bound methods.
    """
    from confluent_kafka import KafkaError, TopicPartition

    topic, p, end = part.topic, part.partition, part.end
    where = f"topic {topic!r} partition {p} on {opts.bootstrap}"
    eof = KafkaError._PARTITION_EOF
    consumer = _checkout(opts)
    healthy = False
    try:
        consumer.assign([TopicPartition(topic, p, part.start)])
        keys: list = []
        values: list = []
        offsets: list = []
        kinds: list = []
        stamps: list = []
        add_key, add_value, add_offset = keys.append, values.append, offsets.append
        add_kind, add_stamp = kinds.append, stamps.append
        pos = part.start  # next offset we still need
        last_progress = time.monotonic()
        while pos < end:
            before = pos
            for m in drain_events(consumer, 0.5):
                err = m.error()
                if err is not None:
                    code = err.code()
                    if code == eof:
                        if m.offset() >= end:
                            pos = end
                        continue
                    if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                        raise KafkaSourceError(
                            f"ddkafka: offsets {part.start}..{end} of {where} are out of range "
                            f"(data deleted or topic recreated?): {err}"
                        )
                    if code in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION):
                        raise KafkaSourceError(f"ddkafka: {where} does not exist: {err}")
                    if err.fatal():
                        raise KafkaSourceError(f"ddkafka: reading {where} failed: {err}")
                    continue  # transient (e.g. broker connection); the client retries
                off = m.offset()
                if off >= end:
                    pos = end
                    break
                if off < pos or m.partition() != p:
                    continue  # left over from an earlier assignment of this consumer
                add_key(m.key())
                add_value(m.value())
                add_offset(off)
                kind, ts = m.timestamp()
                add_kind(kind)
                add_stamp(ts)
                pos = off + 1
            now = time.monotonic()
            if pos > before:
                last_progress = now
            elif pos < end and now - last_progress > opts.timeout:
                raise _stuck_error(consumer, opts, part, pos)
            if len(offsets) >= _BATCH_ROWS or (offsets and pos >= end):
                yield _record_batch(topic, p, keys, values, offsets, kinds, stamps)
                for col in (keys, values, offsets, kinds, stamps):
                    col.clear()
        healthy = True
    finally:
        try:
            consumer.unassign()
        except Exception:  # noqa: BLE001 - broken consumer: drop it below
            healthy = False
        if healthy:
            _checkin(opts, consumer)
        else:
            consumer.close()
