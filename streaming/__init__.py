"""The outside world: Spark Structured Streaming, Kafka, sinks, checkpoints.

Installed as ``ddflow.streaming``; the ddflow engine never imports it.
One role per module:

* :mod:`~ddflow.streaming.driver` -- ``StreamingDataflow``: a dataflow fed by
  a Spark streaming query through ``foreachBatch`` (the builder and the
  per-micro-batch plumbing).
* :mod:`~ddflow.streaming.parse` -- micro-batch rows (JSON values or
  DataFrame columns) to input updates, and dead letters for what does not fit.
* :mod:`~ddflow.streaming.state` -- the input log that makes restarts
  exactly-once.
* :mod:`~ddflow.streaming.sinks` -- where output changes and dead letters go
  (memory, Parquet, JSON lines, Kafka).
* :mod:`~ddflow.streaming.kafka` -- the ``ddkafka`` Spark source:
  ``kafka.client`` (confluent-kafka, no PySpark) and ``kafka.source`` (the
  PySpark Python Data Source).
* :mod:`~ddflow.streaming.broker` -- an embedded Kafka-compatible broker for
  tests and the demo, and small plain-Kafka helpers.
* :mod:`~ddflow.streaming.spark` -- a local ``SparkSession`` with ``ddkafka``
  registered.
* :mod:`~ddflow.streaming.demo` -- the end-to-end job
  (``python -m ddflow.streaming.demo``).

PySpark is imported only by ``kafka.source`` and, lazily, by ``spark``.
"""
