"""The driver's side of a multi-worker dataflow: forking W workers, sending runs, noticing faults.

A worker that raises reports the exception, with its worker id and the
operator it was running, then exits; a worker that dies is noticed by the
end of its socket (and named by ``waitpid``, not by whichever peer
noticed first), and a shared-memory slot per worker tells which operator
it was in.  A worker that hangs (stopped, or stuck holding the GIL) is
noticed by its heartbeat: a thread in each worker stamps the time into
its slot, and the driver, which waits with a finite timeout, fails the
dataflow when a stamp is older than ``heartbeat_timeout``.  The driver
then stops every worker and raises, naming the worker, its pid and the
operator (:func:`_rebuild` is the one place a worker's error becomes the
driver's); every later call raises that failure again.
"""
from __future__ import annotations

import mmap
import os
import signal
import socket
import threading
import time
import traceback
import weakref
from typing import Callable

import numpy as np

from ddflow import errors
from ddflow.base.updates import Updates
from ddflow.graph.context import Context
from ddflow.graph.node import Node
from ddflow.graph.scope import Scope
from ddflow.operators.stateless import RowNode
from ddflow.workers.exchange import partition
from ddflow.workers.runtime import WorkerRuntime
from ddflow.workers.transport import Channel, ChannelClosed, Hub, Message, connect_pair

#: Sockets of every live pool in this process: a forked worker closes those that are not its own,
#: so the end of a socket is seen as soon as the process that owned it is gone.
_LIVE_SOCKETS: "weakref.WeakSet[socket.socket]" = weakref.WeakSet()


def _heartbeat(beats: np.ndarray, me: int, period: float) -> None:
    """Stamp this worker's slot with the time, forever.

    A thread of its own, so that a long operator step (which releases the
    GIL at least every switch interval) still beats, while a stopped
    process, or one stuck in C code holding the GIL, goes stale.  It
    touches only the shared slot: no socket, no lock the worker uses.
    """
    while True:
        beats[me] = time.monotonic()
        time.sleep(period)


def _worker_main(top: Scope, ctx: Context, me: int, workers: int, peer_socks: dict[int, socket.socket],
                 driver_sock: socket.socket, slot: np.ndarray, beats: np.ndarray, period: float | None,
                 due: np.ndarray) -> None:
    """The body of a forked worker; never returns."""
    code = 0
    if period is not None:  # started after the fork, in the worker only: the driver forks with no thread running
        threading.Thread(target=_heartbeat, args=(beats, me, period), name="ddflow-heartbeat", daemon=True).start()
    driver = Channel(driver_sock, -1, ctx.interner)
    rt = None
    try:
        peers = {w: Channel(s, w, ctx.interner) for w, s in peer_socks.items()}
        rt = WorkerRuntime(top, ctx, me, workers, peers, driver, slot, due)
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


