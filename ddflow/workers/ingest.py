"""Input that reaches the workers without passing through the driver.

A streaming micro-batch is spread over Spark partitions on several
executors.  Each partition's task encodes its rows as updates, splits
them by key hash (:func:`ddflow.workers.exchange.partition`, the split
the driver would make) and sends worker w its share directly, one frame
per (batch, partition, worker), empty shares included, so that a worker
knows it has a batch's input when it holds one frame from each of the P
partitions.  The driver only learns P (when Spark's job over the
partitions has finished) and tells every worker to run batch B with P
partitions.

A frame names its batch and partition; a worker keeps the first frame
for each.  A second one with the same bytes (a retried or speculative
task, whose rows are the same: a micro-batch's input is fixed by its
offsets) adds nothing; one with other bytes is an error naming both
senders, raised when the batch is taken.  Frames of batches already
taken are dropped (and compared with what was taken, the same way).

The port is open for the dataflow's whole life, so it trusts nothing:
every connection proves it holds the dataflow's secret before a byte of
its frame is read (:mod:`ddflow.workers.auth`), a frame's size is checked
against ``max_ingest_frame_bytes`` before it is allocated, and its header
is decoded by :mod:`ddflow.workers.wire`, which cannot run code.  What a
sender that proved itself sends is still checked as input is
(:func:`checked`): the input is one of the dataflow's, the column kinds
are its own, every time is at or after the frontier, object codes are
the hashes of the values that came with them.  A bad frame is an error
naming its sender and what was wrong, and nothing of the batch is applied.

On the executor, :class:`Ingest` (``Dataflow.ingest()``, pickled with the
dataflow's :class:`~ddflow.workers.auth.Credentials`) encodes each
partition's rows as the driver's input handles would and sends the
shares (:func:`send_shares`); on the worker, :class:`IngestListener`
keeps the frames until the driver's run asks for them.
"""
from __future__ import annotations

import hashlib
import logging
import select
import socket
import threading
import time
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from ddflow import errors
from ddflow.base.interner import Interner, content_code
from ddflow.base.kinds import DTYPE
from ddflow.base.updates import Updates
from ddflow.workers.auth import Credentials, Gate
from ddflow.workers.exchange import partition
from ddflow.workers.transport import Channel, Message
from ddflow.workers.wire import PREFIX, WireError, decode_frame, frame_header

if TYPE_CHECKING:
    from ddflow.dataflow import InputHandle

_log = logging.getLogger("ddflow.workers")
#: The largest data time (the frontier after it must fit in int64), as ``ddflow.dataflow.MAX_TIME``.
_MAX_TIME = np.iinfo(np.int64).max - 1


