"""The value codec of ddflow's frames: a one-byte tag, then the value; decoding it cannot run code.

It carries a frame's ``meta`` (small command arguments, statistics, dead
letters) and the interned object values that travel beside their codes
(:mod:`ddflow.workers.wire`).  It knows None, bool, int of any size,
float, str, bytes, tuple, list, dict, frozenset, Decimal, date, datetime,
time, timedelta (with ``timezone`` or ``zoneinfo.ZoneInfo`` zones) and
numpy scalars, each decoded to the same type it was: a numpy ``int64(5)``
stays a numpy scalar, because in an object column it is a different value
from the int 5 (its content code, :func:`ddflow.base.interner.content_code`,
differs), and turning one into the other would split a key.  Lists of
strings or bytes go as one block (an Arrow array's offsets and data,
built and read in C, validated in full on receipt), lists of ints or
floats as one numpy array, so a batch's new strings cost about what
pickling them did, not a tag each.

Other types.  Over a network channel (TCP: workers on executors,
``transport="tcp"``, routed input) a value of any other type is refused
at send, naming its type, and a receiver refuses any tag it does not know.
Over a Unix socketpair between forked workers (``trusted=True``) a value
of another type is pickled inside the codec: a socketpair is made by the
driver before it forks, no other process can connect to it, and both ends
run the same program with the same memory, so unpickling there trusts
nothing that the process did not already trust.  That keeps the default
placement taking every picklable value, as it always has.

Every decoder bound is checked before it allocates: counts against the
bytes left, nesting against :data:`MAX_DEPTH`, and any failure is a
:class:`WireError` naming what was wrong, never another exception.
"""
from __future__ import annotations

import datetime as dt
import pickle
import struct
from decimal import Decimal, InvalidOperation
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from ddflow.errors import DataflowError, SchemaError

#: How deep lists, tuples and dicts may nest in a value (a deeper one is refused, at send and on receipt).
MAX_DEPTH = 64
#: The types :func:`dumps` takes over a network channel, as an error names them.
SAFE_TYPES = ("None, bool, int, float, str, bytes, tuple, list, dict, frozenset, decimal.Decimal, datetime.date, "
              "datetime.datetime, datetime.time, datetime.timedelta (zones: datetime.timezone, zoneinfo.ZoneInfo) "
              "and numpy scalars")

_U8, _U32, _I64, _F64 = (struct.Struct(f) for f in ("<B", "<I", "<q", "<d"))
_DATE = struct.Struct("<HBB")
_TIME = struct.Struct("<BBBIB")  # hour, minute, second, microsecond, fold
_DELTA = struct.Struct("<iii")
#: A list this long or longer of one plain type goes as a block (strings and bytes: :data:`_TEXT_BLOCK`; below
#: it, building an Arrow array costs more than a tag per item).
_BLOCK = 8
_TEXT_BLOCK = 32
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


class WireError(DataflowError, ValueError):
    """A frame or value that is not what ddflow sends: malformed, too deep, or of a kind this channel refuses."""


def dumps(value: Any, trusted: bool = False) -> bytes:
    """``value`` in the codec's bytes; a :class:`~ddflow.errors.SchemaError` for a type a network channel refuses.

    ``trusted``: the channel is a socketpair between forked workers, where
    other types are pickled (module docstring).  Cost: O(size), Python per
    item except in blocks of one plain type.

    >>> loads(dumps({"a": (1, 2.5, None), "b": [b"x", "\\u00e9"]}))
    {'a': (1, 2.5, None), 'b': [b'x', 'é']}
    >>> dumps(object())
    Traceback (most recent call last):
    ...
    ddflow.errors.SchemaError: a value of type object cannot cross a network channel: values that leave this machine
    must be None, bool, int, float, str, bytes, ...
    """
    out = bytearray()
    _encode(value, out, 0, trusted)
    return bytes(out)


