"""Shared fixtures for streaming tests: one Kafka-compatible broker and one
local Spark session per test run (Spark takes 10+ s to start).

Set ``KAFKA_BOOTSTRAP=host:port`` to run against an external Kafka instead
of the embedded Tansu broker.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable, Iterator

import pytest

from ddflow.streaming.broker import EmbeddedBroker, create_topics


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """``host:port`` of a Kafka-compatible broker for the whole session."""
    external = os.environ.get("KAFKA_BOOTSTRAP")
    if external:
        yield external
        return
    with EmbeddedBroker() as broker:
        yield broker.bootstrap


@pytest.fixture
def new_topic(kafka_bootstrap: str) -> Callable[..., str]:
    """Factory: ``new_topic(partitions=2)`` creates a uniquely named topic."""

    def make(partitions: int = 2, prefix: str = "t") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        create_topics(kafka_bootstrap, [name], partitions=partitions)
        return name

    return make


@pytest.fixture(scope="session")
def spark():
    """A ``local[2]`` SparkSession with the ``ddkafka`` source registered."""
    pytest.importorskip("pyspark")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python workers must run this interpreter (the one with ddflow installed).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from ddflow.streaming.kafka_source import register

    session = (
        SparkSession.builder.master("local[2]")
        .appName("ddflow-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()
