"""Frames and the value codec (ddflow/workers/wire.py, codec.py): round trips, refusals, bytes that are not ddflow's.

A decoded value must be the value sent, of the same type, pickling to
the same bytes (content codes are hashes of those bytes, so every process
must agree).  Anything else, random or crafted, is a WireError: never
another exception, never code run, never an allocation the bytes did not
pay for.
"""
from __future__ import annotations

import datetime as dt
import math
import pickle
import socket
import struct
from collections import namedtuple
from decimal import Decimal
from zoneinfo import ZoneInfo

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddflow
from ddflow.base.interner import Interner
from ddflow.base.updates import Updates, from_rows
from ddflow.workers.transport import Channel, Hub, Message, ProtocolError, tcp_pair
from ddflow.workers.codec import WireError, dumps, loads
from ddflow.workers.wire import PREFIX, decode_frame, encode_frame

_ZONES = st.one_of(st.none(), st.just(dt.timezone.utc),
                   st.builds(dt.timezone, st.timedeltas(min_value=dt.timedelta(hours=-23),
                                                        max_value=dt.timedelta(hours=23))),
                   st.builds(dt.timezone, st.timedeltas(min_value=dt.timedelta(hours=-5),
                                                        max_value=dt.timedelta(hours=5)), st.text(max_size=5)),
                   st.sampled_from([ZoneInfo("Europe/Paris"), ZoneInfo("America/New_York")]))
_NUMPY = st.one_of(st.integers(-(1 << 63), (1 << 63) - 1).map(np.int64), st.integers(0, 255).map(np.uint8),
                   st.floats(allow_nan=True, width=32).map(np.float32), st.floats(allow_nan=True).map(np.float64),
                   st.booleans().map(np.bool_),
                   st.integers(-(10 ** 12), 10 ** 12).map(lambda i: np.datetime64(i, "us")),
                   st.text(max_size=5).map(np.str_), st.binary(max_size=5).map(np.bytes_))
_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(-(1 << 200), 1 << 200), st.floats(allow_nan=True),
    st.text(), st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=3), st.binary(),
    st.decimals(allow_nan=True), st.dates(), st.times(timezones=_ZONES), st.datetimes(timezones=_ZONES),
    st.timedeltas(), _NUMPY)
_HASHABLE = st.recursive(_SCALARS, lambda inner: st.one_of(st.tuples(inner, inner), st.lists(inner).map(tuple),
                                                            st.frozensets(st.one_of(st.integers(), st.text()))),
                         max_leaves=20)
_VALUES = st.recursive(_HASHABLE, lambda inner: st.one_of(
    st.lists(inner, max_size=20), st.lists(inner, max_size=20).map(tuple),
    st.dictionaries(st.one_of(st.text(), st.integers()), inner, max_size=5),
    st.lists(st.text(), min_size=8, max_size=30), st.lists(st.integers(-(1 << 63), (1 << 63) - 1), min_size=8),
    st.lists(st.floats(allow_nan=True), min_size=8), st.lists(st.binary(), min_size=8)), max_leaves=40)


