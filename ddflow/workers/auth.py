"""Proving that a connection belongs to this dataflow, before anything else is read from it.

Every TCP connection between a dataflow's processes (a worker or task to
the driver, a worker to a peer, an executor to a worker's ingest port,
and the two ends of a ``transport="tcp"`` pair) starts with a
challenge-response over a secret of the dataflow's own, in the way of
Spark's ``spark.authenticate``: both sides prove they hold it, and each
contributes a fresh random nonce, so a recorded exchange proves nothing
on a later connection::

    client -> server   b"DDFLOW-AUTH1", client nonce (32 bytes)
    server -> client   server nonce (32), HMAC-SHA256(secret, b"server" purpose cn sn)
    client -> server   HMAC-SHA256(secret, b"client" purpose cn sn)

``purpose`` (``b"driver"``, ``b"peer"``, ``b"ingest"``, ``b"pair"``) is
bound into both proofs, so a proof for one port is none for another.  The
client checks the server's proof before it proves itself or sends data,
so a worker never talks to an impostor listening on a reused port.  The
whole exchange has a deadline (:data:`HANDSHAKE_S`); a server runs each
connection's exchange in a thread of its own (:class:`Gate`), so a silent
or slow connection delays nobody else.

The secret (32 random bytes, :class:`Credentials`) is made when the
workers start and travels with the dataflow: in the arguments of the
function Spark ships to its barrier tasks, inherited by forked workers.
It is never logged, printed, or put in a name Spark shows (a job group).

Authentication is of each connection as it starts, as with
``spark.authenticate`` alone; an attacker who can rewrite packets on the
path could still take over an authenticated stream.  For integrity and
confidentiality on such a network turn on TLS (:class:`TLS`,
``DDFLOW_TLS_CERT``/``DDFLOW_TLS_KEY``/``DDFLOW_TLS_CA``): every
connection is then mutual TLS first, with the same challenge inside it.
"""
from __future__ import annotations

import hashlib
import hmac
import logging
import os
import queue
import secrets
import socket
import ssl
import threading
import time
from typing import Any, Callable

from ddflow import errors

_log = logging.getLogger("ddflow.workers")

#: Seconds a connection has to complete the handshake (TLS and the challenge) before it is dropped.
HANDSHAKE_S = 10.0
#: Default largest frame a worker or the driver reads from another process (``DDFLOW_MAX_FRAME_BYTES``).
MAX_FRAME_BYTES = 1 << 30
#: Default largest frame a worker's ingest port reads (``DDFLOW_MAX_INGEST_FRAME_BYTES``): one partition's share.
MAX_INGEST_FRAME_BYTES = 256 << 20

_GREETING = b"DDFLOW-AUTH1"
_NONCE = 32
_MAC = 32


class AuthError(errors.DataflowError, ConnectionError):
    """A connection that did not prove it belongs to this dataflow (or whose server did not), and why."""


class TLS:
    """Mutual TLS for a dataflow's connections: a certificate and key every process presents, and the CA that
    signed them.

    ``cert``, ``key``, ``ca``: paths, readable on the driver and on every
    executor (as Spark's own ``spark.ssl.keyStore``); ``ca`` defaults to
    ``cert`` (one self-signed certificate shared by all).  Peers are
    verified against the CA, not by host name: executors' addresses are
    not known in advance, and the dataflow's secret names the dataflow.
    Cost: contexts are built once per process, on first use.

    >>> TLS.from_env({})  # no DDFLOW_TLS_CERT: no TLS
    >>> TLS.from_env({"DDFLOW_TLS_CERT": "/etc/ddflow/node.pem"})
    Traceback (most recent call last):
    ...
    ddflow.errors.UsageError: DDFLOW_TLS_CERT is set but DDFLOW_TLS_KEY is not: TLS needs a certificate and its key
    """

    def __init__(self, cert: str, key: str, ca: str | None = None):
        self.cert, self.key, self.ca = str(cert), str(key), str(ca or cert)
        self._contexts: dict[bool, ssl.SSLContext] = {}

    def __repr__(self) -> str:
        return f"TLS(cert={self.cert!r}, key={self.key!r}, ca={self.ca!r})"

    def __getstate__(self) -> dict:
        return {"cert": self.cert, "key": self.key, "ca": self.ca}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _contexts={})

    @classmethod
    def from_env(cls, env: Any = None) -> "TLS | None":
        """TLS from ``DDFLOW_TLS_CERT``, ``DDFLOW_TLS_KEY`` and (optional) ``DDFLOW_TLS_CA``; None without a cert."""
        env = os.environ if env is None else env
        cert, key = env.get("DDFLOW_TLS_CERT"), env.get("DDFLOW_TLS_KEY")
        if not cert and not key:
            return None
        if not cert or not key:
            have, lack = ("DDFLOW_TLS_CERT", "DDFLOW_TLS_KEY") if cert else ("DDFLOW_TLS_KEY", "DDFLOW_TLS_CERT")
            raise errors.UsageError(f"{have} is set but {lack} is not: TLS needs a certificate and its key")
        return cls(cert, key, env.get("DDFLOW_TLS_CA") or None)

    def context(self, server: bool) -> ssl.SSLContext:
        """The server's or the client's context: TLS 1.2 or later, each side presenting its certificate."""
        ctx = self._contexts.get(server)
        if ctx is None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server else ssl.PROTOCOL_TLS_CLIENT)
            ctx.minimum_version = ssl.TLSVersion.TLSv1_2
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_REQUIRED
            try:
                ctx.load_cert_chain(self.cert, self.key)
                ctx.load_verify_locations(self.ca)
            except (OSError, ssl.SSLError) as e:
                raise errors.UsageError(f"TLS: cannot load the certificate {self.cert!r}, key {self.key!r} or CA "
                                        f"{self.ca!r}: {e}") from None
            self._contexts[server] = ctx
        return ctx


