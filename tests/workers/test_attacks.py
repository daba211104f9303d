"""An attacker on the cluster's network against workers started by a launcher (ddflow/workers/remote.py), on loopback.

The launcher (:mod:`launchers`) starts the tasks as processes of their
own and serves their all-gather, as Spark's barrier stage would; the
attacker is this test process, connecting to every port the dataflow
opens: the driver's rendezvous while the workers start, each worker's
peer listener while the peers connect (the gather hook), and each
worker's ingest port while the dataflow runs.  Pickles that would create
a file, old-style frames, wrong proofs, size claims, silent connections
and random bytes are refused; the dataflow starts in time and its output
equals one worker's.  A sender that holds the secret but forges or
backdates a partition fails the batch, named.
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

import ddflow
from ddflow.workers import auth
from ddflow.workers.auth import TLS, Credentials
from ddflow.workers.remote import RemotePlacement
from launchers import TaskLauncher


class _Marker:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _old_frame(obj) -> bytes:
    """A frame as ddflow framed them before: a prefix, then a pickled header, which the old receivers unpickled."""
    header = pickle.dumps(obj, protocol=5)
    return struct.pack("<QI", 12 + len(header), len(header)) + header


class Attacker:
    """Connections of a process that does not hold the secret: kept open until :meth:`close`."""

    def __init__(self, marker: str):
        self.marker = marker
        self.socks: list[socket.socket] = []

    def _connect(self, address):
        try:
            s = socket.create_connection(tuple(address), timeout=5)
        except OSError:
            return None
        self.socks.append(s)
        return s

    def idle(self, address, n=1):
        for _ in range(n):
            self._connect(address)

    def send(self, address, data: bytes):
        s = self._connect(address)
        if s is not None:
            try:
                s.sendall(data)
            except OSError:
                pass

    def everything(self, address, idle=2):
        """Silent connections, a pickle in the old framing, an old peer's claim, random bytes, a wrong secret."""
        self.idle(address, idle)
        self.send(address, _old_frame(("in", (0, 0, [0]), [], [], _Marker(self.marker))))
        self.send(address, struct.pack("<i", 1) + _old_frame(("x", (0, 0), [], [], _Marker(self.marker))))
        self.send(address, os.urandom(200))
        self.send(address, b'{"token": "guess", "role": "worker", "index": 0}\n')
        threading.Thread(target=self._wrong_secret, args=(address,), daemon=True).start()

    @staticmethod
    def _wrong_secret(address):
        try:
            Credentials.new(env={}).connect(tuple(address), b"peer").close()
        except (OSError, ddflow.DataflowError):
            pass

    def close(self):
        for s in self.socks:
            s.close()


class AttackedLauncher(TaskLauncher):
    """A loopback launcher that lets ``attack(address)`` loose on the driver's port before the tasks start."""

    def __init__(self, attack=None, **kw):
        super().__init__("127.0.0.1", **kw)
        self.attack = attack

    def launch(self, payload, workers, tasks, address, credentials):
        if self.attack is not None:
            self.attack(address)
        super().launch(payload, workers, tasks, address, credentials)


def _reach(flow):
    hr, roots = flow.new_collection("roots")
    he, edges = flow.new_collection("edges")
    caps = [roots.iterate(lambda r: r.join(edges).project(1).concat(roots).distinct()).capture(),
            edges.map(lambda e: (f"n{e[0]}", e[1])).project(0).count().capture()]
    return hr, he, caps


RNG = np.random.default_rng(11)
EDGES = list(zip(RNG.integers(0, 20, 90).tolist(), RNG.integers(0, 20, 90).tolist()))


def _run(flow, routed=None):
    """Three runs of reachability over EDGES (inserts, then some removed); each run's output changes.

    ``routed(flow, batch, rows)``: send the run's edges through the ingest ports instead of the handle.
    """
    hr, he, caps = _reach(flow)
    hr.update([(0,), (5,)], times=0)
    outs = []
    for run in range(3):
        rows = {"add": EDGES[30 * run:30 * run + 30], "del": EDGES[30 * run - 30:30 * run - 15] if run else []}
        if routed is None:
            he.update(rows["add"], times=run)
            if rows["del"]:
                he.update(rows["del"], times=run, diffs=-1)
            flow.advance_to(run + 1)
            flow.run()
        else:
            routed(flow, run, rows)
        outs.append([sorted(c.drain()) for c in caps])
    return outs


