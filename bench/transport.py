"""Transports between worker processes, measured by ping-pong of columnar batches.

    python -m bench.transport [--rows 10,1000,100000,1000000] [--kinds socket,tcp,...] [--json FILE]

Each transport sends a batch of ``rows`` updates (two int64 fields, depth-1
times, diffs: 32 bytes a row) to a forked peer, which sends it back; the
round trip time is the median over repetitions, and the throughput counts
both directions.  Candidates:

- ``socket``: :class:`ddflow.transport.Channel` on a Unix socketpair
  (raw array buffers, zero-copy views on receipt) - what the engine uses
  on one machine;
- ``tcp``: the same Channel on a loopback TCP connection (``TCP_NODELAY``,
  4 MB buffers) - what workers on several machines use
  (``Dataflow(transport="tcp")``);
- ``pipe``: the same frames over a pair of ``os.pipe``;
- ``pickle``: ``multiprocessing.Pipe`` sending the batch pickled (protocol 5);
- ``shm``: a ``multiprocessing.shared_memory`` segment per message holding
  the arrays, its name sent over a socket.
"""
from __future__ import annotations

import argparse
import fcntl
import json
import multiprocessing as mp
import os
import selectors
import socket
import statistics
import sys
import time
from multiprocessing import resource_tracker, shared_memory

import numpy as np

from ddflow.base.updates import Updates
from ddflow.workers.transport import Channel, Hub, Message, tcp_pair


def batch(rows: int) -> Updates:
    rng = np.random.default_rng(0)
    return Updates((rng.integers(0, 1 << 40, rows), rng.integers(0, 1 << 40, rows)),
                   np.arange(rows, dtype=np.int64).reshape(-1, 1), np.ones(rows, dtype=np.int64), ("i", "i"))


class _PipeSock:
    """The socket calls Channel makes, over a read pipe and a write pipe."""

    def __init__(self, rfd: int, wfd: int):
        self.rfd, self.wfd = rfd, wfd
        os.set_blocking(rfd, False)
        os.set_blocking(wfd, False)
        for fd in (rfd, wfd):
            try:
                fcntl.fcntl(fd, 1031, 1 << 20)  # F_SETPIPE_SZ: the largest pipe an unprivileged setting allows
            except OSError:
                pass

    def setblocking(self, flag: bool) -> None:
        pass

    def fileno(self) -> int:
        return self.rfd

    def sendmsg(self, bufs):
        return os.writev(self.wfd, bufs)

    def recv(self, n: int) -> bytes:
        return os.read(self.rfd, n)

    def recv_into(self, view) -> int:
        return os.readv(self.rfd, [view])

    def close(self) -> None:
        os.close(self.rfd)
        os.close(self.wfd)


def _channel_roundtrip(hub: Hub, ch: Channel, msg: Message | None) -> Message:
    """Send ``msg`` (if any) and wait for one message, the way a worker waits (``Hub.poll``)."""
    got: list[Message] = []
    if msg is not None:
        ch.send(msg)
    if isinstance(ch.sock, _PipeSock):  # a pipe's write end is another descriptor than its read end
        sel = hub.pipe_sel
        while not got:
            writing = bool(ch.outbox) and not ch.flush()
            if writing:
                sel.register(ch.sock.wfd, selectors.EVENT_WRITE)
            for key, _ in sel.select():
                if key.fd == ch.sock.rfd:
                    got.extend(ch.receive())
            if writing:
                sel.unregister(ch.sock.wfd)
        return got[0]
    while not got:
        hub.poll(lambda c, m: got.append(m))
    return got[0]


def _hub(ch: Channel) -> Hub:
    if isinstance(ch.sock, _PipeSock):
        hub = Hub([])
        hub.pipe_sel = selectors.DefaultSelector()
        hub.pipe_sel.register(ch.sock.rfd, selectors.EVENT_READ)
        return hub
    return Hub([ch])


def _echo_channel(ch: Channel, reps: int) -> None:
    hub = _hub(ch)
    for _ in range(reps):
        m = _channel_roundtrip(hub, ch, None)
        ch.send(Message("b", None, m.batches))
    while ch.outbox:
        ch.flush()
        time.sleep(0.0005)


