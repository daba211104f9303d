"""Channels between processes: framed messages of raw numpy buffers over sockets.

A message is a kind, a small ``meta`` value and a list of columnar
batches.  On the wire it is one frame (:mod:`ddflow.workers.wire`): a
12-byte prefix (total length, header length), a binary header describing
the arrays, then each array's bytes as they are in memory.  The receiver
checks the prefix against the channel's largest frame before it
allocates, reads the frame into one fresh buffer and views the arrays on
it without copying.

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

Trust.  A Unix socketpair is made by the driver before it forks the
workers: nothing else can connect to it, so its channel is *trusted*
(values of any picklable type, no frame limit).  Every other channel is a
network one: its socket proved itself at connection
(:mod:`ddflow.workers.auth`), its values are limited to the codec's safe
types, and a frame over ``max_frame`` bytes, or one that does not decode,
closes it (:class:`ProtocolError`).  A TLS socket (``ssl.SSLSocket``) is
written with ``send`` instead of ``sendmsg``, which TLS lacks.
"""
from __future__ import annotations

import errno
import logging
import selectors
import socket
import ssl
from collections import deque
from typing import Callable, Iterable

import numpy as np

from ddflow import errors
from ddflow.base.interner import Interner
from ddflow.workers import auth
from ddflow.workers.auth import MAX_FRAME_BYTES, Credentials, Gate
from ddflow.workers.wire import PREFIX, Message, WireError, decode_frame, encode_frame

__all__ = ["Channel", "ChannelClosed", "Hub", "Message", "ProtocolError", "TRANSPORTS", "connect_pair",
           "pair_on", "recv_exact", "tcp_pair"]

_log = logging.getLogger("ddflow.workers")
#: What a TLS socket raises where a plain non-blocking one raises BlockingIOError.
_WOULD_BLOCK = (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError)


class ChannelClosed(ConnectionError):
    """The process at the other end went away."""


class ProtocolError(ChannelClosed):
    """The other end sent what ddflow never sends (a frame over the limit, or one that does not decode): the
    channel was closed, and the message says why."""


#: How the processes of a dataflow are connected: one socket per pair, Unix (one machine) or TCP.
TRANSPORTS = ("socketpair", "tcp")


def tcp_pair(host: str = "127.0.0.1", credentials: Credentials | None = None) -> tuple[socket.socket, socket.socket]:
    """The two ends of one TCP connection on ``host``, each proved to the other: what ``socket.socketpair``
    gives, over TCP.

    Forked workers connected this way exchange exactly as workers on
    several machines would (same kernel path, framing and handshake),
    which is what ``Dataflow(transport="tcp")`` measures and tests.
    ``credentials``: whose secret (and TLS) the ends prove (default: a
    fresh secret, no TLS).  Cost: one connection and one handshake.

    >>> a, b = tcp_pair(); _ = a.sendall(b"x"); b.recv(1)
    b'x'
    """
    with socket.create_server((host, 0)) as srv:
        return pair_on(srv, credentials or Credentials.new(env={}))


def pair_on(srv: socket.socket, credentials: Credentials) -> tuple[socket.socket, socket.socket]:
    """Connect to the listening ``srv`` and accept that one connection, both ends proving themselves.

    Whatever else connects to ``srv`` meanwhile (a process racing for the
    port) is refused by the handshake, in a thread of its own, so it
    delays nothing.  ``srv`` is closed on return.  Cost: one connection
    and one handshake.

    >>> srv = socket.create_server(("127.0.0.1", 0))
    >>> a, b = pair_on(srv, Credentials.new(env={})); _ = a.sendall(b"x"); b.recv(1)
    b'x'
    """
    gate = Gate(srv, credentials, b"pair")
    try:
        a = credentials.connect(srv.getsockname()[:2], b"pair")
        mine = a.getsockname()[:2]
        while True:
            b, addr, _ = gate.arrived.get(timeout=2 * auth.HANDSHAKE_S)
            if tuple(addr[:2]) == tuple(mine):
                return a, b
            b.close()  # another holder of the secret: none exists, but only our own connection will do
    finally:
        gate.close()


def recv_exact(sock: socket.socket, n: int) -> bytes:
    """Exactly ``n`` bytes from a blocking socket; ConnectionError if it ends first."""
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"the connection ended after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def connect_pair(transport: str, credentials: Credentials | None = None) -> tuple[socket.socket, socket.socket]:
    """Two connected sockets for ``transport`` (one of :data:`TRANSPORTS`); TCP ends prove ``credentials``."""
    return socket.socketpair() if transport == "socketpair" else tcp_pair(credentials=credentials)


