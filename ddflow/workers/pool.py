"""The driver's side of a multi-worker dataflow: sending runs, noticing faults, wherever the workers run.

A worker that raises reports the exception, with its worker id and the
operator it was running, then exits; a worker that dies is noticed by the
end of its socket (and named by how it ended, not by whichever peer
noticed first), and a slot per worker tells which operator it was in.  A worker that hangs (stopped, or stuck holding the GIL) is
noticed by its heartbeat: a thread in each worker stamps the time into
its slot, and the driver, which waits with a finite timeout, fails the
dataflow when a stamp is older than ``heartbeat_timeout``.  The driver
then stops every worker and raises, naming the worker, its pid and the
operator (:meth:`WorkerPool._rebuild` is the one place a worker's error becomes the
driver's); every later call raises that failure again.

Where the workers run is a :class:`Placement`: forked on this machine
(:mod:`ddflow.workers.forked`) or tasks on Spark executors
(:mod:`ddflow.workers.remote`); this module is the same for both.
"""
from __future__ import annotations

import time
from typing import Callable, Protocol

import numpy as np

from ddflow import errors
from ddflow.base.updates import Updates
from ddflow.graph.context import Context
from ddflow.graph.node import Node
from ddflow.graph.scope import Scope
from ddflow.workers.auth import MAX_FRAME_BYTES
from ddflow.workers.exchange import partition
from ddflow.workers.transport import Channel, ChannelClosed, Hub, Message, ProtocolError


class Placement(Protocol):
    """Where the workers run: starts them and answers the pool's questions about them.

    Contract: :meth:`start` returns the driver's end of one connected
    socket per worker, in worker order, and sets ``slot`` (2 W int64:
    operator + 1 and state per worker), ``beats`` (W float64: this
    process's ``time.monotonic()`` at each worker's last heartbeat) and
    ``due`` (W int64: a collection of that worker's interner is due),
    which it keeps current while the workers live.  Only :meth:`start`
    and :meth:`wait` may block.  Implementations:
    :class:`ddflow.workers.forked.ForkedPlacement` (this machine),
    :class:`ddflow.workers.remote.RemotePlacement` (Spark executors).
    """

    slot: np.ndarray
    beats: np.ndarray
    due: np.ndarray
    pids: list[int]
    label: str  #: what the dataflow is called (its name, where it was made), set before :meth:`start`
    #: Optional: the largest frame the driver's network channels to the workers carry (default
    #: :data:`ddflow.workers.auth.MAX_FRAME_BYTES`); socketpairs have no limit.
    max_frame_bytes: int

    def start(self, top: Scope, ctx: Context, tick: float | None) -> list:
        """Start the workers (each beats every ``tick`` seconds, or never); the driver's socket to each."""

    def who(self, w: int) -> str:
        """Worker ``w`` for an error message: "pid 123", "pid 123 on host 10.0.0.7"."""

    def ended(self) -> dict[int, str]:
        """Workers known to have ended, and how ("killed by SIGKILL", "exit status 1")."""

    def state_note(self, w: int) -> str:
        """What else is known of a worker whose heartbeat is stale ("; it is stopped ..."), or ""."""

    def kill(self, skip: set[int] | frozenset[int] = frozenset()) -> dict[int, str]:
        """Stop every worker but ``skip`` now, by force; how each ended."""

    def last_words(self, w: int) -> str:
        """What worker ``w`` wrote as a fatal signal killed it (its threads' stacks), or "" where nothing is known."""

    def fault(self) -> str | None:
        """Why the placement itself failed (the Spark job running the workers ended), or None."""

    def owns(self) -> bool:
        """Whether this process may stop the workers."""

    def wait(self, seconds: float) -> None:
        """After "stop": wait for the workers to end, at most ``seconds`` for all; then force."""


