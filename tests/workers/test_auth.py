"""The handshake every TCP connection of a dataflow starts with (ddflow/workers/auth.py), attacked over loopback.

Wrong and missing proofs, replayed exchanges, impostor servers, silent
and hostile connections racing the real one, random bytes: each is a
refusal naming why, and the real connection goes through.  TLS is tested
with self-signed certificates made in the test.
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
from ddflow.base.updates import from_rows
from ddflow.workers.auth import TLS, AuthError, Credentials, Gate, Silent
from ddflow.workers.forked import ForkedPlacement
from ddflow.workers.transport import Channel, Hub, Message, pair_on, recv_exact, tcp_pair


def _cred(**kw) -> Credentials:
    return Credentials.new(env={}, **kw)


def _both(client_cred, server_cred, client_purpose=b"peer", server_purpose=b"peer", timeout=5.0):
    """Run both sides over a socketpair; (client's exception or None, server's exception or None)."""
    a, b = socket.socketpair()
    out = {}

    def serve():
        try:
            server_cred.server(b, server_purpose, timeout)
        except BaseException as e:  # noqa: BLE001 - the test looks at it
            out["server"] = e
        finally:
            b.close()

    t = threading.Thread(target=serve)
    t.start()
    try:
        client_cred.client(a, client_purpose, timeout)
    except BaseException as e:  # noqa: BLE001
        out["client"] = e
    finally:
        a.close()
    t.join()
    return out.get("client"), out.get("server")


def test_the_same_secret_proves_both_ways():
    c = _cred()
    assert _both(c, c) == (None, None)


def test_a_wrong_secret_is_refused_by_the_client_before_it_proves_anything():
    client, server = _both(_cred(), _cred())
    assert isinstance(client, AuthError) and "did not prove it holds this dataflow's secret" in str(client)
    assert isinstance(server, AuthError) and "closed the connection after 0 of the 32 bytes of its proof" in str(server)


def test_a_proof_for_another_port_is_none_for_this_one():
    c = _cred()
    client, server = _both(c, c, client_purpose=b"peer", server_purpose=b"ingest")
    assert isinstance(client, AuthError)


def test_a_missing_or_silent_proof_is_refused_within_the_deadline():
    c = _cred()
    a, b = socket.socketpair()
    a.sendall(b"DDFLOW-AUTH1" + os.urandom(32))
    a.shutdown(socket.SHUT_WR)  # greets, then ends without a proof
    with pytest.raises(AuthError, match="closed the connection after 0 of the 32 bytes of its proof"):
        c.server(b, b"peer", 2.0)
    a.close()
    a, b = socket.socketpair()
    a.sendall(b"DDFLOW-AUTH1")  # greets, half of it, then says nothing
    t0 = time.monotonic()
    with pytest.raises(Silent, match="sent 12 of the 44 bytes of a greeting"):
        c.server(b, b"peer", 0.5)
    assert time.monotonic() - t0 < 3
    a.close()
    b.close()


def test_a_recorded_exchange_proves_nothing_on_a_new_connection():
    c = _cred()
    client_end, relay_c = socket.socketpair()
    relay_s, server_end = socket.socketpair()
    threads = [threading.Thread(target=c.server, args=(server_end, b"peer")),
               threading.Thread(target=c.client, args=(client_end, b"peer"))]
    for t in threads:
        t.start()
    said, answered = [], []
    for src, dst, n in ((relay_c, relay_s, 44), (relay_s, relay_c, 64), (relay_c, relay_s, 32)):
        data = recv_exact(src, n)
        (said if src is relay_c else answered).append(data)
        dst.sendall(data)
    for t in threads:
        t.join()
    # The client's part replayed to a server: the server's nonce is new, so the old proof is wrong.
    a, b = socket.socketpair()
    a.sendall(said[0] + said[1])
    with pytest.raises(AuthError, match="sent a wrong proof"):
        c.server(b, b"peer", 2.0)
    # The server's part replayed to a client: the client's nonce is new, so the client refuses it.
    a2, b2 = socket.socketpair()
    t = threading.Thread(target=lambda: (recv_exact(b2, 44), b2.sendall(answered[0])))
    t.start()
    with pytest.raises(AuthError, match="did not prove it holds this dataflow's secret"):
        c.client(a2, b"peer", 2.0)
    t.join()
    for s in (client_end, relay_c, relay_s, server_end, a, b, a2, b2):
        s.close()


def test_an_impostor_server_learns_no_proof_and_gets_no_data():
    c = _cred()
    a, b = socket.socketpair()
    got = []

    def impostor():
        got.append(recv_exact(b, 44))
        b.sendall(os.urandom(64))
        b.settimeout(2)
        try:
            while chunk := b.recv(100):
                got.append(chunk)
        except OSError:
            pass

    t = threading.Thread(target=impostor)
    t.start()
    with pytest.raises(AuthError, match="did not prove"):
        c.client(a, b"driver", 2.0)
    a.close()
    t.join()
    b.close()
    assert len(got) == 1  # the greeting only: no proof, no hello, no frame


@settings(max_examples=60, deadline=None)
@given(st.binary(min_size=0, max_size=200))
def test_random_bytes_are_refused_by_the_server(data):
    c = _cred()
    a, b = socket.socketpair()
    a.sendall(data)
    a.shutdown(socket.SHUT_WR)
    with pytest.raises(AuthError):
        c.server(b, b"ingest", 1.0)
    a.close()
    b.close()


# -- the gate: each connection proves itself in a thread of its own ----------------------------------------------
def test_silent_connections_delay_no_one_and_are_counted():
    c = _cred()
    srv = socket.create_server(("127.0.0.1", 0))
    gate = Gate(srv, c, b"driver", timeout=1.0)
    try:
        idle = [socket.create_connection(srv.getsockname()) for _ in range(12)]
        bad = socket.create_connection(srv.getsockname())
        bad.sendall(b"GET / HTTP/1.1\r\n" + b"x" * 40)
        t0 = time.monotonic()
        good = c.connect(srv.getsockname(), b"driver")
        sock, addr, _ = gate.arrived.get(timeout=5)
        assert time.monotonic() - t0 < 1.0  # not behind twelve deadlines
        assert addr[:2] == good.getsockname()[:2]
        deadline = time.monotonic() + 10
        while gate.counts["silent"] < 12 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert gate.counts == {"proved": 1, "failed": 1, "silent": 12, "turned away": 0}
        assert gate.summary().startswith("12 stayed silent past the 1 s handshake deadline, 1 failed to authenticate")
        for s in (*idle, bad, good, sock):
            s.close()
    finally:
        gate.close()


def test_more_connections_than_the_gate_proves_at_once_are_turned_away():
    c = _cred()
    srv = socket.create_server(("127.0.0.1", 0))
    gate = Gate(srv, c, b"peer", pending=2, timeout=2.0)
    try:
        idle = [socket.create_connection(srv.getsockname()) for _ in range(5)]
        deadline = time.monotonic() + 5
        while gate.counts["turned away"] < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert gate.counts["turned away"] == 3
        assert "3 were turned away (too many at once)" in gate.summary()
        for s in idle:
            s.close()
    finally:
        gate.close()


def _old_frame_with(path: str) -> bytes:
    class Marker:
        def __reduce__(self):
            return (open, (path, "w"))

    header = pickle.dumps(("x", None, [], [], Marker()), protocol=5)
    return struct.pack("<QI", 12 + len(header), len(header)) + header


@pytest.mark.parametrize("attack", ["silent", "pickle", "garbage", "wrong secret"])
def test_a_tcp_pair_takes_only_its_own_connection(attack, tmp_path):
    """transport="tcp": a process racing for the pair's port first is refused, and the pair is the right one."""
    c = _cred()
    marker = tmp_path / "pwned"
    srv = socket.create_server(("127.0.0.1", 0))
    strangers = [socket.create_connection(srv.getsockname())]  # in the backlog before the real one
    if attack == "pickle":
        strangers[0].sendall(_old_frame_with(str(marker)))
    elif attack == "garbage":
        strangers[0].sendall(os.urandom(300))
    elif attack == "wrong secret":
        strangers[0].close()
        strangers = []
        threading.Thread(target=lambda: _try(lambda: _cred().connect(srv.getsockname(), b"pair")),
                         daemon=True).start()
        time.sleep(0.1)
    t0 = time.monotonic()
    a, b = pair_on(srv, c)
    assert time.monotonic() - t0 < 5
    assert a.getsockname()[:2] == b.getpeername()[:2]
    a.sendall(b"ping")
    assert recv_exact(b, 4) == b"ping"
    assert not marker.exists()
    for s in (a, b, *strangers):
        s.close()


