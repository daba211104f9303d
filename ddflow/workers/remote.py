"""Workers started elsewhere (Spark executors), given the dataflow as bytes and connected by TCP.

The driver listens on one TCP port; a *launcher* (Spark's barrier stage:
:mod:`ddflow.streaming.cluster`) starts T tasks, and each task runs
:func:`serve_task` with the pickled graph and the dataflow's
:class:`~ddflow.workers.auth.Credentials` (its secret, TLS and frame
limits).  A task forks its share of the W workers (worker w belongs to
task ``w % T``), so W may exceed the slots a cluster has.  The rendezvous:

1. each task binds one listener per worker on the address it routes to
   the driver by, and the tasks exchange ``{worker: host:port}`` through
   the launcher's all-gather (``BarrierTaskContext.allGather``);
2. each worker connects to the driver and says who it is (a line of
   JSON: its index, host, pid and ingest port), then to every
   lower-numbered peer's listener (saying its index), and accepts every
   higher-numbered one: one TCP connection per pair, as the forked workers
   have one socketpair per pair;
3. each task connects to the driver too, and reports every half second
   (or every heartbeat tick) its workers' slots, heartbeat ages, process
   states and, once they end, how they ended (``waitpid``).

Every one of these connections first proves, both ways, that it holds
the dataflow's secret (:mod:`ddflow.workers.auth`), each in a thread of
its own with a deadline: a silent or hostile one delays no one, and a
start that times out says who arrived and how many were refused.

From then on the pool (:mod:`ddflow.workers.pool`) runs exactly as with
forked workers: the same framing, counted completion and merge tree.
Failures: a worker that raises reports it (naming its host); a worker or
task that dies is seen by the end of its sockets and named with its host;
a task that loses the driver kills its workers (they also die with the
task process, by ``PR_SET_PDEATHSIG``); a hung worker's stale heartbeat
reaches the driver through its task's reports.  ``kill`` asks every task
to SIGKILL its workers, then cancels the launcher's job.

Ports: the driver's listener (``port``, default any free one) must be
reachable from the executors, and every worker's listener (a free port
on its executor) from the other executors.
"""
from __future__ import annotations

import json
import logging
import os
import pickle
import queue
import select
import selectors
import signal
import socket
import ssl
import struct
import threading
import time
from typing import Any, Callable, Protocol

import numpy as np

from ddflow import errors
from ddflow.base.native import preload
from ddflow.graph.context import Context
from ddflow.graph.scope import Scope
from ddflow.operators.capture import CaptureNode
from ddflow.workers.forked import shared_slots
from ddflow.workers import auth
from ddflow.workers.auth import TLS, Credentials, Gate
from ddflow.workers.ingest import IngestListener
from ddflow.workers.worker import describe_state, proc_state, reap, worker_main

_log = logging.getLogger("ddflow.workers")

#: How often a task reports to the driver when the dataflow has no heartbeat.
REPORT_EVERY = 0.5
#: How long a worker waits for a lower-numbered peer to answer its connection: that peer's task may still be
#: loading (its listener queues the connection meanwhile); the driver's start timeout ends a wait that is too long.
PEER_WAIT_S = 600.0


class Launcher(Protocol):
    """Starts the tasks that run the workers (Spark: :class:`ddflow.streaming.cluster.SparkLauncher`)."""

    host: str  #: the address the executors reach the driver at
    label: str  #: what the tasks' job is called (set before ``launch``: the dataflow's name and creation site)

    def dumps(self, obj: Any) -> bytes:
        """Pickle ``obj`` as the tasks will need it (cloudpickle: lambdas and closures by value)."""

    def tasks(self, workers: int) -> int:
        """How many tasks to run ``workers`` workers in (at most the slots the cluster has)."""

    def launch(self, payload: bytes, workers: int, tasks: int, address: tuple[str, int],
               credentials: Credentials) -> None:
        """Start ``tasks`` tasks, task t calling ``serve_task(payload, t, tasks, workers, address, credentials,
        gather)``.  ``credentials`` holds the dataflow's secret: it must reach the tasks only as the function's
        argument (never in a job name, a log or a command line)."""

    def error(self) -> str | None:
        """Why the tasks' job ended, if it ended with an error."""

    def cancel(self) -> None:
        """Kill the tasks (their workers die with them)."""

    def join(self, seconds: float) -> bool:
        """Wait for the tasks' job to end; whether it did."""

    def busy(self) -> str:
        """Optional: what else holds the cluster's slots now (named in the error of a start that timed out)."""