def _limit(env: Any, name: str, given: int | None, default: int) -> int:
    if given is None:
        text = env.get(name)
        if not text:
            return default
        try:
            given = int(text)
        except ValueError:
            raise errors.UsageError(f"{name} is a number of bytes, got {text!r}") from None
    if isinstance(given, bool) or not isinstance(given, int) or given < 1024:
        raise errors.UsageError(f"{name.lower().removeprefix('ddflow_')} must be at least 1024 bytes, got {given!r}")
    return given


class Credentials:
    """What a dataflow's connections prove and obey: its secret, its TLS (or none), the largest frames its ports read.

    Made once per start of the workers (:meth:`new`), pickled with what
    the tasks get.  Its repr never shows the secret.

    >>> c = Credentials.new(env={}); c
    <Credentials tls=None max_frame_bytes=1073741824 max_ingest_frame_bytes=268435456>
    >>> a, b = socket.socketpair()
    >>> t = threading.Thread(target=c.server, args=(b, b"peer")); t.start()
    >>> _ = c.client(a, b"peer"); t.join(); a.close(); b.close()
    """

    def __init__(self, secret: bytes, tls: TLS | None = None, max_frame_bytes: int = MAX_FRAME_BYTES,
                 max_ingest_frame_bytes: int = MAX_INGEST_FRAME_BYTES):
        if not isinstance(secret, bytes) or len(secret) < 16:
            raise errors.UsageError("a dataflow's secret is at least 16 random bytes")
        self._secret = secret
        self.tls = tls
        self.max_frame_bytes = max_frame_bytes
        self.max_ingest_frame_bytes = max_ingest_frame_bytes

    @classmethod
    def new(cls, tls: TLS | None = None, max_frame_bytes: int | None = None,
            max_ingest_frame_bytes: int | None = None, env: Any = None) -> "Credentials":
        """A fresh secret; what is not given comes from the environment (``DDFLOW_TLS_*``,
        ``DDFLOW_MAX_FRAME_BYTES``, ``DDFLOW_MAX_INGEST_FRAME_BYTES``), else the defaults."""
        env = os.environ if env is None else env
        return cls(secrets.token_bytes(32), tls if tls is not None else TLS.from_env(env),
                   _limit(env, "DDFLOW_MAX_FRAME_BYTES", max_frame_bytes, MAX_FRAME_BYTES),
                   _limit(env, "DDFLOW_MAX_INGEST_FRAME_BYTES", max_ingest_frame_bytes, MAX_INGEST_FRAME_BYTES))

    def __repr__(self) -> str:
        return (f"<Credentials tls={self.tls!r} max_frame_bytes={self.max_frame_bytes} "
                f"max_ingest_frame_bytes={self.max_ingest_frame_bytes}>")

    def _proof(self, side: bytes, purpose: bytes, cn: bytes, sn: bytes) -> bytes:
        return hmac.new(self._secret, side + b"\x00" + purpose + b"\x00" + cn + sn, hashlib.sha256).digest()

    # -- the two sides of the handshake ----------------------------------------------------------------
    def connect(self, address: tuple[str, int], purpose: bytes, timeout: float | None = None) -> socket.socket:
        """A connection to ``address`` that has proved itself both ways (TLS first, if set); blocking, no timeout.

        Raises :class:`AuthError` if the server does not hold the secret,
        OSError if it cannot be reached.
        """
        timeout = HANDSHAKE_S if timeout is None else timeout
        sock = socket.create_connection(tuple(address), timeout=timeout)
        try:
            return self.client(sock, purpose, timeout)
        except BaseException:
            sock.close()
            raise

    def client(self, sock: socket.socket, purpose: bytes, timeout: float | None = None) -> socket.socket:
        """Prove ``sock`` (connected) from the client's side, within ``timeout`` seconds (default
        :data:`HANDSHAKE_S`); the socket to use from now on (a TLS one, if set)."""
        deadline = time.monotonic() + (HANDSHAKE_S if timeout is None else timeout)
        if self.tls is not None:
            sock = _tls(self.tls.context(server=False).wrap_socket(sock, do_handshake_on_connect=False), deadline)
        cn = secrets.token_bytes(_NONCE)
        _send(sock, _GREETING + cn, deadline)
        reply = _recv(sock, _NONCE + _MAC, deadline, "the server's proof")
        sn, theirs = reply[:_NONCE], reply[_NONCE:]
        if not hmac.compare_digest(theirs, self._proof(b"server", purpose, cn, sn)):
            raise AuthError(f"the server at {_name(sock)} did not prove it holds this dataflow's secret")
        _send(sock, self._proof(b"client", purpose, cn, sn), deadline)
        sock.settimeout(None)
        return sock

    def server(self, sock: socket.socket, purpose: bytes, timeout: float | None = None) -> socket.socket:
        """Have the client of ``sock`` (accepted) prove itself; the socket to use from now on.

        Raises :class:`AuthError` naming why: it sent no greeting in time,
        not ddflow's greeting, a wrong proof, or failed TLS.
        """
        deadline = time.monotonic() + (HANDSHAKE_S if timeout is None else timeout)
        if self.tls is not None:
            sock = _tls(self.tls.context(server=True).wrap_socket(sock, server_side=True,
                                                                  do_handshake_on_connect=False), deadline)
        hello = _recv(sock, len(_GREETING) + _NONCE, deadline, "a greeting")
        if hello[:len(_GREETING)] != _GREETING:
            raise AuthError(f"{_name(sock, peer=True)} did not greet as ddflow does (its first bytes: "
                            f"{hello[:16]!r})")
        cn, sn = hello[len(_GREETING):], secrets.token_bytes(_NONCE)
        _send(sock, sn + self._proof(b"server", purpose, cn, sn), deadline)
        theirs = _recv(sock, _MAC, deadline, "its proof")
        if not hmac.compare_digest(theirs, self._proof(b"client", purpose, cn, sn)):
            raise AuthError(f"{_name(sock, peer=True)} sent a wrong proof: it does not hold this dataflow's secret")
        sock.settimeout(None)
        return sock