def _try(fn):
    try:
        fn()
    except (AuthError, OSError):
        pass


# -- TLS ----------------------------------------------------------------------------------------------------
def _tls(files, name="node", ca=None):
    cert, key = files[name]
    return TLS(cert, key, ca)


def _over_tcp(client_cred, server_cred, purpose=b"peer"):
    srv = socket.create_server(("127.0.0.1", 0))
    gate = Gate(srv, server_cred, purpose, timeout=5.0)
    try:
        try:
            client = client_cred.connect(srv.getsockname(), purpose)
        except (AuthError, OSError) as e:
            return e, gate
        server, _, _ = gate.arrived.get(timeout=5)
        return (client, server), gate
    finally:
        gate.close()


def test_tls_carries_the_handshake_and_channels_both_ways(tls_files):
    c = _cred(tls=_tls(tls_files))
    (a, b), _ = _over_tcp(c, c)
    assert a.version() in ("TLSv1.2", "TLSv1.3") and b.version() == a.version()
    it = Interner(hashed=True)
    big = from_rows([(f"k{i}", i) for i in range(100_000)], 0, 1, it)  # several MB: many TLS records, partial writes
    small = from_rows([("x", 1)], 0, 1, it)
    ca, cb = Channel(a, 1, it), Channel(b, 0, Interner(hashed=True))
    assert not ca.trusted and ca.tls
    got = []
    hub = Hub([cb])
    for m in (Message("x", (1,), [big]), Message("x", (2,), [small]), Message("y", {"k": [1.5, None]})):
        ca.send(m)
    deadline = time.monotonic() + 30
    while len(got) < 3 and time.monotonic() < deadline:
        ca.flush()
        hub.poll(lambda ch, m: got.append(m), 0.01)
    assert [m.meta for m in got] == [(1,), (2,), {"k": [1.5, None]}]
    assert got[0].batches[0].to_rows(cb.interner) == big.to_rows(it)
    a.close()
    b.close()


