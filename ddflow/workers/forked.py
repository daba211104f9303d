"""Workers forked on this machine: the default placement of ``Dataflow(workers=W)``.

A placement starts the W worker processes, hands the pool one connected
socket per worker, and answers the pool's questions about them: who a
worker is (for error messages), which ones have ended and how, how to
stop them all.  The pool (:mod:`ddflow.workers.pool`) speaks the protocol
and handles faults the same way for every placement; the other placement
is :class:`ddflow.workers.remote.RemotePlacement` (workers on Spark
executors).

Here the workers are forked after the graph is built, so every
operator, lambda and closure is already in their memory; the slots
(operator, heartbeat, collection due) are shared memory the driver reads
directly, and ``waitpid`` says how a worker ended.
"""
from __future__ import annotations

import faulthandler
import mmap
import os
import signal
import socket
import tempfile
import time
import weakref

import numpy as np

from ddflow.base.native import preload
from ddflow.graph.context import Context
from ddflow.graph.scope import Scope
from ddflow.workers.auth import MAX_FRAME_BYTES, TLS, Credentials
from ddflow.workers.transport import connect_pair
from ddflow.workers.worker import describe_state, proc_state, reap, worker_main

#: Sockets of every live pool in this process: a forked worker closes those that are not its own,
#: so the end of a socket is seen as soon as the process that owned it is gone.
_LIVE_SOCKETS: "weakref.WeakSet[socket.socket]" = weakref.WeakSet()


def shared_slots(W: int) -> tuple[mmap.mmap, np.ndarray, np.ndarray, np.ndarray]:
    """Anonymous shared memory for W workers' slots: (operator + 1, state) each, heartbeats, collection due.

    The state is 1 inside an operator's step, -1 idle between commands, 0
    otherwise (waiting mid-run); a heartbeat is ``time.monotonic()`` of
    the process that reads it.
    """
    m = mmap.mmap(-1, 32 * W)
    slot = np.frombuffer(m, dtype=np.int64, count=2 * W)
    beats = np.frombuffer(m, dtype=np.float64, count=W, offset=16 * W)
    beats[:] = time.monotonic()  # a worker still starting up is not stale
    due = np.frombuffer(m, dtype=np.int64, count=W, offset=24 * W)
    return m, slot, beats, due


class ForkedPlacement:
    """W worker processes forked from the driver, connected by socketpairs or loopback TCP.

    ``transport``: one of :data:`ddflow.workers.transport.TRANSPORTS`.
    Loopback TCP is the network path, on one machine: every connection
    proves a fresh secret both ways (:mod:`ddflow.workers.auth`), with TLS
    if ``tls`` is given or ``DDFLOW_TLS_*`` is set, and frames are bounded
    by ``max_frame_bytes`` (default 1 GiB, or ``DDFLOW_MAX_FRAME_BYTES``).
    Socketpairs need neither: nothing but the forked workers can reach them.
    """

    def __init__(self, transport: str = "socketpair", tls: TLS | None = None, max_frame_bytes: int | None = None):
        self.transport = transport
        self.tls = tls
        self._max_frame = max_frame_bytes
        self.pids: list[int] = []
        self.hosts: list[str] = []

    def start(self, top: Scope, ctx: Context, tick: float | None) -> list[socket.socket]:
        """Fork the workers; the driver's end of each one's socket, in worker order."""
        W = ctx.workers
        preload()  # the workers inherit the loaded extension; one that cannot load fails here, saying why
        self.owner = os.getpid()
        self.slot_map, self.slot, self.beats, self.due = shared_slots(W)
        cred = Credentials.new(self.tls, self._max_frame) if self.transport == "tcp" else None
        self.max_frame_bytes = cred.max_frame_bytes if cred is not None else MAX_FRAME_BYTES
        pairs = {(i, j): connect_pair(self.transport, cred) for i in range(W) for j in range(i + 1, W)}
        drivers = [connect_pair(self.transport, cred) for _ in range(W)]
        for a, b in [*pairs.values(), *drivers]:
            _LIVE_SOCKETS.add(a)
            _LIVE_SOCKETS.add(b)
        # One unlinked file per worker for faulthandler's dump: a worker killed by SIGSEGV in native code leaves
        # its threads' Python stacks there, and the driver's WorkerLost quotes them (see :meth:`last_words`).
        # Open while the workers live; closed by :meth:`wait`, or with this placement.
        self._dumps = [tempfile.TemporaryFile(prefix="ddflow-worker-") for _ in range(W)]  # noqa: SIM115
        for me in range(W):
            pid = os.fork()
            if pid == 0:  # the worker: keeps its own sockets, closes every other live one
                faulthandler.enable(self._dumps[me], all_threads=True)
                mine = {j if i == me else i: (a if i == me else b)
                        for (i, j), (a, b) in pairs.items() if me in (i, j)}
                keep = {id(s) for s in mine.values()} | {id(drivers[me][1])}
                for s in list(_LIVE_SOCKETS):
                    if id(s) not in keep:
                        s.close()
                worker_main(top, ctx, me, W, mine, drivers[me][1], self.slot, self.beats, tick, self.due,
                            max_frame=self.max_frame_bytes)
            self.pids.append(pid)
        self.hosts = ["" for _ in range(W)]
        for a, b in pairs.values():
            a.close()
            b.close()
        for _, w in drivers:
            w.close()
        return [d for d, _ in drivers]

    def who(self, w: int) -> str:
        return f"pid {self.pids[w]}"

    def ended(self) -> dict[int, str]:
        """Workers that have exited, and how (reaped now; non-blocking)."""
        out = {}
        for w, pid in enumerate(self.pids):
            how = reap(pid, os.WNOHANG)
            if how is not None:
                out[w] = how
        return out

    def state_note(self, w: int) -> str:
        return describe_state(proc_state(self.pids[w]))

    def kill(self, skip: set[int] | frozenset[int] = frozenset()) -> dict[int, str]:
        """SIGKILL and reap every worker but ``skip`` (already reaped).  How each ended."""
        live = [(w, pid) for w, pid in enumerate(self.pids) if w not in skip]
        for _, pid in live:
            try:
                os.kill(pid, signal.SIGKILL)  # a stopped process dies too: SIGKILL needs no SIGCONT
            except ProcessLookupError:
                pass
        return {w: reap(pid) or "exited" for w, pid in live}

    def last_words(self, w: int) -> str:
        """The Python stacks worker ``w`` dumped when a fatal signal killed it (faulthandler), or "".  O(dump)."""
        f = self._dumps[w] if w < len(getattr(self, "_dumps", ())) else None
        if f is None or f.closed:
            return ""
        f.seek(0)
        return f.read(16384).decode("utf-8", "replace").strip()

    def fault(self) -> str | None:
        """Nothing outside the workers can fail here."""
        return None

    def owns(self) -> bool:
        """Only this process may stop the workers: a worker forked later for another dataflow inherits
        this pool's finalizer, and the garbage collector may run it there."""
        return os.getpid() == self.owner

    def wait(self, seconds: float) -> None:
        """After "stop": wait for the workers to exit, ``seconds`` for all of them; kill what is left."""
        end = time.monotonic() + seconds
        for pid in self.pids:
            while True:
                try:
                    done, _ = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    break
                if done or time.monotonic() > end:
                    if not done:
                        os.kill(pid, signal.SIGKILL)
                        reap(pid)
                    break
                time.sleep(0.002)
        for f in getattr(self, "_dumps", ()):
            f.close()
