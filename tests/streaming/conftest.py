"""Shared fixtures for streaming tests: one Kafka-compatible broker and one
local Spark session per test run (Spark takes 10+ s to start).

Set ``KAFKA_BOOTSTRAP=host:port`` to run against an external Kafka instead
of the embedded Tansu broker.
"""

from __future__ import annotations

import os
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
    """The session's Spark: ``local-cluster[2,1,1024]`` (two executor JVMs; ``DDFLOW_TEST_MASTER``), ddkafka registered."""
    pytest.importorskip("pyspark")
    from ddflow.streaming.spark import local_session

    session = local_session("ddflow-tests", os.environ.get("DDFLOW_TEST_MASTER", "local-cluster[2,1,1024]"))
    yield session
    session.stop()
