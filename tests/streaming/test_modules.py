"""The streaming package's layout promises: what imports PySpark, what errors derive from."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pytest

from ddflow.errors import DdflowError


def _imports_pyspark(module: str) -> bool:
    code = f"import sys, {module}; print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return out.stdout.strip() == "True"


@pytest.mark.parametrize("module", [
    "ddflow.streaming.kafka.client", "ddflow.streaming.kafka", "ddflow.streaming.driver",
    "ddflow.streaming.parse", "ddflow.streaming.sinks", "ddflow.streaming.broker", "ddflow.streaming.spark",
    "ddflow.streaming.admission", "ddflow.streaming.routing",
])
def test_no_pyspark_on_import(module):
    """Only the Spark data source itself (and sessions, lazily) need PySpark."""
    assert not _imports_pyspark(module)


@pytest.mark.parametrize("module", ["ddflow.streaming.admission", "ddflow.streaming.parse"])
def test_the_feed_s_examples_run(module):
    """The one feed's docstring examples (admission, parsing) run, and there are some."""
    import doctest
    import importlib

    import ddflow

    result = doctest.testmod(importlib.import_module(module), extraglobs={"ddflow": ddflow, "pa": pa},
                             optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0, result


def test_errors_are_ddflow_errors_and_runtime_errors():
    from ddflow.streaming.broker import BrokerError
    from ddflow.streaming.kafka.client import KafkaSourceError

    for cls in (BrokerError, KafkaSourceError):
        assert issubclass(cls, DdflowError) and issubclass(cls, RuntimeError)


def test_kafka_package_names_resolve_lazily():
    pytest.importorskip("pyspark")
    import ddflow.streaming.kafka as kafka
    from ddflow.streaming.kafka import client, source

    assert kafka.FORMAT == source.FORMAT == "ddkafka"
    assert kafka.register is source.register
    assert kafka.KafkaSourceError is source.KafkaSourceError is client.KafkaSourceError
    # Spark pickles these to its Python workers by module path.
    assert source.KafkaDataSource.__module__ == "ddflow.streaming.kafka.source"
    assert source.KafkaStreamReader.__module__ == "ddflow.streaming.kafka.source"
    with pytest.raises(AttributeError):
        kafka.no_such_name


def test_dead_letters_keep_the_message_and_its_place():
    from ddflow.streaming.parse import DEAD_LETTER_SCHEMA, InputSpec, dead_letters, parse_input

    table = pa.table({"value": [b'{"a": 1, "t": 2}', b"{oops"], "topic": ["x", "x"],
                      "partition": pa.array([0, 0], pa.int32()), "offset": [7, 8]})
    rows, bad = parse_input(InputSpec("in", ["a"], format="json", time="t"), table)
    assert rows.select(["a", "time", "diff"]).to_pylist() == [{"a": 1, "time": 2, "diff": 1}]
    assert bad.schema == DEAD_LETTER_SCHEMA
    assert bad.select(["input", "topic", "partition", "offset", "value"]).to_pylist() == [
        {"input": "in", "topic": "x", "partition": 0, "offset": 8, "value": b"{oops"}]
    assert bad.column("error")[0].as_py().startswith("unparseable JSON")
    late = dead_letters("in", "late", rows)
    assert late.column("offset").to_pylist() == [7] and late.column("error").to_pylist() == ["late"]


def test_streaming_uses_only_the_engines_public_api():
    """No ``obj._private`` of another object and no ``from ddflow... import _private``: the driver, the router
    and the Spark launcher go through documented engine methods (``Dataflow.ingest``, ``row_functions``,
    ``Capture.kinds``, ...), so the engine may change what is behind them."""
    import ast
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[2] / "streaming"
    foreign = {"KafkaError"}  # confluent_kafka's error codes are public names with a leading underscore
    spark = {"_jsc", "_jvm", "_jsq"}  # PySpark's way to its JVM objects (the context, the gateway, a query)
    found = []
    for path in sorted(root.rglob("*.py")):
        for n in ast.walk(ast.parse(path.read_text())):
            where = f"{path.relative_to(root.parent)}:{getattr(n, 'lineno', 0)}"
            if isinstance(n, ast.Attribute) and n.attr.startswith("_") and not n.attr.startswith("__"):
                base = n.value
                if isinstance(base, ast.Name) and (base.id in ("self", "cls") or base.id in foreign):
                    continue
                if n.attr not in spark:
                    found.append(f"{where}: {ast.unparse(n)}")
            elif isinstance(n, ast.ImportFrom) and (n.module or "").startswith("ddflow") \
                    and not (n.module or "").startswith("ddflow.streaming"):
                found += [f"{where}: from {n.module} import {a.name}" for a in n.names if a.name.startswith("_")]
    assert not found, "private engine names used by ddflow.streaming:\n" + "\n".join(found)