class IngestListener:
    """A worker's listener for routed input: threads keep whole frames by (batch, partition), with their senders.

    A connection's thread proves it (:class:`~ddflow.workers.auth.Gate`),
    reads its one frame and the frame's small header; decoding (which
    interns values) and the checks are left to the worker's own thread,
    in :meth:`take`.
    """

    #: How long one sender may take to deliver its frame before the connection is dropped.
    READ_TIMEOUT = 60.0
    #: How many taken batches' frames are remembered (by digest), to compare late copies with.
    REMEMBER = 8

    def __init__(self, host: str, credentials: Credentials):
        self.sock = socket.create_server((host, 0), backlog=256)
        self.address = (host, self.sock.getsockname()[1])
        self.max_frame = credentials.max_ingest_frame_bytes
        #: batch -> partition -> (frame, sender, digest)
        self.frames: dict[int, dict[int, tuple[bytearray, str, bytes]]] = {}
        #: (batch, partition) -> (digest, sender) of the frames of recently taken batches
        self.taken_frames: dict[tuple[int, int], tuple[bytes, str]] = {}
        #: What senders that proved themselves got wrong: raised by the next :meth:`take` (by batch; None: any).
        self.problems: dict[int | None, list[str]] = {}
        self.taken = -1  # the last batch taken: later frames for it (or earlier ones) are duplicates
        self.cond = threading.Condition()
        self.gate = Gate(self.sock, credentials, b"ingest", then=self._read, pending=256)

    def _problem(self, batch: int | None, text: str) -> None:
        _log.warning("ddflow ingest: %s", text)
        with self.cond:
            self.problems.setdefault(batch, []).append(text)
            self.cond.notify_all()

    def _read(self, conn: socket.socket, addr: tuple) -> None:
        """Read one proved sender's frame and keep it (in its gate thread); then close the connection, which tells
        the sender its frame is kept.  Returns None: nothing goes on the gate's queue."""
        try:
            frame = self._frame_of(conn, f"{addr[0]}:{addr[1]}")
            if frame is not None:
                self._keep(frame, f"{addr[0]}:{addr[1]}")
        finally:
            conn.close()
        return None

    def _frame_of(self, conn: socket.socket, sender: str) -> bytearray | None:
        """The one frame a sender sends, or None if it ends early or claims more than an ingest port reads."""
        try:
            conn.settimeout(self.READ_TIMEOUT)
            prefix = _recv_exact(conn, PREFIX.size)
            if prefix is None:
                return None  # the sender died before its frame: its retry sends the frame again
            total, hlen = PREFIX.unpack(prefix)
            if total > self.max_frame or PREFIX.size + hlen > total:
                self._problem(None, f"the sender at {sender} claimed a frame of {total} bytes, over the largest an "
                                    f"ingest port reads ({self.max_frame} bytes, DDFLOW_MAX_INGEST_FRAME_BYTES); "
                                    "the connection was closed unread")
                return None
            frame = bytearray(total)
            frame[:PREFIX.size] = prefix
            view = memoryview(frame)
            got = PREFIX.size
            while got < total:
                n = conn.recv_into(view[got:])
                if not n:
                    return None  # the sender died mid-frame: its retry sends the frame again
                got += n
            return frame
        except OSError:
            return None

    def _keep(self, frame: bytearray, sender: str) -> None:
        """Keep a whole frame by its (batch, partition), unless it repeats one (same bytes) or conflicts with one."""
        try:
            kind, meta = frame_header(frame)
            if kind != "in" or type(meta) is not tuple or len(meta) != 3 or not all(type(x) is int for x in meta[:2]):
                raise WireError(f"a {kind!r} frame with meta {meta!r:.100}, not routed input")
        except WireError as e:
            self._problem(None, f"the sender at {sender} sent a frame that is not routed input: {e}")
            return
        batch, part, _ = meta
        digest = hashlib.blake2b(frame, digest_size=16).digest()
        with self.cond:
            if batch <= self.taken:
                first = self.taken_frames.get((batch, part))
                if first is not None and first[0] != digest:
                    self.problems.setdefault(None, []).append(_conflict(batch, part, first[1], sender))
                    self.cond.notify_all()
                return
            parts = self.frames.setdefault(batch, {})
            first = parts.get(part)
            if first is None:
                parts[part] = (frame, sender, digest)
            elif first[2] != digest:
                self.problems.setdefault(batch, []).append(_conflict(batch, part, first[1], sender))
            self.cond.notify_all()

    def take(self, batch: int, partitions: int, interner: Interner, inputs: Mapping[int, Sequence[str] | None],
             frontier: int, timeout: float = 60.0) -> list[tuple[int, Updates]]:
        """The ``partitions`` frames of ``batch``, checked (:func:`checked`), as (input node id, updates) in
        partition order (waits for late ones); their values are registered in ``interner``.

        Raises a :class:`~ddflow.errors.DataflowError` naming the missing
        partitions after ``timeout`` seconds (the driver asks only once
        Spark has finished every partition's task, so they are in flight),
        and one naming the sender and the fault for a bad frame, or two
        senders of different frames for one partition: nothing is
        returned then.
        """
        def ready() -> bool:
            return (None in self.problems or batch in self.problems
                    or all(p in self.frames.get(batch, {}) for p in range(partitions)))

        with self.cond:
            ok = self.cond.wait_for(ready, timeout)
            got = self.frames.pop(batch, {})
            problems = self.problems.pop(None, []) + self.problems.pop(batch, [])
            self.taken = max(self.taken, batch)
            for b in [b for b in self.frames if b <= batch]:
                del self.frames[b]
            for p, (_, sender, digest) in got.items():
                self.taken_frames[(batch, p)] = (digest, sender)
            for key in [k for k in self.taken_frames if k[0] <= batch - self.REMEMBER]:
                del self.taken_frames[key]
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise errors.DataflowError(f"batch {batch}: routed input refused: {problems[0]}{more}")
        stray = sorted(set(got) - set(range(partitions)))
        if stray:
            raise errors.DataflowError(f"batch {batch}: routed input refused: the sender at {got[stray[0]][1]} sent "
                                       f"partition {stray[0]}, but the batch has {partitions} partitions")
        if not ok:
            missing = sorted(set(range(partitions)) - set(got))
            raise errors.DataflowError(f"batch {batch}: no input from partitions {missing[:10]} within {timeout} s "
                                       f"(of {partitions}; the executors route their rows here)")
        return checked([(got[p][0], got[p][1]) for p in range(partitions)], interner, inputs, frontier)

    def close(self) -> None:
        self.gate.close()