def _same(a, b) -> bool:
    """The same value: same type all the way down, and the same pickle (frozensets: equal, as their order may vary)."""
    if type(a) is not type(b):
        return False
    if type(a) is frozenset:
        return a == b
    if type(a) in (list, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if type(a) is dict:
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if type(a) is float and math.isnan(a):
        return math.isnan(b)
    return pickle.dumps(a, protocol=4) == pickle.dumps(b, protocol=4)


@settings(max_examples=300, deadline=None)
@given(_VALUES)
def test_every_safe_value_comes_back_the_same(value):
    assert _same(loads(dumps(value)), value)


def test_named_examples_come_back_the_same():
    examples = [None, True, 0, -1, 1 << 64, -(1 << 300), 1.5, -0.0, float("inf"), "", "é\udc80", b"\x00",
                (), [], {}, frozenset({1, "a"}), Decimal("-1.10"), Decimal("sNaN"), Decimal("1E+999999"),
                dt.date(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=dt.timezone.utc),
                dt.datetime(2021, 11, 7, 1, 30, fold=1, tzinfo=ZoneInfo("America/New_York")), dt.time(12, 0),
                dt.timedelta(days=-999999999), np.int64(5), np.float32("nan"), np.str_("x\x00"), np.bytes_(b"y\x00"),
                np.datetime64("NaT"),
                ["a"] * 100, [b"b"] * 100, list(range(100)), [0.5] * 100, ("x",) * 20, ["a", 1] * 10]
    for v in examples:
        assert _same(loads(dumps(v)), v), v
    assert type(loads(dumps(np.int64(5)))) is np.int64  # not the int 5: another value in an object column


class _OtherZone(dt.tzinfo):
    """A zone the codec does not know (neither ``datetime.timezone`` nor ``zoneinfo.ZoneInfo``)."""

    def utcoffset(self, d):
        return dt.timedelta(hours=1)


class Point:
    def __init__(self, x):
        self.x = x

    def __eq__(self, other):
        return type(other) is Point and other.x == self.x

    def __hash__(self):
        return hash(self.x)


@pytest.mark.parametrize("value, name", [(Point(1), "test_wire.Point"), ({1, 2}, "set"),
                                         (namedtuple("P", "x")(1), "test_wire.P"), (object(), "object")])
def test_other_types_are_refused_at_send_naming_them(value, name):
    with pytest.raises(ddflow.SchemaError, match=rf"a value of type {name} cannot cross a network channel: values "
                                                 r"that leave this machine must be None, bool, int"):
        dumps((1, [value]))


def test_a_zone_the_codec_does_not_carry_is_named():
    with pytest.raises(ddflow.SchemaError, match="a datetime in a zone of type test_wire._OtherZone cannot cross a "
                                                 "network channel: zones must be datetime.timezone or zoneinfo"):
        dumps(dt.datetime(2020, 1, 1, tzinfo=_OtherZone()))


def test_a_trusted_channel_pickles_other_types_and_a_network_one_refuses_the_pickle(tmp_path):
    p = Point(3)
    assert loads(dumps(p, trusted=True), trusted=True) == p
    marker = tmp_path / "pwned"

    class Marker:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    data = dumps(["ok", Marker()], trusted=True)
    with pytest.raises(WireError, match="pickle is refused on a network channel"):
        loads(data)
    assert not marker.exists()


def test_nesting_and_count_bombs_are_refused_without_recursing_or_allocating():
    deep = b"[\x01\x00\x00\x00" * 100_000 + b"N"
    with pytest.raises(WireError, match="nested more than 64 deep"):
        loads(deep)
    with pytest.raises(WireError, match="claims 4294967295 items"):
        loads(b"[" + struct.pack("<I", 0xFFFFFFFF))
    with pytest.raises(WireError, match="claims"):
        loads(b"s" + struct.pack("<I", 1 << 31) + b"abc")
    v: list = []
    for _ in range(70):
        v = [v]
    with pytest.raises(ddflow.SchemaError, match="nested more than 64 deep"):
        dumps(v)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_are_a_wire_error_or_a_value(data):
    try:
        loads(data)
    except WireError:
        pass


def _frame(msg, values=None, trusted=False) -> bytearray:
    head, arrays, total = encode_frame(msg, values, trusted)
    frame = bytearray(head + b"".join(a.tobytes() for a in arrays))
    assert len(frame) == total
    return frame


def _sample_message():
    it = Interner(hashed=True)
    u = from_rows([("a", 1, 2.5, True), ("b", -3, float("nan"), False)], [[0], [4]], [1, -2], it)
    codes = np.unique(u.cols[0]).tolist()
    return Message("x", (3, [1, 2], {"k": None}), [u, u.take(np.zeros(0, dtype=np.int64))]), (codes, it.values_for(
        np.array(codes)))


def test_a_frame_comes_back_with_its_arrays_aligned_and_its_values():
    msg, values = _sample_message()
    m, got = decode_frame(_frame(msg, values))
    assert (m.kind, m.meta) == (msg.kind, msg.meta) and got == values
    it = Interner(hashed=True)
    it.register(*got)
    assert m.batches[0].to_rows(it)[0] == msg.batches[0].to_rows(it)[0]
    assert [b.kinds for b in m.batches] == [b.kinds for b in msg.batches] and len(m.batches[1]) == 0
    assert all(c.ctypes.data % 8 == 0 for c in m.batches[0].cols)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_damaged_frame_is_a_wire_error_or_a_frame_never_anything_else(data):
    msg, values = _sample_message()
    frame = _frame(msg, values)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(frame) - 1))
        frame[i] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        cut = data.draw(st.integers(0, len(frame)))
        frame = frame[:cut] + bytearray(data.draw(st.binary(max_size=20)))
    try:
        m, _ = decode_frame(frame)
    except WireError:
        return
    for u in m.batches:
        assert len(u.cols) == len(u.kinds) and all(len(c) == len(u.diffs) for c in u.cols)