def loads(data: bytes | memoryview, trusted: bool = False) -> Any:
    """The value :func:`dumps` wrote; a :class:`WireError` for anything else (trailing bytes included).

    Cost: O(size).

    >>> loads(b"\\x80")
    Traceback (most recent call last):
    ...
    ddflow.workers.codec.WireError: unknown value tag 0x80 at byte 0
    """
    buf = bytes(data)
    value, pos = decode_at(buf, 0, trusted)
    if pos != len(buf):
        raise WireError(f"{len(buf) - pos} bytes after the value")
    return value


def _refuse(value: Any) -> SchemaError:
    t = type(value)
    name = t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"
    return SchemaError(f"a value of type {name} cannot cross a network channel: values that leave this machine "
                       f"must be {SAFE_TYPES}")


def _encode(v: Any, out: bytearray, depth: int, trusted: bool) -> None:
    t = type(v)
    if t is int:
        if _I64_MIN <= v <= _I64_MAX:
            out += b"i"
            out += _I64.pack(v)
        else:
            raw = v.to_bytes((v.bit_length() + 8) // 8, "little", signed=True)
            out += b"I"
            out += _U32.pack(len(raw))
            out += raw
    elif t is str:
        raw = v.encode("utf-8", "surrogatepass")
        out += b"s"
        out += _U32.pack(len(raw))
        out += raw
    elif v is None:
        out += b"N"
    elif t is bool:
        out += b"T" if v else b"F"
    elif t is float:
        out += b"d"
        out += _F64.pack(v)
    elif t is tuple or t is list:
        if depth >= MAX_DEPTH:
            raise SchemaError(f"a value nested more than {MAX_DEPTH} deep cannot cross a channel")
        if len(v) >= _BLOCK and _block(v, out, t is tuple):
            return
        out += b"(" if t is tuple else b"["
        out += _U32.pack(len(v))
        for x in v:
            _encode(x, out, depth + 1, trusted)
    elif t is dict:
        if depth >= MAX_DEPTH:
            raise SchemaError(f"a value nested more than {MAX_DEPTH} deep cannot cross a channel")
        out += b"{"
        out += _U32.pack(len(v))
        for k, x in v.items():
            _encode(k, out, depth + 1, trusted)
            _encode(x, out, depth + 1, trusted)
    elif t is bytes:
        out += b"y"
        out += _U32.pack(len(v))
        out += v
    elif t is frozenset:
        if depth >= MAX_DEPTH:
            raise SchemaError(f"a value nested more than {MAX_DEPTH} deep cannot cross a channel")
        out += b"f"
        out += _U32.pack(len(v))
        for x in v:
            _encode(x, out, depth + 1, trusted)
    elif t is Decimal:
        raw = str(v).encode()
        out += b"m"
        out += _U32.pack(len(raw))
        out += raw
    elif t is dt.datetime:
        if not _zone(v.tzinfo):
            _other_zone(v, out, trusted)
            return
        out += b"A"
        out += _DATE.pack(v.year, v.month, v.day)
        out += _TIME.pack(v.hour, v.minute, v.second, v.microsecond, v.fold)
        _encode_zone(v.tzinfo, out)
    elif t is dt.date:
        out += b"a"
        out += _DATE.pack(v.year, v.month, v.day)
    elif t is dt.time:
        if not _zone(v.tzinfo):
            _other_zone(v, out, trusted)
            return
        out += b"t"
        out += _TIME.pack(v.hour, v.minute, v.second, v.microsecond, v.fold)
        _encode_zone(v.tzinfo, out)
    elif t is dt.timedelta:
        out += b"l"
        out += _DELTA.pack(v.days, v.seconds, v.microseconds)
    elif t is np.str_:
        raw = str.__str__(v).encode("utf-8", "surrogatepass")  # str(v) would drop trailing NULs
        out += b"u"
        out += _U32.pack(len(raw))
        out += raw
    elif t is np.bytes_:
        out += b"x"
        out += _U32.pack(len(v))
        out += bytes(v)
    elif isinstance(v, np.generic) and v.dtype.kind in "biufcmM" and v.dtype.fields is None:
        code = v.dtype.str.encode()
        out += b"n"
        out += _U8.pack(len(code))
        out += code
        out += v.tobytes()
    else:
        _other(v, out, trusted)


def _other(v: Any, out: bytearray, trusted: bool) -> None:
    """A value of a type the codec does not know: pickled on a trusted channel, else refused."""
    if not trusted:
        raise _refuse(v)
    raw = pickle.dumps(v, protocol=5)
    out += b"P"
    out += _U32.pack(len(raw))
    out += raw


def _other_zone(v: Any, out: bytearray, trusted: bool) -> None:
    """A datetime or time in a zone the codec does not carry: pickled on a trusted channel, else refused."""
    if not trusted:
        t = type(v.tzinfo)
        raise SchemaError(f"a {type(v).__name__} in a zone of type {t.__module__}.{t.__qualname__} cannot cross a "
                          "network channel: zones must be datetime.timezone or zoneinfo.ZoneInfo")
    _other(v, out, trusted)


def _zone(tz: Any) -> bool:
    """Whether the codec carries zone ``tz`` (none, a fixed offset, or an IANA zone by its key)."""
    if tz is None or type(tz) is dt.timezone:
        return True
    try:
        from zoneinfo import ZoneInfo
    except ImportError:  # pragma: no cover - Python >= 3.9 has it
        return False
    return type(tz) is ZoneInfo and tz.key is not None


def _encode_zone(tz: Any, out: bytearray) -> None:
    if tz is None:
        out += b"\x00"
    elif type(tz) is dt.timezone:
        args = tz.__getinitargs__()  # (offset,) or (offset, name): what pickle keeps, so the value pickles alike
        out += b"\x01" if len(args) == 1 else b"\x02"
        off = args[0]
        out += _DELTA.pack(off.days, off.seconds, off.microseconds)
        if len(args) == 2:
            raw = args[1].encode("utf-8", "surrogatepass")
            out += _U32.pack(len(raw))
            out += raw
    else:
        raw = tz.key.encode()
        out += b"\x03"
        out += _U32.pack(len(raw))
        out += raw


def _block(v: Sequence, out: bytearray, is_tuple: bool) -> bool:
    """A list (or tuple) of only str, bytes, int64 or float as one block; False if it is not one of those.

    Strings and bytes go as an Arrow array's offsets and data (built and
    read back in C, and validated in full on receipt); numbers as one
    numpy array.
    """
    t = type(v[0])
    if t is str or t is bytes:
        if len(v) < _TEXT_BLOCK or len(set(map(type, v))) != 1:  # exact types only: np.str_ must stay np.str_
            return False
        try:
            arr = pa.array(v, type=pa.large_string() if t is str else pa.large_binary())
        except (pa.ArrowException, UnicodeEncodeError):  # lone surrogates (rare) go item by item
            return False
        _, offsets, data = arr.buffers()
        out += (b"S" if t is str else b"Y") + (b"t" if is_tuple else b"l")
        out += _U32.pack(len(v))
        out += memoryview(offsets)[:8 * (len(v) + 1)]
        size = int(np.frombuffer(offsets, dtype=np.int64, count=1, offset=8 * len(v))[0])
        out += _I64.pack(size)
        out += memoryview(data)[:size] if size else b""
        return True
    if t is int or t is float:
        if len(set(map(type, v))) != 1:
            return False
        try:
            arr = np.array(v, dtype=np.int64 if t is int else np.float64)
        except OverflowError:
            return False
        out += (b"L" if t is int else b"R") + (b"t" if is_tuple else b"l")
        out += _U32.pack(len(v))
        out += arr.tobytes()
        return True
    return False


def encode(value: Any, out: bytearray, trusted: bool = False) -> None:
    """Append ``value`` in the codec's bytes to ``out``: what :func:`dumps` returns, without the copy.  O(size).

    >>> out = bytearray(b"head"); encode([1, "a"], out); decode_at(bytes(out), 4)
    ([1, 'a'], 24)
    """
    _encode(value, out, 0, trusted)


def decode_at(buf: bytes, pos: int, trusted: bool = False) -> tuple[Any, int]:
    """The value at byte ``pos`` of ``buf``, and where it ends; a :class:`WireError` for anything else.  O(size)."""
    try:
        return _decode(buf, pos, 0, trusted)
    except WireError:
        raise
    except (struct.error, ValueError, TypeError, OverflowError, UnicodeDecodeError, InvalidOperation, KeyError,
            IndexError, MemoryError, RecursionError) as e:
        raise WireError(f"a malformed value: {type(e).__name__}: {e}") from None


def need(buf: bytes, pos: int, n: int) -> int:
    """``pos + n``, checked against the bytes ``buf`` holds (a WireError if it holds fewer).  O(1).

    >>> need(b"abc", 1, 2)
    3
    """
    end = pos + n
    if n < 0 or end > len(buf):
        raise WireError(f"a value claims {n} bytes at byte {pos}, but only {len(buf) - pos} are left")
    return end


def _count(buf: bytes, pos: int, per: int = 1) -> tuple[int, int]:
    """A u32 count at ``pos`` of items of at least ``per`` bytes each, checked against the bytes left."""
    end = need(buf, pos, 4)
    (n,) = _U32.unpack_from(buf, pos)
    if n * per > len(buf) - end:
        raise WireError(f"a value claims {n} items at byte {pos}, more than the {len(buf) - end} bytes left hold")
    return n, end


def _decode(buf: bytes, pos: int, depth: int, trusted: bool) -> tuple[Any, int]:
    if pos >= len(buf):
        raise WireError("the value ends early")
    tag = buf[pos]
    pos += 1
    if tag == 0x69:  # i
        return _I64.unpack_from(buf, need(buf, pos, 8) - 8)[0], pos + 8
    if tag == 0x73:  # s
        n, pos = _count(buf, pos)
        return buf[pos:pos + n].decode("utf-8", "surrogatepass"), pos + n
    if tag == 0x4E:  # N
        return None, pos
    if tag == 0x54:  # T
        return True, pos
    if tag == 0x46:  # F
        return False, pos
    if tag == 0x64:  # d
        return _F64.unpack_from(buf, need(buf, pos, 8) - 8)[0], pos + 8
    if tag in (0x28, 0x5B, 0x7B, 0x66):  # ( [ { f
        if depth >= MAX_DEPTH:
            raise WireError(f"a value nested more than {MAX_DEPTH} deep")
        n, pos = _count(buf, pos, 2 if tag == 0x7B else 1)
        if tag == 0x7B:
            d = {}
            for _ in range(n):
                k, pos = _decode(buf, pos, depth + 1, trusted)
                d[k], pos = _decode(buf, pos, depth + 1, trusted)
            return d, pos
        items = []
        for _ in range(n):
            x, pos = _decode(buf, pos, depth + 1, trusted)
            items.append(x)
        return (tuple(items) if tag == 0x28 else items if tag == 0x5B else frozenset(items)), pos
    if tag in (0x53, 0x59, 0x4C, 0x52):  # S Y L R: blocks
        return _decode_block(buf, pos, tag)
    if tag == 0x79:  # y
        n, pos = _count(buf, pos)
        return buf[pos:pos + n], pos + n
    if tag == 0x49:  # I
        n, pos = _count(buf, pos)
        return int.from_bytes(buf[pos:pos + n], "little", signed=True), pos + n
    if tag == 0x6D:  # m
        n, pos = _count(buf, pos)
        text = buf[pos:pos + n].decode("ascii")
        return Decimal(text), pos + n
    if tag == 0x61:  # a
        end = need(buf, pos, _DATE.size)
        return dt.date(*_DATE.unpack_from(buf, pos)), end
    if tag == 0x41:  # A
        end = need(buf, pos, _DATE.size + _TIME.size)
        y, mo, d = _DATE.unpack_from(buf, pos)
        h, mi, s, us, fold = _TIME.unpack_from(buf, pos + _DATE.size)
        tz, end = _decode_zone(buf, end)
        return dt.datetime(y, mo, d, h, mi, s, us, tzinfo=tz, fold=fold), end
    if tag == 0x74:  # t
        end = need(buf, pos, _TIME.size)
        h, mi, s, us, fold = _TIME.unpack_from(buf, pos)
        tz, end = _decode_zone(buf, end)
        return dt.time(h, mi, s, us, tzinfo=tz, fold=fold), end
    if tag == 0x6C:  # l
        end = need(buf, pos, _DELTA.size)
        return dt.timedelta(*_DELTA.unpack_from(buf, pos)), end
    if tag == 0x75:  # u
        n, pos = _count(buf, pos)
        return np.str_(buf[pos:pos + n].decode("utf-8", "surrogatepass")), pos + n
    if tag == 0x78:  # x
        n, pos = _count(buf, pos)
        return np.bytes_(buf[pos:pos + n]), pos + n
    if tag == 0x6E:  # n
        end = need(buf, pos, 1)
        n = buf[pos]
        end = need(buf, end, n)
        dtype = np.dtype(buf[pos + 1:end].decode("ascii"))
        if dtype.kind not in "biufcmM" or dtype.fields is not None or dtype.subdtype is not None:
            raise WireError(f"a numpy scalar of dtype {dtype} is not one the codec sends")
        stop = need(buf, end, dtype.itemsize)
        return np.frombuffer(buf, dtype=dtype, count=1, offset=end)[0], stop
    if tag == 0x50:  # P
        if not trusted:
            raise WireError(f"a pickled value at byte {pos - 1}: pickle is refused on a network channel")
        n, pos = _count(buf, pos)
        return pickle.loads(buf[pos:pos + n]), pos + n
    raise WireError(f"unknown value tag {tag:#04x} at byte {pos - 1}")


def _decode_zone(buf: bytes, pos: int) -> tuple[Any, int]:
    end = need(buf, pos, 1)
    kind = buf[pos]
    if kind == 0:
        return None, end
    if kind in (1, 2):
        stop = need(buf, end, _DELTA.size)
        offset = dt.timedelta(*_DELTA.unpack_from(buf, end))
        if kind == 1:
            return dt.timezone(offset), stop
        n, stop = _count(buf, stop)
        return dt.timezone(offset, buf[stop:stop + n].decode("utf-8", "surrogatepass")), stop + n
    if kind == 3:
        from zoneinfo import ZoneInfo

        n, end = _count(buf, end)
        key = buf[end:end + n].decode("ascii")
        try:
            return ZoneInfo(key), end + n
        except Exception as e:  # noqa: BLE001 - an unknown or malformed key: the zone cannot be rebuilt here
            raise WireError(f"the time zone {key!r} is not known here: {type(e).__name__}: {e}") from None
    raise WireError(f"unknown time zone tag {kind}")


def _decode_block(buf: bytes, pos: int, tag: int) -> tuple[Any, int]:
    end = need(buf, pos, 1)
    shape = buf[pos]
    if shape not in (0x74, 0x6C):  # t l
        raise WireError(f"unknown block shape {shape:#04x}")
    if tag in (0x4C, 0x52):  # L R: int64 or float64 array
        n, end = _count(buf, end, 8)
        items = np.frombuffer(buf, dtype=np.int64 if tag == 0x4C else np.float64, count=n, offset=end).tolist()
        end += 8 * n
    else:  # S Y: an Arrow array's offsets and data, validated before it is read
        n, end = _count(buf, end, 8)
        offsets = need(buf, end, 8 * (n + 1))
        stop = need(buf, offsets + 8, _I64.unpack_from(buf, offsets)[0])
        arr = pa.Array.from_buffers(pa.large_string() if tag == 0x53 else pa.large_binary(), n,
                                    [None, pa.py_buffer(buf[end:offsets]), pa.py_buffer(buf[offsets + 8:stop])])
        try:
            arr.validate(full=True)
        except pa.ArrowException as e:
            raise WireError(f"a malformed block of {'strings' if tag == 0x53 else 'bytes'}: {e}") from None
        items = arr.to_pylist()
        end = stop
    return (tuple(items) if shape == 0x74 else items), end
