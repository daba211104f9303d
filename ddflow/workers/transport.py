"""Channels between processes: framed messages of raw numpy buffers over Unix sockets.

A message is a kind, a small picklable ``meta`` and a list of columnar
batches.  On the wire it is one frame: a 12-byte prefix (total length,
header length), a pickled header describing the arrays, then each
array's bytes as they are in memory.  The receiver reads a frame into
one fresh buffer and views the arrays on it without copying.

Why this transport (``python -m bench.transport``, this 2-core machine,
``bench/results/transport.jsonl``; round trip of a batch of 32-byte
updates to a forked peer and back): at 100,000 rows (3.2 MB) a Unix
socketpair carrying raw buffers moved 4.1 GB/s, the same frames over
``os.pipe`` 1.8 GB/s, a shared-memory segment per message 1.1 GB/s
(creating and mapping a segment each time costs more than the copy it
saves), and pickled messages (``multiprocessing.Pipe``, protocol 5) 0.5
GB/s.  At 1,000 rows the socketpair was also fastest (309 us against
353-657 us); at 10 rows all four were within the noise of process wake-up
(190-290 us); only at 1,000,000 rows (32 MB) did pipes lead (1.7 against
1.4 GB/s).  Exchange batches are small to medium, so the socketpair stays.

Sockets are non-blocking.  Every channel has its own outbox (so a worker
holds O(W) buffers, one per peer, never a W x W matrix), and a process
that waits keeps draining its outboxes and reading its inboxes, so two
peers sending each other large batches never deadlock on full buffers.
Object-kind columns carry interned codes; the values of codes this
channel has not carried before travel in the same frame.
"""
from __future__ import annotations

import errno
import pickle
import selectors
import socket
import struct
from collections import deque
from typing import Any, Callable, Iterable

import numpy as np

from ddflow.base.interner import Interner
from ddflow.base.updates import Updates

_PREFIX = struct.Struct("<QI")


class ChannelClosed(ConnectionError):
    """The process at the other end went away."""


class Message:
    __slots__ = ("kind", "meta", "batches")

    def __init__(self, kind: str, meta: Any = None, batches: list[Updates] | None = None):
        self.kind = kind
        self.meta = meta
        self.batches = batches or []

    def __repr__(self) -> str:
        return f"<Message {self.kind} {self.meta!r} {[len(b) for b in self.batches]}>"


#: How the processes of a dataflow are connected: one socket per pair, Unix (one machine) or TCP.
TRANSPORTS = ("socketpair", "tcp")


def tcp_pair(host: str = "127.0.0.1") -> tuple[socket.socket, socket.socket]:
    """The two ends of one TCP connection on ``host``: what ``socket.socketpair`` gives, over TCP.

    Forked workers connected this way exchange exactly as workers on
    several machines would (same kernel path, same framing), which is what
    ``Dataflow(transport="tcp")`` measures and tests.

    >>> a, b = tcp_pair(); _ = a.sendall(b"x"); b.recv(1)
    b'x'
    """
    with socket.create_server((host, 0)) as srv:
        a = socket.create_connection(srv.getsockname()[:2])
        b, _ = srv.accept()
    return a, b


def recv_exact(sock: socket.socket, n: int) -> bytes:
    """Exactly ``n`` bytes from a blocking socket; ConnectionError if it ends first."""
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"the connection ended after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def connect_pair(transport: str) -> tuple[socket.socket, socket.socket]:
    """Two connected sockets for ``transport`` (one of :data:`TRANSPORTS`)."""
    return socket.socketpair() if transport == "socketpair" else tcp_pair()


