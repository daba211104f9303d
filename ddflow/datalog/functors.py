"""Soufflé's functors as Soufflé computes them, where Spark SQL's differ or lack: kernels of the plan IR.

Registered in the one function table (:mod:`ddflow.plan.functions`) under
``datalog_`` names, so no SQL query can call them by accident.  On
``number`` values (64-bit here):

- ``band bor bxor bnot``: two's-complement bitwise operations;
- ``bshl bshr bshru``: shifts left, right (arithmetic) and right
  (logical); the shift count is taken modulo 64, as x86 does (C leaves a
  count past the width undefined);
- ``land lor lxor lnot``: 1 where the logical operation on "not zero"
  holds, else 0;
- ``to_string`` of a float: C++'s ``std::to_string``, six places (``3.140000``);
- ``strlen`` and ``substr`` count bytes of UTF-8, as C++'s ``std::string``
  does; ``substr(s, i, n)`` is ``""`` for ``i`` outside ``0..strlen(s)``
  (Soufflé warns and gives that), the rest of ``s`` for a negative ``n``
  (a cut through a multi-byte character shows as U+FFFD);
- ``to_number`` of a symbol reads decimal, ``0x`` hexadecimal and ``0b``
  binary numbers, signed (Soufflé's documented forms); anything else, or
  a number past 64 bits, is an error at run time, never a silent 0;
- ``contains(sub, s)`` and ``match(pattern, s)`` of any arguments (a
  pattern must match all of ``s``; RE2 runs it, per distinct pattern, and
  one RE2 cannot run is an error, not a silent false);
- ``^`` of two numbers: exact, a result past 64 bits raises as ``*``
  does; a negative exponent gives what C's ``pow`` truncates to (0, or
  ±1 for a base of ±1; a base of 0 raises).  ``^`` of floats is ``pow``.

Cost: O(n) numpy per call; ``^`` of numbers O(n) in Python.

>>> from ddflow.plan.expr import Col, Lit, evaluate
>>> from ddflow.plan.functions import typed
>>> e = typed("datalog_bshru", (Col(0, "bigint"), Lit(60, "bigint")))
>>> evaluate(e, [(np.array([-1, 32]), np.array([False, False]))])[0].tolist()
[15, 0]
"""
from __future__ import annotations

import re

import numpy as np

from ddflow.errors import SchemaError
from ddflow.plan.bits import int64_kernel, int64_typer
from ddflow.plan.functions import TypeMismatch, _names, function

#: Soufflé's name of each functor -> the IR function's name.
IR_NAMES = {op: f"datalog_{op}" for op in ("band", "bor", "bxor", "bshl", "bshr", "bshru", "bnot", "land", "lor",
                                           "lxor", "lnot")}
IR_NAMES["^"] = "datalog_ipow"
IR_NAMES["to_string"] = "datalog_ftos"
for _name in ("strlen", "substr", "contains", "match", "to_number"):
    IR_NAMES[_name] = f"datalog_{_name}"


def _numbers(arity: int, name: str):
    return int64_typer(arity, name, "number")


def _count(k: np.ndarray) -> np.ndarray:
    """A shift count modulo 64."""
    return k & 63


_BINARY = {
    "band": lambda x, y: x & y,
    "bor": lambda x, y: x | y,
    "bxor": lambda x, y: x ^ y,
    "bshl": lambda x, y: x << _count(y),
    "bshr": lambda x, y: x >> _count(y),
    "bshru": lambda x, y: (x.view(np.uint64) >> _count(y).astype(np.uint64)).view(np.int64),
    "land": lambda x, y: (x != 0) & (y != 0),
    "lor": lambda x, y: (x != 0) | (y != 0),
    "lxor": lambda x, y: (x != 0) != (y != 0),
}
for _op, _fn in _BINARY.items():
    function(IR_NAMES[_op], _numbers(2, _op))(int64_kernel(_fn))
function(IR_NAMES["bnot"], _numbers(1, "bnot"))(int64_kernel(lambda x: ~x))
function(IR_NAMES["lnot"], _numbers(1, "lnot"))(int64_kernel(lambda x: x == 0))


def _ipow_one(a: int, b: int) -> int:
    if b >= 0:
        r = a ** b
        if not -(1 << 63) <= r < (1 << 63):
            raise SchemaError(f"integer overflow in ^: {a} ^ {b} does not fit in 64 bits")
        return r
    if a == 0:
        raise SchemaError(f"0 ^ {b}: zero to a negative power")
    return a if a in (1, -1) and b % 2 else 1 if a in (1, -1) else 0


