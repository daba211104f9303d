"""Scopes and the one scheduler that steps them.

Progress is tracked by structure, not by timely's general machinery.  A
scope is stepped with a *bound*: a time vector such that every time ``s``
with ``all(s < bound)`` is complete and may be retired.  At top level the
bound is ``(T,)`` for the frontier ``T`` of ``advance_to``; inside a loop
at round ``r`` it is ``(*outer_bound, r + 1)``.  Within one bound, members
are stepped in a topological order of the graph with the loops' feedback
edges (always one iteration later) cut.  A loop keeps running rounds
while any node of its body holds work whose outer part is complete, so no
time is ever finalized early and every time before the frontier is
finished when a top-level step returns.

There is one :class:`Scheduler`.  A dataflow with one worker runs it as it
is; each worker process runs a subclass
(:class:`ddflow.workers.runtime.WorkerRuntime`) that plugs exchange,
completion and agreement on loop rounds in through its hooks, keyed on
what nodes declare (``needs_complete_input``, ``sends_to_workers``).
"""
from __future__ import annotations

import heapq
import re
import time
from dataclasses import dataclass
from time import perf_counter
from typing import TYPE_CHECKING, Iterable, Union

import numpy as np

from ddflow.base.heap import trim
from ddflow.base.lattice import Antichain
from ddflow.base.native import kernel
from ddflow.errors import DataflowError, NonConvergence, UsageError
from ddflow.graph.node import Node, complete_row
from ddflow.traces.spine import IDLE_FUEL, MIN_FUEL

if TYPE_CHECKING:
    from ddflow.graph.context import Context

Member = Union[Node, "IterativeScope"]


@dataclass(frozen=True)
class Plan:
    """How to step one scope: its members in order, whom each reaches, and who needs complete input.

    ``reach[i]`` holds the positions downstream of member ``i`` (feedback
    cut); ``sync[i]`` says member ``i`` must see complete input (a loop
    as a whole always does).
    """

    order: list[Member]
    reach: list[set[int]]
    sync: list[bool]
    #: ``(member, is a loop)`` in order, and whether no member sends to other workers: what a step of one
    #: worker reads (:meth:`Scheduler.step_scope`).
    steps: tuple[tuple[Member, bool], ...] = ()
    local: bool = True


class Scope:
    """The top-level scope (depth 1), and the base of loop scopes."""

    def __init__(self, ctx: "Context", depth: int = 1, parent: "Scope | None" = None, name: str = "top"):
        self.ctx = ctx
        self.depth = depth
        self.parent = parent
        self.name = name
        self.nodes: list[Member] = []
        self._plan: Plan | None = None
        self._plan_version = -1
        #: Top-level steps compacted so far (:func:`compact`): what tells a trace's idle steps apart.
        self.compactions = 0
        #: Bytes of traces that idle effort freed since the heap was last trimmed (:func:`exert_idle`).
        self.freed_bytes = 0
        #: Batches written into the traces under this scope, as :func:`compact` last counted them.
        self.writes = 0

    def add(self, node: Member) -> None:
        """A new member (called by every node and loop as it is made)."""
        self.ctx.check_building()
        self.nodes.append(node)
        self.ctx.changed()

    def member_of(self, node: Node) -> "Member | None":
        """The member of this scope that is ``node`` or contains it (None if outside)."""
        item: Node | Scope = node
        s: Scope | None = node.scope
        while s is not self:
            if s is None:
                return None
            item, s = s, s.parent
        return item

    def is_within(self, other: "Scope") -> bool:
        """This scope is ``other`` or nested in it."""
        s: Scope | None = self
        while s is not None:
            if s is other:
                return True
            s = s.parent
        return False

    def all_nodes(self) -> Iterable[Node]:
        """Every node of this scope and the loops nested in it."""
        for n in self.nodes:
            if isinstance(n, IterativeScope):
                yield from n.all_nodes()
            else:
                yield n

    def plan(self) -> Plan:
        """Members in topological order of the data edges (feedback cut), creation order on ties.

        Creation order alone is not enough: a body may create nodes in an
        enclosing scope after that scope already holds the loop.  Cached
        until the graph changes.
        """
        if self._plan_version == self.ctx.graph_version:
            return self._plan
        n = len(self.nodes)
        pos = {id(m): i for i, m in enumerate(self.nodes)}
        succ: list[set[int]] = [set() for _ in range(n)]
        for node in self.all_nodes():
            a = self.member_of(node)
            for t, port in node.targets:
                if port == t.feedback_port:
                    continue  # feedback: one iteration later
                b = self.member_of(t)
                if a is not None and b is not None and a is not b:
                    succ[pos[id(a)]].add(pos[id(b)])
        indeg = [0] * n
        for s in succ:
            for j in s:
                indeg[j] += 1
        heap = [i for i, d in enumerate(indeg) if d == 0]
        heapq.heapify(heap)
        order: list[int] = []
        while heap:
            i = heapq.heappop(heap)
            order.append(i)
            for j in succ[i]:
                indeg[j] -= 1
                if indeg[j] == 0:
                    heapq.heappush(heap, j)
        if len(order) != n:
            stuck = [self.nodes[i] for i, d in enumerate(indeg) if d > 0]
            raise DataflowError(f"scope {self.name!r} has a cycle outside any loop variable: {stuck[:4]}")
        at = {old: new for new, old in enumerate(order)}
        reach: list[set[int]] = [set() for _ in order]
        for new in reversed(range(n)):  # successors come later in a topological order
            for j in succ[order[new]]:
                reach[new].add(at[j])
                reach[new] |= reach[at[j]]
        members = [self.nodes[i] for i in order]
        loops = [isinstance(m, IterativeScope) for m in members]
        sync = [loop or m.needs_complete_input for m, loop in zip(members, loops)]
        local = not any(m.sends_to_workers for m, loop in zip(members, loops) if not loop)
        steps = tuple((m, loop) for m, loop in zip(members, loops) if loop or not m.inline)
        self._plan = Plan(members, reach, sync, steps, local)
        self._plan_version = self.ctx.graph_version
        return self._plan


