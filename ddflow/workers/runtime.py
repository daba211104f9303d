"""Multi-worker execution: W processes, each running the whole dataflow on its share of the keys.

``Dataflow(workers=W)`` forks W worker processes at its first ``run()``,
after the graph is built, so every operator, lambda and closure is
already in each worker's memory.  The driver (the user's process) keeps
the input handles and the captures: it partitions each run's input by key
(:func:`ddflow.workers.exchange.partition`), sends every worker its share, and
receives the outputs merged into one consolidated batch per capture.

Progress.  Every worker runs the one scheduler
(:class:`ddflow.graph.scope.Scheduler`) that a single-process dataflow
runs: each scope step visits its members in topological order, loops run
rounds.  :class:`WorkerRuntime` only fills in its hooks.  Data crosses workers
only at exchanges, and is handed downstream the moment it arrives; only
operators that must see *complete* input under the step's bound (the
reduce family, and a nested loop as a whole) wait, and only for the
exchanges upstream of them.  The schedule is deterministic, so all
workers pass the same sequence of steps (epochs) and tag their messages
with it.

Completion is counted, not signalled.  A worker sends a peer a message
only when it has data for it, and remembers whom it sent to.  Where a
reduce needs its exchanges complete, the workers sum those per-destination
counts by recursive halving (a reduce-scatter: log2(W) pairwise exchanges
of ever shorter vectors), after which each worker knows how many data
messages are addressed to it and waits for exactly those.  So a round
costs each worker O(log W) coordination messages plus its data messages,
never a marker to every peer; and while counts settle the worker keeps
joining and mapping what has already arrived.  Where the workers must
agree on something (the next round of a loop) they allreduce by recursive
doubling, again log2(W) pairwise exchanges with no central coordinator.
Waiting means polling the worker's own sockets for a moment (``SPIN_S``,
when the machine has a core for every worker and one to spare: a peer's
reply in a round usually comes within it) and then blocking in epoll on
them, so a message wakes only the worker it is addressed to.

Outputs are merged pairwise up a binomial tree (ceil(log2 W) levels, the
merges of a level in parallel on different workers); worker 0 sends the
result to the driver.

Costs are measured in ``bench/README.md`` (``python -m bench.rounds``).

The driver's side (forking, commands, faults) is :mod:`ddflow.workers.pool`;
the collectives are :mod:`ddflow.workers.collectives`.

Faults.  A worker that raises reports the exception, with its worker id
and the operator it was running, then exits; a worker that dies is
noticed by the end of its socket, and a shared-memory slot per worker
tells which operator it was in (or that it was idle between commands).
A worker that hangs is noticed by its heartbeat, a thread stamping the
time into the same shared memory (``Dataflow(heartbeat_timeout=...)``).
The driver then stops every worker and raises, naming the worker, its
pid and the operator, and raises that failure again on every later
command.  Inputs the driver sent are not lost from its point of view:
the dataflow is marked failed, and the streaming driver's input log
(which was not committed for the failing batch) rebuilds it.
"""
from __future__ import annotations

import os
import time
from collections import defaultdict, deque
from itertools import chain
from typing import Callable

import numpy as np

from ddflow.base.consolidate import consolidate
from ddflow.base.updates import Updates
from ddflow.graph.context import Context
from ddflow.graph.node import Node
from ddflow.graph.scope import Plan, Scheduler, Scope, compact, operator_stats, trace_bytes, trace_size
from ddflow.workers.collectives import Collectives
from ddflow.workers.transport import Channel, Hub, Message

_INF = np.iinfo(np.int64).max


def merge_batches(parts: list[Updates], ctx: Context, name: str) -> Updates:
    """One consolidated batch from several consolidated ones (sorted runs: a merge, not a re-sort)."""
    nonempty = [p for p in parts if len(p)]
    if len(nonempty) <= 1:
        return nonempty[0] if nonempty else parts[0]
    parts = nonempty
    kinds = parts[0].kinds
    parts = [p if p.kinds == kinds else ctx.coerce(p, kinds, name) for p in parts]
    return consolidate(Updates.concat(parts), runs=True)


