"""Spark's math functions: pmod, round, bround, ceil/floor, logarithms, exp, pow, sqrt, cbrt, sign, trigonometry
(sin ... atanh, cot, sec, csc, atan2, hypot, degrees, radians), e(), pi(), isnan, nanvl, positive and negative, with
Spark 4's NULL, NaN and domain rules (ANSI mode).

Registered in the one function table (:mod:`ddflow.plan.functions`).  Spark's rules, which differ from C's and
numpy's in places:

- a logarithm of a number <= 0 (or to a base <= 0) is NULL, not NaN or an error; ``sqrt(-1)`` is NaN;
- ``pow(1, NaN)`` and ``pow(-1, ±Infinity)`` are NaN (Java's ``Math.pow``), not 1;
- ``ceil`` / ``floor`` of a double is a bigint: NaN gives 0, a value past bigint raises (ARITHMETIC_OVERFLOW);
  of a DECIMAL(p, s), a DECIMAL(p - s + 1, 0);
- ``round`` rounds HALF_UP and ``bround`` HALF_EVEN the decimal digits of a double's shortest repr
  (``round(2.675, 2)`` is 2.68, ``bround(0.125, 2)`` is 0.12), never give -0.0, and raise when a bigint or
  decimal result overflows;
- ``sign`` of anything is a double (``sign(-0.0)`` is -0.0);
- ``pmod`` by zero raises, as ``%`` does;
- ``isnan(NULL)`` is false, not NULL; ``atan2`` reads -0.0 as 0.0 (Spark adds 0.0 to both arguments).

Cost: O(n) numpy operations per call; round and bround of doubles and of decimals past int64 work row by row in Python.

>>> from ddflow.plan.expr import Col, Lit, evaluate
>>> from ddflow.plan.functions import typed
>>> e = typed("pmod", (Col(0, "bigint"), Lit(3, "bigint")))
>>> evaluate(e, [(np.array([-7, 7]), np.array([False, False]))])[0].tolist()
[2, 1]
"""
from __future__ import annotations

import decimal
import math

import numpy as np

from ddflow.base.schema import decimal_ps, decimal_type, from_unscaled, is_decimal
from ddflow.errors import SchemaError
from ddflow.plan.expr import KERNELS, Call, Lit, filled, unscaled
from ddflow.plan.functions import (TypeMismatch, _names, arithmetic_type, as_decimal, decimal_to_float, fitted,
                                   function, numeric)

_2_63 = 2.0 ** 63


def _doubles(vals: np.ndarray, typ: str) -> np.ndarray:
    return decimal_to_float(vals, typ) if is_decimal(typ) else np.asarray(vals, dtype=np.float64)


def _to_double_typer(arity: int, name: str):
    def typer(args):
        if len(args) != arity or any(not numeric(a.type) for a in args):
            raise TypeMismatch(f"{name} takes {arity} number(s), got ({_names(args)})")
        return "double"
    return typer


def _double_kernel(fn, domain=None):
    """A kernel of doubles: ``fn`` of the arguments as doubles; NULL where ``domain`` (of them) is False."""
    def kernel(args, e, n):
        null = np.zeros(n, dtype=bool)
        xs = []
        for (v, vn), x in zip(args, e.args):
            null |= vn
            xs.append(_doubles(v, x.type))
        with np.errstate(all="ignore"):
            if domain is not None:
                null = null | ~domain(*xs)
            out = fn(*xs)
        return filled(np.asarray(out, dtype=np.float64), null, "double"), null
    return kernel


def _pow(x, y):
    out = np.power(x, y)
    return np.where(np.isnan(y) | ((np.abs(x) == 1) & np.isinf(y)), np.nan, out)  # Java's Math.pow


def _sign(x):
    return np.where((x == 0) | np.isnan(x), x, np.sign(x))


_LN2 = np.log(2.0)
function("ln", _to_double_typer(1, "ln"))(_double_kernel(np.log, lambda x: ~(x <= 0)))
function("log10", _to_double_typer(1, "log10"))(_double_kernel(np.log10, lambda x: ~(x <= 0)))
function("log2", _to_double_typer(1, "log2"))(_double_kernel(lambda x: np.log(x) / _LN2, lambda x: ~(x <= 0)))
function("log", _to_double_typer(2, "log"))(  # log(base, x)
    _double_kernel(lambda b, x: np.log(x) / np.log(b), lambda b, x: ~((b <= 0) | (x <= 0))))