class IterativeScope(Scope):
    """A loop: times gain an iteration coordinate; rounds run until no work is left."""

    DEFAULT_MAX_ITERATIONS = 100_000
    #: A safety net: one step of a loop (all its rounds for one frontier) that runs longer fails, never spins.
    DEFAULT_MAX_SECONDS = 600.0

    def __init__(self, parent: Scope, name: str, max_iterations: int | None = None, max_seconds: float | None = None,
                 max_records: int | None = None):
        super().__init__(parent.ctx, parent.depth + 1, parent, name)
        for what, v in (("max_iterations", max_iterations), ("max_seconds", max_seconds), ("max_records", max_records)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0
                                  or (what != "max_seconds" and not isinstance(v, int))):
                raise UsageError(f"loop {name!r}: {what} is a positive {'number' if what == 'max_seconds' else 'integer'}"
                                 f" or None, not {v!r}")
        self.max_iterations = max_iterations if max_iterations is not None else self.DEFAULT_MAX_ITERATIONS
        self.max_seconds = max_seconds if max_seconds is not None else self.DEFAULT_MAX_SECONDS
        #: The most records the loop's variables may hold together (None: no bound); checked after each step of
        #: rounds, so a loop that derives without end fails naming what grew instead of filling memory.
        self.max_records = max_records
        #: ``(iteration, records its variables had)`` noted half way to a limit: whether a loop that did not
        #: converge still grew (it derives forever) or held steady (it oscillates).
        self.growth: list[tuple[int, int]] = []
        self.variables: list = []
        self.rounds_run = 0
        #: Set by the scheduler before each round: the most rounds, this one first, that one call may run
        #: (a fused loop round, ``ddflow/operators/round``); 1 where rounds must be stepped one by one.
        self.chain_limit = 1
        #: Set by such a call: the rounds after this one it ran; the scheduler goes on past them.
        self.rounds_ahead = 0
        parent.add(self)

    def __repr__(self) -> str:
        return f"<loop {self.name}>"

    def check_variables(self) -> None:
        """Every variable of the loop was ``set``; otherwise a DataflowError naming it."""
        for v in self.variables:
            if v.feedback_source is None:
                raise DataflowError(f"loop {self.name!r}: variable {v.name!r} was never set")

    def next_round(self, outer_bound: np.ndarray) -> int | None:
        """The least iteration with work whose outer time is complete (None: nothing to do).

        Cost: one compiled pass (:func:`least_round`) per array of work in
        the body; nodes without work contribute nothing.
        """
        best = -1
        for n in self.nodes:
            if getattr(n, "_queues_only", False) and not any(n.queues):
                continue  # after a round most of a body holds nothing: no generator for it
            for times in n.work_times():
                if len(times):
                    m = least_round(times, outer_bound)
                    if m >= 0 and (best < 0 or m < best):
                        best = m
        return None if best < 0 else best

    def changing_times(self, outer_bound: np.ndarray, most: int = 5) -> list:
        """The outer times of the work still in the body (what a NonConvergence names), the first ``most``."""
        outer = [t[:, : self.depth - 1] for t in self.work_times() if len(t)]
        if not outer:
            return []
        ts = np.unique(np.concatenate(outer), axis=0)
        ts = ts[np.all(ts < outer_bound, axis=1)]
        shown = [tuple(t) if len(t) > 1 else int(t[0]) for t in ts[:most].tolist()]
        return shown + (["..."] if len(ts) > most else [])

    def variable_records(self, distinct: bool = False) -> dict[str, int]:
        """Per variable: the updates its value's arrangement holds (O(batches)), or with ``distinct`` the records
        its value has now (its updates added up: O(records), for errors and rare samples only)."""
        out = {}
        for v in self.variables:
            src = v.feedback_source
            if src is None:
                n = 0
            elif distinct:
                n = sum(int(h.trace.view().batch.diffs.sum()) for h in src.trace_handles())
            else:
                n = src.records_held()
            out[re.sub(r"#\d+$", "", v.name)] = n
        return out

    def after_rounds(self, r: int, elapsed: float) -> None:
        """Called after the rounds up to ``r`` ran: enforces ``max_records``; half way to ``max_iterations`` or
        ``max_seconds``, notes how many records the variables have (to tell growth from oscillation should the
        loop not converge).  O(variables) a call; the note O(records), once per step of the loop."""
        if not self.growth and (2 * r >= self.max_iterations or 2 * elapsed >= self.max_seconds):
            self.growth = [(r, sum(self.variable_records(distinct=True).values()))]
        if self.max_records is None:
            return
        held = self.variable_records()
        total = sum(held.values())
        if total > self.max_records:
            name, most = max(held.items(), key=lambda kv: kv[1]) if held else ("?", total)
            raise NonConvergence(
                f"loop {self.name!r} holds {total:,} records in its variables after iteration {r}, more than "
                f"max_records={self.max_records:,}; {name!r} holds {most:,} of them. A rule that makes new values "
                "from its own output (a counter, a string that grows) derives forever: bound it with a condition, "
                "or raise max_records")

    def not_converged(self, limit: str, r: int, outer_bound: np.ndarray) -> NonConvergence:
        """The error of a loop that hit ``limit`` still changing at iteration ``r``, saying why it may not converge.

        Growth (its variables have more records than half way there): it
        derives new records forever.  Otherwise it changes without growing:
        it oscillates.
        """
        times = self.changing_times(outer_bound)
        held = self.variable_records(distinct=True)
        total = sum(held.values())
        base = self.growth[0] if self.growth and self.growth[0][0] < r else None
        if base is not None and total > base[1]:
            name, most = max(held.items(), key=lambda kv: kv[1])
            return NonConvergence(
                f"loop {self.name!r} did not converge within {limit}: it still derives new records at iteration {r} "
                f"(its variables have {total:,} records, more than half way there; {name!r} has {most:,}; input "
                f"times {times}). A rule that makes new values from its own output (a counter, a "
                "string that grows) derives forever: bound it with a condition; max_records bounds the growth")
        steady = ", without growing" if base is not None else ""
        return NonConvergence(
            f"loop {self.name!r} did not converge within {limit} (still changing at iteration {r}, input times "
            f"{times}{steady}); a loop over a collection that goes negative (a removal of an absent record) "
            "may never converge: declare the input nonnegative")

    def work_times(self) -> Iterable[np.ndarray]:
        """Work of every node in the body: arrays of this scope's depth or deeper.

        An enter node's queue holds times of the enclosing scope, one
        coordinate short: they enter at iteration 0.
        """
        for n in self.nodes:
            yield from n.work_times()


