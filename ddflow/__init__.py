"""ddflow: differential-dataflow-style incremental computation in Python.

The layers are folders, and imports point only down::

    ddflow.base        lattice times and antichains, column kinds, the interner,
                       columnar updates, consolidation            (numpy, pyarrow)
    ddflow.traces      log-structured merge tries: batches, spine, traces
    ddflow.graph       build context, operator nodes, scopes, the one scheduler
    ddflow.operators   stateless, iterate, arrange, join, reduce, capture
    ddflow.workers     exchange, transport, collectives, worker runtime and pool
    ddflow.collection, ddflow.dataflow    the engine's API: collections, operators, inputs, running
    ddflow.plan        the relational plan IR, its rewrites, its lowering to operators
    ddflow.sql         the SQL front end (parse -> plan -> rewrite -> lower, in ddflow.sql.frontend)
    ddflow.facade      the user's Dataflow: the engine's, plus sql and explain
    ddflow.streaming   Spark Structured Streaming, Kafka, sinks, state

Inside functions too: the engine never imports a front end, and none of
ddflow imports ddflow.streaming (it registers its Spark launcher itself).

This root loads nothing until a name is used (PEP 562), so
``import ddflow.traces`` never loads the engine and ``import ddflow``
never loads Spark or Kafka.

>>> import ddflow
>>> flow = ddflow.Dataflow()
>>> edges_in, edges = flow.new_collection("edges")
>>> out = edges.project(0).count().capture()
>>> edges_in.update([(1, 2), (1, 3)], times=0)
>>> flow.advance_to(1); flow.run()
>>> out.drain()
[((1, 2), 0, 1)]
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "Antichain": "ddflow.base.lattice",
    "MutableAntichain": "ddflow.base.lattice",
    "advance_by": "ddflow.base.lattice",
    "Updates": "ddflow.base.updates",
    "Interner": "ddflow.base.interner",
    "IterativeScope": "ddflow.graph.scope",
    "DdflowError": "ddflow.errors",
    "DataflowError": "ddflow.errors",
    "FrontierError": "ddflow.errors",
    "NonConvergence": "ddflow.errors",
    "WorkerLost": "ddflow.errors",
    "SchemaError": "ddflow.errors",
    "UsageError": "ddflow.errors",
    "Collection": "ddflow.collection",
    "Variable": "ddflow.collection",
    "Arrangement": "ddflow.operators.arrange",
    "Capture": "ddflow.operators.capture",
    "Probe": "ddflow.operators.capture",
    "Dataflow": "ddflow.facade",
    "InputHandle": "ddflow.dataflow",
    "Ingest": "ddflow.workers.ingest",
    "RowFunction": "ddflow.dataflow",
}

__all__ = sorted(_EXPORTS) + ["__version__"]

if TYPE_CHECKING:
    from ddflow.base.interner import Interner
    from ddflow.base.lattice import Antichain, MutableAntichain, advance_by
    from ddflow.base.updates import Updates
    from ddflow.collection import Collection, Variable
    from ddflow.dataflow import InputHandle, RowFunction
    from ddflow.errors import (DataflowError, DdflowError, FrontierError, NonConvergence, SchemaError, UsageError,
                               WorkerLost)
    from ddflow.facade import Dataflow
    from ddflow.graph.scope import IterativeScope
    from ddflow.operators.arrange import Arrangement
    from ddflow.operators.capture import Capture, Probe
    from ddflow.workers.ingest import Ingest


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ddflow' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