@function(IR_NAMES["^"], _numbers(2, "^"))
def _ipow(args, e, n):
    (a, an), (b, bn) = args
    null = an | bn
    out = np.zeros(n, dtype=np.int64)
    for i in np.flatnonzero(~null):
        out[i] = _ipow_one(int(a[i]), int(b[i]))
    return out, null


def _ftos_typer(args):
    if len(args) != 1 or args[0].type not in ("double", "null"):
        raise TypeMismatch(f"to_string of a float, got ({_names(args)})")
    return "string"


@function(IR_NAMES["to_string"], _ftos_typer)
def _ftos(args, e, n):
    (a, an), = args
    out = np.empty(n, dtype=object)
    for i in range(n):
        out[i] = "" if an[i] else "%f" % float(a[i])
    return out, an


def _strings_typer(kinds: str, out: str, name: str):
    def typer(args):
        want = {"s": ("string", "null"), "i": ("bigint", "null")}
        if len(args) != len(kinds) or any(a.type not in want[k] for a, k in zip(args, kinds)):
            names = {"s": "symbol", "i": "number"}
            raise TypeMismatch(f"{name} takes ({', '.join(names[k] for k in kinds)}), got ({_names(args)})")
        return out
    return typer


def _rows(fn, out_dtype):
    """A kernel applying ``fn`` to each row's values (NULL where any argument is)."""
    def kernel(args, e, n):
        null = np.zeros(n, dtype=bool)
        for _, vn in args:
            null = null | vn
        out = np.empty(n, dtype=out_dtype) if out_dtype is object else np.zeros(n, dtype=out_dtype)
        for i in np.flatnonzero(~null):
            out[i] = fn(*(v[i] for v, _ in args))
        if out_dtype is object:
            out[null] = ""
        return out, null
    return kernel


def _substr(s: str, i, k) -> str:
    b = s.encode()
    i, k = int(i), int(k)
    if not 0 <= i <= len(b):
        return ""
    return (b[i:] if k < 0 else b[i:i + k]).decode(errors="replace")


function(IR_NAMES["strlen"], _strings_typer("s", "bigint", "strlen"))(_rows(lambda s: len(s.encode()), np.int64))
function(IR_NAMES["substr"], _strings_typer("sii", "string", "substr"))(_rows(_substr, object))
function(IR_NAMES["contains"], _strings_typer("ss", "boolean", "contains"))(_rows(lambda sub, s: sub in s, bool))


@function(IR_NAMES["match"], _strings_typer("ss", "boolean", "match"))
def _match(args, e, n):
    """``match(pattern, s)``: each distinct pattern run once by RE2 over its rows, anchored at both ends."""
    import pyarrow as pa
    import pyarrow.compute as pc
    (p, pn), (s, sn) = args
    null = pn | sn
    out = np.zeros(n, dtype=bool)
    rows = np.flatnonzero(~null)
    by_pattern: dict[str, list[int]] = {}
    for i in rows:
        by_pattern.setdefault(p[i], []).append(i)
    for pat, idx in by_pattern.items():
        try:
            hit = pc.match_substring_regex(pa.array([s[i] for i in idx], type=pa.string()), f"^(?:{pat})$")
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
            raise SchemaError(f"match: the pattern {pat!r} is not one RE2 runs ({err})") from None
        out[idx] = hit.to_numpy(zero_copy_only=False)
    return out, null


_NUMBER_TEXT = re.compile(r"\s*([+-]?)(0[xX][0-9a-fA-F]+|0[bB][01]+|[0-9]+)\s*")


def _to_number(s: str) -> int:
    m = _NUMBER_TEXT.fullmatch(s)
    if m is None:
        raise SchemaError(f"to_number: {s!r} is not a number")
    digits = m.group(2)
    base = 16 if digits[1:2] in ("x", "X") else 2 if digits[1:2] in ("b", "B") else 10
    v = int(digits[2:] if base != 10 else digits, base) * (-1 if m.group(1) == "-" else 1)
    if not -(1 << 63) <= v < (1 << 63):
        raise SchemaError(f"to_number: {s!r} does not fit in 64 bits")
    return v


function(IR_NAMES["to_number"], _strings_typer("s", "bigint", "to_number"))(_rows(_to_number, np.int64))
