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
for each and ignores the rest, so a retried or speculative task (whose
rows are the same: a micro-batch's input is fixed by its offsets) adds
nothing.  Frames of batches already taken are dropped.

On the executor, :class:`Ingest` (``Dataflow.ingest()``, pickled) encodes
each partition's rows as the driver's input handles would and sends the
shares (:func:`send_shares`); on the worker, :class:`IngestListener`
keeps the frames until the driver's run asks for them.
"""
from __future__ import annotations

import pickle
import select
import socket
import threading
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ddflow import errors
from ddflow.base.interner import Interner
from ddflow.base.updates import Updates
from ddflow.workers.exchange import partition
from ddflow.workers.transport import _PREFIX, Channel, Message, decode_frame, recv_exact

if TYPE_CHECKING:
    from ddflow.dataflow import InputHandle


class IngestListener:
    """A worker's listener for routed input: a thread keeps whole frames by (batch, partition).

    The thread only reads bytes and the frame's small header; decoding
    (which interns values) is left to the worker's own thread, in
    :meth:`take`.
    """

    #: How long one sender may take to deliver its frame before the connection is dropped.
    READ_TIMEOUT = 60.0

    def __init__(self, host: str):
        self.sock = socket.create_server((host, 0), backlog=256)
        self.address = (host, self.sock.getsockname()[1])
        self.frames: dict[int, dict[int, bytearray]] = {}
        self.taken = -1  # the last batch taken: later frames for it (or earlier ones) are duplicates
        self.cond = threading.Condition()
        threading.Thread(target=self._serve, name="ddflow-ingest", daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(self.READ_TIMEOUT)
            prefix = recv_exact(conn, _PREFIX.size)
            total, hlen = _PREFIX.unpack(prefix)
            frame = bytearray(total)
            frame[:_PREFIX.size] = prefix
            view = memoryview(frame)
            got = _PREFIX.size
            while got < total:
                n = conn.recv_into(view[got:])
                if not n:
                    return  # the sender died mid-frame: its retry sends the frame again
                got += n
            _, (batch, part, _ids), *_ = pickle.loads(view[_PREFIX.size:_PREFIX.size + hlen])
        except (OSError, ValueError, pickle.UnpicklingError):
            return
        finally:
            conn.close()
        with self.cond:
            if batch > self.taken:
                self.frames.setdefault(batch, {}).setdefault(part, frame)
                self.cond.notify_all()

    def take(self, batch: int, partitions: int, interner: Interner, timeout: float = 60.0) -> list[Message]:
        """The ``partitions`` frames of ``batch``, decoded, in partition order (waits for late ones).

        Raises a :class:`~ddflow.errors.DataflowError` naming the missing
        partitions after ``timeout`` seconds: the driver asks only once
        Spark has finished every partition's task, so they are in flight.
        """
        with self.cond:
            ok = self.cond.wait_for(lambda: len(self.frames.get(batch, {})) >= partitions, timeout)
            got = self.frames.pop(batch, {})
            self.taken = max(self.taken, batch)
            for b in [b for b in self.frames if b <= batch]:
                del self.frames[b]
        if not ok:
            missing = sorted(set(range(partitions)) - set(got))
            raise errors.DataflowError(f"batch {batch}: no input from partitions {missing[:10]} within {timeout} s "
                                       f"(of {partitions}; the executors route their rows here)")
        return [decode_frame(got[p], interner) for p in sorted(got)]

    def close(self) -> None:
        self.sock.close()


def send_shares(addresses: Sequence[tuple[str, int]], interner: Interner, batch: int, part: int,
                shares: Sequence[tuple[list[int], list[Updates]]]) -> int:
    """Send worker w its share ``shares[w]`` (input node ids, batches) of partition ``part``; bytes sent.

    Runs on an executor.  ``interner`` is a hashed interner of the
    executor's own: codes are content hashes, so the workers decode them
    to the same values; each frame carries the values of its codes.
    """
    sent = 0
    for w, (ids, parts) in enumerate(shares):
        with socket.create_connection(tuple(addresses[w])) as s:
            ch = Channel(s, w, interner)
            ch.send(Message("in", (batch, part, ids), list(parts)))
            while ch.outbox:
                select.select([], [s], [], 5.0)
                ch.flush()
            sent += ch.bytes_sent
            s.shutdown(socket.SHUT_WR)
    return sent


class Ingest:
    """Sends input straight to a dataflow's workers from another process (a Spark executor), as its handles would.

    What :meth:`ddflow.Dataflow.ingest` returns: picklable and small (each
    input's handle, pickled without its dataflow, the number of its
    operator, the frontier and the workers' addresses); it refers to no
    dataflow.  On the executor, :meth:`send` encodes rows exactly as
    :meth:`ddflow.InputHandle.update` would (the same validation), splits them by
    key as the driver would, and sends each worker its share of one
    (batch, partition) (:func:`send_shares`); the driver then runs
    ``run(routed=(batch, partitions))``.
    """

    def __init__(self, inputs: Mapping[str, tuple[int, "InputHandle"]], frontier: int,
                 addresses: Sequence[tuple[str, int]]):
        self._inputs = dict(inputs)
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
        return {"bytes": send_shares(self.addresses, interner, batch, part, shares) if W else 0, "kinds": kinds}