class Channel:
    """One end of a socket between two processes, with an outbox and a frame reader.

    ``max_frame``: the largest frame a network channel sends or reads
    (bytes); a trusted one (a Unix socketpair, module docstring) has none.
    """

    #: Kernel buffer per direction: a batch of a few MB goes out in one or two writes, not dozens of wake-ups.
    BUFFER_BYTES = 4 << 20
    #: A TLS socket is written this much at a time (it has no ``sendmsg``).
    TLS_WRITE = 1 << 20

    def __init__(self, sock: socket.socket, peer: int, interner: Interner | None = None,
                 max_frame: int = MAX_FRAME_BYTES):
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
        #: A socketpair between forked workers: values of any type (pickled), no frame limit.
        self.trusted = getattr(sock, "family", None) == socket.AF_UNIX and not isinstance(sock, ssl.SSLSocket)
        self.tls = isinstance(sock, ssl.SSLSocket)
        self.max_frame = None if self.trusted else max_frame
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
        """Queue ``msg`` and write what the socket takes now; the rest goes out on later flushes.

        Raises :class:`~ddflow.errors.SchemaError` for a value a network
        channel refuses (:mod:`ddflow.workers.wire`), and
        :class:`~ddflow.errors.DataflowError` for a frame over ``max_frame``;
        nothing is queued then.
        """
        values = None
        new_codes: set[int] = set()  # sent with this frame: marked sent only once the frame is queued
        if self.interner is not None and self.interner.hashed:
            sent = self._sent_codes
            for u in msg.batches:
                for c, k in zip(u.cols, u.kinds):
                    if k == "o" and len(c):
                        new = [x for x in np.unique(c).tolist() if x not in sent and x not in new_codes]
                        if new:
                            values = values or ([], [])
                            values[0].extend(new)
                            values[1].extend(self.interner.values_for(np.array(new, dtype=np.int64)))
                            new_codes.update(new)
        head, arrays, total = encode_frame(msg, values, self.trusted)
        if self.max_frame is not None and total > self.max_frame:
            raise errors.DataflowError(
                f"a {msg.kind!r} message of {total} bytes to peer {self.peer} is over the largest frame a network "
                f"channel carries ({self.max_frame} bytes; DDFLOW_MAX_FRAME_BYTES, or the placement's "
                "max_frame_bytes, raises it)")
        self._sent_codes.update(new_codes)
        self.outbox.append(memoryview(head))
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
                n = self.sock.send(out[0][:self.TLS_WRITE]) if self.tls else self.sock.sendmsg(list(out)[:64])
            except _WOULD_BLOCK:
                return False
            except OSError as e:
                if e.errno in (errno.EPIPE, errno.ECONNRESET) or isinstance(e, ssl.SSLError):
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
                need = PREFIX.size - len(self._prefix)
                try:
                    chunk = self.sock.recv(need)
                except _WOULD_BLOCK:
                    return msgs
                except (ConnectionResetError, ssl.SSLError):
                    chunk = b""
                if not chunk:
                    self.closed = True
                    if msgs:
                        return msgs
                    raise ChannelClosed(f"peer {self.peer} closed the channel")
                self._prefix += chunk
                if len(self._prefix) < PREFIX.size:
                    continue
                total, hlen = PREFIX.unpack(self._prefix)
                if self.max_frame is not None and total > self.max_frame or PREFIX.size + hlen > total:
                    self._refuse(f"peer {self.peer} sent a frame claiming {total} bytes (header {hlen}), over the "
                                 f"largest this channel reads ({self.max_frame} bytes)" if PREFIX.size + hlen <= total
                                 else f"peer {self.peer} sent a frame whose header ({hlen} bytes) is longer than the "
                                      f"frame ({total} bytes)")
                self._frame = bytearray(total)
                self._frame[: PREFIX.size] = self._prefix
                self._got = PREFIX.size
                self._prefix = bytearray()
            frame = self._frame
            view = memoryview(frame)
            while self._got < len(frame):
                try:
                    n = self.sock.recv_into(view[self._got:])
                except _WOULD_BLOCK:
                    return msgs
                except (ConnectionResetError, ssl.SSLError):
                    n = 0
                if n == 0:
                    self.closed = True
                    raise ChannelClosed(f"peer {self.peer} closed the channel mid-message")
                self._got += n
            self._frame = None
            try:
                msgs.append(self._decode(frame))
            except WireError as e:
                self._refuse(f"peer {self.peer} sent a frame that does not decode: {e}")

    def _refuse(self, reason: str) -> None:
        """Close the channel for what the other end sent, log why, and raise :class:`ProtocolError`."""
        _log.warning("ddflow closed a channel: %s", reason)
        self.close()
        raise ProtocolError(reason)

    def _decode(self, frame: bytearray) -> Message:
        msg, values = decode_frame(frame, self.trusted)
        if values is not None and self.interner is not None:
            self.interner.register(*values)
        return msg

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
