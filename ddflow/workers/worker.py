"""The body of one worker process, wherever it was started: forked by the driver, or on a Spark executor.

A worker gets the dataflow's graph (inherited by ``fork``, or unpickled),
one connected socket per peer and one to the driver, and three shared
slots it writes and something else reads: which operator it is in
(``slot``), when it last beat (``beats``), and whether a collection of its
interner is due (``due``).  On one machine the driver reads the slots
itself (shared memory); on an executor the task process that forked the
worker reads them and reports them to the driver
(:mod:`ddflow.workers.remote`).
"""
from __future__ import annotations

import os
import signal
import socket
import threading
import time
import traceback

import numpy as np

from ddflow.graph.context import Context
from ddflow.graph.scope import Scope
from ddflow.workers.auth import MAX_FRAME_BYTES
from ddflow.workers.runtime import WorkerRuntime
from ddflow.workers.transport import Channel, ChannelClosed, Message, ProtocolError


def heartbeat(beats: np.ndarray, me: int, period: float) -> None:
    """Stamp this worker's slot with the time, forever.

    A thread of its own, so that a long operator step (which releases the
    GIL at least every switch interval) still beats, while a stopped
    process, or one stuck in C code holding the GIL, goes stale.  It
    touches only the shared slot: no socket, no lock the worker uses.
    """
    while True:
        beats[me] = time.monotonic()
        time.sleep(period)


def worker_main(top: Scope, ctx: Context, me: int, workers: int, peer_socks: dict[int, socket.socket],
                driver_sock: socket.socket, slot: np.ndarray, beats: np.ndarray, period: float | None,
                due: np.ndarray, ingest=None, max_frame: int = MAX_FRAME_BYTES) -> None:
    """Serve the driver's commands until it says stop; report any exception to it; never returns.

    ``max_frame``: the largest frame its network channels carry (socketpairs have none).

    Exits the process (``os._exit``): 0 after "stop", 1 after an error,
    which goes to the driver first with the worker's index, the operator
    it was running and the traceback.
    """
    code = 0
    if period is not None:  # started here, in the worker only: the driver forks with no thread running
        threading.Thread(target=heartbeat, args=(beats, me, period), name="ddflow-heartbeat", daemon=True).start()
    driver = Channel(driver_sock, -1, ctx.interner, max_frame)
    rt = None
    try:
        peers = {w: Channel(s, w, ctx.interner, max_frame) for w, s in peer_socks.items()}
        rt = WorkerRuntime(top, ctx, me, workers, peers, driver, slot, due, ingest)
        rt.serve()
    except BaseException as e:  # noqa: BLE001 - everything is reported to the driver
        code = 1
        where = None
        if rt is not None and slot[2 * me]:
            where = rt.nodes[int(slot[2 * me]) - 1].name
        # A peer that went away is a consequence; a peer's frame this worker refused is a cause.
        secondary = isinstance(e, ChannelClosed) and not isinstance(e, ProtocolError)
        info = {"worker": me, "operator": where, "type": type(e).__name__, "module": type(e).__module__,
                "message": str(e), "traceback": traceback.format_exc(), "peer_closed": secondary}
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


def proc_state(pid: int) -> str | None:
    """The process state letter from ``/proc/<pid>/stat`` (T: stopped), or None where there is no /proc."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return None


def describe_state(state: str | None) -> str:
    """What a process state letter adds to a hung worker's error: "; it is stopped ...", or ""."""
    return ("; it is stopped (process state T: SIGSTOP, or a debugger)" if state in ("T", "t") else
            f"; its process state is {state}" if state else "")


def reap(pid: int, flags: int = 0) -> str | None:
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