def test_a_frame_with_a_pickled_header_from_before_is_refused(tmp_path):
    marker = tmp_path / "pwned"

    class Marker:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    header = pickle.dumps(("x", None, [], [], Marker()), protocol=5)
    with pytest.raises(WireError, match="not a ddflow frame"):
        decode_frame(bytearray(struct.pack("<QI", 12 + len(header), len(header)) + header))
    assert not marker.exists()


# -- channels -------------------------------------------------------------------------------------------------
def _recv_all(ch: Channel, n: int, timeout=10.0):
    got, hub = [], Hub([ch])
    import time

    end = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < end:
        hub.poll(lambda c, m: got.append(m), 0.05)
    return got


def test_a_network_channel_refuses_other_types_at_send_and_a_socketpair_carries_them():
    it = Interner(hashed=True)
    u = from_rows([(Point(1),)], 0, 1, it)
    a, b = tcp_pair()
    ca = Channel(a, 1, it)
    with pytest.raises(ddflow.SchemaError, match="a value of type test_wire.Point cannot cross a network channel"):
        ca.send(Message("x", None, [u]))
    assert not ca.outbox and not ca._sent_codes  # nothing queued, nothing marked sent
    ca.send(Message("x", "next"))  # the channel goes on
    assert [m.meta for m in _recv_all(Channel(b, 0, Interner(hashed=True)), 1)] == ["next"]
    a.close(), b.close()
    a, b = socket.socketpair()
    ca, cb = Channel(a, 1, it), Channel(b, 0, Interner(hashed=True))
    assert ca.trusted
    ca.send(Message("x", Point(2), [u]))
    (m,) = _recv_all(cb, 1)
    assert m.meta == Point(2) and m.batches[0].to_rows(cb.interner) == [((Point(1),), 0, 1)]
    a.close(), b.close()


def test_an_oversized_claim_closes_a_network_channel_with_a_logged_reason(caplog):
    a, b = tcp_pair()
    cb = Channel(b, 3, Interner(hashed=True), max_frame=1 << 20)
    a.sendall(PREFIX.pack(400 << 20, 100))
    with pytest.raises(ProtocolError, match=r"peer 3 sent a frame claiming 419430400 bytes \(header 100\), over the "
                                            r"largest this channel reads \(1048576 bytes\)"):
        _recv_all(cb, 1)
    assert cb.closed and cb._frame is None
    assert "ddflow closed a channel: peer 3 sent a frame claiming 419430400 bytes" in caplog.text
    a.close()


def test_a_frame_that_does_not_decode_closes_a_network_channel():
    a, b = tcp_pair()
    cb = Channel(b, 2, Interner(hashed=True))
    a.sendall(PREFIX.pack(PREFIX.size + 8, 8) + b"\x80" * 8)
    with pytest.raises(ProtocolError, match="peer 2 sent a frame that does not decode: not a ddflow frame"):
        _recv_all(cb, 1)
    a.close()


def test_values_go_once_per_channel_and_again_after_forget():
    it = Interner(hashed=True)
    u = from_rows([("a",), ("b",)], 0, 1, it)
    a, b = socket.socketpair()
    ca, cb = Channel(a, 1, it), Channel(b, 0, Interner(hashed=True))
    sizes = []
    for forget in (False, False, True):
        if forget:
            ca.forget_sent()
        before = ca.bytes_sent
        ca.send(Message("x", None, [u]))
        sizes.append(ca.bytes_sent - before)
    assert sizes[1] < sizes[0] == sizes[2]
    assert [m.batches[0].to_rows(cb.interner) for m in _recv_all(cb, 3)] == [u.to_rows(it)] * 3
    a.close(), b.close()


def test_updates_of_every_dtype_cross():
    cols = (np.array([1, 2], dtype=np.int64), np.array([0.5, -1.0]), np.array([1, 0], dtype=np.int64))
    u = Updates(cols, np.array([[0, 1], [2, 3]], dtype=np.int64), np.array([1, -1], dtype=np.int64), ("i", "f", "b"))
    m, _ = decode_frame(_frame(Message("x", None, [u])))
    (got,) = m.batches
    assert got.times.shape == (2, 2) and got.times.tolist() == [[0, 1], [2, 3]] and got.kinds == ("i", "f", "b")
    assert [c.tolist() for c in got.cols] == [c.tolist() for c in cols]