function("exp", _to_double_typer(1, "exp"))(_double_kernel(np.exp))
function("pow", _to_double_typer(2, "pow"))(_double_kernel(_pow))
function("sqrt", _to_double_typer(1, "sqrt"))(_double_kernel(np.sqrt))
function("cbrt", _to_double_typer(1, "cbrt"))(_double_kernel(np.cbrt))
function("sign", _to_double_typer(1, "sign"))(_double_kernel(_sign))


# -- pmod ---------------------------------------------------------------------------------------------------

@function("pmod", lambda args: arithmetic_type("%", *args))
def _pmod(args, e, n):
    """Spark's pmod: ``r = a % b``; ``(r + b) % b`` where r < 0 (so the sign of b where r is negative)."""
    r, null = KERNELS["%"](args, Call("%", e.args, e.type), n)  # by zero raises, as Spark's ANSI mode does
    (_, _), (b, _) = args
    neg = ~null & (r < 0)
    if not neg.any():
        return r, null
    y = e.args[1]
    if e.type == "double":
        bd = _doubles(b, y.type)
        return np.where(neg, np.fmod(r + bd, bd), r), null
    s = decimal_ps(e.type)[1] if is_decimal(e.type) else 0
    bs = as_decimal(unscaled(np.where(null, 1, b)), y.type, s) if is_decimal(e.type) else np.asarray(b, dtype=np.int64)
    out = np.array(r, dtype=object)
    for i in np.flatnonzero(neg).tolist():
        t, m = int(r[i]) + int(bs[i]), int(bs[i])
        if e.type == "bigint":
            t = (t + (1 << 63)) % (1 << 64) - (1 << 63)  # Java's long addition wraps
        q = abs(t) % abs(m)
        out[i] = q if t >= 0 else -q
    if e.type == "bigint":
        return out.astype(np.int64), null
    return fitted(out, ~null, e.type, "pmod"), null


# -- ceil, floor ----------------------------------------------------------------------------------------------

def _ceil_floor_typer(name: str):
    def typer(args):
        if len(args) != 1 or not numeric(args[0].type):
            raise TypeMismatch(f"{name} takes a number, got ({_names(args)})")
        ps = decimal_ps(args[0].type)
        if ps is not None:
            return decimal_type(min(ps[0] - ps[1] + 1, 38), 0)
        return "bigint"
    return typer


