"""Collections: the user's handle on a changing multiset, and its operators.

Operator names follow differential dataflow.  Records are tuples; keyed
operators use the first field as the key and the rest as the value.
Collections from an enclosing scope may be used inside a loop body
directly: they are entered into the loop automatically.

Every operator is built before the first ``run()`` and then processes
only changes: its cost, given in each docstring, is per batch of new
updates, not per record of the whole collection.

Why this module is long: it is the user's reference.  Each of its thirty
or so operators is a few lines of code under a docstring that says what
it computes, what it costs and shows it in a runnable example (run by
``tests/test_docs.py``); the code alone is under 300 lines.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from ddflow.base.schema import Schema
from ddflow.base.updates import from_rows
from ddflow.errors import DataflowError, UsageError
from ddflow.graph.node import Node
from ddflow.graph.scope import IterativeScope, Scope
from ddflow.operators.arrange import Arrangement, ArrangeNode
from ddflow.operators.capture import Capture, CaptureNode, Probe
from ddflow.operators.input import ConstantNode
from ddflow.operators.iterate import EnterNode, LeaveNode, VariableNode
from ddflow.operators.join import JoinNode
from ddflow.operators.reduce import (
    CountLogic,
    DistinctLogic,
    ExtremeLogic,
    Logic,
    ReduceNode,
    ReduceTactic,
    SumLogic,
    ThresholdLogic,
    UserLogic,
)
from ddflow.operators.stateless import ColumnsNode, ConcatNode, ConsolidateNode, InspectNode, NegateNode, RowNode
from ddflow.workers.exchange import ExchangeNode

if TYPE_CHECKING:
    from ddflow.graph.context import Context

Keyed = "Collection | Arrangement"


class Collection:
    """A multiset of records changing over time, produced by one operator.

    Get one from :meth:`ddflow.Dataflow.new_collection` or from another
    collection's operator; methods build new operators and return their
    output collections.  Nothing runs until :meth:`ddflow.Dataflow.run`.
    """

    def __init__(self, node: Node):
        self.node = node
        self.scope: Scope = node.scope
        self.ctx: Context = node.ctx
        self._arranged: Arrangement | None = None
        self._entered: dict[int, Collection] = {}
        #: Named, typed columns for a table or SQL view (rows stored as :mod:`ddflow.base.schema`
        #: lays them out); None for a positional collection.
        self.schema: Schema | None = None
        #: With several workers, every update already sits on the worker that owns its first field
        #: (a planner that can prove it sets this; ``arrange`` then needs no exchange).
        self.partitioned = False

    @property
    def name(self) -> str:
        """The name of the operator that produces this collection (unique in its dataflow).

        Cost: O(1).

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> edges.name, edges.project(1, name="dst").name
        ('edges', 'dst')
        """
        return self.node.name

    @property
    def columns(self) -> list[str]:
        """Column names of a table or SQL view, in order.

        Cost: O(columns).

        >>> flow = ddflow.Dataflow()
        >>> _, orders = flow.new_collection("orders", schema={"o_id": "bigint", "amount": "double"})
        >>> orders.columns, flow.sql("SELECT amount * 2 AS twice FROM orders").columns
        (['o_id', 'amount'], ['twice'])
        """
        if self.schema is None:
            raise UsageError(f"collection {self.name!r} has positional fields, not named columns "
                             "(tables come from new_collection(name, schema={...}), views from Dataflow.sql)")
        return list(self.schema.names)

    def __repr__(self) -> str:
        return f"<Collection {self.name} depth={self.scope.depth}>"

    def _derive(self, node: Node, *inputs: "Collection") -> "Collection":
        for port, c in enumerate(inputs or (self,)):
            c.node.connect(node, port)
        return Collection(node)

    def _name(self, op: str, name: str | None) -> str:
        return name or self.ctx.fresh(f"{op}({self.name})")

    # -- sources without a handle ---------------------------------------------------
    @staticmethod
    def constant(scope: Scope, rows: Sequence[tuple], kinds: Sequence[str] | None = None,
                 name: str | None = None) -> "Collection":
        """A collection of fixed ``rows`` in ``scope``, there from its first time on (0, or iteration 0).

        No handle feeds it and it is not one of the dataflow's inputs: its
        rows are emitted once, by one worker, and never change (a SQL
        global aggregate's default row, Datalog facts).  ``kinds`` as
        :meth:`ddflow.Dataflow.new_collection`'s (default: inferred from
        the rows).  Cost: O(rows) to build and once at the first run; nothing
        after.

        >>> flow = ddflow.Dataflow()
        >>> nums_in, nums = flow.new_collection("nums")
        >>> out = nums.concat(ddflow.Collection.constant(nums.scope, [(0,), (1,)])).count().capture()
        >>> nums_in.insert((1,), time=2); flow.advance_to(3); flow.run()
        >>> out.drain()
        [((0, 1), 0, 1), ((1, 1), 0, 1), ((1, 1), 2, -1), ((1, 2), 2, 1)]
        """
        name = name or scope.ctx.fresh("constant")
        rows = list(rows)
        times = np.zeros((len(rows), scope.depth), dtype=np.int64)
        u = from_rows(rows, times, 1, scope.ctx.interner, kinds=kinds, depth=scope.depth, where=f"constant {name!r}")
        return Collection(ConstantNode(scope, name, u))

    @staticmethod
    def empty(scope: Scope, name: str | None = None) -> "Collection":
        """A collection in ``scope`` that never holds a record (a loop variable that starts empty).

        Cost: O(1); it is never stepped.

        >>> flow = ddflow.Dataflow()
        >>> nums_in, nums = flow.new_collection("nums")
        >>> loop = nums.iterative("up")
        >>> v = ddflow.Variable(loop, ddflow.Collection.empty(loop))
        >>> _ = v.set(nums.concat(v.map(lambda r: (r[0] + 1,)).filter(lambda r: r[0] < 3)).distinct())
        >>> out = v.result.leave().capture()
        >>> nums_in.insert((0,), time=0); flow.advance_to(1); flow.run()
        >>> out.drain()
        [((0,), 0, 1), ((1,), 0, 1), ((2,), 0, 1)]
        """
        return Collection(ConstantNode(scope, name or scope.ctx.fresh("empty"), None))

    # -- scopes -----------------------------------------------------------------
    def enter(self, scope: IterativeScope) -> "Collection":
        """This collection inside a (nested) loop scope, at iteration 0.

        Rarely needed: operators enter outer collections automatically.
        Cached per scope.  Cost: O(1) to build; at run time O(n) per batch
        of n updates (each time gains an iteration coordinate).

        >>> flow = ddflow.Dataflow()
        >>> nums_in, nums = flow.new_collection("nums")
        >>> loop = nums.iterative("loop")
        >>> inner = nums.enter(loop)
        >>> inner, nums.enter(loop) is inner
        (<Collection enter(nums->loop) depth=2>, True)
        """
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
        """This loop collection in the enclosing scope; all iterations' diffs add up to the fixed point.

        Cost: O(n log n) per batch of n updates (the iteration coordinate is
        dropped and the batch consolidated), vectorized.

        >>> flow = ddflow.Dataflow()
        >>> nums_in, nums = flow.new_collection("nums")
        >>> doubled = nums.enter(nums.iterative("loop")).map(lambda r: (2 * r[0],))
        >>> out = doubled.leave().capture()
        >>> nums_in.update([(1,), (2,)], times=0); flow.advance_to(1); flow.run()
        >>> out.drain()
        [((2,), 0, 1), ((4,), 0, 1)]
        """
        if not isinstance(self.scope, IterativeScope):
            raise DataflowError(f"collection {self.name!r} is not inside a loop; nothing to leave")
        return self._derive(LeaveNode(self.scope.parent, f"leave({self.name})"))

    def _align(self, other: "Collection") -> tuple["Collection", "Collection"]:
        """Bring two collections into the same (innermost) scope."""
        if other.ctx is not self.ctx:
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
        """Each record ``r`` becomes the tuple ``fn(r)``; times and diffs are kept.

        Cost: one Python call of ``fn`` per record, plus decoding the rows and
        encoding the results (O(n) per batch, in Python); see ``map_columns``
        and ``project`` for the vectorized forms.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> out = edges.map(lambda r: (r[0] + r[1],)).capture()
        >>> edges_in.update([(1, 2), (2, 3)], times=0); flow.advance_to(1); flow.run()
        >>> out.drain()
        [((3,), 0, 1), ((5,), 0, 1)]
        """
        return self._derive(RowNode(self.scope, self._name("map", name), fn, "map"))

    def flat_map(self, fn: Callable[[tuple], Any], name: str | None = None) -> "Collection":
        """Each record ``r`` becomes every tuple of the iterable ``fn(r)``, at its time and diff.

        Cost: one Python call of ``fn`` per record, plus one encoding per
        output record (Python per value).

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> out = edges.flat_map(lambda r: [(r[0],), (r[1],)]).capture()
        >>> edges_in.update([(1, 2), (2, 3)], times=0); flow.advance_to(1); flow.run()
        >>> out.drain()
        [((1,), 0, 1), ((2,), 0, 2), ((3,), 0, 1)]
        """
        return self._derive(RowNode(self.scope, self._name("flat_map", name), fn, "flat_map"))

    def filter(self, fn: Callable[[tuple], bool], name: str | None = None) -> "Collection":
        """The records ``r`` for which ``fn(r)`` is true.

        Cost: one Python call of ``fn`` per record (rows are decoded to
        tuples); the kept updates are then selected vectorized.  See
        ``filter_columns`` for the vectorized form.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> out = edges.filter(lambda r: r[0] < r[1]).capture()
        >>> edges_in.update([(1, 2), (3, 2)], times=0); flow.advance_to(1); flow.run()
        >>> out.drain()
        [((1, 2), 0, 1)]
        """
        return self._derive(RowNode(self.scope, self._name("filter", name), fn, "filter"))

    def project(self, *fields: int, name: str | None = None) -> "Collection":
        """Keep and reorder fields by position, without any Python per record.

        Cost: O(number of fields) per batch, whatever its size: the kept
        columns are shared, not copied.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> out = edges.project(1, 0).capture()
        >>> edges_in.update([(1, 2)], times=0); flow.advance_to(1); flow.run()
        >>> out.drain()
        [((2, 1), 0, 1)]
        """
        return self._derive(ColumnsNode(self.scope, self._name("project", name), "project", indices=fields))

    def map_columns(self, fn: Callable[..., Any], name: str | None = None) -> "Collection":
        """``fn(*columns) -> column or tuple of columns``: numpy arrays in, numpy arrays out.

        The vectorized ``map``: ``fn`` sees a whole batch, one array per field,
        read-only (a numeric column is the batch other readers share).
        Cost: one call of ``fn`` per batch, no Python per record for numeric
        columns.  Object columns are decoded to object arrays; a new object
        output is interned value by value, but an input column returned as
        it came keeps its codes, with no Python per record.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> out = edges.map_columns(lambda src, dst: (dst, src * 10)).capture()
        >>> edges_in.update([(1, 2), (2, 3)], times=0); flow.advance_to(1); flow.run()
        >>> out.drain()
        [((2, 10), 0, 1), ((3, 20), 0, 1)]
        """
        return self._derive(ColumnsNode(self.scope, self._name("map_columns", name), "map", fn=fn))

    def filter_columns(self, fn: Callable[..., Any], name: str | None = None) -> "Collection":
        """``fn(*columns) -> bool mask``: the records where the mask is true.

        The vectorized ``filter``.  Cost: one call of ``fn`` per batch, then
        an O(n) vectorized selection; no Python per record.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> out = edges.filter_columns(lambda src, dst: src < dst).capture()
        >>> edges_in.update([(1, 2), (3, 2)], times=0); flow.advance_to(1); flow.run()
        >>> out.drain()
        [((1, 2), 0, 1)]
        """
        return self._derive(ColumnsNode(self.scope, self._name("filter_columns", name), "filter", fn=fn))

    def temporal_filter(self, fn: Callable[..., Any], name: str | None = None) -> "Collection":
        """``fn(*columns) -> (lower, upper)``: each record is present while ``lower <= time < upper``.

        Materialize's temporal filter (``mz_now()``), differential
        dataflow's idiom of a +1 when a record becomes valid and a -1 when
        it stops: ``WHERE ts > now() - INTERVAL 1 MINUTE`` is
        ``lower = ts, upper = ts + 60 s``.  Bounds are int64 arrays on the
        data-time clock; ``NO_LOWER`` / ``NO_UPPER``
        (:mod:`ddflow.operators.temporal`) leave a side open.  A record
        whose upper bound the frontier passes leaves every trace downstream
        once compacted.  Top-level collections only.  Cost: stateless, one
        call of ``fn`` per batch and O(n) vectorized.

        >>> flow = ddflow.Dataflow()
        >>> ev_in, ev = flow.new_collection("events")
        >>> out = ev.temporal_filter(lambda ts: (ts, ts + 10)).capture()
        >>> ev_in.update([(5,)], times=5); flow.advance_to(100); flow.run()
        >>> out.drain()
        [((5,), 5, 1), ((5,), 15, -1)]
        """
        from ddflow.operators.temporal import TemporalFilterNode

        return self._derive(TemporalFilterNode(self.scope, self._name("temporal_filter", name), fn))

    def window(self, fn: Callable[..., Any], width: int, slide: int | None = None, offset: int = 0,
               expire: bool = False, name: str | None = None) -> "Collection":
        """``(*record, start, end)`` once per window ``[start, start + width)`` holding the record's time (Spark's ``window``).

        ``fn(*columns) -> (ts, valid)``: each record's time (int64) and
        whether it has one.  Windows start every ``slide`` (default
        ``width``: tumbling) at ``offset`` modulo ``slide``.  ``expire``
        (only when each record's data time is its ``ts``: an event-time
        input): each copy leaves at its window's end, so what is computed
        per window leaves every trace once the frontier passes it; follow
        the per-window result with ``close_at`` to keep its final value.
        Stateless.  Cost: O(n * width / slide) vectorized.

        >>> flow = ddflow.Dataflow()
        >>> ev_in, ev = flow.new_collection("events")
        >>> out = ev.window(lambda ts: (ts, ts >= 0), width=10, slide=5).capture()
        >>> ev_in.update([(12,)], times=12); flow.advance_to(13); flow.run()
        >>> out.drain()
        [((12, 5, 15), 12, 1), ((12, 10, 20), 12, 1)]
        """
        from ddflow.operators.temporal import WindowNode

        node = WindowNode(self.scope, self._name("window", name), fn, width, slide or width, offset, expire)
        return self._derive(node)

    def close_at(self, fn: Callable[..., Any], final: bool = False, name: str | None = None) -> "Collection":
        """``fn(*columns) -> end``: every change to a record at or after its ``end`` is dropped; it keeps its value at close.

        What turns a window's live result (retracted when the window
        ends, so that no trace keeps it) into the permanent result a query
        shows.  ``final``: the earlier changes move to ``end`` too, so each
        record appears once, final, when it closes (append-only output).
        Cost: stateless, one call of ``fn`` per batch and O(n) vectorized.

        >>> flow = ddflow.Dataflow()
        >>> ev_in, ev = flow.new_collection("events")
        >>> out = ev.temporal_filter(lambda w: (w * 0, w)).close_at(lambda w: w).capture()
        >>> ev_in.update([(10,)], times=0); flow.advance_to(100); flow.run()
        >>> out.drain()
        [((10,), 0, 1)]
        """
        from ddflow.operators.temporal import CloseAtNode

        return self._derive(CloseAtNode(self.scope, self._name("close_at", name), fn, final))

    def sessionize(self, ts_field: int, gap: int, expire: bool = False, name: str | None = None) -> "Collection":
        """``(key, *vals, start, end)``: each record tagged with its key's session (Spark's ``session_window``).

        A session is a run of records of one key each at most ``gap``
        after the previous (field ``ts_field``, counted in the record,
        key included); ``start`` is its first ``ts`` and ``end`` its last
        plus ``gap``.  Removals re-split sessions exactly.  ``expire``
        (only when each record's data time is its ``ts``: an event-time
        input) drops a session at time ``end + 1``, from the output and
        from the state.  Cost: one compiled call per step, O(r) per
        changed key and time for its r records in open sessions, plus a
        copy of the state (see :mod:`ddflow.operators.session`).

        >>> flow = ddflow.Dataflow()
        >>> ev_in, ev = flow.new_collection("events")
        >>> out = ev.sessionize(1, gap=5).capture()
        >>> ev_in.update([("a", 1), ("a", 4), ("a", 20)], times=0); flow.advance_to(1); flow.run()
        >>> sorted(r for r, _, _ in out.drain())
        [('a', 1, 1, 9), ('a', 4, 1, 9), ('a', 20, 20, 25)]
        """
        from ddflow.operators.session import SessionNode

        name = self._name("sessionize", name)
        src = self
        if self.ctx.workers > 1 and not self.partitioned:
            src = self._derive(ExchangeNode(self.scope, f"{name}.exchange", self.ctx.workers))
        out = src._derive(SessionNode(self.scope, name, ts_field, gap, expire))
        out.partitioned = True
        return out

    def negate(self, name: str | None = None) -> "Collection":
        """The same updates with every diff negated: ``concat`` with it subtracts.

        Cost: O(n) per batch of n updates, vectorized.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> out = edges.negate().capture()
        >>> edges_in.update([(1, 2)], times=0); flow.advance_to(1); flow.run()
        >>> out.drain()
        [((1, 2), 0, -1)]
        """
        return self._derive(NegateNode(self.scope, self._name("negate", name)))

    def concat(self, *others: "Collection", name: str | None = None) -> "Collection":
        """The multiset sum of this collection and ``others``: multiplicities add.

        Collections of different (nested) scopes are brought into the
        innermost one.  Cost: O(n) per round for the n updates arriving on
        all inputs (one concatenation), vectorized; not consolidated.

        >>> flow = ddflow.Dataflow()
        >>> a_in, a = flow.new_collection("a")
        >>> b_in, b = flow.new_collection("b")
        >>> out = a.concat(b).capture()
        >>> a_in.insert((1,), time=0); b_in.insert((1,), time=0); flow.advance_to(1); flow.run()
        >>> out.drain()
        [((1,), 0, 2)]
        """
        colls = [self]
        for o in others:
            a, b = colls[0]._align(o)
            colls = [c.enter(a.scope) if c.scope is not a.scope else c for c in colls] + [b]
        node = ConcatNode(colls[0].scope, name or self.ctx.fresh("concat"), n_inputs=len(colls))
        return colls[0]._derive(node, *colls)

    def consolidate(self, name: str | None = None) -> "Collection":
        """The same collection with each batch consolidated: equal (record, time) diffs added, zeros dropped.

        Cost: O(n log n) per batch of n updates (one sort), vectorized.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> _ = edges.concat(edges).consolidate().inspect(print)
        >>> edges_in.update([(1, 2)], times=0); flow.advance_to(1); flow.run()
        ((1, 2), 0, 2)
        """
        return self._derive(ConsolidateNode(self.scope, self._name("consolidate", name)))

    def inspect(self, fn: Callable[[tuple], None], name: str | None = None) -> "Collection":
        """Calls ``fn((row, time, diff))`` for each update passing through; the collection is unchanged.

        Cost: one Python call per update, plus decoding the batch's rows.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> _ = edges.inspect(print)
        >>> edges_in.update([(1, 2)], times=0); flow.advance_to(1); flow.run()
        ((1, 2), 0, 1)
        """
        return self._derive(InspectNode(self.scope, self._name("inspect", name), fn, batch=False))

    def inspect_batch(self, fn: Callable[[Any], None], name: str | None = None) -> "Collection":
        """Calls ``fn(arrow_table)`` for each batch passing through; the collection is unchanged.

        The table has fields ``c0, c1, ...``, ``time`` and ``diff``.  Cost: one
        call per batch plus an O(n) conversion to Arrow.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> _ = edges.inspect_batch(lambda t: print(t.num_rows))
        >>> edges_in.update([(1, 2), (2, 3)], times=0); flow.advance_to(1); flow.run()
        2
        """
        return self._derive(InspectNode(self.scope, self._name("inspect", name), fn, batch=True))

    # -- arrangements and joins --------------------------------------------------------------
    def arrange(self, name: str | None = None) -> Arrangement:
        """Index by key (the first field) in a trace that several joins and reduces can share.

        Built once per collection: a second call returns the same arrangement.
        Cost: O(n log n) per batch of n updates (consolidate and build a trie
        batch) plus amortized O(log n) merges per update in the trace's
        spine; with ``workers > 1`` updates first move to their key's worker.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> arr = edges.arrange()
        >>> edges.arrange() is arr
        True
        >>> edges_in.update([(1, 2), (1, 3)], times=0); flow.advance_to(1); flow.run()
        >>> len(arr.trace)
        2
        """
        if self._arranged is None:
            source = self.node
            if self.ctx.workers > 1 and not self.partitioned:
                # All updates of a key meet on its worker before they are indexed.
                source = ExchangeNode(self.scope, self._name("exchange", None), self.ctx.workers)
                self.node.connect(source)
            node = ArrangeNode(self.scope, self._name("arrange", name))
            source.connect(node)
            self._arranged = Arrangement(self, node)
        return self._arranged

    def join(self, other: Keyed, name: str | None = None) -> "Collection":
        """``(key, *left_vals, *right_vals)`` for every pair of records with equal keys.

        The pair's time is the later of the two (their least upper bound),
        its diff the product of theirs.  ``other`` may be a Collection or an
        :class:`Arrangement` (to share its trace).  Cost: per new batch of
        either input, one seek of its k distinct keys into the other trace
        (O(k log n) per trace batch), plus O(p log p) for its p output pairs.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> paths2 = edges.join(edges.project(1, 0)).capture()
        >>> edges_in.update([(1, 2), (2, 3)], times=0); flow.advance_to(1); flow.run()
        >>> paths2.drain()
        [((2, 3, 1), 0, 1)]
        """
        return self._join_arranged(self.arrange(), other, name=name)

    def _join_arranged(self, left: Arrangement, other: Keyed, name: str | None = None) -> "Collection":
        if isinstance(other, Arrangement):
            other_coll = other.collection
        elif isinstance(other, Collection):
            other_coll = other
        else:
            raise UsageError(f"join {self.name!r}: expected a Collection or Arrangement, got {type(other).__name__}")
        a, b = left.collection._align(other_coll)
        la = left if left.scope is a.scope else a.arrange()
        rb = other if isinstance(other, Arrangement) and other.scope is a.scope else b.arrange()
        node = JoinNode(a.scope, name or self.ctx.fresh(f"join({a.name},{b.name})"), la.node, rb.node)
        return Collection(node)

    def semijoin(self, keys: Keyed, name: str | None = None) -> "Collection":
        """Records whose key (first field) is in ``keys``; multiplicities multiply.

        Only the first field of ``keys`` is used; pass a distinct set of keys
        to keep multiplicities as they are.  Cost: a ``join`` with the keys.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> keep_in, keep = flow.new_collection("keep")
        >>> out = edges.semijoin(keep).capture()
        >>> edges_in.update([(1, 2), (2, 3)], times=0); keep_in.insert((1,), time=0)
        >>> flow.advance_to(1); flow.run()
        >>> out.drain()
        [((1, 2), 0, 1)]
        """
        return self.join(self._keys_of(keys), name=name or self.ctx.fresh(f"semijoin({self.name})"))

    def antijoin(self, keys: Keyed, name: str | None = None) -> "Collection":
        """Records whose key is not in ``keys``: ``self - self.semijoin(keys)``.

        Exact when ``keys`` holds each key at most once (use ``distinct``).
        Cost: a ``semijoin`` plus an O(n) ``negate`` and ``concat``.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> drop_in, drop = flow.new_collection("drop")
        >>> out = edges.antijoin(drop).capture()
        >>> edges_in.update([(1, 2), (2, 3)], times=0); drop_in.insert((1,), time=0)
        >>> flow.advance_to(1); flow.run()
        >>> out.drain()
        [((2, 3), 0, 1)]
        """
        return self.concat(self.semijoin(keys).negate(), name=name or self.ctx.fresh(f"antijoin({self.name})"))

    def _keys_of(self, keys: Keyed) -> "Collection":
        coll = keys.collection if isinstance(keys, Arrangement) else keys
        return coll.project(0)

    # -- reductions ------------------------------------------------------------------
    def reduce(self, fn: Callable[[Any, list[tuple[tuple, int]]], list[tuple[tuple, int]]],
               name: str | None = None) -> "Collection":
        """``fn(key, [(val, mult)]) -> [(out_val, mult)]`` gives records ``(key, *out_val)``.

        ``fn`` sees the key's accumulated values (tuples of the other fields)
        and is kept exactly up to date as they change.  Cost: per changed key,
        Python work proportional to its history (input and output updates)
        times its interesting times, with one call of ``fn`` for each.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> degree = edges.reduce(lambda key, vals: [((sum(m for _, m in vals),), 1)]).capture()
        >>> edges_in.update([(1, 2), (1, 3), (2, 3)], times=0); flow.advance_to(1); flow.run()
        >>> degree.drain()
        [((1, 2), 0, 1), ((2, 1), 0, 1)]
        """
        return self._reduce_arranged(self.arrange(), UserLogic(fn), name=name)

    def _reduce_arranged(self, arr: Arrangement, logic: Any, name: str | None = None,
                         tactic: type[ReduceTactic] | None = None) -> "Collection":
        """A reduce of ``arr`` by ``logic``; ``tactic`` forces a strategy (tests pit each against the reference)."""
        if not isinstance(logic, Logic):
            logic = UserLogic(logic)
        if arr.scope is not self.scope:
            arr = self.arrange()
        node = ReduceNode(self.scope, name or self.ctx.fresh(f"{logic.name}({self.name})"), arr.node, logic, tactic)
        return Collection(node)

    def count(self, name: str | None = None) -> "Collection":
        """``(*row, count)`` for each distinct row (the whole record is the group).

        Cost: O(n log n) vectorized numpy work per batch of n updates plus one
        seek of their keys, no Python per key, at the top level and in a
        top-level loop; deeper loops use the per-key path of ``reduce``.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> out = edges.project(0).count().capture()
        >>> edges_in.update([(1, 2), (1, 3), (2, 3)], times=0); flow.advance_to(1); flow.run()
        >>> out.drain()
        [((1, 2), 0, 1), ((2, 1), 0, 1)]
        """
        return self._reduce_arranged(self.arrange(), CountLogic(), name)

    def distinct(self, name: str | None = None) -> "Collection":
        """Each row with positive multiplicity, once: the set of the multiset.

        Cost: as ``count``: O(n log n) vectorized per batch of n updates plus
        one seek of their keys, no Python per key (per-key path in nested loops).

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> out = edges.project(0).distinct().capture()
        >>> edges_in.update([(1, 2), (1, 3), (2, 3)], times=0); flow.advance_to(1); flow.run()
        >>> out.drain()
        [((1,), 0, 1), ((2,), 0, 1)]
        """
        return self._reduce_arranged(self.arrange(), DistinctLogic(), name)

    def threshold(self, fn: Callable[[int], int], name: str | None = None) -> "Collection":
        """Each distinct row with multiplicity ``fn(count)`` (absent where it is 0).

        Cost: as ``count`` (vectorized per batch), plus one Python call of
        ``fn`` per changed row and time.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> hubs = edges.project(0).threshold(lambda c: 1 if c >= 2 else 0).capture()
        >>> edges_in.update([(1, 2), (1, 3), (2, 3)], times=0); flow.advance_to(1); flow.run()
        >>> hubs.drain()
        [((1,), 0, 1)]
        """
        return self._reduce_arranged(self.arrange(), ThresholdLogic(fn), name)

    def accumulate(self, groups: int = 1, weights: int = 1, floats: int = 0,
                   name: str | None = None) -> "Collection":
        """``(*group, count, *sums)`` per group: the count and diff-weighted sums of its weights, from the changes.

        Records are ``(g_0..g_(groups-1), w_1..w_weights, x_1..x_floats)``:
        the group (any kinds), then int64 weights, then float64 ones.  Each
        group with a nonzero count ``c`` (the sum of its diffs) has one
        record ``(*g, c, S_1, .., X_1, ..)`` with ``S_j`` the sum of
        ``diff * w_j`` (a sum past int64 is an error) and ``X_j`` the sum of
        ``diff * x_j`` computed exactly and rounded once, so retractions
        undo exactly (:mod:`ddflow.base.exactsum`).
        Cost: at the top level O(n (w + 1) log n) vectorized per batch of n
        updates plus one seek of their first fields, reading O(w + 1)
        compacted rows per changed group (never its history, no Python per
        group); groups sharing their first field are read together.  In a
        loop it is a per-key ``reduce`` (Python over the group's history).
        See :mod:`ddflow.operators.reduce.accumulate` for the contract.

        >>> flow = ddflow.Dataflow()
        >>> sales_in, sales = flow.new_collection("sales")
        >>> out = sales.accumulate(groups=1, weights=1).capture()
        >>> sales_in.update([("a", 2), ("a", 3), ("b", 1)], times=0); flow.advance_to(1); flow.run()
        >>> sales_in.update([("a", 3)], times=1, diffs=-1); flow.advance_to(2); flow.run()
        >>> out.drain()
        [(('a', 2, 5), 0, 1), (('b', 1, 1), 0, 1), (('a', 1, 2), 1, 1), (('a', 2, 5), 1, -1)]
        >>> flow = ddflow.Dataflow()
        >>> prices_in, prices = flow.new_collection("prices")
        >>> total = prices.accumulate(groups=1, weights=0, floats=1).capture()
        >>> prices_in.update([("a", 0.1), ("a", 0.2)], times=0); flow.advance_to(1); flow.run()
        >>> prices_in.update([("a", 0.1)], times=1, diffs=-1); flow.advance_to(2); flow.run()
        >>> total.drain()  # exactly 0.2 at time 1, where 0.1 + 0.2 - 0.1 is 0.20000000000000004
        [(('a', 2, 0.30000000000000004), 0, 1), (('a', 1, 0.2), 1, 1), (('a', 2, 0.30000000000000004), 1, -1)]
        """
        from ddflow.operators.reduce.accumulate import AccumulateLogic, AccumulateTactic, ExplodeNode
        from ddflow.operators.reduce.general import GeneralTactic

        if groups < 1 or weights < 0 or floats < 0:
            raise UsageError(f"accumulate needs groups >= 1 and weights, floats >= 0, got {groups}, {weights} "
                             f"and {floats}")
        if weights == 0 and floats == 0:
            # No weights: records are the groups, and this is ``count`` exactly (its total-order tactic is
            # the fastest path there is; its output is on the worker of its first field, as ours).
            out = self.count(name)
            out.partitioned = True
            return out
        name = self._name("accumulate", name)
        logic = AccumulateLogic(groups, weights, name, floats)
        if self.scope.depth > 1:
            return self._reduce_arranged(self.arrange(), logic, name, tactic=GeneralTactic)
        src = self
        if self.ctx.workers > 1 and not self.partitioned:
            # Move the records, not their m + 1 exploded forms, to the group's worker.
            src = self._derive(ExchangeNode(self.scope, f"{name}.exchange", self.ctx.workers))
        exploded = src._derive(ExplodeNode(self.scope, f"{name}.explode", groups, weights, name, floats))
        exploded.partitioned = True
        arr = exploded.arrange(f"{name}.arrange")
        out = Collection(ReduceNode(self.scope, name, arr.node, logic, AccumulateTactic))
        out.partitioned = True  # each group's row is made on the worker that owns its first field
        return out

    def sum(self, name: str | None = None) -> "Collection":
        """``(key, sum of the first value field)`` per key, weighted by multiplicity.

        A float sum is exact, rounded once, so it depends on the key's
        records alone (not on their order).  Cost: as ``reduce``: per changed
        key, Python work proportional to its history; ``accumulate`` keeps
        sums from the changes alone.

        >>> flow = ddflow.Dataflow()
        >>> sales_in, sales = flow.new_collection("sales")
        >>> out = sales.sum().capture()
        >>> sales_in.update([("a", 2), ("a", 3), ("b", 1)], times=0); flow.advance_to(1); flow.run()
        >>> out.drain()
        [(('a', 5), 0, 1), (('b', 1), 0, 1)]
        """
        return self._reduce_arranged(self.arrange(), SumLogic(), name)

    def min(self, name: str | None = None) -> "Collection":
        """``(key, *smallest value)`` per key (values are the other fields, as tuples).

        Cost: with numeric values, at the top level and in a top-level loop,
        one compiled walk over each changed key's history: O(h log h +
        |times| x |distinct values|) per key, no Python per key (object
        values, such as strings, ranked by their decoded values).  Objects
        Python cannot compare with each other, NaN and deeper loops take the
        per-key path of ``reduce``.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> out = edges.min().capture()
        >>> edges_in.update([(1, 3), (1, 2), (2, 3)], times=0); flow.advance_to(1); flow.run()
        >>> out.drain()
        [((1, 2), 0, 1), ((2, 3), 0, 1)]
        """
        return self._reduce_arranged(self.arrange(), ExtremeLogic("min"), name)

    def max(self, name: str | None = None) -> "Collection":
        """``(key, *largest value)`` per key (values are the other fields, as tuples).

        Cost: as ``min``.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> out = edges.max().capture()
        >>> edges_in.update([(1, 3), (1, 2), (2, 3)], times=0); flow.advance_to(1); flow.run()
        >>> out.drain()
        [((1, 3), 0, 1), ((2, 3), 0, 1)]
        """
        return self._reduce_arranged(self.arrange(), ExtremeLogic("max"), name)

    def top_k(self, k: int, numbered: bool | str = False, ties: int = 1, desc: tuple[int, ...] = (),
              partition: int = 0, name: str | None = None) -> "Collection":
        """The ``k`` smallest values per key (with multiplicity), as ``(key, *value)``.

        ``numbered``: each row ends in a number, as SQL's ranking functions
        over ``PARTITION BY key ORDER BY value``: ``True`` or
        ``"row_number"``, each copy kept once as ``(key, *value, n)``, ``n``
        its row number 1..k within the key; ``"rank"`` and
        ``"dense_rank"``, every copy of a value under one number, RANK()
        or DENSE_RANK() with values tying when their first ``ties`` fields
        are equal, kept while the number is at most ``k`` (so more than
        ``k`` rows where values tie).  ``desc``: the value fields (0-based)
        ordered descending.  ``partition``: the first ``partition`` value
        fields belong to the key (``PARTITION BY key, v_0, ..``): the values
        of a key equal in them are ranked on their own, so a partition of
        several fields needs no composite key.  Cost: as ``min`` (plus
        ranking the values once per step).

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> out = edges.top_k(2).capture()
        >>> ranked = edges.top_k(2, numbered=True).capture()
        >>> ranks = edges.top_k(3, numbered="rank").capture()
        >>> dense = edges.top_k(3, numbered="dense_rank").capture()
        >>> edges_in.update([(1, 4), (1, 2), (1, 2), (1, 3)], times=0); flow.advance_to(1); flow.run()
        >>> out.drain()
        [((1, 2), 0, 2)]
        >>> ranked.drain()
        [((1, 2, 1), 0, 1), ((1, 2, 2), 0, 1)]
        >>> ranks.drain()  # both copies of 2 rank 1, and 3 ranks 3
        [((1, 2, 1), 0, 2), ((1, 3, 3), 0, 1)]
        >>> dense.drain()
        [((1, 2, 1), 0, 2), ((1, 3, 2), 0, 1), ((1, 4, 3), 0, 1)]
        """
        if k < 1:
            raise UsageError(f"top_k needs k >= 1, got {k}")
        kind = {False: "top_k", True: "row_number"}.get(numbered, numbered) if isinstance(numbered, bool) else numbered
        if kind not in ("top_k", "row_number", "rank", "dense_rank"):
            raise UsageError(f"top_k: numbered is True, False, 'row_number', 'rank' or 'dense_rank', got {numbered!r}")
        if kind in ("rank", "dense_rank") and ties < 1:
            raise UsageError(f"top_k: ties counts the value fields that rank, at least 1, got {ties}")
        if partition < 0:
            raise UsageError(f"top_k: partition counts value fields, at least 0, got {partition}")
        return self._reduce_arranged(self.arrange(), ExtremeLogic(kind, k, ties, desc, partition), name)

    # -- iteration ------------------------------------------------------------------
    def iterate(self, fn: Callable[["Variable"], "Collection"], name: str | None = None,
                max_iterations: int | None = None, max_seconds: float | None = None,
                max_records: int | None = None) -> "Collection":
        """The fixed point of ``fn`` starting from this collection.

        ``fn`` gets the loop :class:`Variable` and returns its next value;
        outer collections used in ``fn`` enter the loop by themselves.  Cost:
        rounds until nothing changes (at most ``max_iterations``, and at most
        ``max_seconds`` per run, with at most ``max_records`` updates held by
        the loop's arrangements: past any, ``NonConvergence`` names the loop
        and what it exceeded), each round costing the body's operators on
        that round's changes only.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> roots_in, roots = flow.new_collection("roots")
        >>> reach = roots.iterate(lambda r: r.join(edges).project(1).concat(roots).distinct()).capture()
        >>> edges_in.update([(1, 2), (2, 3), (4, 5)], times=0); roots_in.insert((1,), time=0)
        >>> flow.advance_to(1); flow.run()
        >>> reach.drain()
        [((1,), 0, 1), ((2,), 0, 1), ((3,), 0, 1)]
        """
        scope = IterativeScope(self.scope, name or self.ctx.fresh("iterate"), max_iterations, max_seconds, max_records)
        var = Variable(scope, self)
        result = fn(var)
        if not isinstance(result, Collection):
            raise UsageError(f"loop {scope.name!r}: the body must return a Collection, got {type(result).__name__}")
        var.set(result)
        return var.result.leave()

    def iterative(self, name: str | None = None, max_iterations: int | None = None,
                  max_seconds: float | None = None, max_records: int | None = None) -> IterativeScope:
        """A loop scope nested in this collection's scope, for :class:`Variable` (mutual recursion).

        Like :meth:`ddflow.Dataflow.iterative`, for code that holds collections
        but not the dataflow.  Cost: O(1); running it costs as ``iterate``.

        >>> flow = ddflow.Dataflow()
        >>> nums_in, nums = flow.new_collection("nums")
        >>> v = ddflow.Variable(nums.iterative("up"), nums)
        >>> _ = v.set(v.map(lambda r: (r[0] + 1,)).filter(lambda r: r[0] < 3).concat(nums).distinct())
        >>> out = v.result.leave().capture()
        >>> nums_in.insert((0,), time=0); flow.advance_to(1); flow.run()
        >>> out.drain()
        [((0,), 0, 1), ((1,), 0, 1), ((2,), 0, 1)]
        """
        return IterativeScope(self.scope, name or self.ctx.fresh("iterative"), max_iterations, max_seconds,
                             max_records)

    # -- outputs ------------------------------------------------------------------
    def capture(self, name: str | None = None) -> Capture:
        """Record this collection's output changes for reading with :class:`Capture`.

        Only top-level collections can be captured (``leave`` a loop first).
        Cost: O(1) per batch (kept as is); reading consolidates, O(n log n).

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> out = edges.capture()
        >>> edges_in.update([(1, 2)], times=0); flow.advance_to(1); flow.run()
        >>> out.drain()
        [((1, 2), 0, 1)]
        """
        if self.scope.depth != 1:
            raise DataflowError(f"capture {self.name!r}: call leave() to bring the collection out of its loop first")
        node = CaptureNode(self.scope, self._name("capture", name))
        self.node.connect(node)
        return Capture(node, self.schema)

    def subscribe(self, fn: Callable[[Any], None], name: str | None = None) -> Capture:
        """Calls ``fn(arrow_table)`` with each batch of output changes as it is produced.

        The table has fields ``c0, c1, ...``, ``time`` and ``diff``; the returned
        :class:`Capture` also keeps the batches (drain it to free them).  Cost:
        one call per batch plus an O(n) conversion to Arrow.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> _ = edges.subscribe(lambda t: print(t.to_pylist()))
        >>> edges_in.update([(1, 2)], times=0); flow.advance_to(1); flow.run()
        [{'c0': 1, 'c1': 2, 'time': 0, 'diff': 1}]
        """
        interner = self.ctx.interner
        node = CaptureNode(self.scope, self._name("subscribe", name), lambda u: fn(u.to_arrow(interner)))
        self.node.connect(node)
        return Capture(node)

    def probe(self) -> Probe:
        """A :class:`Probe` telling which times' outputs are final.

        The probe follows the whole dataflow's completed frontier (not this
        collection alone).  Cost: O(1), and O(1) per query.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> p = edges.probe()
        >>> flow.advance_to(3); flow.run()
        >>> p.done(2), p.done(3)
        (True, False)
        """
        return Probe(self.ctx)


class Variable(Collection):
    """A loop variable: starts as ``initial`` and becomes what ``set`` gives it, one iteration later.

    Several variables in one scope express mutual recursion:

    >>> flow = ddflow.Dataflow()
    >>> nums_in, nums = flow.new_collection("nums")
    >>> scope = flow.iterative("even_odd")
    >>> even, odd = ddflow.Variable(scope, nums), ddflow.Variable(scope, nums.filter(lambda r: False))
    >>> step = lambda c: c.map(lambda r: (r[0] + 1,)).filter(lambda r: r[0] < 5)
    >>> _ = even.set(step(odd).concat(nums).distinct()); _ = odd.set(step(even).distinct())
    >>> evens, odds = even.result.leave().capture(), odd.result.leave().capture()
    >>> nums_in.insert((0,), time=0); flow.advance_to(1); flow.run()
    >>> [r for r, _, _ in evens.drain()], [r for r, _, _ in odds.drain()]
    ([(0,), (2,), (4,)], [(1,), (3,)])
    """

    def __init__(self, scope: IterativeScope, initial: Collection, name: str | None = None):
        node = VariableNode(scope, name or scope.ctx.fresh(f"variable({scope.name})"))
        super().__init__(node)
        entered = initial.enter(scope) if initial.scope is not scope else initial
        entered.node.connect(node, 0)
        self.result: Collection | None = None
        scope.variables.append(node)

    def set(self, result: Collection) -> Collection:
        """Feed ``result`` back: at iteration ``i + 1`` the variable is ``result`` of iteration ``i``.

        Call it exactly once; returns ``result`` (in the variable's scope).
        Cost: O(1) to build; at run time O(n log n) per batch of n fed-back
        changes (only differences circulate).

        >>> flow = ddflow.Dataflow()
        >>> nums_in, nums = flow.new_collection("nums")
        >>> v = ddflow.Variable(flow.iterative("up"), nums)
        >>> _ = v.set(v.map(lambda r: (r[0] + 1,)).filter(lambda r: r[0] < 3).concat(nums).distinct())
        >>> out = v.result.leave().capture()
        >>> nums_in.insert((0,), time=0); flow.advance_to(1); flow.run()
        >>> out.drain()
        [((0,), 0, 1), ((1,), 0, 1), ((2,), 0, 1)]
        """
        if self.node.feedback_source is not None:
            raise DataflowError(f"variable {self.name!r} was already set")
        if result.scope is not self.scope:
            result = result.enter(self.scope)
        result.node.connect(self.node, 1)
        self.node.feedback_source = result.node
        self.result = result
        return result