class WorkerPool:
    """The driver's side of W worker processes.  Holds no reference to the dataflow (so it can be collected).

    ``heartbeat_timeout`` (seconds, or None for none): a worker whose
    heartbeat is older than this fails the dataflow instead of blocking it.
    ``transport``: how the processes are connected (:data:`~ddflow.workers.transport.TRANSPORTS`).
    """

    def __init__(self, top: Scope, ctx: Context, heartbeat_timeout: float | None = 30.0,
                 transport: str = "socketpair"):
        W = ctx.workers
        self.W = W
        self.ctx = ctx
        self.heartbeat_timeout = heartbeat_timeout
        #: How often workers beat and the driver looks: often enough that a hang is seen soon after the timeout.
        self.tick = None if heartbeat_timeout is None else min(0.5, heartbeat_timeout / 4)
        #: Only this process may shut the pool down: a worker forked later for another dataflow inherits
        #: this pool's finalizer (and, closed, its sockets), and the garbage collector may run it there.
        self.owner = os.getpid()
        self.nodes = list(top.all_nodes())
        self.names = [n.name for n in self.nodes]
        # Shared with the workers: (operator + 1, state) each, then each one's last heartbeat (time.monotonic()).
        # The state is 1 inside an operator's step, -1 idle between commands, 0 otherwise (waiting mid-run).
        self.slot_map = mmap.mmap(-1, 32 * W)
        self.slot = np.frombuffer(self.slot_map, dtype=np.int64, count=2 * W)
        self.beats = np.frombuffer(self.slot_map, dtype=np.float64, count=W, offset=16 * W)
        self.beats[:] = time.monotonic()  # a worker still starting up is not stale
        #: Then each one's "a collection of my interner's codes is due" flag, set at the end of a run.
        self.due = np.frombuffer(self.slot_map, dtype=np.int64, count=W, offset=24 * W)
        self._next_look = 0.0  # when the driver next compares the heartbeats with the timeout
        pairs = {(i, j): connect_pair(transport) for i in range(W) for j in range(i + 1, W)}
        drivers = [connect_pair(transport) for _ in range(W)]
        for a, b in [*pairs.values(), *drivers]:
            _LIVE_SOCKETS.add(a)
            _LIVE_SOCKETS.add(b)
        self.pids: list[int] = []
        self._fork(W, top, ctx, pairs, drivers)
        for (a, b) in pairs.values():
            a.close()
            b.close()
        for _, w in drivers:
            w.close()
        self.channels = [Channel(d, w, ctx.interner) for w, (d, _) in enumerate(drivers)]
        self.hub = Hub(self.channels)
        self.closed = False
        #: What failed the pool: every later command raises it again (its sockets are closed by then).
        self.failure: BaseException | None = None
        self._done: Message | None = None
        #: Row-wise functions that drop what raises: each worker reports their dropped rows after every run.
        self.guarded = any(isinstance(n, RowNode) and n.on_error == "dead-letter" for n in self.nodes)
        self._dropped: dict[int, list] = {}  # worker -> [(node id, rows)] of the current run
        self._stats: list[dict] = []
        self._errors: list[dict] = []
        self._gone: set[int] = set()

    def _fork(self, W: int, top: Scope, ctx: Context, pairs: dict, drivers: list) -> None:
        """Fork the W workers; each keeps its own sockets and closes every other live one."""
        for me in range(W):
            pid = os.fork()
            if pid == 0:  # the worker
                mine = {j if i == me else i: (a if i == me else b)
                        for (i, j), (a, b) in pairs.items() if me in (i, j)}
                keep = {id(s) for s in mine.values()} | {id(drivers[me][1])}
                for s in list(_LIVE_SOCKETS):
                    if id(s) not in keep:
                        s.close()
                _worker_main(top, ctx, me, W, mine, drivers[me][1], self.slot, self.beats, self.tick, self.due)
            self.pids.append(pid)

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
                stale = np.flatnonzero(now - self.beats > self.heartbeat_timeout)
                if stale.size:
                    self._hung(stale.tolist())

    def _check(self) -> None:
        """Raise if the pool can take no command: it failed (that failure again) or was shut down."""
        if self.failure is not None:
            raise errors.DataflowError(f"the dataflow failed earlier: {self.failure}") from self.failure
        if self.closed:
            raise errors.DataflowError("the dataflow's workers were shut down")

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
    def run(self, inputs: list[Node], frontier: int) -> None:
        """Send every worker its share of the queued input, run to ``frontier``, hand outputs to the captures."""
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
        self._send([Message("run", (frontier, ids_, collect), parts) for ids_, parts in shares])
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
            cap.parts.append(u)
            if cap.callback is not None:
                cap.callback(u)

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

        Which worker died comes from its own exit status (``waitpid``), not
        from the first socket that ended: when one worker dies its peers
        notice, report "peer closed" and exit too, and any of them may be
        the first the driver hears from.
        """
        deadline = time.monotonic() + 2.0
        while len(self._gone) < self.W and time.monotonic() < deadline:
            self._collect(0.05)
        exited = {}
        for w, pid in enumerate(self.pids):
            how = _reap(pid, os.WNOHANG)
            if how is not None:
                exited[w] = how
        status = {**self._kill_all(skip=set(exited)), **exited}
        reported = {e["worker"] for e in self._errors}
        primary = [e for e in self._errors if not e["peer_closed"]]
        if primary:
            raise self._failed(_rebuild(primary[0]))
        # Blame first a worker that ended on its own (not by our SIGKILL above), and by a signal over an exit.
        died = sorted((self._gone | set(exited)) - reported,
                      key=lambda w: (w not in exited, not status[w].startswith("killed"), w))
        if died:
            w = died[0]
            raise self._failed(errors.DataflowError(
                f"worker {w} (pid {self.pids[w]}) died ({status[w]}) {self._where(w)}; the dataflow is stopped"))
        if self._errors:
            raise self._failed(_rebuild(self._errors[0]))
        raise self._failed(errors.DataflowError(f"the workers cannot be reached ({cause!r}); the dataflow is stopped"))

    def _hung(self, stale: list[int]) -> None:
        """Stop every worker and raise, naming the stalest of ``stale`` (workers whose heartbeat is too old)."""
        now = time.monotonic()
        w = max(stale, key=lambda w: (now - self.beats[w], -w))
        age, pid, where = now - self.beats[w], self.pids[w], self._where(w)
        state = _proc_state(pid)
        how = ("; it is stopped (process state T: SIGSTOP, or a debugger)" if state in ("T", "t") else
               f"; its process state is {state}" if state else "")
        self._kill_all()
        raise self._failed(errors.DataflowError(
            f"worker {w} (pid {pid}) is hung {where}: no heartbeat for {age:.1f} s (heartbeat_timeout="
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
        """SIGKILL and reap every worker but ``skip`` (already reaped); close the sockets.  How each ended."""
        live = [(w, pid) for w, pid in enumerate(self.pids) if w not in skip]
        for _, pid in live:
            try:
                os.kill(pid, signal.SIGKILL)  # a stopped process dies too: SIGKILL needs no SIGCONT
            except ProcessLookupError:
                pass
        status = {w: _reap(pid) or "exited" for w, pid in live}
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
        if self.closed or os.getpid() != self.owner:
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
        end = time.monotonic() + 1.0  # one second for all of them, not each: shutdown never waits W seconds
        for pid in self.pids:
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


def _reap(pid: int, flags: int = 0) -> str | None:
    """How child ``pid`` ended, having reaped it; None if it still runs (with ``os.WNOHANG``)."""
    try:
        done, st = os.waitpid(pid, flags)
    except ChildProcessError:
        return "exited"
    if not done:
        return None
    if os.WIFSIGNALED(st):
        return f"killed by {signal.Signals(os.WTERMSIG(st)).name}"
    return f"exit status {os.WEXITSTATUS(st)}"


def _proc_state(pid: int) -> str | None:
    """The process state letter from ``/proc/<pid>/stat`` (T: stopped), or None where there is no /proc."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return None


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