#: Launcher factories by the ``Dataflow`` keyword that asks for them (``spark``): ``factory(session) -> Launcher``.
#: The packages that provide one fill it (``ddflow.streaming.cluster`` registers ``"spark"`` when imported), so
#: the engine never imports them; one not imported yet is found through its ``ddflow.launchers`` entry point.
LAUNCHERS: dict[str, Callable[[Any], Launcher]] = {}


def register_launcher(kind: str, factory: Callable[[Any], Launcher]) -> None:
    """Make ``Dataflow(**{kind: session})`` start its workers with ``factory(session)``."""
    LAUNCHERS[kind] = factory


def find_launcher(kind: str, session: Any) -> Launcher:
    """The registered launcher for ``kind`` over ``session``, loading an installed package's entry point if needed."""
    factory = LAUNCHERS.get(kind)
    if factory is None:
        from importlib.metadata import entry_points

        for ep in entry_points(group="ddflow.launchers", name=kind):
            factory = LAUNCHERS.setdefault(kind, ep.load())
            break
    if factory is None:
        raise errors.UsageError(f"Dataflow({kind}=...) needs the launcher that ddflow.streaming provides: install "
                                "ddflow with its entry points (pip install -e .), or import ddflow.streaming.cluster")
    return factory(session)


class RemotePlacement:
    """The driver's side of workers started by a :class:`Launcher`: listens, accepts, reads the tasks' reports.

    ``start_timeout``: seconds to wait for every worker to connect (the
    cluster may first have to free slots) before the dataflow fails.
    ``tls``: a :class:`~ddflow.workers.auth.TLS` for every connection
    (default: from ``DDFLOW_TLS_CERT``/``DDFLOW_TLS_KEY``/``DDFLOW_TLS_CA``,
    else none).  ``max_frame_bytes``, ``max_ingest_frame_bytes``: the
    largest frame a worker or the driver reads from another process, and
    that a worker's ingest port reads (defaults 1 GiB and 256 MiB, or
    ``DDFLOW_MAX_FRAME_BYTES``, ``DDFLOW_MAX_INGEST_FRAME_BYTES``).
    """

    def __init__(self, launcher: Launcher, port: int = 0, start_timeout: float = 120.0, tls: TLS | None = None,
                 max_frame_bytes: int | None = None, max_ingest_frame_bytes: int | None = None):
        self.launcher = launcher
        self.tls = tls
        self._limits = (max_frame_bytes, max_ingest_frame_bytes)
        #: The running dataflow's credentials (made at :meth:`start`; they travel to the tasks).
        self.credentials: Credentials | None = None
        #: What the launcher's job is called (``Dataflow`` sets it before the start).
        self.label = "ddflow dataflow"
        self.port = port
        self.start_timeout = start_timeout
        self.pids: list[int] = []
        self.hosts: list[str] = []
        self._states: dict[int, str] = {}
        self._ended: dict[int, str] = {}
        self._tasks: dict[int, socket.socket] = {}
        self._task_of: dict[int, int] = {}
        self._lock = threading.Lock()
        self._reader: threading.Thread | None = None
        self._closing = False

    # -- start ----------------------------------------------------------------------------------
    def start(self, top: Scope, ctx: Context, tick: float | None) -> list[socket.socket]:
        """Launch the tasks and wait until every worker and task has connected; the workers' sockets."""
        W = ctx.workers
        self.owner = os.getpid()
        self.W = W
        self.slot = np.zeros(2 * W, dtype=np.int64)
        self.beats = np.full(W, time.monotonic())
        self.due = np.zeros(W, dtype=np.int64)
        self.pids, self.hosts = [0] * W, [""] * W
        #: Each worker's listener for input routed by executors (:mod:`ddflow.workers.ingest`).
        self.ingest: list[tuple[str, int]] = [("", 0)] * W
        cred = self.credentials = Credentials.new(self.tls, *self._limits)
        self.max_frame_bytes = cred.max_frame_bytes
        self.launcher.label = self.label
        T = self.launcher.tasks(W)
        srv = socket.create_server((self.launcher.host, self.port), backlog=max(64, 2 * W))
        address = srv.getsockname()[:2]
        gate = Gate(srv, cred, b"driver", then=_read_hello, pending=max(64, 4 * W))
        workers: dict[int, socket.socket] = {}
        deadline = time.monotonic() + self.start_timeout
        try:
            self.launcher.launch(_graph_bytes(self.launcher, top, ctx, tick), W, T, address, cred)
            while len(workers) < W or len(self._tasks) < T:
                if self.launcher.error() is not None:
                    raise errors.DataflowError(f"the workers did not start: {self.launcher.error()}")
                if time.monotonic() > deadline:
                    busy = getattr(self.launcher, "busy", lambda: "")()
                    refused = gate.summary()
                    raise errors.DataflowError(
                        f"the workers did not start: {len(workers)} of {W} workers and {len(self._tasks)} of {T} "
                        f"tasks connected to {address[0]}:{address[1]} and proved themselves within "
                        f"{self.start_timeout} s"
                        + (f"; other connections were refused: {refused}" if refused else "; no connection was refused")
                        + f" (are {T} task slots free, and can the executors reach this address?)"
                        + (f"; holding slots now: {busy}" if busy else ""))
                try:
                    conn, _, hello = gate.arrived.get(timeout=0.5)
                except queue.Empty:
                    continue
                role, index = hello["role"], hello["index"]
                if role == "error":
                    conn.close()
                    raise errors.DataflowError(
                        f"the workers did not start: task {index} on host {hello['host']} could not load "
                        f"the dataflow: {hello['message']} (the modules that define its functions must be importable "
                        "on the executors: install them there, ship them with SparkContext.addPyFile, or have "
                        "cloudpickle.register_pickle_by_value send them with the dataflow)")
                if (role == "worker" and not 0 <= index < W) or (role == "task" and not 0 <= index < T) or \
                        index in (workers if role == "worker" else self._tasks):
                    _log.warning("ddflow refused a %s connection claiming index %s: out of range or taken", role, index)
                    conn.close()  # a retried task's second connection: the first one stays
                elif role == "worker":
                    workers[index] = conn
                    self.pids[index], self.hosts[index] = hello["pid"], hello["host"]
                    self.ingest[index] = (hello["ingest"][0], int(hello["ingest"][1]))
                else:
                    self._tasks[index] = conn
                    for w in hello["workers"]:
                        self._task_of[w] = index
        except BaseException:
            for c in [*workers.values(), *self._tasks.values()]:
                c.close()
            self.launcher.cancel()
            raise
        finally:
            gate.close()  # a retried task of this job cannot join a running dataflow
            while not gate.arrived.empty():
                gate.arrived.get()[0].close()
        self.beats[:] = time.monotonic()  # a start that took long (busy cluster) is not a hang
        self._reader = threading.Thread(target=self._read_reports, name="ddflow-task-reports", daemon=True)
        self._reader.start()
        return [workers[w] for w in range(W)]

    # -- the tasks' reports ---------------------------------------------------------------------
    def _read_reports(self) -> None:
        """Apply every task's reports to the slots, until every task's socket has ended."""
        sel = selectors.DefaultSelector()
        buffers = {}
        for t, s in self._tasks.items():
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ, t)
            buffers[t] = b""
        live = len(self._tasks)

        def end(t: int, s: socket.socket) -> None:
            sel.unregister(s)
            with self._lock:
                for w, owner in self._task_of.items():
                    if owner == t:
                        self._ended.setdefault(w, f"its task process on {self.hosts[w] or 'its host'} ended: "
                                                  "the executor, or the task, went away")

        while live and not self._closing:
            for key, _ in sel.select(1.0):
                t, s = key.data, key.fileobj
                data = _recv_now(s)
                if data is None:
                    continue
                if not data:
                    end(t, s)
                    live -= 1
                    continue
                buffers[t] += data
                *lines, buffers[t] = buffers[t].split(b"\n")
                try:
                    for line in lines:
                        self._apply(json.loads(line))
                    if len(buffers[t]) > MAX_LINE:
                        raise ValueError(f"a line longer than {MAX_LINE} bytes")
                except (ValueError, TypeError, KeyError, AttributeError) as e:  # a report not as a task writes it
                    _log.warning("ddflow: task %d sent a report the driver cannot read (%s); its connection is "
                                 "closed", t, e)
                    end(t, s)
                    live -= 1
                    s.close()
        sel.close()

    def _apply(self, report: dict) -> None:
        now = time.monotonic()
        with self._lock:
            for w, (age, op, state, due, letter) in report["workers"].items():
                w = int(w)
                self.beats[w] = now - age
                self.slot[2 * w], self.slot[2 * w + 1] = op, state
                self.due[w] = due
                self._states[w] = letter
            for w, how in report["ended"].items():
                self._ended.setdefault(int(w), how)

    # -- the pool's questions --------------------------------------------------------------------
    def who(self, w: int) -> str:
        return f"pid {self.pids[w]} on host {self.hosts[w]}"

    def ended(self) -> dict[int, str]:
        with self._lock:
            return dict(self._ended)

    def state_note(self, w: int) -> str:
        return describe_state(self._states.get(w))

    def last_words(self, w: int) -> str:
        return ""  # an executor's worker dies out of reach: its task's log has what it wrote

    def fault(self) -> str | None:
        return self.launcher.error()

    def owns(self) -> bool:
        return os.getpid() == self.owner

    def kill(self, skip: set[int] | frozenset[int] = frozenset()) -> dict[int, str]:
        """Every task SIGKILLs its workers; wait up to 2 s to hear how they ended; cancel the job."""
        live = [w for w in range(self.W) if w not in skip]
        for s in self._tasks.values():
            try:
                s.sendall(b"kill\n")
            except OSError:
                pass
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and not set(live) <= set(self.ended()):
            time.sleep(0.02)
        self._shut()
        ended = self.ended()
        return {w: ended.get(w, "killed with its task") for w in live}

    #: After "stop" and a cancel, how long to wait for the launcher's job to end (its slots free) before giving up.
    CANCEL_WAIT = 30.0

    def wait(self, seconds: float) -> None:
        """After "stop": the workers exit, then their tasks end the job; cancel it if it has not ended in time.

        Returns once the job has ended (``close`` promises the slots are free
        for the next dataflow), or after :attr:`CANCEL_WAIT` more seconds if
        the cancel does not take.
        """
        if not self.launcher.join(max(seconds, 3.0)):  # a Spark job takes a moment to finish after its tasks
            self.launcher.cancel()
            self.launcher.join(self.CANCEL_WAIT)
        self._shut()

    def _shut(self) -> None:
        self.launcher.cancel()
        self._closing = True
        for s in self._tasks.values():
            try:
                s.close()
            except OSError:
                pass