class Channel:
    """One end of a socket between two processes, with an outbox and a frame reader."""

    #: Kernel buffer per direction: a batch of a few MB goes out in one or two writes, not dozens of wake-ups.
    BUFFER_BYTES = 4 << 20

    def __init__(self, sock: socket.socket, peer: int, interner: Interner | None = None):
        sock.setblocking(False)
        if isinstance(sock, socket.socket):
            for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
                try:
                    sock.setsockopt(socket.SOL_SOCKET, opt, self.BUFFER_BYTES)
                except OSError:
                    pass
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                # A frame goes out as soon as it is written: a round's small messages must not wait for Nagle.
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock
        self.peer = peer
        self.interner = interner
        self.outbox: deque[memoryview] = deque()
        self._sent_codes: set[int] = set()
        self._prefix = bytearray()
        self._frame: bytearray | None = None
        self._got = 0
        self.closed = False
        self.bytes_sent = 0
        self.messages_sent = 0

    def forget_sent(self) -> None:
        """Send values again with their codes from now on: the other end may have forgotten them (a collection)."""
        self._sent_codes = set()

    def fileno(self) -> int:
        return self.sock.fileno()

    # -- sending ---------------------------------------------------------------------
    def send(self, msg: Message) -> None:
        """Queue ``msg`` and write what the socket takes now; the rest goes out on later flushes."""
        arrays: list[np.ndarray] = []
        descr = []
        values = None
        for u in msg.batches:
            descr.append((u.kinds, u.depth, len(u)))
            arrays.extend(np.ascontiguousarray(c) for c in u.cols)
            arrays.append(np.ascontiguousarray(u.times))
            arrays.append(np.ascontiguousarray(u.diffs))
            if self.interner is not None and self.interner.hashed:
                for c, k in zip(u.cols, u.kinds):
                    if k == "o" and len(c):
                        new = [x for x in np.unique(c).tolist() if x not in self._sent_codes]
                        if new:
                            values = values or ([], [])
                            values[0].extend(new)
                            values[1].extend(self.interner.values_for(np.array(new, dtype=np.int64)))
                            self._sent_codes.update(new)
        header = pickle.dumps((msg.kind, msg.meta, descr, [(a.dtype.str, a.shape) for a in arrays], values),
                              protocol=5)
        total = _PREFIX.size + len(header) + sum(a.nbytes for a in arrays)
        self.outbox.append(memoryview(_PREFIX.pack(total, len(header)) + header))
        for a in arrays:
            if a.nbytes:
                self.outbox.append(memoryview(a).cast("B"))
        self.bytes_sent += total
        self.messages_sent += 1
        self.flush()

    def flush(self) -> bool:
        """Write as much of the outbox as the socket takes; True when it is empty."""
        out = self.outbox
        while out:
            try:
                n = self.sock.sendmsg(list(out)[:64])
            except (BlockingIOError, InterruptedError):
                return False
            except OSError as e:
                if e.errno in (errno.EPIPE, errno.ECONNRESET):
                    self.closed = True
                    raise ChannelClosed(f"peer {self.peer} closed the channel") from None
                raise
            while n:
                head = out[0]
                if n >= len(head):
                    n -= len(head)
                    out.popleft()
                else:
                    out[0] = head[n:]
                    n = 0
        return True

    # -- receiving ----------------------------------------------------------------------
    def receive(self) -> list[Message]:
        """Every complete message the socket holds now (non-blocking)."""
        msgs = []
        while True:
            if self._frame is None:
                need = _PREFIX.size - len(self._prefix)
                try:
                    chunk = self.sock.recv(need)
                except (BlockingIOError, InterruptedError):
                    return msgs
                except ConnectionResetError:
                    chunk = b""
                if not chunk:
                    self.closed = True
                    if msgs:
                        return msgs
                    raise ChannelClosed(f"peer {self.peer} closed the channel")
                self._prefix += chunk
                if len(self._prefix) < _PREFIX.size:
                    continue
                total, _ = _PREFIX.unpack(self._prefix)
                self._frame = bytearray(total)
                self._frame[: _PREFIX.size] = self._prefix
                self._got = _PREFIX.size
                self._prefix = bytearray()
            frame = self._frame
            view = memoryview(frame)
            while self._got < len(frame):
                try:
                    n = self.sock.recv_into(view[self._got:])
                except (BlockingIOError, InterruptedError):
                    return msgs
                except ConnectionResetError:
                    n = 0
                if n == 0:
                    self.closed = True
                    raise ChannelClosed(f"peer {self.peer} closed the channel mid-message")
                self._got += n
            self._frame = None
            msgs.append(self._decode(frame))

    def _decode(self, frame: bytearray) -> Message:
        return decode_frame(frame, self.interner)

    def close(self) -> None:
        self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass


class Hub:
    """Waits on many channels at once: blocks in epoll until one is readable (or writable, with a backlog)."""

    def __init__(self, channels: Iterable[Channel]):
        self.sel = selectors.DefaultSelector()
        self.channels: list[Channel] = []
        self._writing: set[int] = set()
        for ch in channels:
            self.add(ch)

    def add(self, ch: Channel) -> None:
        self.channels.append(ch)
        self.sel.register(ch.sock, selectors.EVENT_READ, ch)

    def remove(self, ch: Channel) -> None:
        """Stop waiting on ``ch`` (its peer is gone): it is neither flushed nor selected again."""
        try:
            self.sel.unregister(ch.sock)
        except (KeyError, ValueError):
            pass
        self._writing.discard(ch.fileno())
        if ch in self.channels:
            self.channels.remove(ch)

    def poll(self, on_message: Callable[[Channel, Message], None], timeout: float | None = None) -> int:
        """Flush outboxes, wait for input (at most ``timeout``), hand every message to ``on_message``."""
        for ch in self.channels:
            backlog = bool(ch.outbox) and not ch.flush()
            if backlog != (ch.fileno() in self._writing):
                ev = selectors.EVENT_READ | (selectors.EVENT_WRITE if backlog else 0)
                self.sel.modify(ch.sock, ev, ch)
                (self._writing.add if backlog else self._writing.discard)(ch.fileno())
        n = 0
        for key, ev in self.sel.select(timeout):
            ch: Channel = key.data
            if ev & selectors.EVENT_WRITE:
                ch.flush()
            if ev & selectors.EVENT_READ:
                for m in ch.receive():
                    n += 1
                    on_message(ch, m)
        return n

    def close(self) -> None:
        self.sel.close()


def decode_frame(frame: bytearray, interner: Interner | None) -> Message:
    """The message in one whole frame (arrays are views on ``frame``); values it carries go to ``interner``."""
    _, hlen = _PREFIX.unpack_from(frame)
    kind, meta, descr, arrays, values = pickle.loads(memoryview(frame)[_PREFIX.size : _PREFIX.size + hlen])
    if values is not None and interner is not None:
        interner.register(*values)
    pos = _PREFIX.size + hlen
    arrs = []
    for dt, shape in arrays:
        dt = np.dtype(dt)
        count = int(np.prod(shape)) if len(shape) else 1
        a = np.frombuffer(frame, dtype=dt, count=count, offset=pos).reshape(shape) if count else np.zeros(shape, dt)
        pos += count * dt.itemsize
        arrs.append(a)
    batches = []
    i = 0
    for kinds, depth, n in descr:
        k = len(kinds)
        batches.append(Updates(tuple(arrs[i : i + k]), arrs[i + k], arrs[i + k + 1], tuple(kinds)))
        i += k + 2
    return Message(kind, meta, batches)