def _conflict(batch: int, part: int, first: str, second: str) -> str:
    return (f"two different frames for batch {batch} partition {part}, from {first} and from {second} (a retried "
            "task sends the same bytes: a micro-batch's input is fixed by its offsets)")


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    """Exactly ``n`` bytes from a blocking socket; None if it ends first."""
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def checked(frames: Sequence[tuple[bytearray, str]], interner: Interner, inputs: Mapping[int, Sequence[str] | None],
            frontier: int) -> list[tuple[int, Updates]]:
    """The routed batches of ``frames`` ((frame, sender) each), checked as input is, as (input node id, updates).

    ``inputs``: the dataflow's input node ids, each with its column kinds
    (None where not known yet: then every frame's batches of that input
    must agree).  Each frame must decode, name inputs of ``inputs``, carry
    their kinds (and the kinds' dtypes, bool columns 0 or 1), have
    one-field-or-more records at depth 1, times from ``frontier`` to the
    largest data time, and a value for each object code that is the
    hash of that value.  The first fault raises a
    :class:`~ddflow.errors.DataflowError` naming the sender; then nothing
    is returned and no value is registered.  Cost: O(rows), vectorized,
    plus a hash per new object value.

    >>> from ddflow.base.updates import from_rows
    >>> from ddflow.workers.wire import encode_frame
    >>> head, arrays, _ = encode_frame(Message("in", (4, 0, [0]), [from_rows([(1, 2)], 1, 1, Interner())]), None)
    >>> frame = bytearray(head + b"".join(a.tobytes() for a in arrays))
    >>> [(nid, u.to_rows(Interner())) for nid, u in checked([(frame, "10.0.0.7:5000")], Interner(), {0: None}, 0)]
    [(0, [((1, 2), 1, 1)])]
    >>> checked([(frame, "10.0.0.7:5000")], Interner(), {0: ("i", "i")}, 3)
    Traceback (most recent call last):
    ...
    ddflow.errors.DataflowError: batch 4: routed input refused: the sender at 10.0.0.7:5000 (it proved itself) sent
    a bad frame: input 0: an update at time 1 is before the frontier 3 (times before it are final); nothing of ...
    """
    kinds = {nid: tuple(k) if k is not None else None for nid, k in inputs.items()}
    out: list[tuple[int, Updates]] = []
    new_values: dict[int, Any] = {}
    for frame, sender in frames:
        try:
            msg, values = decode_frame(frame)
        except WireError as e:
            raise _refused(frame_batch(frame), sender, f"its frame does not decode: {e}") from None
        ids = msg.meta[2]
        if type(ids) is not list or len(ids) != len(msg.batches) or not all(type(i) is int for i in ids):
            raise _refused(msg.meta[0], sender, f"its frame names inputs {ids!r:.100} for {len(msg.batches)} batches")
        if values is not None:
            for c, v in zip(*values):
                try:
                    ok = content_code(v) == c
                except errors.SchemaError:
                    ok = False
                if not ok:
                    raise _refused(msg.meta[0], sender,
                                   f"the value {v!r:.100} came with code {c}, which is not its hash")
                new_values[c] = v
        for nid, u in zip(ids, msg.batches):
            if nid not in kinds:
                raise _refused(msg.meta[0], sender,
                               f"its frame names input {nid}, which is not an input of this dataflow")
            if not len(u):
                continue
            want = kinds[nid]
            if want is None:
                kinds[nid] = want = u.kinds
            problem = _fault(u, want, frontier)
            if problem is None:
                for c, k in zip(u.cols, u.kinds):
                    if k == "o":
                        unknown = [x for x in np.unique(c).tolist() if x not in new_values and not _knows(interner, x)]
                        if unknown:
                            problem = f"object code {unknown[0]} came without its value"
                            break
            if problem is not None:
                raise _refused(msg.meta[0], sender, f"input {nid}: {problem}")
            out.append((nid, u))
    if new_values:
        interner.register(list(new_values), list(new_values.values()))
    return out


