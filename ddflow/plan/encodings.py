"""Spark's hashes and encodings of a string: ``md5``, ``sha1``, ``sha2``, ``crc32``, ``hex``, ``bin``, ``base64``,
``soundex`` and ``luhn_check``, each of the string's UTF-8 bytes as Spark casts a string to binary; and ``conv``,
a number's digits from one base to another.

Registered in the one function table by :mod:`ddflow.plan.strings`'s helpers; NULL in, NULL out.  Cost: O(total
characters) per call, one Python pass over the column's strings (hashlib and zlib do the bytes).

>>> import numpy as np
>>> from ddflow.plan.expr import Col, evaluate
>>> from ddflow.plan.functions import typed
>>> e = typed("soundex", (Col(0, "string"),))
>>> evaluate(e, [(np.array(["Robert", "Tymczak", None], dtype=object), np.array([False, False, True]))])[0].tolist()
['R163', 'T522', None]
"""
from __future__ import annotations

import base64
import hashlib
import zlib

from ddflow.errors import SchemaError
from ddflow.plan.functions import TypeMismatch, _names, function
from ddflow.plan.strings import _reg, _rowwise


# -- hashes and encodings (of a string's UTF-8 bytes, as Spark casts a string to binary) -------------------------

def _utf8(s: str) -> bytes:
    return s.encode("utf-8", "surrogatepass")


_reg("md5", "s", "string")(lambda s: hashlib.md5(_utf8(s)).hexdigest())
_reg("sha1", "s", "string")(lambda s: hashlib.sha1(_utf8(s)).hexdigest())
_reg("crc32", "s", "bigint")(lambda s: zlib.crc32(_utf8(s)))


@_reg("sha2", "si", "string", constant=(1,))
def _sha2(s: str, bits: int) -> str | None:
    """SHA-224/256/384/512 as hex (0 is 256); another length gives NULL, as in Spark."""
    algo = {0: "sha256", 224: "sha224", 256: "sha256", 384: "sha384", 512: "sha512"}.get(bits)
    return None if algo is None else hashlib.new(algo, _utf8(s)).hexdigest()


def _hex_typer(args):
    if len(args) != 1 or args[0].type not in ("string", "bigint", "null"):
        raise TypeMismatch(f"hex takes a string or a bigint, got ({_names(args)})")
    return "string"


@function("hex", _hex_typer)
def _hex(args, e, n):
    """A bigint's two's complement in upper-case hex (no leading zeros), or a string's UTF-8 bytes."""
    if e.args[0].type == "string":
        return _rowwise(lambda s: _utf8(s).hex().upper(), "string")(args, e, n)
    return _rowwise(lambda k: format(k & 0xFFFFFFFFFFFFFFFF, "X"), "string")(args, e, n)


_reg("bin", "i", "string", int32=False)(lambda k: format(k & 0xFFFFFFFFFFFFFFFF, "b"))


@_reg("base64", "s", "string")
def _base64(s: str) -> str:
    """Spark's base64 (``spark.sql.chunkBase64String.enabled``, on by default): Java's MIME encoder, lines of 76
    characters joined by CRLF, padded, no line end after the last."""
    text = base64.b64encode(_utf8(s)).decode("ascii")
    return "\r\n".join(text[i:i + 76] for i in range(0, len(text), 76))


#: Soundex's digit of each of A..Z ('7': H and W, skipped without ending a run; '0': a vowel, which ends one).
_SOUNDEX = dict(zip("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "01230127022455012623017202"))


@_reg("soundex", "s", "string")
def _soundex(s: str) -> str:
    """Spark's UTF8String.soundex: the first letter and three digits; a string that does not begin with an ASCII
    letter is itself; characters other than ASCII letters end a run of one digit."""
    if not s or s[0].upper() not in _SOUNDEX or not s[0].isascii():
        return s
    first = s[0].upper()
    out, last = [first], _SOUNDEX[first]
    for ch in s[1:]:
        c = ch.upper() if ch.isascii() else ""
        if c not in _SOUNDEX or not c:
            last = "0"
            continue
        code = _SOUNDEX[c]
        if code == "7":
            continue
        if code != "0" and code != last:
            out.append(code)
            if len(out) == 4:
                break
        last = code
    return "".join(out).ljust(4, "0")


@_reg("luhn_check", "s", "boolean")
def _luhn_check(s: str) -> bool:
    """Spark's luhn_check: a non-empty string of ASCII digits whose Luhn checksum is 0 (anything else, false)."""
    if not s or not all("0" <= c <= "9" for c in s):
        return False
    total = 0
    for i, c in enumerate(reversed(s)):
        d = int(c) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


_U64 = 1 << 64
_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@_reg("conv", "sii", "string")
def _conv(text: str, from_base: int, to_base: int) -> str | None:
    """Spark's conv(num, from_base, to_base): the digits of ``num`` (spaces trimmed, a leading ``-``, read up to
    the first character that is not a digit of ``from_base``) as an unsigned 64-bit number, written in
    ``to_base`` (upper case); a negative ``to_base`` writes it signed, Spark's NumberConverter's way (``-0``
    included).  NULL for a base outside 2..36 or an empty text; past 64 bits raises, as Spark's ANSI mode does
    (ARITHMETIC_OVERFLOW)."""
    if not (2 <= from_base <= 36 and 2 <= abs(to_base) <= 36):
        return None
    text = text.strip(" ")
    if not text:
        return None
    negative = text.startswith("-")
    v = 0
    for ch in text[1:] if negative else text:
        d = _DIGITS.find(ch.upper()) if ch.isascii() else -1
        if not 0 <= d < from_base:
            break
        v = v * from_base + d
        if v >= _U64:
            raise SchemaError(f"conv({text!r}, {from_base}, {to_base}): the number is past 64 bits (Spark's "
                              "ARITHMETIC_OVERFLOW)")
    if to_base > 0:  # unsigned: a negative number is its two's complement; one past int64's magnitude, all ones
        sign = ""
        if negative:
            v = _U64 - 1 if v >= _U64 >> 1 else -v % _U64
    else:  # signed: the magnitude read as an int64, behind a sign that a '-' in the text keeps (even "-0")
        sign = "-" if negative else ""
        if v >= _U64 >> 1:
            v, sign = _U64 - v, "-"
    base, out = abs(to_base), []
    while True:
        v, d = divmod(v, base)
        out.append(_DIGITS[d])
        if not v:
            break
    return sign + "".join(reversed(out))


__all__: list[str] = []
