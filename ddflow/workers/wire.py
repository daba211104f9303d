"""What crosses a socket between ddflow's processes: frames whose decoding cannot run code.

A frame is a 12-byte prefix (total length, header length), a binary
header and the arrays' bytes as they are in memory.  The header is laid
out field by field, never pickled:

    b"D\\x01"  kind (u8 length, ASCII)  batches (u16)
    per batch: arity (u16), time depth (u16), rows (u64), one kind letter per field,
               one dtype code per array (the fields', the times', the diffs')
    meta        (:mod:`ddflow.workers.codec`)
    values      (u32 count; that many int64 codes, then the values: a list, in the codec)
    zero padding to a multiple of 8, so the arrays that follow are aligned

so a receiver learns every array's size from the header, checks that they
add up to the frame's length, and views each array on the frame without
copying.  Nothing in a frame names a type to construct or a function to
call: a forged frame can be refused, never obeyed.  Anything that is not
a frame :func:`encode_frame` wrote is a :class:`WireError` naming what is
wrong.
"""
from __future__ import annotations

import struct
from typing import Any

import numpy as np

from ddflow.base.kinds import KINDS
from ddflow.base.updates import Updates
from ddflow.errors import SchemaError
from ddflow.workers.codec import WireError, decode_at, encode, need

__all__ = ["PREFIX", "Message", "WireError", "decode_frame", "encode_frame", "frame_header"]

#: The frame prefix: total length (this prefix included) and the header's length.
PREFIX = struct.Struct("<QI")

_MAGIC = b"D\x01"
_U8, _U16, _U32 = (struct.Struct(f) for f in ("<B", "<H", "<I"))
_BATCH = struct.Struct("<HHQ")
#: Array dtypes a frame may carry, by their one-byte code.
_DTYPES = [np.dtype(s) for s in ("<i8", "<f8", "|b1", "<u8", "<i4", "<u4", "<f4", "<i2", "<u2", "|i1", "|u1")]
_DTYPE_CODE = {d: i for i, d in enumerate(_DTYPES)}
_KIND_BYTES = frozenset(k.encode() for k in KINDS)


class Message:
    """One frame's content: a kind, a small ``meta`` value and a list of columnar batches."""

    __slots__ = ("kind", "meta", "batches")

    def __init__(self, kind: str, meta: Any = None, batches: list[Updates] | None = None):
        self.kind = kind
        self.meta = meta
        self.batches = batches or []

    def __repr__(self) -> str:
        return f"<Message {self.kind} {self.meta!r} {[len(b) for b in self.batches]}>"


def encode_frame(msg: Message, values: tuple[list[int], list[Any]] | None, trusted: bool = False
                 ) -> tuple[bytearray, list[np.ndarray], int]:
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
    encode(msg.meta, head, trusted)
    if values is None:
        head += b"\x00\x00\x00\x00"
    else:
        codes, vals = values
        head += _U32.pack(len(codes))
        head += np.asarray(codes, dtype=np.int64).tobytes()
        encode(list(vals), head, trusted)
    head += bytes(-len(head) % 8)
    total = len(head) + sum(a.nbytes for a in arrays)
    PREFIX.pack_into(head, 0, total, len(head) - PREFIX.size)
    return head, arrays, total


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
        meta, pos = decode_at(head, pos, trusted)
        if not with_values:
            pos, nv = len(head), 0
        else:
            (nv,) = _U32.unpack_from(head, pos)
            pos += 4
        values = None
        if nv:
            end = need(head, pos, 8 * nv)
            codes = np.frombuffer(head, dtype=np.int64, count=nv, offset=pos).tolist()
            vals, pos = decode_at(head, end, trusted)
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