def _ceil_floor(up: bool):
    def kernel(args, e, n):
        (a, an), = args
        t = e.args[0].type
        if t in ("bigint", "null"):
            return filled(np.asarray(a, dtype=np.int64), an, "bigint"), an
        if is_decimal(t):
            s = decimal_ps(t)[1]
            v = unscaled(np.where(an, 0, a))
            d = 10 ** s
            q = -((-v) // d) if up else v // d
            return fitted(q, ~an, e.type, "ceil" if up else "floor"), an
        with np.errstate(all="ignore"):
            f = np.ceil(a) if up else np.floor(a)
        f = np.where(an | np.isnan(f), 0.0, f)  # Spark: ceil(NaN) is 0
        if ((f >= _2_63) | (f < -_2_63)).any():
            raise SchemaError(f"{'ceil' if up else 'floor'}: a result past bigint (ARITHMETIC_OVERFLOW in Spark)")
        return f.astype(np.int64), an
    return kernel


function("ceil", _ceil_floor_typer("ceil"))(_ceil_floor(True))
function("floor", _ceil_floor_typer("floor"))(_ceil_floor(False))


# -- round and bround ----------------------------------------------------------------------------------------

def _rounding_typer(name: str):
    def typer(args):
        if len(args) != 2 or not numeric(args[0].type) or not isinstance(args[1], Lit) or args[1].type != "bigint":
            raise TypeMismatch(f"{name}(number, a constant bigint scale), got ({_names(args)})")
        t, d = args[0].type, args[1].value
        ps = decimal_ps(t)
        if ps is None:
            return "bigint" if t in ("bigint", "null") else "double"
        p, s = ps
        if d < 0:
            return decimal_type(min(max(p - s + 1, -d + 1), 38), 0)
        return decimal_type(min(p - s + 1 + min(s, d), 38), min(s, d))
    return typer


def _half_even(v: int, k: int) -> int:
    """``v / 10**k`` rounded HALF_EVEN (k >= 0), exact."""
    if k <= 0:
        return v * 10 ** (-k)
    d = 10 ** k
    q, r = divmod(abs(v), d)
    if 2 * r > d or (2 * r == d and q % 2):
        q += 1
    return q if v >= 0 else -q


def _half_up(v: int, k: int) -> int:
    """``v / 10**k`` rounded HALF_UP, away from zero on a tie (k >= 0), exact."""
    if k <= 0:
        return v * 10 ** (-k)
    d = 10 ** k
    q, r = divmod(abs(v), d)
    if 2 * r >= d:
        q += 1
    return q if v >= 0 else -q


def _rounding(name: str, exact, mode: str):
    """``name(x, d)``: x rounded to ``d`` places (``d`` < 0: to tens, hundreds ...) by ``exact`` on integers and
    ``mode`` on a double's shortest repr; Spark's types and overflow rule."""
    def kernel(args, e, n):
        (a, an), _ = args
        t, d = e.args[0].type, e.args[1].value
        live = np.flatnonzero(~an).tolist()
        if e.type == "double":
            out = np.asarray(a, dtype=np.float64).copy()
            ctx = decimal.Context(prec=800)
            q = decimal.Decimal(1).scaleb(-d)
            for i in live:
                x = float(out[i])
                if x == x and abs(x) != float("inf"):
                    out[i] = float(decimal.Decimal(repr(x)).quantize(q, rounding=mode, context=ctx)) + 0.0
            return filled(out, an, "double"), an
        if e.type == "bigint":
            if d >= 0:
                return filled(np.asarray(a, dtype=np.int64), an, "bigint"), an
            vals = [0] * n
            for i in live:
                r = exact(int(a[i]), -d) * 10 ** (-d)
                if not -(1 << 63) <= r < (1 << 63):
                    raise SchemaError(f"{name}: a result past bigint (ARITHMETIC_OVERFLOW in Spark)")
                vals[i] = r
            return np.array(vals, dtype=np.int64), an
        s = decimal_ps(t)[1]
        ns = decimal_ps(e.type)[1]
        out = np.zeros(n, dtype=object)
        for i in live:
            if d >= 0:
                out[i] = exact(int(a[i]), s - ns)
            else:
                out[i] = exact(int(a[i]), s - d) * 10 ** (-d)
        return fitted(out, ~an, e.type, name), an
    return kernel


function("bround", _rounding_typer("bround"))(_rounding("bround", _half_even, decimal.ROUND_HALF_EVEN))
function("round", _rounding_typer("round"))(_rounding("round", _half_up, decimal.ROUND_HALF_UP))


# -- trigonometry, constants, NaN ------------------------------------------------------------------------------

def _cot(x):
    return 1.0 / np.tan(x)


for _name, _fn in (("sin", np.sin), ("cos", np.cos), ("tan", np.tan), ("asin", np.arcsin), ("acos", np.arccos),
                   ("atan", np.arctan), ("sinh", np.sinh), ("cosh", np.cosh), ("tanh", np.tanh),
                   ("asinh", np.arcsinh), ("acosh", np.arccosh), ("atanh", np.arctanh), ("cot", _cot),
                   ("sec", lambda x: 1.0 / np.cos(x)), ("csc", lambda x: 1.0 / np.sin(x)),
                   ("degrees", np.degrees), ("radians", np.radians), ("expm1", np.expm1), ("rint", np.rint)):
    function(_name, _to_double_typer(1, _name))(_double_kernel(_fn))
function("log1p", _to_double_typer(1, "log1p"))(_double_kernel(np.log1p, lambda x: ~(x <= -1)))
function("atan2", _to_double_typer(2, "atan2"))(  # Spark adds 0.0 to both: -0.0 is 0.0 there
    _double_kernel(lambda y, x: np.arctan2(y + 0.0, x + 0.0)))
function("hypot", _to_double_typer(2, "hypot"))(_double_kernel(np.hypot))
function("e", _to_double_typer(0, "e"))(lambda args, e, n: (np.full(n, np.e), np.zeros(n, dtype=bool)))
function("pi", _to_double_typer(0, "pi"))(lambda args, e, n: (np.full(n, np.pi), np.zeros(n, dtype=bool)))


def _isnan_typer(args):
    if len(args) != 1 or not numeric(args[0].type):
        raise TypeMismatch(f"isnan takes a number, got ({_names(args)})")
    return "boolean"


@function("isnan", _isnan_typer)
def _isnan(args, e, n):
    """True where the value is NaN; never NULL (``isnan(NULL)`` is false, as in Spark)."""
    ((v, vn),) = args
    return (~vn & np.isnan(_doubles(v, e.args[0].type))), np.zeros(n, dtype=bool)


@function("nanvl", _to_double_typer(2, "nanvl"))
def _nanvl(args, e, n):
    """``a`` unless it is NaN, else ``b``; NULL where the value chosen is NULL."""
    (a, an), (b, bn) = args
    x, y = _doubles(a, e.args[0].type), _doubles(b, e.args[1].type)
    pick = ~an & np.isnan(x)
    null = np.where(pick, bn, an)
    return filled(np.where(pick, y, x), null, "double"), null


def _same_typer(name: str):
    def typer(args):
        if len(args) != 1 or not numeric(args[0].type):
            raise TypeMismatch(f"{name} takes a number, got ({_names(args)})")
        return args[0].type if args[0].type != "null" else "double"
    return typer


function("positive", _same_typer("positive"))(lambda args, e, n: args[0])


@function("negative", _same_typer("negative"))
def _negative(args, e, n):
    """``-x``: as unary minus (a bigint's minimum overflows and raises, as in Spark's ANSI mode)."""
    return KERNELS["neg"](args, Call("neg", e.args, e.type), n)


__all__: list[str] = []


def _int_argument(vals: np.ndarray, null: np.ndarray, what: str) -> np.ndarray:
    """An argument Spark casts to int, as int64: a value past int raises (``what`` with the value), as Spark's
    CAST_OVERFLOW does.  O(n)."""
    v = np.asarray(vals, dtype=np.int64)
    past = ~null & ((v < -(1 << 31)) | (v >= (1 << 31)))
    if past.any():
        raise SchemaError(what.format(int(v[past][0])) + " (Spark casts it to int and raises CAST_OVERFLOW)")
    return v


def _factorial_typer(args):
    if len(args) != 1 or args[0].type not in ("bigint", "null"):
        raise TypeMismatch(f"factorial takes an integer, got ({_names(args)})")
    return "bigint"


@function("factorial", _factorial_typer)
def _factorial(args, e, n):
    """factorial(k) of 0..20 (what fits bigint); NULL outside that, as Spark's; a k past int raises, as Spark's
    CAST of its argument to int does.  O(n)."""
    (a, an), = args
    v = _int_argument(a, an, "factorial: {} is past int")
    null = an | (v < 0) | (v > 20)
    table = np.array([math.factorial(k) for k in range(21)], dtype=np.int64)
    return filled(table[np.clip(v, 0, 20)], null, "bigint"), null


def _format_number_typer(args):
    if len(args) != 2 or not (args[0].type in ("bigint", "double", "null") or is_decimal(args[0].type)):
        raise TypeMismatch(f"format_number takes a number and a count of decimal places, got ({_names(args)})")
    if args[1].type == "string":
        raise TypeMismatch("format_number with a DecimalFormat pattern (a string) is not supported (give the "
                           "count of decimal places)")
    if args[1].type not in ("bigint", "null"):
        raise TypeMismatch(f"format_number's decimal places must be an integer, got ({_names(args)})")
    return "string"


def _number_text(v, typ: str, places: int) -> str:
    """Java's DecimalFormat("#,##0.00..", HALF_EVEN) of one value, as Spark's format_number writes it."""
    if typ == "double":
        if v != v:
            return "NaN"
        if v in (math.inf, -math.inf):
            return "-\u221e" if v < 0 else "\u221e"
        shortest = decimal.Decimal(repr(float(v)))
        # Java rounds the double's exact value, and writes the digits of its shortest text past them (zeros)
        d = shortest if shortest.as_tuple().exponent >= -places else decimal.Decimal(float(v))
        if v == 0 and math.copysign(1.0, v) < 0:
            d = decimal.Decimal("-0")
    elif typ == "bigint":
        d = decimal.Decimal(int(v))
    else:
        d = from_unscaled(v, decimal_ps(typ)[1])
    if typ == "double":
        places = min(places, 340)  # DecimalFormat's most fraction digits of a double
    wide = decimal.Context(prec=max(d.adjusted(), 0) + places + 2, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
    q = d.quantize(decimal.Decimal(1).scaleb(-places), rounding=decimal.ROUND_HALF_EVEN, context=wide)
    return format(q, ",f")


@function("format_number", _format_number_typer)
def _format_number(args, e, n):
    """format_number(x, d): ``x`` rounded HALF_EVEN to ``d`` places (a double by its exact value), with
    thousands separators: Spark's DecimalFormat.  A negative ``d`` gives NULL, as in Spark; -0.0 keeps its sign.
    O(n), Python per row."""
    (x, xn), (d, dn) = args
    typ = e.args[0].type
    places = _int_argument(d, dn, "format_number: {} decimal places is past int")
    null = xn | dn | (places < 0)
    out = np.full(n, None, dtype=object)
    for i in np.flatnonzero(~null).tolist():
        out[i] = _number_text(x[i], typ, int(places[i]))
    return out, null