def frame_batch(frame: bytearray) -> Any:
    """The batch a routed frame names, for an error message ("?" if its header does not say)."""
    try:
        return frame_header(frame)[1][0]
    except (WireError, TypeError, IndexError, KeyError):
        return "?"


def _knows(interner: Interner, code: int) -> bool:
    try:
        interner.values_for(np.array([code], dtype=np.int64))
    except KeyError:
        return False
    return True


def _fault(u: Updates, kinds: tuple[str, ...], frontier: int) -> str | None:
    """What is wrong with routed updates ``u`` for an input of column kinds ``kinds``, or None."""
    if u.kinds != kinds:
        return f"column kinds {u.kinds}, but the input's are {kinds}"
    if not u.arity:
        return "a record needs at least one field, got the empty tuple"
    if u.depth != 1:
        return f"input times are integers (depth 1), got depth {u.depth}"
    for i, (c, k) in enumerate(zip(u.cols, u.kinds)):
        if c.dtype != DTYPE[k]:
            return f"field {i} is stored as {c.dtype}, not {np.dtype(DTYPE[k])}"
        if k == "b" and len(c) and not ((c == 0) | (c == 1)).all():
            return f"field {i} is bool, but holds {int(c[(c != 0) & (c != 1)][0])}"
    lo, hi = int(u.times.min()), int(u.times.max())
    if lo < frontier:
        return f"an update at time {lo} is before the frontier {frontier} (times before it are final)"
    if hi > _MAX_TIME:
        return f"time {hi} is past the largest data time {_MAX_TIME}"
    return None


def _refused(batch: Any, sender: str, what: str) -> errors.DataflowError:
    return errors.DataflowError(f"batch {batch}: routed input refused: the sender at {sender} (it proved itself) sent "
                                f"a bad frame: {what}; nothing of the batch was applied")


def send_shares(addresses: Sequence[tuple[str, int]], interner: Interner, batch: int, part: int,
                shares: Sequence[tuple[list[int], list[Updates]]], credentials: Credentials) -> int:
    """Send worker w its share ``shares[w]`` (input node ids, batches) of partition ``part``; bytes sent.

    Runs on an executor.  ``interner`` is a hashed interner of the
    executor's own: codes are content hashes, so the workers decode them
    to the same values; each frame carries the values of its codes.  Each
    connection proves ``credentials`` first; a share over
    ``max_ingest_frame_bytes`` is refused here, naming the setting.
    """
    sent = 0
    for w, (ids, parts) in enumerate(shares):
        with credentials.connect(tuple(addresses[w]), b"ingest") as s:
            ch = Channel(s, w, interner, credentials.max_ingest_frame_bytes)
            try:
                ch.send(Message("in", (batch, part, list(ids)), list(parts)))
            except errors.DataflowError as e:
                raise errors.DataflowError(f"batch {batch} partition {part}: the share for worker {w} is too large "
                                           f"to route: {e} (DDFLOW_MAX_INGEST_FRAME_BYTES)") from None
            deadline = time.monotonic() + IngestListener.READ_TIMEOUT
            while ch.outbox:
                if time.monotonic() > deadline:
                    raise errors.DataflowError(f"batch {batch} partition {part}: worker {w} at {addresses[w]} took "
                                               f"no data for {IngestListener.READ_TIMEOUT} s")
                select.select([], [s], [], 5.0)
                ch.flush()
            sent += ch.bytes_sent
            s.shutdown(socket.SHUT_WR)
            _wait_closed(s, deadline)  # the worker closes once it has kept the frame: then this task may end
    return sent