@kernel("graph")
def least_round(times, outer_bound):
    """The least iteration ``times[i, k]`` (``k = len(outer_bound)``) of a row with ``times[i, :k] < outer_bound``; -1 if none.

    A row with only ``k`` coordinates (an enter node's queue) is at
    iteration 0; coordinates past ``k + 1`` (nested loops) are ignored.
    O(n k), one compiled pass.
    """
    k = len(outer_bound)
    best = -1
    for i in range(times.shape[0]):
        if complete_row(times, i, outer_bound):
            r = times[i, k] if times.shape[1] > k else 0
            if best < 0 or r < best:
                best = r
    return best


class Scheduler:
    """Steps scopes: members in plan order, loops round by round.

    The hooks (``begin_epoch``, ``step_node``, ``send``, ``wait_complete``,
    ``agree_round``) do nothing special here; the worker runtime overrides
    them.  Nodes that send to other workers exist only when W > 1, so with
    one worker nothing is ever in flight and no completion is waited for.
    """

    #: This scheduler is the only worker and its hooks are these (a subclass that overrides one says False).
    alone: bool = True

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        cls.alone = all(getattr(cls, h) is getattr(Scheduler, h)
                        for h in ("begin_epoch", "step_node", "send", "wait_complete", "agree_round"))

    def step_scope(self, scope: Scope, bound: np.ndarray) -> bool | None:
        """Retire everything in ``scope`` that is complete under ``bound``.

        Returns whether a member emitted updates (or a nested loop ran a
        round) where that is known (one worker), None where it is not
        (several: a worker whose members emit nothing may still be
        waited on).
        """
        plan = scope.plan()
        if plan.local and self.alone:
            # One worker: nothing is sent or in flight and the hooks do nothing, so a step is the members'
            # steps in order (what the loop below does then, without its bookkeeping per member).
            emitted = False
            for m, loop in plan.steps:
                if loop:
                    emitted |= self.step_loop(m, bound)
                elif m.has_ready_work(bound):
                    before = m.updates_out
                    t0 = perf_counter()
                    m.run_step(bound)
                    m.busy_s += perf_counter() - t0
                    emitted |= m.updates_out != before
            if scope.parent is None:
                self.quiescent(scope)
            return emitted
        self.begin_epoch()
        in_flight: list[tuple[int, int]] = []  # (position, epoch) of exchanges not yet complete here
        for i, m in enumerate(plan.order):
            if plan.sync[i] and in_flight:
                need = [p for p in in_flight if i in plan.reach[p[0]]]
                if need:
                    self.wait_complete(plan, need, i, bound)
                    in_flight = [p for p in in_flight if p not in need]
            if isinstance(m, IterativeScope):
                self.step_loop(m, bound)
                self.begin_epoch()
                continue
            if not m.sends_to_workers and not m.has_ready_work(bound):
                continue  # nothing queued or pending that this step could retire: it would do nothing
            self.step_node(m, bound)
            if m.sends_to_workers:
                in_flight.append(self.send(i, m))
        if in_flight:
            self.wait_complete(plan, in_flight, len(plan.order), bound)
        if scope.parent is None:
            self.quiescent(scope)
        return None

    def step_loop(self, loop: IterativeScope, outer_bound: np.ndarray) -> bool:
        """Run the loop's rounds until no work with a complete outer time is left; whether a round ran.

        Where the round just run is known to have emitted updates (one
        worker), the next is its successor, without asking the body for
        its least round (:meth:`IterativeScope.next_round`, a scan of every
        member's work): the body's feedback is for it.  A round that emits
        nothing is where the loop asks, to jump ahead or stop.  (Emitted,
        not stepped: a member may be stepped at every round without
        progress, such as an enter node holding input for a later outer
        time.)  A guess is never wrong, only wasted: every round before
        it has run.  So a step of the loop costs one empty round and saves
        a scan a round; workers agree on every round instead
        (``agree_round``).  With one worker a fused loop round may run the
        rounds after it in the same call (``chain_limit``; it reports them
        in ``rounds_ahead``), and the loop goes on after the last of them.
        """
        loop.check_variables()
        loop.growth = []
        started = time.monotonic()
        last = -1
        r, guessed = None, False
        while True:
            if r is None:
                r, guessed = self.agree_round(loop.next_round(outer_bound)), False
                if r is None:
                    return last >= 0
            if r <= last:
                # A round steps every member in order, so what it makes is for later rounds: work left at
                # it means a member was not stepped.  Raised, because rerunning the round would spin.
                raise DataflowError(f"loop {loop.name!r}: internal error, work at iteration {r} is left after "
                                    f"iteration {last} ran")
            over = r > loop.max_iterations
            if over or time.monotonic() - started > loop.max_seconds:
                if guessed:
                    r = None  # a guess past a limit: the loop fails only if the body has work there
                    continue
                limit = f"max_iterations={loop.max_iterations}" if over else f"max_seconds={loop.max_seconds:g}"
                raise loop.not_converged(limit, r, outer_bound)
            last = r
            loop.rounds_run = max(loop.rounds_run, r + 1)
            bound = np.empty(len(outer_bound) + 1, dtype=np.int64)
            bound[:-1] = outer_bound
            bound[-1] = r + 1
            # One worker may run rounds r, r + 1, ... in one fused call (its peers would wait for each).
            loop.chain_limit, loop.rounds_ahead = (loop.max_iterations - r + 1 if self.alone else 1), 0
            emitted = self.step_scope(loop, bound)
            ahead, loop.chain_limit, loop.rounds_ahead = loop.rounds_ahead, 1, 0
            if ahead:
                last += ahead
                loop.rounds_run = max(loop.rounds_run, last + 1)
            loop.after_rounds(last, time.monotonic() - started)
            r, guessed = (last + 1, True) if emitted else (None, False)

    # -- hooks -------------------------------------------------------------------------
    def begin_epoch(self) -> None:
        """A new scope step begins (workers tag their messages with it)."""

    def step_node(self, node: Node, bound: np.ndarray) -> None:
        """Step one node."""
        node.run_step(bound)

    def send(self, position: int, node: Node) -> tuple[int, int]:
        """Ship what ``node`` produced for other workers; returns what to wait on."""
        raise DataflowError(f"operator {node.name!r} sends to other workers, but this dataflow has one")

    def wait_complete(self, plan: Plan, need: list[tuple[int, int]], upto: int, bound: np.ndarray) -> None:
        """Return when the exchanges ``need`` have delivered everything addressed here."""

    def agree_round(self, mine: int | None) -> int | None:
        """The next loop round all workers run: here, this worker's own."""
        return mine

    def quiescent(self, top: Scope) -> None:
        """A top-level step is done: no operator is mid-step, so nothing holds codes outside the nodes.

        Collects the interner's unused codes when that is due (see
        :func:`collect_codes`).
        """
        collect_codes(top)