def _graph_bytes(launcher: Launcher, top: Scope, ctx: Context, tick: float | None) -> bytes:
    """The graph as the tasks get it: no queued input (the driver sends each worker its share), no callbacks."""
    nodes = list(top.all_nodes())
    queues = [n.queues for n in nodes]
    callbacks = [(n, n.callback) for n in nodes if isinstance(n, CaptureNode)]
    try:
        for n in nodes:
            n.queues = [[] for _ in n.queues]
        for n, _ in callbacks:
            n.callback = None
        return launcher.dumps((top, ctx, tick))
    finally:
        for n, q in zip(nodes, queues):
            n.queues = q
        for n, cb in callbacks:
            n.callback = cb


#: The longest line of JSON a worker or task may send the driver (a hello, a report).
MAX_LINE = 1 << 20
#: What each role's hello must hold, with the types of its fields.
_HELLO = {"worker": {"index": int, "host": str, "pid": int, "ingest": list},
          "task": {"index": int, "host": str, "pid": int, "workers": list},
          "error": {"index": int, "host": str, "pid": int, "message": str}}


def _read_hello(conn: socket.socket, addr: tuple) -> dict:
    """The line a worker or task sends first, once it has proved itself: who it is (read in its gate thread,
    within the handshake's deadline).  Raises if it is not one."""
    deadline = time.monotonic() + auth.HANDSHAKE_S
    buf = bytearray()
    while not buf.endswith(b"\n"):  # a byte at a time: what follows the line (a task's reports) is not ours
        left = deadline - time.monotonic()
        if left <= 0 or len(buf) > MAX_LINE:
            raise ConnectionError("it proved itself, then sent no line saying who it is")
        conn.settimeout(left)
        chunk = conn.recv(1)
        if not chunk:
            raise ConnectionError("it closed the connection before saying who it is")
        buf += chunk
    conn.settimeout(None)
    hello = json.loads(buf)
    fields = _HELLO.get(hello.get("role")) if isinstance(hello, dict) else None
    if fields is None or any(type(hello.get(k)) is not t for k, t in fields.items()):
        raise ConnectionError(f"its hello {bytes(buf[:200])!r} is not a worker's or a task's")
    if hello["role"] == "worker":
        ing = hello["ingest"]
        if len(ing) != 2 or type(ing[0]) is not str or type(ing[1]) is not int:
            raise ConnectionError(f"its ingest address {ing!r:.100} is not a host and a port")
    if hello["role"] == "task" and not all(type(w) is int for w in hello["workers"]):
        raise ConnectionError(f"its workers {hello['workers']!r:.100} are not worker indexes")
    return hello