def _wait_closed(s: socket.socket, deadline: float) -> None:
    """Wait until the other end closes ``s`` (or the deadline passes)."""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        s.settimeout(left)
        try:
            if not s.recv(1):
                return
        except OSError:
            return


class Ingest:
    """Sends input straight to a dataflow's workers from another process (a Spark executor), as its handles would.

    What :meth:`ddflow.Dataflow.ingest` returns: picklable and small (each
    input's handle, pickled without its dataflow, the number of its
    operator, the frontier, the workers' addresses and the dataflow's
    :class:`~ddflow.workers.auth.Credentials`, which every connection to
    a worker proves); it refers to no dataflow.  On the executor, :meth:`send` encodes rows exactly as
    :meth:`ddflow.InputHandle.update` would (the same validation), splits them by
    key as the driver would, and sends each worker its share of one
    (batch, partition) (:func:`send_shares`); the driver then runs
    ``run(routed=(batch, partitions))``.
    """

    def __init__(self, inputs: Mapping[str, tuple[int, "InputHandle"]], frontier: int,
                 addresses: Sequence[tuple[str, int]], credentials: Credentials | None = None):
        if addresses and credentials is None:
            raise errors.UsageError("Ingest: the workers' ingest ports need the dataflow's credentials")
        self._inputs = dict(inputs)
        self.credentials = credentials
        #: The dataflow's frontier when this was made: every update must be at this time or later.
        self.frontier = frontier
        #: Each worker's listener for input sent this way, in worker order.
        self.addresses = [tuple(a) for a in addresses]

    def __repr__(self) -> str:
        return f"<Ingest {sorted(self._inputs)} to {len(self.addresses)} workers>"

    def input(self, name: str) -> "InputHandle":
        """Input ``name``'s handle as the executors see it: its ``kinds``, ``table`` and ``event_time``, no dataflow.

        Cost: O(1).

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges", schema=["i", "i"])
        >>> Ingest({"edges": (0, edges_in)}, 0, []).input("edges").kinds
        ('i', 'i')
        """
        return self._inputs[name][1]

    def send(self, batch: int, part: int, rows: Mapping[str, tuple[Any, Any, Any]]) -> dict:
        """Send every worker its share of ``rows`` (input name -> ``(rows, times, diffs)``, as ``update`` takes them)
        for micro-batch ``batch`` from partition ``part``: one frame per worker, empty ones included.

        Returns ``{"bytes": sent, "kinds": {name: column kinds}}`` (the kinds
        each input's rows fixed, for its handle in the driver).  Cost: as
        ``update`` for the rows, a hash of every record to split them, one
        connection per worker.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> Ingest({"edges": (0, edges_in)}, 0, []).send(0, 0, {})
        {'bytes': 0, 'kinds': {}}
        """
        W = len(self.addresses)
        interner = Interner(hashed=True)  # codes are content hashes: the workers decode them to the same values
        shares: list[tuple[list[int], list[Updates]]] = [([], []) for _ in range(W)]
        kinds: dict[str, list[str]] = {}
        for name, (r, t, d) in rows.items():
            index, handle = self._inputs[name]
            u = handle.encode(r, t, d, interner, self.frontier)
            for w, share in enumerate(partition(u, W)):
                if len(share):
                    shares[w][0].append(index)
                    shares[w][1].append(share)
            kinds[name] = list(handle.kinds or (u.kinds if len(u) else ()))
        sent = send_shares(self.addresses, interner, batch, part, shares, self.credentials) if W else 0
        return {"bytes": sent, "kinds": kinds}
