"""Spark Python Data Source ``ddkafka``: Kafka topics as a Spark stream.

Spark's built-in ``kafka`` format needs a connector jar from Maven, which is
not always reachable. This source gives the same rows (Spark's Kafka source
schema) and the main options of that format, reading with ``confluent-kafka``:

    register(spark)
    (spark.readStream.format(FORMAT)
        .option("kafka.bootstrap.servers", "127.0.0.1:9092")
        .option("subscribe", "orders,customers")
        .option("startingOffsets", "earliest")   # | "latest" | '{"orders":{"0":12}}'
        .option("maxOffsetsPerTrigger", 10000)
        .load())

Stream offsets are Kafka partition offsets, ``{"topic": {"0": 12, "1": 7}}``
(the next offset to read per partition, string keys, as in Spark's Kafka
source), so Spark's offset log and checkpoint give exactly-once reads across
restarts. One Spark input partition reads one topic-partition offset range
and yields Arrow record batches.

Options (case-insensitive):

``kafka.bootstrap.servers`` (required), ``subscribe`` (required,
comma-separated topics), ``startingOffsets`` (streaming default ``latest``,
batch default ``earliest``; in JSON, -2 means earliest and -1 latest, and
every partition of every subscribed topic must be listed), ``endingOffsets``
(batch reads only, default ``latest``), ``maxOffsetsPerTrigger``,
``kafkaConsumer.pollTimeoutMs`` (how long a read or offset lookup may make
no progress before failing, default 30000), ``failOnDataLoss``, and any
other ``kafka.<name>``, passed to librdkafka as ``<name>`` (e.g.
``kafka.isolation.level``).

Data loss, as in Spark's source: a partition that now ends before the
offset the query has read to (the topic was deleted and recreated, or
truncated), one whose earliest offset is past it (records deleted before
they were read), a micro-batch replayed after a restart whose offsets are
gone, or a partition that disappeared.  With ``failOnDataLoss=true`` (the
default) the query fails at once with a ``KafkaSourceError`` naming every
such topic, partition and offset; with ``false`` a warning names them
(logger ``ddflow.streaming.kafka``, in Spark's Python planner's log) and
the partition is read on from its earliest available offset.

Differences from Spark's source: ``assign``/``subscribePattern`` and
``includeHeaders`` are not supported; a loss found by an executor while it
reads (records deleted between planning and reading) fails the task even
with ``failOnDataLoss=false``; a record without a timestamp gets a null
``timestamp`` and ``timestampType`` -1. The default isolation level is librdkafka's
``read_committed`` (Tansu honours open transactions but still delivers
aborted records, see ``broker``).

This module holds only the Spark-facing classes; the Kafka work is in
:mod:`ddflow.streaming.kafka.client`.  Spark pickles the data source and
its readers to Python workers by module path, so these classes must stay
importable as ``ddflow.streaming.kafka.source``.  Importing this module
imports PySpark; ``ddflow`` itself never imports it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Optional

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ddflow.streaming.kafka.client import (
    ARROW_SCHEMA,
    KafkaSourceError,
    Offsets,
    _canonical,
    _Kafka,
    _KafkaUser,
    _Options,
    _read_range,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "FORMAT",
    "SCHEMA",
    "ARROW_SCHEMA",
    "KafkaSourceError",
    "KafkaDataSource",
    "KafkaStreamReader",
    "KafkaBatchReader",
    "KafkaInputPartition",
    "register",
]

#: The name to pass to ``spark.readStream.format``.
FORMAT = "ddkafka"

#: Spark's Kafka source schema (all columns nullable, as in Spark).
SCHEMA = StructType([
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
])


def register(spark: "SparkSession") -> None:
    """Register the ``ddkafka`` format with ``spark`` (idempotent)."""
    spark.dataSource.register(KafkaDataSource)


class KafkaInputPartition(InputPartition):
    """One Spark task: offsets ``[start, end)`` of one topic-partition."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end

    def __repr__(self) -> str:
        return f"KafkaInputPartition({self.topic}[{self.partition}] {self.start}..{self.end})"


