"""The ``ddkafka`` Spark source: Kafka topics as a Spark stream without the Maven connector jar.

* :mod:`~ddflow.streaming.kafka.client` -- options, offsets and reading
  offset ranges into Arrow with ``confluent-kafka``; no PySpark.
* :mod:`~ddflow.streaming.kafka.source` -- the PySpark Python Data Source
  (``register``, ``FORMAT``, the data source and its readers).

Importing this package imports neither PySpark nor the client; the names
of ``source`` below load it (and PySpark) on first use::

    from ddflow.streaming.kafka import FORMAT, register
"""
from __future__ import annotations

import importlib
from typing import Any

_SOURCE_NAMES = ("FORMAT", "SCHEMA", "register", "KafkaDataSource", "KafkaStreamReader",
                 "KafkaBatchReader", "KafkaInputPartition")
_CLIENT_NAMES = ("ARROW_SCHEMA", "KafkaSourceError")

__all__ = [*_SOURCE_NAMES, *_CLIENT_NAMES]


def __getattr__(name: str) -> Any:
    """Load ``source`` (PySpark) or ``client`` only when one of their names is asked for."""
    if name in _SOURCE_NAMES:
        return getattr(importlib.import_module(f"{__name__}.source"), name)
    if name in _CLIENT_NAMES:
        return getattr(importlib.import_module(f"{__name__}.client"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
