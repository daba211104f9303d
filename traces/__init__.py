"""Log-structured merge tries: the storage of arranged collections.

Installed as ``ddflow.traces``.  Builds only on the base layer
(:mod:`ddflow.base`); knows nothing of the dataflow.
"""
if __name__ != "ddflow.traces":
    # From the repository root, `traces` is importable on its own: a second copy of every class here (a Batch
    # that is not a ddflow.traces Batch).
    raise ImportError(f"import ddflow.traces, not {__name__} (traces/ installs as ddflow.traces)")

from .batch import Batch, Description
from .spine import Spine
from .trace import Trace, TraceHandle, TraceView, seek

__all__ = ["Batch", "Description", "Spine", "Trace", "TraceHandle", "TraceView", "seek"]