def spin_seconds(workers: int, spin: float) -> float:
    """How long a worker polls before blocking: ``spin`` if this machine has more cores than workers, else 0.

    A polling worker holds a core.  Where the workers, with the driver
    and whatever else runs, need every core, it holds the one the peer it
    waits for needs: on this 2-core machine two workers ran reach at
    K=100 16-19% faster without polling (three alternations, a day when
    two busy processes got 1.3-1.7x one's speed), where polling had
    gained 8.6% on a quieter day (``bench/HISTORY.md``, tenth slice and
    stop 56).  A spare core is the cautious rule.  (Workers on several
    machines are counted as if on this one: the cautious side.)

    >>> spin_seconds(10 ** 6, 5e-5)
    0.0
    """
    return spin if workers < usable_cores() else 0.0


def usable_cores() -> int:
    """The cores this process may run on (its affinity where the platform says, else the machine's).  O(1)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class WorkerRuntime(Scheduler):
    """The scheduler of one worker process: the one schedule, with exchange and completion plugged in."""

    #: A waiting worker polls its sockets this long (since its last message) before it blocks in epoll.  A
    #: peer's next message in a round usually comes within this, and waking a blocked process costs tens of
    #: microseconds on a VM: a round trip between two forked processes took 89 us blocking and 19 us polling;
    #: reach at W=2, K=100 gained 8.6% at 300 us, 4% at 50 us, nothing more at 2 ms (``bench/HISTORY.md``,
    #: tenth slice).  Only with a core to spare (:func:`spin_seconds`).
    SPIN_S = 300e-6

    def __init__(self, top: Scope, ctx: Context, me: int, workers: int, peers: dict[int, Channel], driver: Channel,
                 slot: np.ndarray, due: np.ndarray | None = None, ingest=None):
        self.top = top
        #: Where routed input arrives (an :class:`ddflow.workers.ingest.IngestListener`), on executors.
        self.ingest = ingest
        self.due = due if due is not None else np.zeros(workers, dtype=np.int64)
        self.ctx = ctx
        self.me = me
        self.W = workers
        self.peers = peers
        self.driver = driver
        self.slot = slot
        self.hub = Hub([*peers.values(), driver])
        self.nodes: list[Node] = list(top.all_nodes())
        self.nid = {id(n): i for i, n in enumerate(self.nodes)}
        self.captures = [n for n in self.nodes if n.is_output]
        #: Row-wise functions that drop what raises (``on_error="dead-letter"``): their rows go to the driver.
        self.guarded = [i for i, n in enumerate(self.nodes) if getattr(n, "on_error", None) == "dead-letter"]
        for n in self.nodes:
            n.start_worker(me)
        self.coll = Collectives(me, workers, peers, self._wait)
        self.spin = spin_seconds(workers, self.SPIN_S)
        self.epoch = 0
        self.received: dict[tuple[int, int], int] = defaultdict(int)  # data messages per (exchange, epoch)
        self.sent: dict[tuple[int, int], list[int]] = {}  # per (exchange, epoch): the peers that got data
        self.future: dict[int, list[tuple]] = defaultdict(list)
        self.commands: deque[Message] = deque()
        self.stats = {"rounds": 0, "coord_s": [], "wait_s": 0.0, "busy_s": 0.0, "idle_s": 0.0, "runs": 0, "messages": 0,
                      "data_messages": 0}
        self._last_work = time.perf_counter()

    # -- message plumbing ---------------------------------------------------------------------
    def _on_message(self, ch: Channel, m: Message) -> None:
        self.stats["messages"] += 1
        if ch is self.driver:
            self.commands.append(m)
        elif m.kind == "x":
            nid, tag = m.meta
            if tag > self.epoch:
                self.future[tag].append((nid, tag, m.batches[0]))
            else:
                self._deliver(nid, tag, m.batches[0])
        else:
            self.coll.deliver(m)

    def _deliver(self, nid: int, tag: int, batch: Updates) -> None:
        """A peer's share of exchange ``nid`` in step ``tag`` goes downstream (each peer sends at most one)."""
        self.nodes[nid].emit(batch)
        self.received[(nid, tag)] += 1

    def _wait(self, done: Callable[[], bool], on_progress: Callable[[], None] | None = None, state: int = 0) -> None:
        """Block in epoll until ``done()``; ``state`` goes in the slot meanwhile (-1: idle, between commands).

        The time counts as idle between commands, else as waiting, less the
        operator steps ``on_progress`` ran meanwhile (those count as busy):
        no second is counted twice.
        """
        t0 = time.perf_counter()
        busy0 = self.stats["busy_s"]
        self.slot[2 * self.me + 1] = state
        spin_until = t0 + self.spin
        while not done():
            timeout = 0 if self.spin and time.perf_counter() < spin_until else None  # poll, then block
            if self.hub.poll(self._on_message, timeout) and on_progress is not None:
                on_progress()
                self.slot[2 * self.me + 1] = 0
                spin_until = time.perf_counter() + self.spin
        elapsed = time.perf_counter() - t0
        if state == -1:
            self.stats["idle_s"] += elapsed
        else:
            self.stats["wait_s"] += elapsed - (self.stats["busy_s"] - busy0)

    # -- the scheduler's hooks -------------------------------------------------------------------
    def begin_epoch(self) -> None:
        self.epoch += 1
        for entry in self.future.pop(self.epoch, ()):
            self._deliver(*entry)

    def step_node(self, m: Node, bound: np.ndarray) -> None:
        self.slot[2 * self.me] = self.nid[id(m)] + 1
        self.slot[2 * self.me + 1] = 1
        t0 = time.perf_counter()
        m.run_step(bound)
        self._last_work = time.perf_counter()
        self.stats["busy_s"] += self._last_work - t0
        m.busy_s += self._last_work - t0
        self.slot[2 * self.me + 1] = 0

    def send(self, position: int, x: Node) -> tuple[int, int]:
        """Send each peer with a share of ``x``'s step its share now, in one message; note who got one.

        Data is never held back (a waiting peer can start on it) and a peer
        with no share gets nothing: completion is counted in :meth:`wait_complete`.
        """
        per: dict[int, list[Updates]] = defaultdict(list)
        for w, part in x.outgoing:
            per[w].append(part)
        x.outgoing = []
        key = (self.nid[id(x)], self.epoch)
        for w, parts in per.items():
            self.peers[w].send(Message("x", key, [Updates.concat(parts)]))
        self.sent[key] = list(per)
        self.stats["data_messages"] += len(per)
        return position, self.epoch

    def wait_complete(self, plan: Plan, need: list[tuple[int, int]], upto: int, bound: np.ndarray) -> None:
        """Wait until every data message of the exchanges ``need`` addressed here has arrived.

        How many that is comes from summing every worker's per-destination
        counts (a reduce-scatter); what arrives meanwhile is joined and
        mapped at once.
        """
        order, reach, sync = plan.order, plan.reach, plan.sync
        restep = sorted({q for p, _ in need for q in reach[p] if q < upto and not sync[q]})
        keys = [(self.nid[id(order[p])], tag) for p, tag in need]

        def work() -> None:
            for q in restep:
                self.step_node(order[q], bound)

        counts = np.bincount([w for k in keys for w in self.sent.pop(k)], minlength=self.W)
        expected = self.coll.reduce_scatter(counts, work)

        def done() -> bool:
            return sum(self.received.get(k, 0) for k in keys) >= expected

        self._wait(done, work)
        work()
        for k in keys:
            self.received.pop(k, None)

    def agree_round(self, mine: int | None) -> int | None:
        """The least next round over all workers (each must run it, with or without work)."""
        r = self.coll.allreduce(_INF if mine is None else mine, min)
        self.stats["coord_s"].append(time.perf_counter() - self._last_work)
        if r == _INF:
            return None
        self.stats["rounds"] += 1
        return r

    # -- commands from the driver -------------------------------------------------------------------------
    def serve(self) -> None:
        while True:
            self._wait(lambda: bool(self.commands), state=-1)
            cmd = self.commands.popleft()
            self.slot[2 * self.me + 1] = 0  # busy with a command, not yet in an operator
            if cmd.kind == "run":
                self._run(cmd)
            elif cmd.kind == "stats":
                self.driver.send(Message("stats", self._stats()))
            elif cmd.kind == "stop":
                return

    def _run(self, cmd: Message) -> None:
        frontier, ids, collect, routed = cmd.meta
        for nid, b in zip(ids, cmd.batches):
            self.nodes[nid].push(0, b)
        if routed is not None:  # this run's input also came straight from the executors
            if self.ingest is None:
                raise RuntimeError("routed input, but this worker has no ingest listener")
            batch, partitions, inputs = routed  # inputs: {input node id: the driver's column kinds, or None}
            kinds = {nid: k if k is not None else self.nodes[nid].kinds for nid, k in inputs.items()}
            # Checked in full before any is pushed: a bad frame fails the run with nothing of it applied.
            for nid, b in self.ingest.take(batch, partitions, self.ctx.interner, kinds, self.ctx.completed):
                self.nodes[nid].push(0, b)
        if collect:  # every process does it now, before it sends anything of this run (WorkerPool._collect_codes)
            self._collect_codes()
        self.step_scope(self.top, np.array([frontier], dtype=np.int64))
        self.due[self.me] = self.ctx.interner.due()  # read by the driver before the next run
        if self.guarded:  # every worker reports, so the driver knows when it has them all
            self.driver.send(Message("failed", [(i, self.nodes[i].failed) for i in self.guarded]))
            for i in self.guarded:
                self.nodes[i].failed = []
        outs = {}
        for cap in self.captures:
            if cap.parts:
                outs[self.nid[id(cap)]] = merge_batches([consolidate(p) for p in cap.parts], self.ctx, cap.name)
                cap.parts = []
        merged = self.coll.merge_up(outs, lambda a, b, nid: merge_batches([a, b], self.ctx, self.nodes[nid].name))
        if self.me == 0:
            ids = sorted(merged)
            self.driver.send(Message("done", ids, [merged[i] for i in ids]))
        self.ctx.completed = frontier
        compact(self.top, frontier)  # the driver's frontier: every time before it is final here too
        self.stats["runs"] += 1

    def _collect_codes(self) -> None:
        """Free the codes nothing here holds, and make every channel send values with their codes again.

        Besides the nodes' columns, exchange batches that arrived early (a
        faster peer already running this run) are held: their values came
        with them and must stay.
        """
        early = (col for entries in self.future.values() for _, _, b in entries
                 for col, k in zip(b.cols, b.kinds) if k == "o")
        self.ctx.interner.collect(chain((c for n in self.nodes for c in n.held_columns()), early))
        for ch in (*self.peers.values(), self.driver):
            ch.forget_sent()

    def _stats(self) -> dict:
        coord = self.stats["coord_s"]
        return {"worker": self.me, "trace_size": trace_size(self.top),
                "interner_values": len(self.ctx.interner), "interner_collections": self.ctx.interner.collections,
                "trace_bytes": trace_bytes(self.top), "rounds": self.stats["rounds"],
                "runs": self.stats["runs"], "wait_s": self.stats["wait_s"], "busy_s": self.stats["busy_s"],
                # between the driver's commands (not waiting on peers: the driver had nothing for it)
                "idle_s": self.stats["idle_s"],
                # CPU seconds since the fork: unlike waiting, not inflated when workers time-share cores
                # (read here only: clock_gettime for CPU time is a real system call, ~20 us on this VM)
                "cpu_s": time.process_time(),
                "coord_s": list(coord[-5000:]),
                "messages_received": self.stats["messages"],
                "messages_sent": sum(c.messages_sent for c in self.peers.values()),
                "data_messages_sent": self.stats["data_messages"],  # the rest are collectives
                "bytes_sent": sum(c.bytes_sent for c in self.peers.values()),
                "operators": operator_stats(self.top)}
