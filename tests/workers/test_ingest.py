"""Routed input (ddflow/workers/ingest.py): frames from executors, kept by (batch, partition), taken once."""
from __future__ import annotations

import numpy as np
import pytest

import ddflow
from ddflow.base.interner import Interner
from ddflow.base.updates import Updates
from ddflow.workers.ingest import IngestListener, send_shares


def _batch(interner: Interner, rows: list[tuple], t: int) -> Updates:
    from ddflow.base.updates import from_rows

    return from_rows(rows, np.full(len(rows), t, dtype=np.int64), 1, interner)


def test_every_partition_once_whatever_the_retries():
    """Each partition's frame is taken once, in partition order; a retried task's copy and late frames are ignored."""
    worker = Interner(hashed=True)
    listeners = [IngestListener("127.0.0.1") for _ in range(2)]
    addrs = [l_.address for l_ in listeners]
    sender = Interner(hashed=True)  # an executor's own: content-hashed codes decode the same everywhere
    shares = {p: [([7], [_batch(sender, [(f"k{p}{w}", p)], p)]) for w in range(2)] for p in range(3)}
    for p in (2, 0, 1, 1):  # out of order, and partition 1 twice (a retried task)
        send_shares(addrs, sender, 5, p, shares[p])
    for w, lst in enumerate(listeners):
        msgs = lst.take(5, 3, worker, timeout=10)
        assert [m.meta[:2] for m in msgs] == [(5, 0), (5, 1), (5, 2)]
        assert [m.batches[0].to_rows(worker) for m in msgs] == [[((f"k{p}{w}", p), p, 1)] for p in range(3)]
        assert all(m.meta[2] == [7] for m in msgs)
    send_shares(addrs, sender, 5, 0, shares[0])  # a straggler for a batch already taken is dropped
    send_shares(addrs, sender, 6, 0, [([], []), ([], [])])
    assert [m.meta[:2] for m in listeners[0].take(6, 1, worker, timeout=10)] == [(6, 0)]
    assert 5 not in listeners[0].frames


def test_a_missing_partition_is_named_not_waited_for_forever():
    lst = IngestListener("127.0.0.1")
    send_shares([lst.address], Interner(hashed=True), 1, 0, [([], [])])
    with pytest.raises(ddflow.DataflowError, match=r"batch 1: no input from partitions \[1, 2\] within 0.2 s"):
        lst.take(1, 3, Interner(hashed=True), timeout=0.2)


def test_a_sender_that_dies_mid_frame_leaves_nothing_behind():
    import socket
    import struct

    lst = IngestListener("127.0.0.1")
    with socket.create_connection(lst.address) as s:
        s.sendall(struct.pack("<QI", 1000, 10) + b"x" * 20)  # promises 1000 bytes, sends 32
    send_shares([lst.address], Interner(hashed=True), 3, 0, [([], [])])
    assert [m.meta[:2] for m in lst.take(3, 1, Interner(hashed=True), timeout=10)] == [(3, 0)]
