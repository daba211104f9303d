"""ddflow: differential-dataflow-style incremental computation in Python.

Layers import only downward: the base (``lattice``, ``updates``,
``interner``) < ``ddflow.traces`` < the dataflow (this package) <
``ddflow.streaming``.
"""
from ddflow.lattice import Antichain, MutableAntichain, advance_by
from ddflow.errors import DataflowError, FrontierError, NonConvergence
from ddflow.collection import Collection, Variable
from ddflow.arrange import Arrangement
from ddflow.capture import Capture, Probe
from ddflow.dataflow import Dataflow, InputHandle

__all__ = [
    "Antichain", "Arrangement", "Capture", "Collection", "DataflowError", "Dataflow", "FrontierError",
    "InputHandle", "MutableAntichain", "NonConvergence", "Probe", "Variable", "advance_by",
]