class Silent(AuthError, TimeoutError):
    """A connection that did not finish the handshake within its deadline."""


def _name(sock: socket.socket, peer: bool = False) -> str:
    try:
        addr = sock.getpeername()
    except OSError:
        return "a connection" if peer else "the other end"
    where = f"{addr[0]}:{addr[1]}" if isinstance(addr, tuple) else "a local socket"
    return f"the connection from {where}" if peer else where


def _remaining(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise Silent("the handshake's deadline passed")
    return left


def _tls(sock: ssl.SSLSocket, deadline: float) -> ssl.SSLSocket:
    sock.settimeout(_remaining(deadline))
    try:
        sock.do_handshake()
    except (TimeoutError, socket.timeout):
        raise Silent(f"{_name(sock, peer=True)} did not complete TLS before the handshake's deadline") from None
    except (ssl.SSLError, OSError) as e:
        raise AuthError(f"TLS with {_name(sock, peer=True)} failed: {e}") from None
    return sock


def _send(sock: socket.socket, data: bytes, deadline: float) -> None:
    sock.settimeout(_remaining(deadline))
    try:
        sock.sendall(data)
    except (TimeoutError, socket.timeout):
        raise Silent(f"{_name(sock, peer=True)} stopped reading during the handshake") from None
    except OSError as e:
        raise AuthError(f"{_name(sock, peer=True)} went away during the handshake: {e}") from None


def _recv(sock: socket.socket, n: int, deadline: float, what: str) -> bytes:
    buf = b""
    while len(buf) < n:
        try:
            sock.settimeout(_remaining(deadline))
            chunk = sock.recv(n - len(buf))
        except (Silent, TimeoutError, socket.timeout):
            raise Silent(f"{_name(sock, peer=True)} sent {len(buf)} of the {n} bytes of {what} within "
                         "the handshake's deadline") from None
        except OSError as e:
            raise AuthError(f"{_name(sock, peer=True)} failed during the handshake: {e}") from None
        if not chunk:
            raise AuthError(f"{_name(sock, peer=True)} closed the connection after {len(buf)} of the {n} bytes of "
                            f"{what}")
        buf += chunk
    return buf


class Gate:
    """A listening socket whose connections each prove themselves in a thread of their own, within a deadline.

    ``then(sock, address)`` runs in that thread once a connection has
    proved itself (read what it says first, say); what it returns is put
    on :attr:`arrived` with the socket and address, unless it is None.
    Connections that fail are closed and counted (:meth:`summary`), each
    with a warning on the ``ddflow.workers`` logger.  At most ``pending``
    connections prove themselves at once; more are closed at once and
    counted as turned away.  :meth:`close` stops accepting (what arrived
    stays on :attr:`arrived`).  Cost: a thread per connection while it
    proves itself.

    >>> c = Credentials.new(env={})
    >>> gate = Gate(socket.create_server(("127.0.0.1", 0)), c, b"peer", then=lambda sock, addr: sock.recv(2))
    >>> s = c.connect(gate.srv.getsockname(), b"peer"); _ = s.sendall(b"hi")
    >>> gate.arrived.get(timeout=10)[2], gate.counts["proved"]
    (b'hi', 1)
    >>> gate.close(); s.close()
    """

    def __init__(self, srv: socket.socket, credentials: Credentials, purpose: bytes,
                 then: Callable[[socket.socket, tuple], Any] | None = None, pending: int = 64,
                 timeout: float | None = None):
        self.srv = srv
        self.credentials = credentials
        self.purpose = purpose
        self.then = then
        #: Seconds each connection has to prove itself (and then, for ``then``, to say what it says first).
        self.timeout = HANDSHAKE_S if timeout is None else timeout
        self.arrived: queue.Queue = queue.Queue()
        self.counts = {"proved": 0, "failed": 0, "silent": 0, "turned away": 0}
        self.reasons: list[str] = []  #: the first few failures' reasons, for an error message
        self._slots = threading.BoundedSemaphore(pending)
        self._lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._accept, name=f"ddflow-{purpose.decode()}-gate", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, addr = self.srv.accept()
            except OSError:
                return
            if not self._slots.acquire(blocking=False):
                conn.close()
                self._count("turned away", f"a connection from {addr[0]}:{addr[1]} was turned away: too many "
                                           "connections were proving themselves at once")
                continue
            threading.Thread(target=self._prove, args=(conn, addr), name="ddflow-handshake", daemon=True).start()

    def _prove(self, conn: socket.socket, addr: tuple) -> None:
        try:
            try:
                sock = self.credentials.server(conn, self.purpose, self.timeout)
            except Silent as e:
                conn.close()
                self._count("silent", f"{self.purpose.decode()} port: {e}")
                return
            except (AuthError, OSError) as e:
                conn.close()
                self._count("failed", f"{self.purpose.decode()} port: {e}")
                return
            with self._lock:
                self.counts["proved"] += 1
            try:
                got = self.then(sock, addr) if self.then is not None else True
            except Exception as e:  # noqa: BLE001 - a proved peer that then misbehaves is refused the same way
                sock.close()
                self._count("failed", f"{self.purpose.decode()} port: {addr[0]}:{addr[1]}: {e}")
                return
            if got is not None:
                with self._lock:
                    late = self._closed
                    if not late:
                        self.arrived.put((sock, addr, got))
                if late:  # proved after the gate closed: nobody will take it
                    sock.close()
        finally:
            self._slots.release()

    def _count(self, what: str, reason: str) -> None:
        _log.warning("ddflow refused a connection: %s", reason)
        with self._lock:
            self.counts[what] += 1
            if len(self.reasons) < 5:
                self.reasons.append(reason)

    def summary(self) -> str:
        """The connections refused so far, for an error message: "2 stayed silent, 1 failed to authenticate", or ""."""
        with self._lock:
            c = dict(self.counts)
            reasons = list(self.reasons)
        parts = [f"{c['silent']} stayed silent past the {self.timeout:g} s handshake deadline" if c["silent"] else "",
                 f"{c['failed']} failed to authenticate" if c["failed"] else "",
                 f"{c['turned away']} were turned away (too many at once)" if c["turned away"] else ""]
        text = ", ".join(p for p in parts if p)
        return f"{text} (first: {reasons[0]})" if text else ""

    def close(self) -> None:
        """Stop accepting: the listening socket is closed, and the accepting thread has ended on return.

        Connections still proving themselves finish in their threads and are
        closed; what already arrived stays on :attr:`arrived`.
        """
        with self._lock:
            self._closed = True
        try:
            self.srv.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.srv.close()
        if self._thread is not threading.current_thread():
            self._thread.join(5.0)