@pytest.fixture(scope="module")
def oracle():
    with ddflow.Dataflow() as flow:
        return _run(flow)


def _route(flow, batch, rows):
    """What the streaming driver does: executors (here, this process) send two partitions' rows to the workers."""
    ingest = flow.ingest()
    for part in range(2):
        edges, diffs = rows["add"][part::2] + rows["del"][part::2], [1] * len(rows["add"][part::2]) + \
            [-1] * len(rows["del"][part::2])
        got = ingest.send(batch, part, {"edges": (edges, batch, diffs)} if edges else {})
        for name, kinds in got["kinds"].items():  # as the streaming driver fixes a handle's kinds
            h = next(h for h in flow.inputs if h.name == name)
            if h.kinds is None and kinds:
                h.kinds = tuple(kinds)
    flow.advance_to(batch + 1)
    flow.run(routed=(batch, 2))


def test_the_start_goes_through_silent_hostile_and_forged_connections(oracle, tmp_path):
    """The rendezvous and the peer listeners under attack: the start takes no deadline, nothing runs, output right."""
    marker = str(tmp_path / "pwned")
    attacker = Attacker(marker)
    launcher = AttackedLauncher(attack=lambda address: attacker.everything(address, idle=4),
                                on_gather=lambda tables: [attacker.everything(a) for a in tables.values()])
    placement = RemotePlacement(launcher, start_timeout=60)
    t0 = time.monotonic()
    try:
        with ddflow.Dataflow(workers=3, placement=placement) as flow:
            out = _run(flow)
            started = time.monotonic() - t0
    finally:
        attacker.close()
    assert launcher.join(10)
    assert out == oracle
    assert not os.path.exists(marker)
    assert started < 60


def test_a_start_that_times_out_names_what_arrived_and_what_was_refused(monkeypatch, tmp_path):
    monkeypatch.setattr(auth, "HANDSHAKE_S", 1.0)
    attacker = Attacker(str(tmp_path / "pwned"))

    def attack(address):
        attacker.idle(address, 4)
        attacker.send(address, os.urandom(100))

    placement = RemotePlacement(AttackedLauncher(attack=attack, start=False), start_timeout=3)
    t0 = time.monotonic()
    try:
        with pytest.raises(ddflow.DataflowError, match=r"0 of 2 workers and 0 of 2 tasks connected to 127.0.0.1:\d+ "
                                                       r"and proved themselves within 3 s; other connections were "
                                                       r"refused: 4 stayed silent past the 1 s handshake deadline, 1 "
                                                       r"failed to authenticate"):
            with ddflow.Dataflow(workers=2, placement=placement) as flow:
                flow.new_collection("xs")[1].capture()
                flow.run()
    finally:
        attacker.close()
    assert time.monotonic() - t0 < 10  # not 4 x 10 s of one-at-a-time hellos


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(x.split()[1]) for x in f if x.startswith("VmRSS")) * 1024


def test_ingest_ports_refuse_strangers_and_take_the_real_input(oracle, tmp_path):
    """Pickles, size claims, random bytes and wrong secrets at every worker's ingest port while the dataflow runs."""
    marker = str(tmp_path / "pwned")
    attacker = Attacker(marker)
    launcher = AttackedLauncher()
    try:
        with ddflow.Dataflow(workers=2, placement=RemotePlacement(launcher, start_timeout=60)) as flow:

            def routed(flow, batch, rows):
                ingest = flow.ingest()
                before = [_rss(pid) for pid in flow._pool.pids]
                for address in ingest.addresses:
                    attacker.everything(address)
                    for _ in range(2):
                        attacker.send(address, struct.pack("<QI", 400 << 20, 100))  # claims 400 MB, sends nothing
                time.sleep(0.5)
                assert all(_rss(pid) - b < 100 << 20 for pid, b in zip(flow._pool.pids, before))
                _route(flow, batch, rows)

            out = _run(flow, routed)
    finally:
        attacker.close()
    assert launcher.join(10)
    assert out == oracle
    assert not os.path.exists(marker)