def _recv_now(s: socket.socket) -> bytes | None:
    """What a non-blocking socket holds now (a TLS one: every decrypted byte); b"" at its end, None if nothing."""
    data = b""
    while True:
        try:
            chunk = s.recv(65536)
        except (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return data or None
        except OSError:
            chunk = b""
        if not chunk:
            return data  # the end (after what came before it, if anything)
        data += chunk
        if not isinstance(s, ssl.SSLSocket) or not s.pending():
            return data


def _say(sock: socket.socket, obj: dict) -> None:
    sock.sendall((json.dumps(obj) + "\n").encode())


def route_ip(address: tuple[str, int]) -> str:
    """The local address this host reaches ``address`` by (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(address)
        return s.getsockname()[0]


def _die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent (the task) dies (Linux; elsewhere a no-op)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def serve_task(payload: bytes, task: int, tasks: int, workers: int, address: tuple[str, int],
               credentials: Credentials, gather: Callable[[str], list[str]]) -> dict[int, str]:
    """Run task ``task``'s workers (w with ``w % tasks == task``) until they end; how each ended.

    Runs in the launcher's task process (a Spark executor's Python
    worker).  ``gather(message)`` returns every task's message, in task
    order, once all have called it (``BarrierTaskContext.allGather``).
    ``credentials``: what every connection of the workers and the task
    proves (:mod:`ddflow.workers.auth`).
    """
    W = workers
    address = (address[0], int(address[1]))
    mine = [w for w in range(W) if w % tasks == task]
    host = route_ip(address)
    try:
        top, ctx, tick = pickle.loads(payload)
    except BaseException as e:  # the driver says why at once, instead of waiting for Spark's retries to end
        with credentials.connect(address, b"driver") as s:
            _say(s, {"role": "error", "index": task, "host": host, "pid": os.getpid(),
                     "message": f"{type(e).__name__}: {e}"})
        raise
    listeners = {w: socket.create_server((host, 0), backlog=max(64, W)) for w in mine}
    table: dict[int, tuple[str, int]] = {}
    for entry in gather(json.dumps({w: [host, s.getsockname()[1]] for w, s in listeners.items()})):
        table.update({int(w): (h, int(p)) for w, (h, p) in json.loads(entry).items()})
    _, slot, beats, due = shared_slots(W)
    old_chld = signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # waitpid must see the workers
    me = os.getpid()
    pids: dict[int, int] = {}
    preload()  # this task's workers inherit the loaded extension; one that cannot load fails the task, saying why
    for w in mine:
        beats[w] = time.monotonic()  # its heartbeat thread starts after the rendezvous
        pid = os.fork()
        if pid == 0:
            _worker_process(top, ctx, w, W, listeners, table, address, credentials, host, slot, beats, tick, due, me)
        pids[w] = pid
    for s in listeners.values():
        s.close()
    try:
        return _supervise(pids, task, host, address, credentials, slot, beats, due, tick)
    finally:
        signal.signal(signal.SIGCHLD, old_chld)


def _worker_process(top: Scope, ctx: Context, w: int, W: int, listeners: dict[int, socket.socket],
                    table: dict[int, tuple[str, int]], address: tuple[str, int], credentials: Credentials, host: str,
                    slot: np.ndarray, beats: np.ndarray, tick: float | None, due: np.ndarray, parent: int) -> None:
    """A forked worker: connect to the driver and the peers, each connection proved both ways, then serve; never
    returns."""
    try:
        _die_with_parent()
        if os.getppid() != parent:
            os._exit(3)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        for j, s in listeners.items():
            if j != w:
                s.close()
        gate = Gate(listeners[w], credentials, b"peer", then=_read_index(w, W))
        ingest = IngestListener(host, credentials)
        driver = credentials.connect(address, b"driver")
        _say(driver, {"role": "worker", "index": w, "host": host, "pid": os.getpid(), "ingest": list(ingest.address)})
        peers = {}
        for j in range(w):  # connect to the lower-numbered peers (their gates prove us meanwhile) ...
            s = credentials.connect(table[j], b"peer", PEER_WAIT_S)
            s.sendall(struct.pack("<i", w))
            peers[j] = s
        while len(peers) < W - 1:  # ... and take the higher-numbered ones, each once
            c, addr, j = gate.arrived.get()
            if j in peers:
                _log.warning("ddflow worker %d refused a second connection claiming to be worker %d (from %s:%s)",
                             w, j, addr[0], addr[1])
                c.close()
            else:
                peers[j] = c
        gate.close()
    except BaseException:  # noqa: BLE001 - the driver sees this worker never arrive, or its socket end
        import traceback

        traceback.print_exc()
        os._exit(3)
    worker_main(top, ctx, w, W, peers, driver, slot, beats, tick, due, ingest, credentials.max_frame_bytes)


def _read_index(w: int, W: int) -> Callable[[socket.socket, tuple], int]:
    """What worker ``w``'s gate reads from a proved peer: its index, one of the higher-numbered workers."""

    def read(conn: socket.socket, addr: tuple) -> int:
        conn.settimeout(auth.HANDSHAKE_S)
        raw = b""
        while len(raw) < 4:
            chunk = conn.recv(4 - len(raw))
            if not chunk:
                raise ConnectionError("it proved itself, then closed before saying which worker it is")
            raw += chunk
        conn.settimeout(None)
        (j,) = struct.unpack("<i", raw)
        if not w < j < W:
            raise ConnectionError(f"it claims to be worker {j}; worker {w} takes connections from workers "
                                  f"{w + 1} to {W - 1}")
        return j

    return read