def compaction_frontier(frontier: int, depth: int) -> Antichain:
    """Every future time in a scope of ``depth`` is beyond ``(frontier, 0, ..., 0)``."""
    return Antichain(np.array([[frontier] + [0] * (depth - 1)], dtype=np.int64))


def compact(scope: Scope, frontier: int) -> None:
    """Advance every trace under ``scope`` to ``frontier``, then spend the step's idle effort on the traces it did not write.

    All times before ``frontier`` are final.  Called after every top-level
    step, by one worker and by each of several.  Compacting every few
    time units instead measured 2.6% faster at one update per step but
    held 21% more updates (merges in between kept distinct times the
    frontier had passed).

    Idle effort: a trace's merges are fuelled by its insertions, so a
    trace that is no longer written (an idle dataflow, or an input that
    stopped while others go on) would keep a merge in progress, or
    batches that cancel, for good.  Each step, the traces that were not
    written since the step before and are not in their idle shape
    (:meth:`ddflow.traces.spine.Spine.wants_effort`) share
    :data:`~ddflow.traces.spine.IDLE_FUEL` units of merge work when the
    step wrote no trace, :data:`~ddflow.traces.spine.MIN_FUEL` (what one
    insertion gives) when it wrote some, starting with a different trace
    each step.  A trace in its idle shape is skipped for O(1) until it is
    written again, so a dataflow that stays idle stops paying, and a
    written trace keeps its insertions' fuel alone.  Cost: O(traces)
    attribute reads, plus at most about ``IDLE_FUEL`` updates merged.
    """
    frontiers: dict[int, Antichain] = {}
    scope.compactions += 1
    step = scope.compactions
    idle = None
    writes = 0
    for node in scope.all_nodes():
        for h in node.trace_handles():
            depth = h.trace.depth
            if depth not in frontiers:
                frontiers[depth] = compaction_frontier(frontier, depth)
            h.set_logical_compaction(frontiers[depth])
            spine = h.trace.spine
            writes += spine.writes
            if spine.wants_effort(step):
                (idle := idle or []).append(spine)
    wrote, scope.writes = writes != scope.writes, writes
    if idle:
        # A step that wrote nothing may merge IDLE_FUEL; one that wrote some trace adds to its cost no more
        # than one more insertion would (MIN_FUEL), so a busy dataflow's steps stay as flat as its fuel keeps them.
        exert_idle(scope, idle, step, MIN_FUEL if wrote else IDLE_FUEL)


