"""Routed input (ddflow/workers/ingest.py): frames from executors, proved, kept by (batch, partition), checked,
taken once.

The listener is attacked here as a process on the cluster's network
would: without the dataflow's secret (pickles, old-style frames, size
claims, random bytes: each refused before a byte of its frame is read,
and the listener goes on), and with it (a sender that proved itself but
sends a bad frame: an error naming the sender, and nothing applied).
"""
from __future__ import annotations

import os
import pickle
import socket
import struct
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddflow
from ddflow.base.interner import Interner
from ddflow.base.updates import Updates, from_rows
from ddflow.workers.auth import Credentials
from ddflow.workers.ingest import IngestListener, send_shares
from ddflow.workers.transport import Channel, Message, recv_exact
from ddflow.workers.wire import PREFIX

#: The listener's inputs in these tests: node 7 has records of a string and an int; node 8 is not typed yet.
INPUTS = {7: ("o", "i"), 8: None}


def _batch(interner: Interner, rows: list[tuple], t: int) -> Updates:
    return from_rows(rows, np.full(len(rows), t, dtype=np.int64), 1, interner)


@pytest.fixture
def cred():
    return Credentials.new(env={})


def _listeners(cred, n=1):
    """``n`` listeners proving ``cred``, closed after the ``with`` block that iterates this once."""
    made = [IngestListener("127.0.0.1", cred) for _ in range(n)]
    try:
        yield made
    finally:
        for lst in made:
            lst.close()


@pytest.fixture
def listener(cred):
    lst = IngestListener("127.0.0.1", cred)
    yield lst
    lst.close()