def test_a_proved_sender_that_forges_or_backdates_a_partition_fails_the_batch_named(tmp_path):
    with ddflow.Dataflow(workers=2, placement=RemotePlacement(AttackedLauncher(), start_timeout=60)) as flow:
        hr, he, caps = _reach(flow)
        hr.update([(0,)], times=0)
        flow.advance_to(3)
        flow.run()
        ingest = flow.ingest()
        forged = pickle.loads(pickle.dumps(ingest))  # what a compromised executor holds: the secret too
        forged.send(5, 0, {"edges": ([(0, 13)], 3, 1)})  # first, before the genuine frame
        ingest.send(5, 0, {"edges": ([(0, 1)], 3, 1)})
        he.kinds = ("i", "i")
        flow.advance_to(6)
        with pytest.raises(ddflow.DataflowError, match=r"batch 5: routed input refused: two different frames for "
                                                       r"batch 5 partition 0, from 127.0.0.1:\d+ and from "
                                                       r"127.0.0.1:\d+"):
            flow.run(routed=(5, 1))
    with ddflow.Dataflow(workers=2, placement=RemotePlacement(AttackedLauncher(), start_timeout=60)) as flow:
        hr, he, caps = _reach(flow)
        hr.update([(0,)], times=0)
        flow.advance_to(3)
        flow.run()
        ingest = flow.ingest()
        ingest.frontier = 0  # the executor's own check would refuse time 1: a sender that skips it
        ingest.send(7, 0, {"edges": ([(0, 1), (1, 2)], 1, 1)})
        he.kinds = ("i", "i")
        flow.advance_to(4)
        with pytest.raises(ddflow.DataflowError, match=r"routed input refused: the sender at 127.0.0.1:\d+ \(it proved "
                                                       r"itself\) sent a bad frame: input \d+: an update at time 1 is "
                                                       r"before the frontier 3"):
            flow.run(routed=(7, 1))


def test_workers_on_executors_over_tls(oracle, tls_files):
    cert, key = tls_files["node"]
    launcher = AttackedLauncher()
    with ddflow.Dataflow(workers=3, placement=RemotePlacement(launcher, start_timeout=60, tls=TLS(cert, key))) as flow:
        assert _run(flow, _route) == oracle
        assert flow._pool.channels[0].tls
        plain = Credentials(flow._pool.placement.credentials._secret)  # the secret, but no TLS: refused
        with pytest.raises((OSError, ddflow.DataflowError)):
            plain.connect(flow.ingest().addresses[0], b"ingest", timeout=3).recv(1)
    assert launcher.join(10)


def test_a_routed_table_with_nulls_and_strings_passes_the_checks():
    """A table's rows (NULLs, strings, floats) routed from two partitions: the worker's checks take what the
    executors' handles encode, and the output equals the driver path's."""
    rows = [(1, "ann", 2.5), (2, None, None), (3, "bob", -1.0), (4, "ann", 0.0)]
    outs = []
    for workers in (1, 2):
        placement = RemotePlacement(AttackedLauncher(), start_timeout=60) if workers > 1 else None
        with ddflow.Dataflow(workers=workers, placement=placement) as flow:
            h, orders = flow.new_collection("orders", schema={"o_id": "bigint", "cust": str, "amount": "double"})
            cap = orders.map(lambda r: (r[1], r[0])).capture()
            if workers == 1:
                h.update(rows, times=0)
                flow.advance_to(1)
                flow.run()
            else:
                ingest = flow.ingest()
                for part in range(2):
                    ingest.send(0, part, {"orders": (rows[part::2], 0, 1)})
                flow.advance_to(1)
                flow.run(routed=(0, 2))
            outs.append(sorted(cap.drain(), key=repr))
    assert outs[0] == outs[1] and len(outs[0]) == 4
