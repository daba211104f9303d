"""Multi-worker execution: W processes, each running the whole dataflow on its share of the keys.

``Dataflow(workers=W)`` forks W worker processes at its first ``run()``,
after the graph is built, so every operator, lambda and closure is
already in each worker's memory.  The driver (the user's process) keeps
the input handles and the captures: it partitions each run's input by key
(:func:`ddflow.exchange.partition`), sends every worker its share, and
receives the outputs merged into one consolidated batch per capture.

Progress.  Every worker runs the same structural schedule as the
single-process engine (``ddflow.node``): each scope step visits its
members in topological order, loops run rounds.  Data crosses workers
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
Waiting means blocking in epoll on the worker's own sockets, so a message
wakes only the worker it is addressed to.

Outputs are merged pairwise up a binomial tree (ceil(log2 W) levels, the
merges of a level in parallel on different workers); worker 0 sends the
result to the driver.

Costs are measured in ``bench/README.md`` (``python -m bench.rounds``).

Faults.  A worker that raises reports the exception, with its worker id
and the operator it was running, then exits; a worker that dies is
noticed by the end of its socket, and a shared-memory slot per worker
tells which operator it was in.  The driver then stops every worker and
raises, naming both.  Inputs the driver sent are not lost from its point
of view: the dataflow is marked failed, and the streaming driver's input
log (which was not committed for the failing batch) rebuilds it.
"""
from __future__ import annotations

import mmap
import os
import signal
import socket
import time
import traceback
import weakref
from collections import defaultdict, deque
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ddflow import errors
from ddflow.capture import CaptureNode
from ddflow.exchange import ExchangeNode, partition
from ddflow.node import IterativeScope, Node, Scope
from ddflow.reduce import ReduceNode
from ddflow.transport import Channel, ChannelClosed, Hub, Message
from ddflow.updates import Updates, consolidate

if TYPE_CHECKING:
    from ddflow.dataflow import Dataflow

_INF = np.iinfo(np.int64).max
#: Sockets of every live pool in this process: a forked worker closes those that are not its own,
#: so the end of a socket is seen as soon as the process that owned it is gone.
_LIVE_SOCKETS: "weakref.WeakSet[socket.socket]" = weakref.WeakSet()


def _needs_complete_input(m: Any) -> bool:
    return isinstance(m, (ExchangeNode, ReduceNode, IterativeScope))


def merge_batches(parts: list[Updates], flow: "Dataflow", name: str) -> Updates:
    """One consolidated batch from several consolidated ones (sorted runs: a merge, not a re-sort)."""
    nonempty = [p for p in parts if len(p)]
    if len(nonempty) <= 1:
        return nonempty[0] if nonempty else parts[0]
    parts = nonempty
    kinds = parts[0].kinds
    parts = [p if p.kinds == kinds else flow.coerce(p, kinds, name) for p in parts]
    return consolidate(Updates.concat(parts), runs=True)


# -- in each worker process ------------------------------------------------------------------------