class _Marker:
    """Unpickling this creates ``path``: what a pickled payload of an attacker would do."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _old_frame(payload_obj) -> bytes:
    """A frame in the framing before this round: a prefix, then a pickled header (what the old listener unpickled)."""
    header = pickle.dumps(payload_obj, protocol=5)
    return struct.pack("<QI", 12 + len(header), len(header)) + header


def _closed(s: socket.socket) -> bool:
    """Whether the other end closed ``s`` (a close with unread data comes as a reset)."""
    s.settimeout(10)
    try:
        return s.recv(100) == b""
    except ConnectionResetError:
        return True


def _rows(lst, batch, parts, interner, frontier=0, inputs=INPUTS):
    return [(nid, u.to_rows(interner)) for nid, u in lst.take(batch, parts, interner, inputs, frontier, timeout=10)]


def test_every_partition_once_whatever_the_retries(cred):
    """Each partition's frame is taken once, in partition order; a retried task's copy and late frames are ignored."""
    for listeners in _listeners(cred, 2):
        worker = Interner(hashed=True)
        addrs = [l_.address for l_ in listeners]
        sender = Interner(hashed=True)  # an executor's own: content-hashed codes decode the same everywhere
        shares = {p: [([7], [_batch(sender, [(f"k{p}{w}", p)], p)]) for w in range(2)] for p in range(3)}
        for p in (2, 0, 1, 1):  # out of order, and partition 1 twice (a retried task)
            send_shares(addrs, sender, 5, p, shares[p], cred)
        for w, lst in enumerate(listeners):
            assert _rows(lst, 5, 3, worker) == [(7, [((f"k{p}{w}", p), p, 1)]) for p in range(3)]
        send_shares(addrs, sender, 5, 0, shares[0], cred)  # a straggler for a batch already taken is dropped
        send_shares(addrs, sender, 6, 0, [([], []), ([], [])], cred)
        assert listeners[0].take(6, 1, worker, INPUTS, 0, timeout=10) == []
        assert 5 not in listeners[0].frames


def test_a_missing_partition_is_named_not_waited_for_forever(cred, listener):
    send_shares([listener.address], Interner(hashed=True), 1, 0, [([], [])], cred)
    with pytest.raises(ddflow.DataflowError, match=r"batch 1: no input from partitions \[1, 2\] within 0.2 s"):
        listener.take(1, 3, Interner(hashed=True), INPUTS, 0, timeout=0.2)


def test_a_sender_that_dies_mid_frame_leaves_nothing_behind(cred, listener):
    with cred.connect(listener.address, b"ingest") as s:
        s.sendall(struct.pack("<QI", 1000, 10) + b"x" * 20)  # promises 1000 bytes, sends 32
    send_shares([listener.address], Interner(hashed=True), 3, 0, [([], [])], cred)
    assert listener.take(3, 1, Interner(hashed=True), INPUTS, 0, timeout=10) == []


# -- without the secret: refused before anything is read -------------------------------------------------------
def _wait_counted(lst, n, what=("failed", "silent"), timeout=10.0):
    end = time.monotonic() + timeout
    while sum(lst.gate.counts[k] for k in what) < n and time.monotonic() < end:
        time.sleep(0.01)
    return sum(lst.gate.counts[k] for k in what)


def test_a_pickled_frame_from_a_stranger_runs_nothing(cred, listener, tmp_path):
    """An old-style frame whose header unpickles into ``open(path, "w")``: the file never appears."""
    marker = tmp_path / "pwned"
    with socket.create_connection(listener.address) as s:
        s.sendall(_old_frame(("in", (9, 0, [7]), [], [], _Marker(str(marker)))))
        assert _closed(s)  # its greeting was not ddflow's
    assert _wait_counted(listener, 1) == 1
    assert not marker.exists()
    sender = Interner(hashed=True)  # the listener goes on
    send_shares([listener.address], sender, 9, 0, [([7], [_batch(sender, [("a", 1)], 0)])], cred)
    assert _rows(listener, 9, 1, Interner(hashed=True)) == [(7, [(("a", 1), 0, 1)])]
    assert not marker.exists()


def test_a_wrong_secret_or_a_replayed_handshake_is_refused(cred, listener):
    other = Credentials.new(env={})
    with pytest.raises(ddflow.DataflowError, match="did not prove it holds this dataflow's secret"):
        other.connect(listener.address, b"ingest")
    # Record a genuine exchange through a relay, then play the client's part to a new connection: the server's
    # fresh nonce makes the recorded proof worthless.
    client_end, relay_c = socket.socketpair()
    relay_s, server_end = socket.socketpair()
    threads = [threading.Thread(target=cred.server, args=(server_end, b"ingest")),
               threading.Thread(target=cred.client, args=(client_end, b"ingest"))]
    for t in threads:
        t.start()
    recorded = []
    for src, dst, n in ((relay_c, relay_s, 44), (relay_s, relay_c, 64), (relay_c, relay_s, 32)):
        data = recv_exact(src, n)
        recorded.append(data) if src is relay_c else None
        dst.sendall(data)
    for t in threads:
        t.join()
    for s in (client_end, relay_c, relay_s, server_end):
        s.close()
    with socket.create_connection(listener.address) as s:
        s.sendall(recorded[0])
        s.recv(64)  # the server's nonce and proof
        s.sendall(recorded[1])  # the old proof, for the old nonce
        assert _closed(s)
    assert _wait_counted(listener, 2) == 2
    assert listener.gate.counts["proved"] == 0


def test_size_claims_from_strangers_allocate_nothing(cred, listener):
    """Two connections claiming 400 MB frames and sending nothing more: refused at the greeting, memory flat."""
    def rss():
        with open(f"/proc/{os.getpid()}/status") as f:
            return next(int(x.split()[1]) for x in f if x.startswith("VmRSS")) * 1024

    before = rss()
    socks = [socket.create_connection(listener.address) for _ in range(2)]
    for s in socks:
        s.sendall(struct.pack("<QI", 400 << 20, 100))
    time.sleep(1.0)  # they hold their connections: the greeting is still 32 bytes short
    assert rss() - before < 50 << 20
    for s in socks:
        s.close()
    assert _wait_counted(listener, 2) == 2
    assert listener.gate.counts["proved"] == 0


def test_silent_strangers_delay_no_sender(cred, listener, monkeypatch):
    """Idle connections each wait out their handshake deadline in a thread of their own; a real sender is not held."""
    monkeypatch.setattr("ddflow.workers.auth.HANDSHAKE_S", 30.0)
    idle = [socket.create_connection(listener.address) for _ in range(8)]
    t0 = time.monotonic()
    send_shares([listener.address], Interner(hashed=True), 1, 0, [([], [])], cred)
    assert listener.take(1, 1, Interner(hashed=True), INPUTS, 0, timeout=10) == []
    assert time.monotonic() - t0 < 20  # not 8 deadlines one after another
    for s in idle:
        s.close()


@settings(max_examples=40, deadline=None)
@given(st.binary(min_size=1, max_size=300))
def test_random_bytes_from_a_stranger_are_refused(data):
    cred = Credentials.new(env={})
    lst = IngestListener("127.0.0.1", cred)
    try:
        with socket.create_connection(lst.address) as s:
            try:
                s.sendall(data)
                s.shutdown(socket.SHUT_WR)
                s.settimeout(15)
                while s.recv(4096):
                    pass
            except OSError:
                pass
        assert _wait_counted(lst, 1, timeout=15) == 1
        assert lst.gate.counts["proved"] == 0 and not lst.frames and not lst.problems
    finally:
        lst.close()


# -- with the secret: checked as input, and an error naming the sender -------------------------------------------
def _send_raw(cred, address, msg: Message, interner=None, max_frame=None) -> str:
    """Send one frame as a sender that proved itself; its address as the listener names it."""
    with cred.connect(address, b"ingest") as s:
        name = "%s:%d" % s.getsockname()[:2]
        ch = Channel(s, 0, interner if interner is not None else Interner(hashed=True),
                     max_frame or cred.max_ingest_frame_bytes)
        ch.send(msg)
        while ch.outbox:
            ch.flush()
        s.shutdown(socket.SHUT_WR)
        s.settimeout(5)
        s.recv(1)
    return name


def test_two_different_frames_for_one_partition_name_both_senders(cred, listener):
    """A forged frame that comes first no longer wins: the batch fails, naming both senders, and nothing is applied."""
    it = Interner(hashed=True)
    forged = _send_raw(cred, listener.address, Message("in", (5, 0, [7]), [_batch(it, [("forged", 1)], 0)]), it)
    it2 = Interner(hashed=True)
    genuine = _send_raw(cred, listener.address, Message("in", (5, 0, [7]), [_batch(it2, [("genuine", 2)], 0)]), it2)
    worker = Interner(hashed=True)
    with pytest.raises(ddflow.DataflowError, match=rf"two different frames for batch 5 partition 0, from {forged} "
                                                   rf"and from {genuine}"):
        listener.take(5, 1, worker, INPUTS, 0, timeout=10)
    assert len(worker) == 0  # no value of either was registered


def test_an_identical_retry_is_ignored_before_and_after_the_take(cred, listener):
    sender = Interner(hashed=True)
    share = [([7], [_batch(sender, [("x", 1)], 0)])]
    for _ in range(2):
        send_shares([listener.address], sender, 2, 0, share, cred)
    assert _rows(listener, 2, 1, Interner(hashed=True)) == [(7, [(("x", 1), 0, 1)])]
    send_shares([listener.address], sender, 2, 0, share, cred)  # a late speculative copy
    send_shares([listener.address], sender, 3, 0, [([], [])], cred)
    assert listener.take(3, 1, Interner(hashed=True), INPUTS, 0, timeout=10) == []


def test_a_different_late_copy_of_a_taken_frame_fails_the_next_batch(cred, listener):
    sender = Interner(hashed=True)
    send_shares([listener.address], sender, 2, 0, [([7], [_batch(sender, [("x", 1)], 0)])], cred)
    assert len(listener.take(2, 1, Interner(hashed=True), INPUTS, 0, timeout=10)) == 1
    send_shares([listener.address], sender, 2, 0, [([7], [_batch(sender, [("y", 1)], 0)])], cred)
    send_shares([listener.address], sender, 3, 0, [([], [])], cred)
    with pytest.raises(ddflow.DataflowError, match="two different frames for batch 2 partition 0"):
        listener.take(3, 1, Interner(hashed=True), INPUTS, 0, timeout=10)


def _bad(cred, listener, msg, interner=None, match="", frontier=0):
    who = _send_raw(cred, listener.address, msg, interner)
    worker = Interner(hashed=True)
    with pytest.raises(ddflow.DataflowError, match=rf"the sender at {who} \(it proved itself\) sent a bad frame: "
                                                   rf"{match}.*; nothing of the batch was applied"):
        listener.take(msg.meta[0], 1, worker, INPUTS, frontier, timeout=10)
    assert len(worker) == 0


def test_an_update_behind_the_frontier_is_refused(cred, listener):
    it = Interner(hashed=True)
    _bad(cred, listener, Message("in", (4, 0, [7]), [_batch(it, [("late", 1)], 2)]), it,
         match=r"input 7: an update at time 2 is before the frontier 3", frontier=3)


def test_an_unknown_input_or_other_kinds_or_a_lying_code_are_refused(cred, listener):
    it = Interner(hashed=True)
    _bad(cred, listener, Message("in", (1, 0, [99]), [_batch(it, [(1, 2)], 0)]), it,
         match="its frame names input 99, which is not an input of this dataflow")
    _bad(cred, listener, Message("in", (2, 0, [7]), [_batch(it, [(1, 2)], 0)]), it,
         match=r"input 7: column kinds \('i', 'i'\), but the input's are \('o', 'i'\)")
    u = _batch(it, [("a", 1)], 0)
    liar = Interner(hashed=True)
    liar.register([int(u.cols[0][0])], ["b"])  # says code("a") is "b"
    _bad(cred, listener, Message("in", (3, 0, [7]), [u]), liar, match="the value 'b' came with code")
    no_values = Interner()  # a dense interner's channel sends no values beside codes
    ch_values = Updates((np.array([12345], dtype=np.int64), np.array([1])), np.zeros((1, 1), dtype=np.int64),
                        np.ones(1, dtype=np.int64), ("o", "i"))
    _bad(cred, listener, Message("in", (4, 0, [7]), [ch_values]), no_values,
         match="input 7: object code 12345 came without")
    flag = Updates((np.array([3], dtype=np.int64),), np.zeros((1, 1), dtype=np.int64), np.ones(1, dtype=np.int64),
                   ("b",))
    _bad(cred, listener, Message("in", (5, 0, [8]), [flag]), it, match="input 8: field 0 is bool, but holds 3")


def test_an_untyped_input_takes_the_kinds_its_frames_agree_on(cred, listener):
    it = Interner(hashed=True)
    send_shares([listener.address], it, 1, 0, [([8], [_batch(it, [(1, 2)], 0)])], cred)
    send_shares([listener.address], it, 1, 1, [([8], [_batch(it, [(1.5, 2)], 0)])], cred)
    with pytest.raises(ddflow.DataflowError, match=r"column kinds \('f', 'i'\), but the input's are \('i', 'i'\)"):
        listener.take(1, 2, Interner(hashed=True), INPUTS, 0, timeout=10)


def test_an_oversized_claim_from_a_proved_sender_fails_the_next_take(cred, listener):
    with cred.connect(listener.address, b"ingest") as s:
        s.sendall(struct.pack("<QI", 400 << 20, 100))
        name = "%s:%d" % s.getsockname()[:2]
        assert _closed(s)  # unread
    with pytest.raises(ddflow.DataflowError, match=rf"the sender at {name} claimed a frame of 419430400 bytes, over "
                                                   r"the largest an ingest port reads \(268435456 bytes"):
        listener.take(1, 1, Interner(hashed=True), INPUTS, 0, timeout=10)


def test_a_share_over_the_limit_is_refused_where_it_is_sent():
    small = Credentials.new(max_ingest_frame_bytes=4096, env={})
    for lst in _listeners(small):
        it = Interner(hashed=True)
        big = _batch(it, [(f"k{i}", i) for i in range(500)], 0)
        with pytest.raises(ddflow.DataflowError, match="batch 1 partition 0: the share for worker 0 is too large"):
            send_shares([lst[0].address], it, 1, 0, [([7], [big])], small)


@settings(max_examples=40, deadline=None)
@given(st.binary(min_size=0, max_size=200), st.integers(0, 200))
def test_random_frames_from_a_proved_sender_are_errors_never_code(data, hlen):
    """Bytes in ddflow's framing but not ddflow's frame: a named refusal at the take, no other exception."""
    cred = Credentials.new(env={})
    lst = IngestListener("127.0.0.1", cred)
    try:
        frame = PREFIX.pack(PREFIX.size + len(data), min(hlen, len(data))) + data
        with cred.connect(lst.address, b"ingest") as s:
            s.sendall(frame)
            s.shutdown(socket.SHUT_WR)
            s.settimeout(10)
            s.recv(1)
        try:
            out = lst.take(0, 1, Interner(hashed=True), INPUTS, 0, timeout=10)
        except ddflow.DataflowError as e:
            assert "refused" in str(e) or "no input from partitions" in str(e)
        else:
            assert out == [] or all(nid in INPUTS for nid, _ in out)
    finally:
        lst.close()
