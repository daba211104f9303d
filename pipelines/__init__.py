"""ddflow.pipelines: incremental views in scheduled pipelines: lakehouse tables in, exactly-once tables out.

Declare tables (sources), views (Spark SQL) and sinks once, then refresh::

    from ddflow.pipelines import Pipeline, delta, delta_table, delta_changelog

    p = Pipeline("/lake/_state/revenue")
    p.table("orders", delta("/lake/orders"))
    p.table("customer", delta("/lake/customer"))
    p.view("revenue", "SELECT c_nation, SUM(o_total) AS total FROM orders JOIN customer ON o_cust = c_id "
                      "GROUP BY c_nation", key="c_nation")
    p.sink("revenue", delta_table("/lake/revenue"))
    p.sink("revenue", delta_changelog("/lake/revenue_changes"))
    report = p.refresh()         # reads only the commits since the last run; every sink once

or from a scheduler: ``python -m ddflow.pipelines run pipeline.py`` (exit
status 0 when done).  Sources: :func:`delta`, :func:`iceberg`,
:func:`parquet`, :func:`changelog`; sinks: :func:`delta_table`,
:func:`delta_changelog`, :func:`iceberg_table`, :func:`iceberg_changelog`,
:func:`parquet_changelog`.  Spark Declarative Pipelines:
:mod:`ddflow.pipelines.sdp`.

Nothing here loads Spark, deltalake or pyiceberg until a source or sink
of that kind is used; ``import ddflow`` never loads this package.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Callable, Mapping

_EXPORTS = {
    "Pipeline": "ddflow.pipelines.pipeline",
    "PipelineError": "ddflow.pipelines.pipeline",
    "RunReport": "ddflow.pipelines.pipeline",
    "SourceError": "ddflow.pipelines.source",
    "Source": "ddflow.pipelines.source",
    "Sink": "ddflow.pipelines.sink",
}

__all__ = sorted(_EXPORTS) + ["changelog", "delta", "delta_changelog", "delta_table", "iceberg", "iceberg_changelog",
                              "iceberg_table", "parquet", "parquet_changelog"]

if TYPE_CHECKING:
    from ddflow.pipelines.pipeline import Pipeline, PipelineError, RunReport
    from ddflow.pipelines.sink import Sink
    from ddflow.pipelines.source import Source, SourceError


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'ddflow.pipelines' has no attribute {name!r}")


def delta(path: str, columns: list[str] | None = None, cdf: bool | str = "auto",
          storage_options: dict[str, str] | None = None):
    """A Delta table as a source: each version is a commit (its change data feed where it is on, otherwise its
    files' differences).  See :class:`ddflow.pipelines.delta_tables.DeltaSource`.

    >>> delta("/lake/orders").where()
    'Delta table /lake/orders'
    """
    from ddflow.pipelines.delta_tables import DeltaSource
    return DeltaSource(path, columns, cdf, storage_options)


def iceberg(identifier: str, catalog: Any, columns: list[str] | None = None):
    """An Iceberg table of ``catalog`` (a pyiceberg catalog, or a dict of its properties) as a source: each
    snapshot is a commit.  See :class:`ddflow.pipelines.iceberg_tables.IcebergSource`."""
    from ddflow.pipelines.iceberg_tables import IcebergSource
    return IcebergSource(identifier, catalog, columns)


def parquet(path: str, columns: list[str] | None = None, replace_on_change: bool = False):
    """A directory of Parquet files as a source: each new file is a commit of inserts.  See
    :class:`ddflow.pipelines.parquet_files.ParquetSource`."""
    from ddflow.pipelines.parquet_files import ParquetSource
    return ParquetSource(path, columns, replace_on_change)


def changelog(read: Callable[[int | None], Any], columns: Mapping[str, str], format: str = "spark",
              position: str | None = None, value: str = "value", name: str | None = None):
    """Changelog rows (Spark's ``_change_type``/``_commit_version``, or Debezium envelopes) returned by
    ``read(since)``.  See :class:`ddflow.pipelines.changelog_source.ChangelogSource`."""
    from ddflow.pipelines.changelog_source import ChangelogSource
    return ChangelogSource(read, columns, format, position, value, name)


def delta_table(path: str, partition_by: list[str] | None = None, storage_options: dict[str, str] | None = None):
    """A Delta table of the view's current rows, one MERGE per run.  See
    :class:`ddflow.pipelines.delta_tables.DeltaTableSink`."""
    from ddflow.pipelines.delta_tables import DeltaTableSink
    return DeltaTableSink(path, partition_by, storage_options)


def delta_changelog(path: str, partition_by: list[str] | None = None, storage_options: dict[str, str] | None = None):
    """A Delta table of the view's changes in Spark's changelog shape.  See
    :class:`ddflow.pipelines.delta_tables.DeltaChangelogSink`."""
    from ddflow.pipelines.delta_tables import DeltaChangelogSink
    return DeltaChangelogSink(path, partition_by, storage_options)


def iceberg_table(identifier: str, catalog: Any):
    """An Iceberg table of the view's current rows.  See :class:`ddflow.pipelines.iceberg_tables.IcebergTableSink`."""
    from ddflow.pipelines.iceberg_tables import IcebergTableSink
    return IcebergTableSink(identifier, catalog)


def iceberg_changelog(identifier: str, catalog: Any):
    """An Iceberg table of the view's changes.  See :class:`ddflow.pipelines.iceberg_tables.IcebergChangelogSink`."""
    from ddflow.pipelines.iceberg_tables import IcebergChangelogSink
    return IcebergChangelogSink(identifier, catalog)


def parquet_changelog(path: str):
    """A directory of the view's changes, one Parquet file per run.  See
    :class:`ddflow.pipelines.parquet_files.ParquetChangelogSink`."""
    from ddflow.pipelines.parquet_files import ParquetChangelogSink
    return ParquetChangelogSink(path)
