"""What crosses a socket between ddflow's processes: frames whose decoding cannot run code.

A frame is a 12-byte prefix (total length, header length), a binary
header and the arrays' bytes as they are in memory.  The header is laid
out field by field, never pickled:

    b"D\\x01"  kind (u8 length, ASCII)  batches (u16)
    per batch: arity (u16), time depth (u16), rows (u64), one kind letter per field,
               one dtype code per array (the fields', the times', the diffs')
    meta        (the value codec below)
    values      (u32 count; that many int64 codes, then the values: the codec's sequence)
    zero padding to a multiple of 8, so the arrays that follow are aligned

so a receiver learns every array's size from the header, checks that they
add up to the frame's length, and views each array on the frame without
copying.  Nothing in a frame names a type to construct or a function to
call: a forged frame can be refused, never obeyed.

The value codec (:func:`dumps`, :func:`loads`) carries ``meta`` (small
command arguments, statistics, dead letters) and the interned object
values that travel beside their codes: a one-byte tag, then the value.  It
knows None, bool, int of any size, float, str, bytes, tuple, list, dict,
frozenset, Decimal, date, datetime, time, timedelta (with ``timezone`` or
``zoneinfo.ZoneInfo`` zones) and numpy scalars, each decoded to the same
type it was: a numpy ``int64(5)`` stays a numpy scalar, because in an
object column it is a different value from the int 5 (its content code,
:func:`ddflow.base.interner.content_code`, differs), and turning one into
the other would split a key.  Lists of strings, bytes, ints or floats go
as one block (lengths or a numpy array), so a batch's new strings cost one
join and one decode, not a tag each.

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

from ddflow.base.kinds import KINDS
from ddflow.base.updates import Updates
from ddflow.errors import DataflowError, SchemaError

#: The frame prefix: total length (this prefix included) and the header's length.
PREFIX = struct.Struct("<QI")
#: How deep lists, tuples and dicts may nest in a value (a deeper one is refused, at send and on receipt).
MAX_DEPTH = 64
#: The types :func:`dumps` takes over a network channel, as an error names them.
SAFE_TYPES = ("None, bool, int, float, str, bytes, tuple, list, dict, frozenset, decimal.Decimal, datetime.date, "
              "datetime.datetime, datetime.time, datetime.timedelta (zones: datetime.timezone, zoneinfo.ZoneInfo) "
              "and numpy scalars")

_MAGIC = b"D\x01"
_U8, _U16, _U32, _I64, _F64 = (struct.Struct(f) for f in ("<B", "<H", "<I", "<q", "<d"))
_BATCH = struct.Struct("<HHQ")
_DATE = struct.Struct("<HBB")
_TIME = struct.Struct("<BBBIB")  # hour, minute, second, microsecond, fold
_DELTA = struct.Struct("<iii")
#: Array dtypes a frame may carry, by their one-byte code.
_DTYPES = [np.dtype(s) for s in ("<i8", "<f8", "|b1", "<u8", "<i4", "<u4", "<f4", "<i2", "<u2", "|i1", "|u1")]
_DTYPE_CODE = {d: i for i, d in enumerate(_DTYPES)}
_KIND_BYTES = frozenset(k.encode() for k in KINDS)
#: A list this long or longer of one plain type goes as a block.
_BLOCK = 8
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


class WireError(DataflowError, ValueError):
    """A frame or value that is not what ddflow sends: malformed, too deep, or of a kind this channel refuses."""


class Message:
    """One frame's content: a kind, a small ``meta`` value and a list of columnar batches."""

    __slots__ = ("kind", "meta", "batches")

    def __init__(self, kind: str, meta: Any = None, batches: list[Updates] | None = None):
        self.kind = kind
        self.meta = meta
        self.batches = batches or []

    def __repr__(self) -> str:
        return f"<Message {self.kind} {self.meta!r} {[len(b) for b in self.batches]}>"


