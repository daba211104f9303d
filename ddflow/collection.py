"""Collections: the user's handle on a changing multiset, and its operators.

Operator names follow differential dataflow.  Records are tuples; keyed
operators use the first field as the key and the rest as the value.
Collections from an enclosing scope may be used inside a loop body
directly: they are entered into the loop automatically.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

from ddflow.arrange import Arrangement, ArrangeNode
from ddflow.capture import Capture, CaptureNode, Probe
from ddflow.errors import DataflowError
from ddflow.exchange import ExchangeNode
from ddflow.join import JoinNode
from ddflow.node import IterativeScope, Node, Scope
from ddflow.reduce import (CountLogic, DistinctLogic, ExtremeLogic, Logic, ReduceNode, SumLogic, ThresholdLogic,
                           UserLogic)
from ddflow.stateless import (ColumnsNode, ConcatNode, ConsolidateNode, EnterNode, InspectNode, LeaveNode,
                              NegateNode, RowNode, VariableNode)

if TYPE_CHECKING:
    from ddflow.dataflow import Dataflow

Keyed = "Collection | Arrangement"


class Collection:
    """A multiset of records changing over time, produced by one operator."""

    def __init__(self, node: Node):
        self.node = node
        self.scope: Scope = node.scope
        self.flow: Dataflow = node.flow
        self._arranged: Arrangement | None = None
        self._entered: dict[int, Collection] = {}

    @property
    def name(self) -> str:
        return self.node.name

    def __repr__(self) -> str:
        return f"<Collection {self.name} depth={self.scope.depth}>"

    def _derive(self, node: Node, *inputs: "Collection") -> "Collection":
        for port, c in enumerate(inputs or (self,)):
            c.node.connect(node, port)
        return Collection(node)

    def _name(self, op: str, name: str | None) -> str:
        return name or self.flow._fresh(f"{op}({self.name})")

    # -- scopes -----------------------------------------------------------------
    def enter(self, scope: IterativeScope) -> "Collection":
        """This collection inside a (nested) loop scope, at iteration 0."""
        if scope is self.scope:
            return self
        if not scope.is_within(self.scope):
            raise DataflowError(f"collection {self.name!r} cannot enter loop {scope.name!r}: it is not nested in its scope")
        outer = self.enter(scope.parent) if scope.parent is not self.scope else self
        cached = outer._entered.get(id(scope))
        if cached is None:
            cached = outer._derive(EnterNode(scope, f"enter({outer.name}->{scope.name})"))
            outer._entered[id(scope)] = cached
        return cached

    def leave(self) -> "Collection":
        """This loop collection in the enclosing scope; all iterations' diffs add up to the fixed point."""
        if not isinstance(self.scope, IterativeScope):
            raise DataflowError(f"collection {self.name!r} is not inside a loop; nothing to leave")
        return self._derive(LeaveNode(self.scope.parent, f"leave({self.name})"))

    def _align(self, other: "Collection") -> tuple["Collection", "Collection"]:
        """Bring two collections into the same (innermost) scope."""
        if other.flow is not self.flow:
            raise DataflowError(f"collections {self.name!r} and {other.name!r} belong to different dataflows")
        if self.scope is other.scope:
            return self, other
        if self.scope.is_within(other.scope):
            return self, other.enter(self.scope)
        if other.scope.is_within(self.scope):
            return self.enter(other.scope), other
        raise DataflowError(f"collections {self.name!r} and {other.name!r} are in unrelated loops")

    # -- row transforms ------------------------------------------------------------
    def map(self, fn: Callable[[tuple], tuple], name: str | None = None) -> "Collection":
        """Row-at-a-time; see ``map_columns`` and ``project`` for the vectorized forms."""
        return self._derive(RowNode(self.scope, self._name("map", name), fn, "map"))

    def flat_map(self, fn: Callable[[tuple], Any], name: str | None = None) -> "Collection":
        return self._derive(RowNode(self.scope, self._name("flat_map", name), fn, "flat_map"))

    def filter(self, fn: Callable[[tuple], bool], name: str | None = None) -> "Collection":
        return self._derive(RowNode(self.scope, self._name("filter", name), fn, "filter"))

    def project(self, *fields: int, name: str | None = None) -> "Collection":
        """Keep and reorder fields by position, without any Python per record."""
        return self._derive(ColumnsNode(self.scope, self._name("project", name), "project", indices=fields))

    def map_columns(self, fn: Callable[..., Any], name: str | None = None) -> "Collection":
        """``fn(*columns) -> column or tuple of columns``: numpy arrays in, numpy arrays out."""
        return self._derive(ColumnsNode(self.scope, self._name("map_columns", name), "map", fn=fn))

    def filter_columns(self, fn: Callable[..., Any], name: str | None = None) -> "Collection":
        """``fn(*columns) -> bool mask``."""
        return self._derive(ColumnsNode(self.scope, self._name("filter_columns", name), "filter", fn=fn))

    def negate(self, name: str | None = None) -> "Collection":
        return self._derive(NegateNode(self.scope, self._name("negate", name)))

    def concat(self, *others: "Collection", name: str | None = None) -> "Collection":
        colls = [self]
        for o in others:
            a, b = colls[0]._align(o)
            colls = [c.enter(a.scope) if c.scope is not a.scope else c for c in colls] + [b]
        node = ConcatNode(colls[0].scope, name or self.flow._fresh("concat"), n_inputs=len(colls))
        return colls[0]._derive(node, *colls)

    def consolidate(self, name: str | None = None) -> "Collection":
        return self._derive(ConsolidateNode(self.scope, self._name("consolidate", name)))

    def inspect(self, fn: Callable[[tuple], None], name: str | None = None) -> "Collection":
        """Calls ``fn((row, time, diff))`` for each update passing through."""
        return self._derive(InspectNode(self.scope, self._name("inspect", name), fn, batch=False))

    def inspect_batch(self, fn: Callable[[Any], None], name: str | None = None) -> "Collection":
        """Calls ``fn(arrow_table)`` for each batch passing through."""
        return self._derive(InspectNode(self.scope, self._name("inspect", name), fn, batch=True))

    # -- arrangements and joins --------------------------------------------------------------
    def arrange(self, name: str | None = None) -> Arrangement:
        """Index by key in a trace that several joins and reduces can share."""
        if self._arranged is None:
            source = self.node
            if self.flow.workers > 1:
                # All updates of a key meet on its worker before they are indexed.
                source = ExchangeNode(self.scope, self._name("exchange", None), self.flow.workers)
                self.node.connect(source)
            node = ArrangeNode(self.scope, self._name("arrange", name))
            source.connect(node)
            self._arranged = Arrangement(self, node)
        return self._arranged

    def join(self, other: Keyed, name: str | None = None) -> "Collection":
        """``(key, *left_vals, *right_vals)`` for every pair of records with equal keys."""
        return self._join_arranged(self.arrange(), other, name=name)

    def _join_arranged(self, left: Arrangement, other: Keyed, name: str | None = None) -> "Collection":
        if isinstance(other, Arrangement):
            other_coll = other.collection
        elif isinstance(other, Collection):
            other_coll = other
        else:
            raise TypeError(f"join {self.name!r}: expected a Collection or Arrangement, got {type(other).__name__}")
        a, b = left.collection._align(other_coll)
        la = left if left.scope is a.scope else a.arrange()
        rb = other if isinstance(other, Arrangement) and other.scope is a.scope else b.arrange()
        node = JoinNode(a.scope, name or self.flow._fresh(f"join({a.name},{b.name})"), la.node, rb.node)
        return Collection(node)

    def semijoin(self, keys: Keyed, name: str | None = None) -> "Collection":
        """Records whose key is in ``keys``; multiplicities multiply."""
        return self.join(self._keys_of(keys), name=name or self.flow._fresh(f"semijoin({self.name})"))

    def antijoin(self, keys: Keyed, name: str | None = None) -> "Collection":
        """Records whose key is not in ``keys``: ``self - self.semijoin(keys)``."""
        return self.concat(self.semijoin(keys).negate(), name=name or self.flow._fresh(f"antijoin({self.name})"))

    def _keys_of(self, keys: Keyed) -> "Collection":
        coll = keys.collection if isinstance(keys, Arrangement) else keys
        return coll.project(0)

    # -- reductions ------------------------------------------------------------------
    def reduce(self, fn: Callable[[Any, list[tuple[tuple, int]]], list[tuple[tuple, int]]],
               name: str | None = None) -> "Collection":
        """``fn(key, [(val, mult)]) -> [(out_val, mult)]`` gives records ``(key, *out_val)``."""
        return self._reduce_arranged(self.arrange(), UserLogic(fn), name=name)

    def _reduce_arranged(self, arr: Arrangement, logic: Any, name: str | None = None) -> "Collection":
        if not isinstance(logic, Logic):
            logic = UserLogic(logic)
        if arr.scope is not self.scope:
            arr = self.arrange()
        node = ReduceNode(self.scope, name or self.flow._fresh(f"{logic.name}({self.name})"), arr.node, logic)
        return Collection(node)

    def count(self, name: str | None = None) -> "Collection":
        """``(*row, count)`` for each distinct row."""
        return self._reduce_arranged(self.arrange(), CountLogic(), name)

    def distinct(self, name: str | None = None) -> "Collection":
        return self._reduce_arranged(self.arrange(), DistinctLogic(), name)

    def threshold(self, fn: Callable[[int], int], name: str | None = None) -> "Collection":
        """Each distinct row with multiplicity ``fn(count)``."""
        return self._reduce_arranged(self.arrange(), ThresholdLogic(fn), name)

    def sum(self, name: str | None = None) -> "Collection":
        """``(key, sum of the first value field)`` per key."""
        return self._reduce_arranged(self.arrange(), SumLogic(), name)

    def min(self, name: str | None = None) -> "Collection":
        """``(key, *smallest value)`` per key."""
        return self._reduce_arranged(self.arrange(), ExtremeLogic("min"), name)

    def max(self, name: str | None = None) -> "Collection":
        return self._reduce_arranged(self.arrange(), ExtremeLogic("max"), name)

    def top_k(self, k: int, name: str | None = None) -> "Collection":
        """The ``k`` smallest values per key (with multiplicity), as ``(key, *value)``."""
        if k < 1:
            raise ValueError(f"top_k needs k >= 1, got {k}")
        return self._reduce_arranged(self.arrange(), ExtremeLogic("top_k", k), name)

    # -- iteration ------------------------------------------------------------------
    def iterate(self, fn: Callable[["Variable"], "Collection"], name: str | None = None,
                max_iterations: int | None = None) -> "Collection":
        """The fixed point of ``fn`` starting from this collection."""
        scope = IterativeScope(self.scope, name or self.flow._fresh("iterate"), max_iterations)
        var = Variable(scope, self)
        result = fn(var)
        if not isinstance(result, Collection):
            raise TypeError(f"loop {scope.name!r}: the body must return a Collection, got {type(result).__name__}")
        var.set(result)
        return var.result.leave()

    # -- outputs ------------------------------------------------------------------
    def capture(self, name: str | None = None) -> Capture:
        if self.scope.depth != 1:
            raise DataflowError(f"capture {self.name!r}: call leave() to bring the collection out of its loop first")
        node = CaptureNode(self.scope, self._name("capture", name))
        self.node.connect(node)
        return Capture(node)

    def subscribe(self, fn: Callable[[Any], None], name: str | None = None) -> Capture:
        """Calls ``fn(arrow_table)`` with each batch of output changes as it is produced."""
        flow = self.flow
        node = CaptureNode(self.scope, self._name("subscribe", name), lambda u: fn(u.to_arrow(flow.interner)))
        self.node.connect(node)
        return Capture(node)

    def probe(self) -> Probe:
        return Probe(self.flow)


class Variable(Collection):
    """A loop variable: starts as ``initial`` and becomes what ``set`` gives it, one iteration later.

    Several variables in one scope express mutual recursion::

        scope = flow.iterative("mutual")
        a, b = Variable(scope, init_a), Variable(scope, init_b)
        a.set(b.map(...).concat(init_a).distinct())
        b.set(a.map(...).distinct())
        result_a = a.result.leave()
    """

    def __init__(self, scope: IterativeScope, initial: Collection, name: str | None = None):
        node = VariableNode(scope, name or scope.flow._fresh(f"variable({scope.name})"))
        super().__init__(node)
        entered = initial.enter(scope) if initial.scope is not scope else initial
        entered.node.connect(node, 0)
        self.result: Collection | None = None
        scope.variables.append(node)

    def set(self, result: Collection) -> Collection:
        if self.node.feedback_source is not None:
            raise DataflowError(f"variable {self.name!r} was already set")
        if result.scope is not self.scope:
            result = result.enter(self.scope)
        result.node.connect(self.node, 1)
        self.node.feedback_source = result.node
        self.result = result
        return result
