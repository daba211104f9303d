"""The reduce family: the algebra (``logic``), the tactics that retire times, and the node.

``general`` is the reference tactic (any logic, any depth); ``total``
(depth 1) and ``iterate`` (loop times) are vectorized tactics for scalar
logics (``chain`` holds the loop's compiled chain walk), ``walk`` a
compiled one for min, max and top_k; each is property-tested against the
reference.
"""
from ddflow.operators.reduce.logic import (
    CountLogic,
    DistinctLogic,
    ExtremeLogic,
    Logic,
    SumLogic,
    ThresholdLogic,
    UserLogic,
)
from ddflow.operators.reduce.node import TACTICS, ReduceNode, choose_tactic
from ddflow.operators.reduce.tactic import ReduceTactic

__all__ = ["CountLogic", "DistinctLogic", "ExtremeLogic", "Logic", "ReduceNode", "ReduceTactic", "SumLogic", "TACTICS",
           "ThresholdLogic", "UserLogic", "choose_tactic"]
