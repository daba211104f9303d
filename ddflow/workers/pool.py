"""The driver's side of a multi-worker dataflow: forking W workers, sending runs, noticing faults.

A worker that raises reports the exception, with its worker id and the
operator it was running, then exits; a worker that dies is noticed by the
end of its socket, and a shared-memory slot per worker tells which
operator it was in.  The driver then stops every worker and raises,
naming both (:func:`_rebuild` is the one place a worker's error becomes
the driver's).
"""
from __future__ import annotations

import mmap
import os
import signal
import socket
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
from ddflow.workers.exchange import partition
from ddflow.workers.runtime import WorkerRuntime
from ddflow.workers.transport import Channel, ChannelClosed, Hub, Message

#: Sockets of every live pool in this process: a forked worker closes those that are not its own,
#: so the end of a socket is seen as soon as the process that owned it is gone.
_LIVE_SOCKETS: "weakref.WeakSet[socket.socket]" = weakref.WeakSet()


def _worker_main(top: Scope, ctx: Context, me: int, workers: int, peer_socks: dict[int, socket.socket],
                 driver_sock: socket.socket, slot: np.ndarray) -> None:
    """The body of a forked worker; never returns."""
    code = 0
    driver = Channel(driver_sock, -1, ctx.interner)
    rt = None
    try:
        peers = {w: Channel(s, w, ctx.interner) for w, s in peer_socks.items()}
        rt = WorkerRuntime(top, ctx, me, workers, peers, driver, slot)
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
    """The driver's side of W worker processes.  Holds no reference to the dataflow (so it can be collected)."""

    def __init__(self, top: Scope, ctx: Context):
        W = ctx.workers
        self.W = W
        #: Only this process may shut the pool down: a worker forked later for another dataflow inherits
        #: this pool's finalizer (and, closed, its sockets), and the garbage collector may run it there.
        self.owner = os.getpid()
        self.nodes = list(top.all_nodes())
        self.names = [n.name for n in self.nodes]
        self.slot_map = mmap.mmap(-1, 16 * W)  # shared with the workers: (operator + 1, inside a step) each
        self.slot = np.frombuffer(self.slot_map, dtype=np.int64)
        pairs = {(i, j): socket.socketpair() for i in range(W) for j in range(i + 1, W)}
        drivers = [socket.socketpair() for _ in range(W)]
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
        self._done: Message | None = None
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
                _worker_main(top, ctx, me, W, mine, drivers[me][1], self.slot)
            self.pids.append(pid)

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
    def run(self, inputs: list[Node], frontier: int) -> None:
        """Send every worker its share of the queued input, run to ``frontier``, hand outputs to the captures."""
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
        for w, ch in enumerate(self.channels):
            ch.send(Message("run", (frontier, shares[w][0]), shares[w][1]))
        self._wait(lambda: self._done is not None)
        for nid, u in zip(self._done.meta, self._done.batches):
            cap = self.nodes[nid]
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