def test_tls_refuses_a_stranger_certificate_and_a_plain_client(tls_files):
    node = _cred(tls=_tls(tls_files))
    stranger = Credentials(node._secret, _tls(tls_files, "stranger"))  # even with the secret: the CA does not sign it
    err, gate = _over_tcp(stranger, node)
    assert isinstance(err, AuthError) and "TLS" in str(err)
    plain = Credentials(node._secret)
    err, gate = _over_tcp(plain, node)
    assert isinstance(err, (AuthError, OSError))
    time.sleep(0.2)
    assert gate.counts["proved"] == 0 and gate.counts["failed"] >= 1


def test_tls_settings_come_from_the_environment(tls_files):
    cert, key = tls_files["node"]
    tls = TLS.from_env({"DDFLOW_TLS_CERT": cert, "DDFLOW_TLS_KEY": key})
    assert (tls.cert, tls.key, tls.ca) == (cert, key, cert)
    c = Credentials.new(env={"DDFLOW_TLS_CERT": cert, "DDFLOW_TLS_KEY": key, "DDFLOW_MAX_FRAME_BYTES": "65536"})
    assert c.tls.cert == cert and c.max_frame_bytes == 65536
    with pytest.raises(ddflow.UsageError, match="DDFLOW_MAX_FRAME_BYTES is a number of bytes, got 'lots'"):
        Credentials.new(env={"DDFLOW_MAX_FRAME_BYTES": "lots"})
    with pytest.raises(ddflow.UsageError, match="cannot load the certificate"):
        TLS("/nonexistent.pem", key).context(server=True)
    assert repr(c).count(c._secret.hex()) == 0 and "secret" not in repr(c)


def _reach(flow):
    hr, roots = flow.new_collection("roots")
    he, edges = flow.new_collection("edges")
    caps = [roots.iterate(lambda r: r.join(edges).project(1).concat(roots).distinct()).capture(),
            edges.map(lambda e: (f"n{e[0]}", e[1])).project(0).count().capture()]
    return hr, he, caps


def _run_reach(workers, placement=None, **kw):
    rng = np.random.default_rng(5)
    src, dst = rng.integers(0, 20, 120).tolist(), rng.integers(0, 20, 120).tolist()
    outs = []
    with ddflow.Dataflow(workers=workers, placement=placement, **kw) as flow:
        hr, he, caps = _reach(flow)
        hr.update([(0,), (3,)], times=0)
        for run in range(3):
            he.update(list(zip(src[40 * run:40 * run + 40], dst[40 * run:40 * run + 40])), times=run)
            if run:
                he.update(list(zip(src[40 * run - 40:40 * run - 20], dst[40 * run - 40:40 * run - 20])), times=run,
                          diffs=-1)
            flow.advance_to(run + 1)
            flow.run()
            outs.append([sorted(c.drain()) for c in caps])
    return outs


def test_forked_workers_over_tls_deliver_what_one_worker_does(tls_files):
    assert _run_reach(3, ForkedPlacement("tcp", tls=_tls(tls_files))) == _run_reach(1)


def test_a_frame_over_the_limit_is_refused_where_it_is_sent():
    with pytest.raises(ddflow.DataflowError, match=r"over the largest frame a network channel carries \(65536 bytes"):
        with ddflow.Dataflow(workers=2, placement=ForkedPlacement("tcp", max_frame_bytes=65536)) as flow:
            h, xs = flow.new_collection("xs")
            xs.count().capture()
            h.update([(i,) for i in range(20_000)], times=0)
            flow.advance_to(1)
            flow.run()


def test_tcp_pair_keeps_its_old_signature():
    a, b = tcp_pair()
    a.sendall(b"x")
    assert b.recv(1) == b"x"
    a.close()
    b.close()