class WorkerRuntime:
    """The scheduler of one worker process."""

    def __init__(self, flow: "Dataflow", me: int, workers: int, peers: dict[int, Channel], driver: Channel,
                 slot: np.ndarray):
        self.flow = flow
        self.me = me
        self.W = workers
        self.peers = peers
        self.driver = driver
        self.slot = slot
        self.hub = Hub([*peers.values(), driver])
        self.nodes: list[Node] = list(flow.top.all_nodes())
        self.nid = {id(n): i for i, n in enumerate(self.nodes)}
        self.captures = [n for n in self.nodes if isinstance(n, CaptureNode)]
        for n in self.nodes:
            # Forked with the driver's memory: queued input belongs to the driver, which sends each worker its share.
            n.queues = [[] for _ in n.queues]
            if isinstance(n, ExchangeNode):
                n.me = me
            if isinstance(n, CaptureNode):
                n.callback = None  # subscriptions are called in the driver, with the merged output
        self.plans: dict[int, tuple] = {}
        self.epoch = 0
        self.received: dict[tuple[int, int], int] = defaultdict(int)  # data messages per (exchange, epoch)
        self.sent: dict[tuple[int, int], list[int]] = {}  # per (exchange, epoch): the peers that got data
        self.future: dict[int, list[tuple]] = defaultdict(list)
        # Collectives: one message per (kind, sequence number); P is the largest power of two <= W.
        self.collective_msgs: dict[tuple[str, int], Message] = {}
        self.collective_seq = 0
        self.P = 1 << (workers.bit_length() - 1)
        self.commands: deque[Message] = deque()
        self.stats = {"rounds": 0, "coord_s": [], "wait_s": 0.0, "busy_s": 0.0, "runs": 0, "messages": 0,
                      "data_messages": 0}
        self._last_work = time.perf_counter()
        self.by_node: dict[str, float] = defaultdict(float)  # busy seconds per operator

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
            self.collective_msgs[(m.kind, m.meta[0])] = m

    def _deliver(self, nid: int, tag: int, batch: Updates) -> None:
        """A peer's share of exchange ``nid`` in step ``tag`` goes downstream (each peer sends at most one)."""
        self.nodes[nid].emit(batch)
        self.received[(nid, tag)] += 1

    def _new_epoch(self) -> None:
        self.epoch += 1
        for entry in self.future.pop(self.epoch, ()):
            self._deliver(*entry)

    def _wait(self, done: Callable[[], bool], on_progress: Callable[[], None] | None = None) -> None:
        t0 = time.perf_counter()
        self.slot[2 * self.me + 1] = 0
        while not done():
            if self.hub.poll(self._on_message) and on_progress is not None:
                on_progress()
                self.slot[2 * self.me + 1] = 0
        self.stats["wait_s"] += time.perf_counter() - t0

    # -- the schedule ---------------------------------------------------------------------------------
    def _plan(self, scope: Scope) -> tuple:
        """Members in order, which members each reaches (feedback cut), and which need complete input."""
        key = id(scope)
        if key not in self.plans:
            order = scope.ordered()
            pos = {id(m): i for i, m in enumerate(order)}
            succ: list[set[int]] = [set() for _ in order]
            for n in scope.all_nodes():
                a = scope._item_of(n)
                for t, port in n.targets:
                    if port == t.feedback_port:
                        continue
                    b = scope._item_of(t)
                    if a is not None and b is not None and a is not b:
                        succ[pos[id(a)]].add(pos[id(b)])
            reach: list[set[int]] = [set() for _ in order]
            for i in reversed(range(len(order))):  # successors come later in a topological order
                for j in succ[i]:
                    reach[i].add(j)
                    reach[i] |= reach[j]
            self.plans[key] = (order, reach, [_needs_complete_input(m) for m in order])
        return self.plans[key]

    def _step(self, m: Node, bound: np.ndarray) -> None:
        self.slot[2 * self.me] = self.nid[id(m)] + 1
        self.slot[2 * self.me + 1] = 1
        t0 = time.perf_counter()
        m.step(bound)
        self._last_work = time.perf_counter()
        self.stats["busy_s"] += self._last_work - t0
        self.by_node[m.name] += self._last_work - t0
        self.slot[2 * self.me + 1] = 0

    def step_scope(self, scope: Scope, bound: np.ndarray) -> None:
        order, reach, sync = self._plan(scope)
        self._new_epoch()
        pending: list[tuple[int, int]] = []  # (position, epoch tag) of exchanges not yet complete here
        for i, m in enumerate(order):
            if sync[i] and pending:
                need = [p for p in pending if i in reach[p[0]]]
                if need:
                    self._complete(scope, need, i, bound)
                    pending = [p for p in pending if p not in need]
            if isinstance(m, IterativeScope):
                self.step_loop(m, bound)
                self._new_epoch()
                continue
            self._step(m, bound)
            if isinstance(m, ExchangeNode):
                self._finalize(m)
                pending.append((i, self.epoch))
        if pending:
            self._complete(scope, pending, len(order), bound)

    def _finalize(self, x: ExchangeNode) -> None:
        """Send each peer with a share of ``x``'s step its share now, in one message; note who got one.

        Data is never held back (a waiting peer can start on it) and a peer
        with no share gets nothing: completion is counted in :meth:`_complete`.
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

    def _complete(self, scope: Scope, need: list[tuple[int, int]], upto: int, bound: np.ndarray) -> None:
        """Wait until every data message of the exchanges ``need`` addressed here has arrived.

        How many that is comes from summing every worker's per-destination
        counts (:meth:`reduce_scatter`); what arrives meanwhile is joined and
        mapped at once.
        """
        order, reach, sync = self._plan(scope)
        restep = sorted({q for p, _ in need for q in reach[p] if q < upto and not sync[q]})
        keys = [(self.nid[id(order[p])], tag) for p, tag in need]

        def work() -> None:
            for q in restep:
                self._step(order[q], bound)

        counts = np.bincount([w for k in keys for w in self.sent.pop(k)], minlength=self.W)
        expected = self.reduce_scatter(counts, work)

        def done() -> bool:
            return sum(self.received.get(k, 0) for k in keys) >= expected

        self._wait(done, work)
        work()
        for k in keys:
            self.received.pop(k, None)

    def step_loop(self, loop: IterativeScope, outer_bound: np.ndarray) -> None:
        for v in loop.variables:
            if v.feedback_source is None:
                raise errors.DataflowError(f"loop {loop.name!r}: variable {v.name!r} was never set")
        while True:
            mine = loop.next_round(outer_bound)
            r = self.allreduce(_INF if mine is None else mine, min)
            self.stats["coord_s"].append(time.perf_counter() - self._last_work)
            if r == _INF:
                return
            if r > loop.max_iterations:
                raise errors.NonConvergence(
                    f"loop {loop.name!r} did not converge within max_iterations={loop.max_iterations} "
                    f"(still changing at iteration {r})")
            loop.rounds_run = max(loop.rounds_run, r + 1)
            self.stats["rounds"] += 1
            self.step_scope(loop, np.append(outer_bound, r + 1))

    # -- collectives: log2(W) pairwise exchanges each ----------------------------------------------------
    # Every worker calls the same collectives in the same order (the schedule
    # is deterministic), so a shared sequence number pairs up their messages.
    # Where W is not a power of two, the workers beyond the largest power of
    # two P <= W fold into worker ``me - P`` first and hear back last.

    def _next_seq(self) -> int:
        self.collective_seq += 1
        return self.collective_seq - 1

    def _take(self, kind: str, seq: int, work: Callable[[], None] | None = None) -> Message:
        key = (kind, seq)
        self._wait(lambda: key in self.collective_msgs, work)
        return self.collective_msgs.pop(key)

    def allreduce(self, value: int, op: Callable[[int, int], int]) -> int:
        """``op`` over every worker's ``value``, known to all, by recursive doubling.

        ``op`` must be commutative and associative (partners combine in opposite orders).
        """
        seq, me, W, P = self._next_seq(), self.me, self.W, self.P
        if me >= P:
            self.peers[me - P].send(Message("fold", (seq, value)))
            return self._take("unfold", seq).meta[1]
        if me + P < W:
            value = op(value, self._take("fold", seq).meta[1])
        k = 1
        while k < P:
            self.peers[me ^ k].send(Message(f"ar{k}", (seq, value)))
            value = op(value, self._take(f"ar{k}", seq).meta[1])
            k <<= 1
        if me + P < W:
            self.peers[me + P].send(Message("unfold", (seq, value)))
        return value

    def reduce_scatter(self, counts: np.ndarray, work: Callable[[], None] | None = None) -> int:
        """The sum over all workers of their ``counts[me]``, by recursive halving.

        ``counts`` has one entry per destination worker.  Each of the P core
        workers answers for itself and its folded partner, so the vector is
        P rows of two; at every step a worker keeps the half of the rows that
        holds its own and sends the other half to its partner: messages
        shrink from P/2 rows to one.
        """
        seq, me, W, P = self._next_seq(), self.me, self.W, self.P
        if me >= P:
            self.peers[me - P].send(Message("rsfold", (seq, counts.tolist())))
            return self._take("rsunfold", seq, work).meta[1]
        rows = np.zeros((P, 2), dtype=np.int64)
        rows[:, 0] = counts[:P]
        rows[: W - P, 1] = counts[P:]
        if me + P < W:
            theirs = np.asarray(self._take("rsfold", seq, work).meta[1], dtype=np.int64)
            rows[:, 0] += theirs[:P]
            rows[: W - P, 1] += theirs[P:]
        lo, k = 0, P // 2  # rows [lo, lo + 2k) are this worker's block
        while k:
            keep, give = (lo + k, lo) if me & k else (lo, lo + k)
            self.peers[me ^ k].send(Message(f"rs{k}", (seq, rows[give : give + k].tolist())))
            rows[keep : keep + k] += np.asarray(self._take(f"rs{k}", seq, work).meta[1], dtype=np.int64)
            lo, k = keep, k // 2
        if me + P < W:
            self.peers[me + P].send(Message("rsunfold", (seq, int(rows[me, 1]))))
        return int(rows[me, 0])

    def merge_up(self, outs: dict[int, Updates]) -> dict[int, Updates]:
        """Merge every worker's outputs pairwise up a binomial tree; worker 0 ends with the total.

        At level k (1, 2, 4, ...) a worker with bit k set sends what it holds
        to ``me - k`` and is done; the others merge in what ``me + k`` sends.
        """
        seq, me = self._next_seq(), self.me
        held = dict(outs)
        k = 1
        while k < self.W:
            if me & k:
                ids = sorted(held)
                self.peers[me - k].send(Message(f"merge{k}", (seq, ids), [held[i] for i in ids]))
                return {}
            if me + k < self.W:
                m = self._take(f"merge{k}", seq)
                for nid, u in zip(m.meta[1], m.batches):
                    held[nid] = merge_batches([held[nid], u], self.flow, self.nodes[nid].name) if nid in held else u
            k <<= 1
        return held

    # -- commands from the driver -------------------------------------------------------------------------
    def serve(self) -> None:
        while True:
            self._wait(lambda: bool(self.commands))
            cmd = self.commands.popleft()
            if cmd.kind == "run":
                self._run(cmd)
            elif cmd.kind == "stats":
                self.driver.send(Message("stats", self._stats()))
            elif cmd.kind == "stop":
                return

    def _run(self, cmd: Message) -> None:
        frontier, ids = cmd.meta
        self.flow.frontier = frontier  # the driver's frontier: this worker's compaction follows it
        for nid, b in zip(ids, cmd.batches):
            self.nodes[nid].push(0, b)
        self.step_scope(self.flow.top, np.array([frontier], dtype=np.int64))
        outs = {}
        for cap in self.captures:
            if cap.parts:
                outs[self.nid[id(cap)]] = merge_batches([consolidate(p) for p in cap.parts], self.flow, cap.name)
                cap.parts = []
        merged = self.merge_up(outs)
        if self.me == 0:
            ids = sorted(merged)
            self.driver.send(Message("done", ids, [merged[i] for i in ids]))
        self.flow.completed = frontier
        self.flow._compact()
        self.stats["runs"] += 1

    def _stats(self) -> dict:
        coord = self.stats["coord_s"]
        return {"worker": self.me, "trace_size": self.flow._local_trace_size(),
                "trace_bytes": self.flow._local_trace_bytes(), "rounds": self.stats["rounds"],
                "runs": self.stats["runs"], "wait_s": self.stats["wait_s"], "busy_s": self.stats["busy_s"],
                # CPU seconds since the fork: unlike waiting, not inflated when workers time-share cores
                # (read here only: clock_gettime for CPU time is a real system call, ~20 us on this VM)
                "cpu_s": time.process_time(),
                "coord_s": list(coord[-5000:]), "busy_by_operator_s": dict(self.by_node),
                "messages_received": self.stats["messages"],
                "messages_sent": sum(c.messages_sent for c in self.peers.values()),
                "data_messages_sent": self.stats["data_messages"],  # the rest are collectives
                "bytes_sent": sum(c.bytes_sent for c in self.peers.values())}


def _worker_main(flow: "Dataflow", me: int, workers: int, peer_socks: dict[int, socket.socket],
                 driver_sock: socket.socket, slot: np.ndarray) -> None:
    """The body of a forked worker; never returns."""
    code = 0
    driver = Channel(driver_sock, -1, flow.interner)
    rt = None
    try:
        peers = {w: Channel(s, w, flow.interner) for w, s in peer_socks.items()}
        rt = WorkerRuntime(flow, me, workers, peers, driver, slot)
        rt.serve()
    except BaseException as e:  # noqa: BLE001 - everything is reported to the driver
        code = 1
        where = None
        if rt is not None and slot[2 * me]:
            where = rt.nodes[int(slot[2 * me]) - 1].name
        info = {"worker": me, "operator": where, "type": type(e).__name__, "module": type(e).__module__,
                "message": str(e), "traceback": traceback.format_exc(), "peer_closed": isinstance(e, ChannelClosed)}
        try:
            driver.send(Message("error", info))
            deadline = time.monotonic() + 2.0
            while driver.outbox and time.monotonic() < deadline:
                if not driver.flush():
                    time.sleep(0.001)
        except Exception:  # noqa: BLE001 - the driver may be gone too
            pass
    finally:
        os._exit(code)


# -- in the driver -----------------------------------------------------------------------------------


class WorkerPool:
    """The driver's side of W worker processes.  Holds no reference to the dataflow (so it can be collected)."""

    def __init__(self, flow: "Dataflow"):
        W = flow.workers
        self.W = W
        self.names = [n.name for n in flow.top.all_nodes()]
        self.slot_map = mmap.mmap(-1, 16 * W)  # shared with the workers: (operator + 1, inside a step) each
        self.slot = np.frombuffer(self.slot_map, dtype=np.int64)
        pairs = {(i, j): socket.socketpair() for i in range(W) for j in range(i + 1, W)}
        drivers = [socket.socketpair() for _ in range(W)]
        for a, b in [*pairs.values(), *drivers]:
            _LIVE_SOCKETS.add(a)
            _LIVE_SOCKETS.add(b)
        self.pids: list[int] = []
        for me in range(W):
            pid = os.fork()
            if pid == 0:  # the worker
                mine = {j if i == me else i: (a if i == me else b)
                        for (i, j), (a, b) in pairs.items() if me in (i, j)}
                keep = {id(s) for s in mine.values()} | {id(drivers[me][1])}
                for s in list(_LIVE_SOCKETS):
                    if id(s) not in keep:
                        s.close()
                _worker_main(flow, me, W, mine, drivers[me][1], self.slot)
            self.pids.append(pid)
        for (a, b) in pairs.values():
            a.close()
            b.close()
        for _, w in drivers:
            w.close()
        self.channels = [Channel(d, w, flow.interner) for w, (d, _) in enumerate(drivers)]
        self.hub = Hub(self.channels)
        self.closed = False
        self._done: Message | None = None
        self._stats: list[dict] = []
        self._errors: list[dict] = []
        self._gone: set[int] = set()

    # -- messages -----------------------------------------------------------------------------
    def _on_message(self, ch: Channel, m: Message) -> None:
        if m.kind == "done":
            self._done = m
        elif m.kind == "stats":
            self._stats.append(m.meta)
        elif m.kind == "error":
            self._errors.append(m.meta)

    def _collect(self, timeout: float | None) -> None:
        """Take the workers' messages; note every worker whose socket ended."""
        try:
            self.hub.poll(self._on_message, timeout)
        except ChannelClosed:
            pass
        for ch in self.channels:
            if ch.closed and ch.peer not in self._gone:
                self._gone.add(ch.peer)
                try:
                    self.hub.sel.unregister(ch.sock)
                except (KeyError, ValueError):
                    pass

    def _poll(self) -> None:
        self._collect(None)
        if self._errors or self._gone:
            self._fail()

    def _wait(self, done: Callable[[], bool]) -> None:
        if self.closed:
            raise errors.DataflowError("the dataflow's workers were shut down")
        while not done():
            self._poll()

    # -- commands ----------------------------------------------------------------------------------
    def run(self, flow: "Dataflow", frontier: int) -> None:
        """Send every worker its share of the queued input, run to ``frontier``, hand outputs to the captures."""
        shares: list[tuple[list[int], list[Updates]]] = [([], []) for _ in range(self.W)]
        ids = {id(n): i for i, n in enumerate(flow.top.all_nodes())}
        for handle in flow.inputs:
            node, i = handle.node, ids[id(handle.node)]
            if node.queues[0]:
                u = Updates.concat(node.queues[0])
                node.queues[0] = []
                for w, part in enumerate(partition(u, self.W)):
                    if len(part):
                        shares[w][0].append(i)
                        shares[w][1].append(part)
        self._done = None
        for w, ch in enumerate(self.channels):
            ch.send(Message("run", (frontier, shares[w][0]), shares[w][1]))
        self._wait(lambda: self._done is not None)
        nodes = list(flow.top.all_nodes())
        for nid, u in zip(self._done.meta, self._done.batches):
            cap: CaptureNode = nodes[nid]
            if cap.kinds is None:
                cap.kinds = u.kinds
            cap.parts.append(u)
            if cap.callback is not None:
                cap.callback(u)

    def stats(self) -> list[dict]:
        self._stats = []
        for ch in self.channels:
            ch.send(Message("stats"))
        self._wait(lambda: len(self._stats) == self.W)
        return sorted(self._stats, key=lambda s: s["worker"])

    # -- failure and shutdown -------------------------------------------------------------------------
    def _fail(self) -> None:
        """Collect what every worker says for a moment, stop them all, and raise the root cause."""
        deadline = time.monotonic() + 2.0
        while len(self._gone) < self.W and time.monotonic() < deadline:
            self._collect(0.05)
        status = self._kill_all()
        reported = {e["worker"] for e in self._errors}
        primary = [e for e in self._errors if not e["peer_closed"]]
        if primary:
            e = primary[0]
            raise _rebuild(e)
        died = [w for w in sorted(self._gone) if w not in reported]
        if died:
            w = died[0]
            idx, inside = int(self.slot[2 * w]), bool(self.slot[2 * w + 1])
            where = (f"while running operator {self.names[idx - 1]!r}" if inside and idx else
                     f"after operator {self.names[idx - 1]!r}" if idx else "before running any operator")
            raise errors.DataflowError(f"worker {w} (pid {self.pids[w]}) died ({status.get(w, 'exited')}) {where}; "
                                       "the dataflow is stopped")
        raise _rebuild(self._errors[0])

    def _kill_all(self) -> dict[int, str]:
        status = {}
        for w, pid in enumerate(self.pids):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for w, pid in enumerate(self.pids):
            status[w] = _reap(pid)
        self._close()
        return status

    def _close(self) -> None:
        if not self.closed:
            self.closed = True
            for ch in self.channels:
                ch.close()
            self.hub.close()

    def shutdown(self) -> None:
        """Stop the workers (they finish nothing more) and wait for them."""
        if self.closed:
            return
        for ch in self.channels:
            try:
                ch.send(Message("stop"))
            except (ChannelClosed, OSError):
                pass
        deadline = time.monotonic() + 1.0
        while any(ch.outbox for ch in self.channels) and time.monotonic() < deadline:
            try:
                self.hub.poll(lambda c, m: None, 0.01)
            except ChannelClosed:
                break
        self._close()
        for pid in self.pids:
            end = time.monotonic() + 1.0
            while True:
                try:
                    done, _ = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    break
                if done or time.monotonic() > end:
                    if not done:
                        os.kill(pid, signal.SIGKILL)
                        _reap(pid)
                    break
                time.sleep(0.002)


def _reap(pid: int) -> str:
    try:
        _, st = os.waitpid(pid, 0)
    except ChildProcessError:
        return "exited"
    if os.WIFSIGNALED(st):
        return f"killed by {signal.Signals(os.WTERMSIG(st)).name}"
    return f"exit status {os.WEXITSTATUS(st)}"


def _rebuild(e: dict) -> BaseException:
    """The worker's exception, in the driver, naming the worker and the operator."""
    where = f"worker {e['worker']}" + (f", operator {e['operator']!r}" if e["operator"] else "")
    msg = f"{e['message']} [{where}]"
    cls = getattr(errors, e["type"], None) if e["module"] == errors.__name__ else None
    if cls is None and e["module"] == "builtins":
        import builtins

        cls = getattr(builtins, e["type"], None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        cls = errors.DataflowError
    try:
        exc = cls(msg)
    except Exception:  # noqa: BLE001 - a constructor with other arguments
        exc = errors.DataflowError(f"{e['type']}: {msg}")
    exc.worker_traceback = e["traceback"]  # type: ignore[attr-defined]
    return exc