class KafkaDataSource(DataSource):
    """The ``ddkafka`` format: Spark's Kafka source rows from confluent-kafka."""

    @classmethod
    def name(cls) -> str:
        """The format name, ``ddkafka``."""
        return FORMAT

    def schema(self) -> StructType:
        """Spark's Kafka source schema; the only one this source gives."""
        return SCHEMA

    def _check_schema(self, schema: StructType) -> None:
        if schema.simpleString() != SCHEMA.simpleString():
            raise KafkaSourceError(
                f"ddkafka has a fixed schema {SCHEMA.simpleString()}, got {schema.simpleString()}"
            )

    def streamReader(self, schema: StructType) -> "KafkaStreamReader":
        """The micro-batch reader for ``spark.readStream``; options are checked here, on the driver."""
        self._check_schema(schema)
        return KafkaStreamReader(_Options.parse(self.options, streaming=True))

    def reader(self, schema: StructType) -> "KafkaBatchReader":
        """The bounded reader for ``spark.read``."""
        self._check_schema(schema)
        return KafkaBatchReader(_Options.parse(self.options, streaming=False))


def _partitions(kafka: _Kafka, start: Offsets, end: Offsets) -> list[KafkaInputPartition]:
    """One Spark input partition per non-empty topic-partition range."""
    return [KafkaInputPartition(*r) for r in kafka.ranges(start, end)]


class KafkaStreamReader(_KafkaUser, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader; offsets per topic-partition, admission control by
    ``maxOffsetsPerTrigger``, and ``Trigger.AvailableNow`` support."""

    def __init__(self, opts: _Options) -> None:
        self._opts = opts
        self._target: Optional[Offsets] = None

    def initialOffset(self) -> dict:
        """Where a query without a checkpoint starts: ``startingOffsets`` resolved."""
        return self._kafka.resolve(self._opts.starting, "startingOffsets")

    def getDefaultReadLimit(self) -> ReadLimit:
        """``maxOffsetsPerTrigger`` as Spark's read limit, else everything available."""
        if self._opts.max_offsets is not None:
            return ReadMaxRows(self._opts.max_offsets)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Freeze "now": an ``availableNow`` query stops at these offsets whatever arrives later."""
        self._target = self._kafka.latest_all()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """The end of the next micro-batch after ``start`` (see ``_Kafka.next_end``)."""
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return self._kafka.next_end(start, self._target, max_rows)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        """One input partition per topic-partition with offsets in ``[start, end)``."""
        start, end = _canonical(start), _canonical(end)
        if start == end:
            return []
        return _partitions(self._kafka, start, end)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """On an executor: the partition's records as Arrow batches of ``ARROW_SCHEMA``."""
        assert isinstance(partition, KafkaInputPartition)
        return _read_range(self._opts, partition)

    def commit(self, end: dict) -> None:
        """Nothing: Spark's checkpoint holds the offsets, Kafka gets no commits."""

    def stop(self) -> None:
        """Close the planner's consumer."""
        self._close()


class KafkaBatchReader(_KafkaUser, DataSourceReader):
    """``spark.read.format("ddkafka")``: one bounded offset range per partition."""

    def __init__(self, opts: _Options) -> None:
        self._opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        """One input partition per topic-partition between ``startingOffsets`` and ``endingOffsets``."""
        try:
            start = self._kafka.resolve(self._opts.starting, "startingOffsets")
            end = self._kafka.resolve(self._opts.ending, "endingOffsets")
            return _partitions(self._kafka, start, end)
        finally:
            self._close()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """On an executor: the partition's records as Arrow batches of ``ARROW_SCHEMA``."""
        assert isinstance(partition, KafkaInputPartition)
        return _read_range(self._opts, partition)
