"""A launcher of the tests' own for :class:`ddflow.workers.remote.RemotePlacement`: what Spark's barrier stage does.

:class:`TaskLauncher` starts task t as a process of its own (``python -c
TASK``), in network namespace t when given namespaces (``ip netns exec``,
each its own host address: ``test_remote.py``), else on this host's
loopback, and serves the tasks' all-gather.  ``on_gather(tables)`` runs
once every task has sent its ``{worker: [host, port]}`` table and before
any task hears back, while the workers' peer listeners are open and not
yet taken: where an attacker racing the real peers would strike.
"""
from __future__ import annotations

import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

TASK = """
import json, pickle, socket, sys
from ddflow.workers.remote import serve_task
payload_file, task, tasks, workers, host, port, gather_host, gather_port = sys.argv[1:]
def gather(msg):
    with socket.create_connection((gather_host, int(gather_port))) as s:
        s.sendall((json.dumps([int(task), msg]) + "\\n").encode())
        return json.loads(s.makefile().readline())
with open(payload_file, "rb") as f:
    payload, credentials = pickle.load(f)  # the test's own file (mode 0600): the secret is on no command line
serve_task(payload, int(task), int(tasks), int(workers), (host, int(port)), credentials, gather)
"""


class TaskLauncher:
    """Starts task t (in namespace ``spaces[t]``, if given) and serves the tasks' all-gather."""

    def __init__(self, host: str = "127.0.0.1", spaces: list[str] | None = None, tasks: int = 2, on_gather=None,
                 start=True):
        self.host = host
        self.spaces = spaces
        self.n = len(spaces) if spaces else tasks
        self.on_gather = on_gather
        self.start = start  #: False: launch starts nothing (a cluster whose slots never free)
        self.procs: list[subprocess.Popen] = []
        self.payload = None

    def dumps(self, obj):
        from pyspark import cloudpickle

        return cloudpickle.dumps(obj)

    def tasks(self, workers: int) -> int:
        return self.n

    def launch(self, payload, workers, tasks, address, credentials) -> None:
        self.credentials = credentials
        if not self.start:
            return
        fd, self.payload = tempfile.mkstemp(prefix="ddflow-payload-")
        with os.fdopen(fd, "wb") as f:
            pickle.dump((payload, credentials), f)
        gather = socket.create_server((self.host, 0))
        threading.Thread(target=self._gather, args=(gather, tasks), daemon=True).start()
        for t in range(tasks):
            where = ["ip", "netns", "exec", self.spaces[t]] if self.spaces else []
            self.procs.append(subprocess.Popen(
                [*where, sys.executable, "-c", TASK, self.payload, str(t), str(tasks), str(workers), address[0],
                 str(address[1]), *map(str, gather.getsockname()[:2])], start_new_session=True))

    def _gather(self, srv: socket.socket, tasks: int) -> None:
        conns, msgs = [], {}
        while len(conns) < tasks:
            c, _ = srv.accept()
            t, msg = json.loads(c.makefile().readline())
            msgs[t] = msg
            conns.append(c)
        if self.on_gather is not None:
            tables = {}
            for t in range(tasks):
                tables.update({int(w): (h, int(p)) for w, (h, p) in json.loads(msgs[t]).items()})
            self.on_gather(tables)
        reply = (json.dumps([msgs[t] for t in range(tasks)]) + "\n").encode()
        for c in conns:
            c.sendall(reply)
            c.close()
        srv.close()

    def error(self):
        bad = [(t, p.returncode) for t, p in enumerate(self.procs) if p.poll() not in (None, 0)]
        return f"task {bad[0][0]} exited with status {bad[0][1]}" if bad else None

    def cancel(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)

    def join(self, seconds: float) -> bool:
        end = time.monotonic() + seconds
        for p in self.procs:
            try:
                p.wait(max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                return False
        if self.payload is not None and os.path.exists(self.payload):
            os.unlink(self.payload)
        return True