#: Once idle effort has freed this many bytes of traces, the allocator is asked to give free memory back to the
#: system (:func:`ddflow.base.heap.trim`): freed arrays otherwise stay in the process, at its peak RSS.
TRIM_BYTES = 1 << 24


def exert_idle(scope: Scope, spines: list, step: int, fuel: int = IDLE_FUEL) -> int:
    """Share ``fuel`` units of merge work among ``spines``, starting at one that turns with ``step``; the units spent.

    Each spine takes what it can use (:meth:`ddflow.traces.spine.Spine.exert_idle`),
    the next what is left.  What the merges free is counted: the object
    cells they let go of tell the interner (a collection of the codes no
    longer held may be due, :meth:`ddflow.base.interner.Interner.release`),
    and past about :data:`TRIM_BYTES` of arrays the heap is trimmed.  Cost:
    about ``fuel`` updates merged, O(batches) for each spine exerted.
    """
    spent = 0
    first = step % len(spines)
    released = 0
    for spine in spines[first:] + spines[:first]:
        if spent >= fuel:
            break
        n = len(spine)
        spent += spine.exert_idle(fuel - spent)
        gone = max(n - len(spine), 0)
        # About 8 bytes an update per column, time coordinate and diff (what the arrays of a batch take at most).
        scope.freed_bytes += 8 * gone * (len(spine.kinds) + spine.depth + 1)
        released += gone * spine.kinds.count("o")
    if released:  # interner codes the traces no longer hold: a collection may be due (at a quiescent point)
        scope.ctx.interner.release(released)
    if scope.freed_bytes >= TRIM_BYTES:
        scope.freed_bytes = 0
        trim()
    return spent


