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
exchanges upstream of them.  An exchange is complete on a worker when
every peer has sent its end-of-step marker, which each peer sends once,
behind its data, on a FIFO socket: the per-peer counts settle without a
coordinator, and while they do the worker keeps joining and mapping what
has already arrived.  The schedule is deterministic, so all workers pass
the same sequence of steps (epochs) and tag their messages with it.  Where
the workers must agree on something (the next round of a loop) they
reduce over a binary tree: log2(W) hops up and down, no one waits for a
central coordinator.  Waiting means blocking in epoll on the worker's own
sockets, so a message wakes only the worker it is addressed to.

Outputs are merged pairwise up the same tree (log2(W) levels, all merges
of a level in parallel on different workers); worker 0 sends the result
to the driver.

Costs (``bench/README.md``).  Per loop round a worker sends each peer at
most one message per exchange that has data for it, plus the end-of-step
markers (coalesced: one message per peer per wait), and takes part in one
tree reduction.  The markers are O(W) messages per worker per round: cheap
at the worker counts one machine holds, the term to replace (by completion
counted over the tree) before W reaches the hundreds.

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


class TreeShape:
    """A binary tree over worker ids: worker 0 at the root, ``i``'s children ``2i+1`` and ``2i+2``."""

    def __init__(self, me: int, workers: int):
        self.me = me
        self.parent = (me - 1) // 2 if me else None
        self.children = [c for c in (2 * me + 1, 2 * me + 2) if c < workers]


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
        self.tree = TreeShape(me, workers)
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
        self.markers: dict[tuple[int, int], int] = defaultdict(int)
        self.future: dict[int, list[tuple]] = defaultdict(list)
        self.deferred: dict[int, list[tuple[int, int]]] = {w: [] for w in peers}
        self.tree_msgs: dict[tuple[str, int], list[Message]] = defaultdict(list)
        self.tree_seq = 0
        self.commands: deque[Message] = deque()
        self.stats = {"rounds": 0, "coord_s": [], "wait_s": 0.0, "busy_s": 0.0, "runs": 0, "messages": 0}
        self._last_work = time.perf_counter()
        self.by_node: dict[str, float] = defaultdict(float)  # busy seconds per operator

    # -- message plumbing ---------------------------------------------------------------------
    def _on_message(self, ch: Channel, m: Message) -> None:
        self.stats["messages"] += 1
        if ch is self.driver:
            self.commands.append(m)
        elif m.kind == "x":
            batches = iter(m.batches)
            for nid, tag, has_data in m.meta:
                entry = (nid, tag, next(batches) if has_data else None)
                if tag > self.epoch:
                    self.future[tag].append(entry)
                else:
                    self._deliver(*entry)
        else:
            self.tree_msgs[(m.kind, m.meta[0])].append(m)

    def _deliver(self, nid: int, tag: int, batch: Updates | None) -> None:
        """A peer's share of exchange ``nid`` goes downstream; it is that peer's last for step ``tag``."""
        if batch is not None:
            self.nodes[nid].emit(batch)
        self.markers[(nid, tag)] += 1

    def _new_epoch(self) -> None:
        self.epoch += 1
        for entry in self.future.pop(self.epoch, ()):
            self._deliver(*entry)

    def _send_deferred(self) -> None:
        """Markers without data wait for the next data message to their peer, or for the next wait."""
        for w, marks in self.deferred.items():
            if marks:
                self.peers[w].send(Message("x", [(n, t, False) for n, t in marks]))
                marks.clear()

    def _wait(self, done: Callable[[], bool], on_progress: Callable[[], None] | None = None) -> None:
        self._send_deferred()
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
        """Send each peer its share of ``x``'s step now, with the marker that ends it.

        A peer with no share gets only the marker, deferred: it rides on the next
        data message to that peer or goes out, with any others, when this worker
        next waits.  Data is never held back (a waiting peer can start on it).
        """
        per: dict[int, list[Updates]] = defaultdict(list)
        for w, part in x.outgoing:
            per[w].append(part)
        x.outgoing = []
        nid = self.nid[id(x)]
        for w, ch in self.peers.items():
            parts = per.get(w)
            if parts:
                marks = self.deferred[w]
                ch.send(Message("x", [(nid, self.epoch, True)] + [(n, t, False) for n, t in marks],
                                [Updates.concat(parts)]))
                marks.clear()
            else:
                self.deferred[w].append((nid, self.epoch))

    def _complete(self, scope: Scope, need: list[tuple[int, int]], upto: int, bound: np.ndarray) -> None:
        """Wait for every peer's marker on the exchanges ``need``, working on what arrives meanwhile."""
        order, reach, sync = self._plan(scope)
        restep = sorted({q for p, _ in need for q in reach[p] if q < upto and not sync[q]})
        keys = [(self.nid[id(order[p])], tag) for p, tag in need]
        peers = self.W - 1

        def done() -> bool:
            return all(self.markers.get(k, 0) >= peers for k in keys)

        def work() -> None:
            for q in restep:
                self._step(order[q], bound)

        self._wait(done, work)
        work()
        for k in keys:
            self.markers.pop(k, None)

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

    # -- collectives over the tree ----------------------------------------------------------------------
    def _gather(self, kind: str, seq: int) -> list[Message]:
        key = (kind, seq)
        n = len(self.tree.children)
        self._wait(lambda: len(self.tree_msgs[key]) >= n)
        return self.tree_msgs.pop(key, [])

    def allreduce(self, value: int, op: Callable[[int, int], int]) -> int:
        seq = self.tree_seq
        self.tree_seq += 1
        for m in self._gather("up", seq):
            value = op(value, m.meta[1])
        if self.tree.parent is not None:
            self.peers[self.tree.parent].send(Message("up", (seq, value)))
            key = ("down", seq)
            self._wait(lambda: bool(self.tree_msgs[key]))
            value = self.tree_msgs.pop(key)[0].meta[1]
        for c in self.tree.children:
            self.peers[c].send(Message("down", (seq, value)))
        return value

    def merge_up(self, outs: dict[int, Updates]) -> dict[int, Updates]:
        """Merge every worker's outputs pairwise up the tree; the root returns the total."""
        seq = self.tree_seq
        self.tree_seq += 1
        parts: dict[int, list[Updates]] = defaultdict(list)
        for nid, u in outs.items():
            parts[nid].append(u)
        for m in self._gather("merge", seq):
            for nid, u in zip(m.meta[1], m.batches):
                parts[nid].append(u)
        merged = {nid: merge_batches(ps, self.flow, self.nodes[nid].name) for nid, ps in parts.items()}
        if self.tree.parent is not None:
            ids = sorted(merged)
            self.peers[self.tree.parent].send(Message("merge", (seq, ids), [merged[i] for i in ids]))
        return merged

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
                "coord_s": list(coord[-5000:]), "busy_by_operator_s": dict(self.by_node), "messages_received": self.stats["messages"],
                "messages_sent": sum(c.messages_sent for c in self.peers.values()),
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