# -- the value codec ----------------------------------------------------------------------------------------
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
    ddflow.workers.wire.WireError: unknown value tag 0x80 at byte 0
    """
    buf = bytes(data)
    value, pos = _decode_checked(buf, 0, trusted)
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
            _other(v, out, trusted)
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
            _other(v, out, trusted)
            return
        out += b"t"
        out += _TIME.pack(v.hour, v.minute, v.second, v.microsecond, v.fold)
        _encode_zone(v.tzinfo, out)
    elif t is dt.timedelta:
        out += b"l"
        out += _DELTA.pack(v.days, v.seconds, v.microseconds)
    elif t is np.str_:
        raw = str(v).encode("utf-8", "surrogatepass")
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
        for x in v:
            if type(x) is not t:
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
        for x in v:
            if type(x) is not t:
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


def _decode_checked(buf: bytes, pos: int, trusted: bool) -> tuple[Any, int]:
    try:
        return _decode(buf, pos, 0, trusted)
    except WireError:
        raise
    except (struct.error, ValueError, TypeError, OverflowError, UnicodeDecodeError, InvalidOperation, KeyError,
            IndexError, MemoryError, RecursionError) as e:
        raise WireError(f"a malformed value: {type(e).__name__}: {e}") from None


def _need(buf: bytes, pos: int, n: int) -> int:
    end = pos + n
    if n < 0 or end > len(buf):
        raise WireError(f"a value claims {n} bytes at byte {pos}, but only {len(buf) - pos} are left")
    return end


def _count(buf: bytes, pos: int, per: int = 1) -> tuple[int, int]:
    """A u32 count at ``pos`` of items of at least ``per`` bytes each, checked against the bytes left."""
    end = _need(buf, pos, 4)
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
        return _I64.unpack_from(buf, _need(buf, pos, 8) - 8)[0], pos + 8
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
        return _F64.unpack_from(buf, _need(buf, pos, 8) - 8)[0], pos + 8
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
        end = _need(buf, pos, _DATE.size)
        return dt.date(*_DATE.unpack_from(buf, pos)), end
    if tag == 0x41:  # A
        end = _need(buf, pos, _DATE.size + _TIME.size)
        y, mo, d = _DATE.unpack_from(buf, pos)
        h, mi, s, us, fold = _TIME.unpack_from(buf, pos + _DATE.size)
        tz, end = _decode_zone(buf, end)
        return dt.datetime(y, mo, d, h, mi, s, us, tzinfo=tz, fold=fold), end
    if tag == 0x74:  # t
        end = _need(buf, pos, _TIME.size)
        h, mi, s, us, fold = _TIME.unpack_from(buf, pos)
        tz, end = _decode_zone(buf, end)
        return dt.time(h, mi, s, us, tzinfo=tz, fold=fold), end
    if tag == 0x6C:  # l
        end = _need(buf, pos, _DELTA.size)
        return dt.timedelta(*_DELTA.unpack_from(buf, pos)), end
    if tag == 0x75:  # u
        n, pos = _count(buf, pos)
        return np.str_(buf[pos:pos + n].decode("utf-8", "surrogatepass")), pos + n
    if tag == 0x78:  # x
        n, pos = _count(buf, pos)
        return np.bytes_(buf[pos:pos + n]), pos + n
    if tag == 0x6E:  # n
        end = _need(buf, pos, 1)
        n = buf[pos]
        end = _need(buf, end, n)
        dtype = np.dtype(buf[pos + 1:end].decode("ascii"))
        if dtype.kind not in "biufcmM" or dtype.fields is not None or dtype.subdtype is not None:
            raise WireError(f"a numpy scalar of dtype {dtype} is not one the codec sends")
        stop = _need(buf, end, dtype.itemsize)
        return np.frombuffer(buf, dtype=dtype, count=1, offset=end)[0], stop
    if tag == 0x50:  # P
        if not trusted:
            raise WireError(f"a pickled value at byte {pos - 1}: pickle is refused on a network channel")
        n, pos = _count(buf, pos)
        return pickle.loads(buf[pos:pos + n]), pos + n
    raise WireError(f"unknown value tag {tag:#04x} at byte {pos - 1}")


def _decode_zone(buf: bytes, pos: int) -> tuple[Any, int]:
    end = _need(buf, pos, 1)
    kind = buf[pos]
    if kind == 0:
        return None, end
    if kind in (1, 2):
        stop = _need(buf, end, _DELTA.size)
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
    end = _need(buf, pos, 1)
    shape = buf[pos]
    if shape not in (0x74, 0x6C):  # t l
        raise WireError(f"unknown block shape {shape:#04x}")
    if tag in (0x4C, 0x52):  # L R: int64 or float64 array
        n, end = _count(buf, end, 8)
        items = np.frombuffer(buf, dtype=np.int64 if tag == 0x4C else np.float64, count=n, offset=end).tolist()
        end += 8 * n
    else:  # S Y: an Arrow array's offsets and data, validated before it is read
        n, end = _count(buf, end, 8)
        offsets = _need(buf, end, 8 * (n + 1))
        stop = _need(buf, offsets + 8, _I64.unpack_from(buf, offsets)[0])
        arr = pa.Array.from_buffers(pa.large_string() if tag == 0x53 else pa.large_binary(), n,
                                    [None, pa.py_buffer(buf[end:offsets]), pa.py_buffer(buf[offsets + 8:stop])])
        try:
            arr.validate(full=True)
        except pa.ArrowException as e:
            raise WireError(f"a malformed block of {'strings' if tag == 0x53 else 'bytes'}: {e}") from None
        items = arr.to_pylist()
        end = stop
    return (tuple(items) if shape == 0x74 else items), end


# -- frames --------------------------------------------------------------------------------------------------
def encode_frame(msg: Message, values: tuple[list[int], list[Any]] | None, trusted: bool = False
                 ) -> tuple[bytes, list[np.ndarray], int]:
    """The frame of ``msg`` with ``values`` (codes, values) beside it: (prefix and header, arrays, total bytes).

    The arrays are the batches' columns, times and diffs, contiguous, to
    be written after the header as they are.  Raises a SchemaError for a
    value a network channel refuses (``trusted=False``).  Cost: O(batches
    + size of meta and values); the arrays are not copied (unless not
    contiguous).

    >>> from ddflow.base.interner import Interner
    >>> from ddflow.base.updates import from_rows
    >>> u = from_rows([(1, 2.5)], 0, 1, Interner())
    >>> head, arrays, total = encode_frame(Message("x", (3, 4), [u]), None)
    >>> frame = bytearray(head + b"".join(a.tobytes() for a in arrays)); len(frame) == total
    True
    >>> m, values = decode_frame(frame); m.kind, m.meta, m.batches[0].to_rows(Interner())
    ('x', (3, 4), [((1, 2.5), 0, 1)])
    """
    kind = msg.kind.encode("ascii")
    head = bytearray(PREFIX.size)
    head += _MAGIC
    head += _U8.pack(len(kind))
    head += kind
    head += _U16.pack(len(msg.batches))
    arrays: list[np.ndarray] = []
    for u in msg.batches:
        n, depth = len(u.diffs), u.times.shape[1]
        head += _BATCH.pack(len(u.kinds), depth, n)
        head += "".join(u.kinds).encode("ascii")
        for a in (*u.cols, u.times, u.diffs):
            a = np.ascontiguousarray(a)
            code = _DTYPE_CODE.get(a.dtype)
            if code is None:
                raise SchemaError(f"an array of dtype {a.dtype} cannot cross a channel")
            head.append(code)
            arrays.append(a)
    _encode(msg.meta, head, 0, trusted)
    if values is None:
        head += b"\x00\x00\x00\x00"
    else:
        codes, vals = values
        head += _U32.pack(len(codes))
        head += np.asarray(codes, dtype=np.int64).tobytes()
        _encode(list(vals), head, 0, trusted)
    head += bytes(-len(head) % 8)
    total = len(head) + sum(a.nbytes for a in arrays)
    PREFIX.pack_into(head, 0, total, len(head) - PREFIX.size)
    return bytes(head), arrays, total


def frame_header(frame: bytearray | bytes, trusted: bool = False) -> tuple[str, Any]:
    """The kind and meta of a whole frame, checking its layout but building no arrays (what a listener looks at)."""
    kind, meta, _, _, _ = _parse(frame, trusted, with_values=False)
    return kind, meta


def decode_frame(frame: bytearray, trusted: bool = False) -> tuple[Message, tuple[list[int], list[Any]] | None]:
    """The message in one whole frame (arrays are views on ``frame``) and the values it carries beside codes.

    Raises :class:`WireError` naming what is wrong for anything
    :func:`encode_frame` did not write.  Cost: O(batches + meta and
    values), no copy of the arrays.
    """
    kind, meta, layout, values, pos = _parse(frame, trusted)
    batches = []
    for kinds, depth, n, dtypes in layout:
        arrs = []
        for i, dtype in enumerate(dtypes):
            count = n * depth if i == len(dtypes) - 2 else n
            arrs.append(np.frombuffer(frame, dtype=dtype, count=count, offset=pos) if count
                        else np.zeros(0, dtype=dtype))
            pos += count * dtype.itemsize
        times = arrs[-2].reshape(n, depth)
        batches.append(Updates(tuple(arrs[:-2]), times, arrs[-1], kinds))
    return Message(kind, meta, batches), values


def _parse(frame: bytearray | bytes, trusted: bool, with_values: bool = True):
    """Every field of a frame's header, checked against the frame's length: (kind, meta, layout, values, offset).

    ``with_values=False`` stops after the meta: the values are neither read nor checked.
    """
    if len(frame) < PREFIX.size:
        raise WireError(f"a frame of {len(frame)} bytes, shorter than its prefix")
    total, hlen = PREFIX.unpack_from(frame)
    if total != len(frame) or PREFIX.size + hlen > total:
        raise WireError(f"a frame of {len(frame)} bytes whose prefix says {total} bytes with a {hlen}-byte header")
    head = bytes(memoryview(frame)[PREFIX.size:PREFIX.size + hlen])
    try:
        if head[:2] != _MAGIC:
            raise WireError("not a ddflow frame (its header does not start with ddflow's mark)")
        pos = 2
        n = head[pos]
        kind = head[pos + 1:pos + 1 + n].decode("ascii")
        pos += 1 + n
        (nb,) = _U16.unpack_from(head, pos)
        pos += 2
        layout = []
        size = 0
        for _ in range(nb):
            arity, depth, rows = _BATCH.unpack_from(head, pos)
            pos += _BATCH.size
            kinds = head[pos:pos + arity]
            if len(kinds) != arity or not all(bytes((k,)) in _KIND_BYTES for k in kinds):
                raise WireError(f"a batch whose column kinds {kinds!r} are not ddflow's")
            pos += arity
            codes = head[pos:pos + arity + 2]
            if len(codes) != arity + 2 or max(codes) >= len(_DTYPES):
                raise WireError("a batch with an unknown array dtype")
            pos += arity + 2
            dtypes = [_DTYPES[c] for c in codes]
            if dtypes[-1] != np.int64 or dtypes[-2] != np.int64:
                raise WireError("a batch whose times or diffs are not int64")
            size += rows * (sum(d.itemsize for d in dtypes[:-2]) + 8 * depth + 8)
            layout.append((tuple(kinds.decode()), depth, rows, dtypes))
        meta, pos = _decode_checked(head, pos, trusted)
        if not with_values:
            pos, nv = len(head), 0
        else:
            (nv,) = _U32.unpack_from(head, pos)
            pos += 4
        values = None
        if nv:
            end = _need(head, pos, 8 * nv)
            codes = np.frombuffer(head, dtype=np.int64, count=nv, offset=pos).tolist()
            vals, pos = _decode_checked(head, end, trusted)
            if type(vals) is not list or len(vals) != nv:
                raise WireError(f"{nv} codes but {len(vals) if type(vals) is list else 'no list of'} values")
            values = (codes, vals)
        if head[pos:].strip(b"\x00") or len(head) - pos > 7:
            raise WireError(f"{len(head) - pos} bytes after the header's fields")
    except (struct.error, IndexError, UnicodeDecodeError, ValueError) as e:
        if isinstance(e, WireError):
            raise
        raise WireError(f"a malformed frame header: {type(e).__name__}: {e}") from None
    if PREFIX.size + hlen + size != total:
        raise WireError(f"a frame of {total} bytes whose header describes {PREFIX.size + hlen + size}")
    return kind, meta, layout, values, PREFIX.size + hlen