def collect_codes(scope: Scope, force: bool = False) -> int:
    """Free the interner codes no node of the dataflow holds; return how many were freed.

    Mark and sweep: every node reports the code columns it still holds
    (:meth:`ddflow.graph.node.Node.held_columns`: traces, queues, pending
    work, undrained captures) and the interner frees the rest
    (:meth:`ddflow.base.interner.Interner.collect`).  Runs only when the
    interner says a collection is due (or ``force``), and only between
    steps, where no operator keeps codes in locals: the scheduler calls it
    at the end of every top-level step.  The whole dataflow is marked
    whichever of its scopes is given.  A hashed interner (several workers)
    is collected only when forced, by the worker pool, which has every
    process collect at once (see :mod:`ddflow.base.interner`).  Cost:
    O(cells held + capacity) vectorized, amortized O(1) per new value when
    not forced.
    """
    while scope.parent is not None:
        scope = scope.parent
    interner = scope.ctx.interner
    if not force and (interner.hashed or not interner.due()):
        return 0
    return interner.collect(c for n in scope.all_nodes() for c in n.held_columns())


def trace_size(scope: Scope) -> int:
    """Updates held as state in ``scope``: traces (arrangements, reduce outputs) and operators' own state."""
    return sum(n.records_held() for n in scope.all_nodes())


def trace_bytes(scope: Scope) -> int:
    """Bytes held in the traces of ``scope``."""
    return sum(n.bytes_held() for n in scope.all_nodes())


def operator_stats(scope: Scope) -> list[dict]:
    """Per operator of ``scope``: its name and kind, the records and bytes it holds, updates queued, in and out,
    and the seconds spent in its steps."""
    return [{"operator": n.name, "kind": type(n).__name__, "records": n.records_held(), "bytes": n.bytes_held(),
             "queued": n.queued(), "updates_in": n.updates_in, "updates_out": n.updates_out, "busy_s": n.busy_s}
            for n in scope.all_nodes()]