class WorkerPool:
    """The driver's side of W worker processes.  Holds no reference to the dataflow (so it can be collected).

    ``heartbeat_timeout`` (seconds, or None for none): a worker whose
    heartbeat is older than this fails the dataflow instead of blocking it.
    ``placement``: where the workers run (default: forked here, connected
    by socketpairs).
    """

    def __init__(self, top: Scope, ctx: Context, heartbeat_timeout: float | None = 30.0,
                 placement: Placement | None = None):
        if placement is None:
            from ddflow.workers.forked import ForkedPlacement

            placement = ForkedPlacement()
        W = ctx.workers
        self.W = W
        self.ctx = ctx
        self.heartbeat_timeout = heartbeat_timeout
        #: How often workers beat and the driver looks: often enough that a hang is seen soon after the timeout.
        self.tick = None if heartbeat_timeout is None else min(0.5, heartbeat_timeout / 4)
        self.nodes = list(top.all_nodes())
        self.names = [n.name for n in self.nodes]
        self._next_look = 0.0  # when the driver next compares the heartbeats with the timeout
        self.placement = placement
        self.closed = False
        socks = placement.start(top, ctx, self.tick)
        self.slot, self.beats, self.due = placement.slot, placement.beats, placement.due
        limit = getattr(placement, "max_frame_bytes", None) or MAX_FRAME_BYTES
        self.channels = [Channel(d, w, ctx.interner, limit) for w, d in enumerate(socks)]
        self.hub = Hub(self.channels)
        #: What failed the pool: every later command raises it again (its sockets are closed by then).
        self.failure: BaseException | None = None
        self._done: Message | None = None
        #: Row-wise functions that drop what raises: each worker reports their dropped rows after every run.
        self.guarded = any(getattr(n, "on_error", None) == "dead-letter" for n in self.nodes)
        self._dropped: dict[int, list] = {}  # worker -> [(node id, rows)] of the current run
        self._stats: list[dict] = []
        self._errors: list[dict] = []
        self._gone: set[int] = set()
        #: A worker's channel the driver closed for what came on it (a frame over the limit, or one that does
        #: not decode): the cause the failure names.
        self._refused: ProtocolError | None = None

    @property
    def pids(self) -> list[int]:
        """The workers' process ids (each on its own host), in worker order."""
        return self.placement.pids

    # -- messages -----------------------------------------------------------------------------
    def _on_message(self, ch: Channel, m: Message) -> None:
        if m.kind == "done":
            self._done = m
        elif m.kind == "stats":
            self._stats.append(m.meta)
        elif m.kind == "failed":
            self._dropped[ch.peer] = m.meta
        elif m.kind == "error":
            self._errors.append(m.meta)

    def _collect(self, timeout: float | None) -> None:
        """Take the workers' messages; note every worker whose socket ended.

        A channel that ended on a write (the worker was gone when we sent)
        is still read to its end: the worker's last words (often "my peer
        is gone") are there, and they tell who died first.
        """
        try:
            self.hub.poll(self._on_message, timeout)
        except ProtocolError as e:
            self._refused = self._refused or e
        except ChannelClosed:
            pass
        for ch in self.channels:
            if ch.closed and ch.peer not in self._gone:
                self._gone.add(ch.peer)
                ch.outbox.clear()
                self.hub.remove(ch)
                while True:
                    try:
                        msgs = ch.receive()
                    except OSError:  # ChannelClosed included: the end
                        break
                    if not msgs:
                        break
                    for m in msgs:
                        self._on_message(ch, m)

    def _poll(self) -> None:
        self._collect(self.tick)
        if self._errors or self._gone:
            self._fail()
        if self.tick is not None:
            now = time.monotonic()
            if now >= self._next_look:  # at most once a tick: a run's many short polls cost nothing more
                self._next_look = now + self.tick
                if self.placement.fault() is not None:
                    self._fail()
                stale = np.flatnonzero(now - self.beats > self.heartbeat_timeout)
                if stale.size:
                    self._hung(stale.tolist())

    def check_alive(self) -> None:
        """Raise now if a worker has ended, reported an error or stopped beating (:meth:`_fail`, :meth:`_hung`).

        For a caller about to depend on the workers outside a command (an
        executor routing rows to them).  Cost: one poll of the sockets, no wait.
        """
        self._check()
        self._collect(0)
        if self._errors or self._gone or self.placement.fault() is not None:
            self._fail()
        if self.tick is not None:
            stale = np.flatnonzero(time.monotonic() - self.beats > self.heartbeat_timeout)
            if stale.size:
                self._hung(stale.tolist())

    def _check(self) -> None:
        """Raise if the pool can take no command: it failed (that failure again) or was shut down."""
        if self.failure is not None:
            raise errors.DataflowError(f"the dataflow failed earlier: {self.failure}") from self.failure
        if self.closed:
            raise errors.DataflowError("the dataflow is closed: its workers and task slots are released")

    def _send(self, msgs: list[Message]) -> None:
        """Send worker w ``msgs[w]``; a worker already gone fails the pool (named by :meth:`_fail`)."""
        self._check()
        try:
            for ch, m in zip(self.channels, msgs):
                ch.send(m)
        except OSError as e:  # ChannelClosed included
            self._fail(e)

    def _wait(self, done: Callable[[], bool]) -> None:
        self._check()
        while not done():
            self._poll()

    # -- commands ----------------------------------------------------------------------------------
    def run(self, inputs: list[Node], frontier: int, routed: tuple[int, int] | None = None,
            kinds: list[tuple[str, ...] | None] | None = None) -> None:
        """Send every worker its share of the queued input, run to ``frontier``, hand outputs to the captures.

        ``routed=(batch, partitions)``: the run also takes the input that
        executors sent the workers directly (:mod:`ddflow.workers.ingest`),
        checked against ``inputs`` and their column kinds ``kinds`` (the
        handles', in the order of ``inputs``; None where not known).
        """
        self._check()
        shares: list[tuple[list[int], list[Updates]]] = [([], []) for _ in range(self.W)]
        ids = {id(n): i for i, n in enumerate(self.nodes)}
        for node in inputs:
            i = ids[id(node)]
            if node.queues[0]:
                u = Updates.concat(node.queues[0])
                node.queues[0] = []
                for w, part in enumerate(partition(u, self.W)):
                    if len(part):
                        shares[w][0].append(i)
                        shares[w][1].append(part)
        self._done = None
        self._dropped = {}
        collect = bool(self.due.any())
        if routed is not None:
            known = kinds if kinds is not None else [None] * len(inputs)
            routed = (*routed, {ids[id(n)]: tuple(k) if k is not None else None for n, k in zip(inputs, known)})
        self._send([Message("run", (frontier, ids_, collect, routed), parts) for ids_, parts in shares])
        if collect:
            self._collect_codes()
        self._wait(lambda: self._done is not None and (not self.guarded or len(self._dropped) == self.W))
        for w in sorted(self._dropped):  # in worker order, so a replay reports them alike
            for nid, rows in self._dropped[w]:
                self.nodes[nid].failed.extend(rows)
        for nid, u in zip(self._done.meta, self._done.batches):
            cap = self.nodes[nid]
            if cap.kinds is None:
                cap.kinds = u.kinds
            cap.keep(u)

    def _collect_codes(self) -> None:
        """Every process collects its interner's unused codes at once (workers: at the start of this run).

        A worker may forget a value whose code a channel thinks it sent, so
        every channel forgets what it sent (worker side: see
        :meth:`WorkerRuntime._run`); the driver collects its own interner too,
        keeping what its captures and inputs hold.  The run message that asks
        for it is already encoded, with the values it needed.
        """
        for ch in self.channels:
            ch.forget_sent()
        self.ctx.interner.collect(c for n in self.nodes for c in n.held_columns())

    def stats(self) -> list[dict]:
        """Every worker's statistics, in worker order."""
        self._check()
        self._stats = []
        self._send([Message("stats") for _ in range(self.W)])
        self._wait(lambda: len(self._stats) == self.W)
        return sorted(self._stats, key=lambda s: s["worker"])

    # -- failure and shutdown -------------------------------------------------------------------------
    def _failed(self, exc: BaseException) -> BaseException:
        """Remember ``exc`` as the pool's failure (and the dataflow's), to raise now and on every later command."""
        self.failure = exc
        if self.ctx.failed is None:
            self.ctx.failed = exc
        return exc

    def _fail(self, cause: BaseException | None = None) -> None:
        """Collect what every worker says for a moment, stop them all, and raise the root cause.

        Which worker died comes from how it ended (``waitpid``, here or on
        its executor), not from the first socket that ended: when one
        worker dies its peers notice, report "peer closed" and exit too, and
        any of them may be the first the driver hears from.
        """
        deadline = time.monotonic() + 2.0
        while len(self._gone) < self.W and time.monotonic() < deadline:
            self._collect(0.05)
        exited = self.placement.ended()
        late = time.monotonic() + 0.5  # off this machine, how a worker ended comes a moment after its socket ends
        while not self._gone <= set(exited) | self._errors_from() and time.monotonic() < late:
            time.sleep(0.02)
            for w, how in self.placement.ended().items():
                exited.setdefault(w, how)
        status = {**self._kill_all(skip=set(exited)), **exited}
        reported = self._errors_from()
        primary = [e for e in self._errors if not e["peer_closed"]]
        if primary:
            raise self._failed(self._rebuild(primary[0]))
        if self._refused is not None:
            raise self._failed(errors.DataflowError(
                f"the driver closed a worker's channel: {self._refused}; every worker was stopped and the dataflow is "
                "stopped"))
        # Blame first a worker that ended on its own (not by our kill above), and by a signal over an exit.
        died = sorted((self._gone | set(exited)) - reported,
                      key=lambda w: (w not in exited, not status[w].startswith("killed"), w))
        if died:
            w = died[0]
            words = self.placement.last_words(w)
            raise self._failed(errors.WorkerLost(
                f"worker {w} ({self.placement.who(w)}) died ({status[w]}) {self._where(w)}; the dataflow is stopped"
                + (f"\n{words}" if words else "")))
        if self._errors:
            raise self._failed(self._rebuild(self._errors[0]))
        fault = self.placement.fault()
        if fault is not None:
            who = ", ".join(f"worker {w} ({self.placement.who(w)})" for w in range(self.W))
            raise self._failed(errors.WorkerLost(f"{fault}; the dataflow is stopped (its workers: {who})"))
        raise self._failed(errors.WorkerLost(
            f"the workers cannot be reached ({cause!r}); the dataflow is stopped"))

    def _errors_from(self) -> set[int]:
        return {e["worker"] for e in self._errors}

    def _hung(self, stale: list[int]) -> None:
        """Stop every worker and raise, naming the stalest of ``stale`` (workers whose heartbeat is too old)."""
        now = time.monotonic()
        w = max(stale, key=lambda w: (now - self.beats[w], -w))
        age, where, how = now - self.beats[w], self._where(w), self.placement.state_note(w)
        self._kill_all()
        raise self._failed(errors.WorkerLost(
            f"worker {w} ({self.placement.who(w)}) is hung {where}: no heartbeat for {age:.1f} s (heartbeat_timeout="
            f"{self.heartbeat_timeout} s){how}; every worker was killed and the dataflow is stopped"))

    def _where(self, w: int) -> str:
        """Where worker ``w`` was, from its slot: in an operator's step, idle between commands, or between steps."""
        idx, state = int(self.slot[2 * w]), int(self.slot[2 * w + 1])
        last = f"operator {self.names[idx - 1]!r}" if idx else None
        if state == 1 and last:
            return f"while running {last}"
        if state == -1:
            return "while idle between commands" + (f" (last ran {last})" if last else "")
        return f"after {last}" if last else "before running any operator"

    def _kill_all(self, skip: frozenset[int] | set[int] = frozenset()) -> dict[int, str]:
        """Stop every worker but ``skip`` (already ended) by force; close the sockets.  How each ended."""
        status = self.placement.kill(skip)
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
        if self.closed or not self.placement.owns():
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
        self.placement.wait(1.0)  # one second for all of them, not each: shutdown never waits W seconds

    def _rebuild(self, e: dict) -> BaseException:
        """The worker's exception, in the driver, naming the worker (and its host, off this machine) and the operator."""
        w = e["worker"]
        host = self.placement.hosts[w] if w < len(self.placement.hosts) else ""
        where = f"worker {w}" + (f" on host {host}" if host else "") + (
            f", operator {e['operator']!r}" if e["operator"] else "")
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