def _supervise(pids: dict[int, int], task: int, host: str, address: tuple[str, int], credentials: Credentials,
               slot: np.ndarray, beats: np.ndarray, due: np.ndarray, tick: float | None) -> dict[int, str]:
    """Report the workers to the driver until all have ended; kill them if the driver says so or goes away."""
    ended: dict[int, str] = {}
    try:
        sup = credentials.connect(address, b"driver")
        _say(sup, {"role": "task", "index": task, "host": host, "pid": os.getpid(), "workers": list(pids)})
    except OSError:
        sup = None
    every = tick or REPORT_EVERY
    while len(ended) < len(pids):
        killing = sup is None
        if sup is not None:
            ready, _, _ = select.select([sup], [], [], every)
            if ready:
                try:
                    data = sup.recv(4096)
                except OSError:
                    data = b""
                killing = not data or b"kill" in data
        if killing:
            for w, pid in pids.items():
                if w not in ended:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        for w, pid in pids.items():
            if w not in ended:
                how = reap(pid, 0 if killing else os.WNOHANG)
                if how is not None:
                    ended[w] = how
        if sup is not None:
            now = time.monotonic()
            report = {"workers": {w: [now - float(beats[w]), int(slot[2 * w]), int(slot[2 * w + 1]), int(due[w]),
                                      proc_state(pid) or ""] for w, pid in pids.items() if w not in ended},
                      "ended": ended}
            try:
                _say(sup, report)
            except OSError:
                sup = None
    if sup is not None:
        sup.close()
    return ended
