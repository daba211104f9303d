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
"""
from __future__ import annotations

import pickle
import select
import socket
import threading
from typing import Sequence

from ddflow import errors
from ddflow.base.interner import Interner
from ddflow.base.updates import Updates
from ddflow.workers.transport import _PREFIX, Channel, Message, decode_frame, recv_exact


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

