"""Log-structured merge tries: the storage of arranged collections.

Installed as ``ddflow.traces``.  Builds only on the base layer
(:mod:`ddflow.base`); knows nothing of the dataflow.
"""
from .batch import Batch, Description
from .spine import Spine
from .trace import Trace, TraceHandle, TraceView, seek

__all__ = ["Batch", "Description", "Spine", "Trace", "TraceHandle", "TraceView", "seek"]