def bench_channel(kind: str, u: Updates, reps: int) -> list[float]:
    if kind in ("socket", "tcp"):
        a, b = socket.socketpair() if kind == "socket" else tcp_pair()
        mine = Channel(a, 1)
        child_sock = b
    else:
        r1, w1 = os.pipe()
        r2, w2 = os.pipe()
        mine = Channel(_PipeSock(r1, w2), 1)  # type: ignore[arg-type]
        child_sock = (r2, w1)
    pid = os.fork()
    if pid == 0:
        try:
            ch = Channel(child_sock, 0) if kind != "pipe" else Channel(_PipeSock(*child_sock), 0)  # type: ignore[arg-type]
            _echo_channel(ch, reps)
        finally:
            os._exit(0)
    times = []
    msg = Message("b", None, [u])
    hub = _hub(mine)
    for _ in range(reps):
        t0 = time.perf_counter()
        back = _channel_roundtrip(hub, mine, msg)
        times.append(time.perf_counter() - t0)
        assert len(back.batches[0]) == len(u)
    os.waitpid(pid, 0)
    return times


def _echo_pickle(conn, reps: int) -> None:
    for _ in range(reps):
        conn.send(conn.recv())


def bench_pickle(u: Updates, reps: int) -> list[float]:
    a, b = mp.Pipe()
    p = mp.get_context("fork").Process(target=_echo_pickle, args=(b, reps))
    p.start()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        a.send(u)
        back = a.recv()
        times.append(time.perf_counter() - t0)
        assert len(back) == len(u)
    p.join()
    return times


def _shm_send(sock: socket.socket, u: Updates) -> None:
    arrays = [*u.cols, u.times, u.diffs]
    size = max(1, sum(a.nbytes for a in arrays))
    seg = shared_memory.SharedMemory(create=True, size=size)
    pos = 0
    for a in arrays:
        seg.buf[pos : pos + a.nbytes] = a.tobytes() if not a.flags.c_contiguous else memoryview(a).cast("B")
        pos += a.nbytes
    name = seg.name.encode()
    resource_tracker.unregister(seg._name, "shared_memory")  # the receiver unlinks it
    seg.close()
    sock.sendall(len(name).to_bytes(2, "little") + name + len(u).to_bytes(8, "little"))


def _shm_recv(sock: socket.socket) -> Updates:
    n = int.from_bytes(sock.recv(2, socket.MSG_WAITALL), "little")
    name = sock.recv(n, socket.MSG_WAITALL).decode()
    rows = int.from_bytes(sock.recv(8, socket.MSG_WAITALL), "little")
    seg = shared_memory.SharedMemory(name=name)
    flat = np.frombuffer(seg.buf, dtype=np.int64, count=4 * rows).copy()
    seg.close()
    seg.unlink()
    return Updates((flat[:rows], flat[rows : 2 * rows]), flat[2 * rows : 3 * rows].reshape(-1, 1), flat[3 * rows :],
                   ("i", "i"))


def bench_shm(u: Updates, reps: int) -> list[float]:
    a, b = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        try:
            for _ in range(reps):
                _shm_send(b, _shm_recv(b))
        finally:
            os._exit(0)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        _shm_send(a, u)
        back = _shm_recv(a)
        times.append(time.perf_counter() - t0)
        assert len(back) == len(u)
    os.waitpid(pid, 0)
    return times


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.transport", description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", default="10,1000,100000,1000000")
    p.add_argument("--kinds", default="socket,tcp,pipe,pickle,shm")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    results = []
    for rows in [int(x) for x in args.rows.split(",")]:
        u = batch(rows)
        reps = max(5, min(400, 2_000_000 // max(rows, 1)))
        for kind in args.kinds.split(","):
            if kind in ("socket", "tcp", "pipe"):
                t = bench_channel(kind, u, reps)
            elif kind == "pickle":
                t = bench_pickle(u, reps)
            else:
                t = bench_shm(u, reps)
            med = statistics.median(t)
            nbytes = 32 * rows
            res = {"transport": kind, "rows": rows, "bytes": nbytes, "roundtrip_us": med * 1e6,
                   "gb_per_s": 2 * nbytes / med / 1e9}
            results.append(res)
            print(json.dumps(res), flush=True)
    if args.json:
        with open(args.json, "a") as f:
            for r in results:
                f.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
