"""Log-structured merge tries: the storage of arranged collections.

Installed as ``ddflow.traces``.  Builds only on the base layer
(``ddflow.lattice``, ``ddflow.updates``); knows nothing of the dataflow.
"""
from .batch import Batch, Description, ranges
from .spine import Spine
from .trace import Cursor, Trace, TraceHandle, seek

__all__ = ["Batch", "Cursor", "Description", "Spine", "Trace", "TraceHandle", "ranges", "seek"]
