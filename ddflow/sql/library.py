"""Spark SQL's library functions (sqlglot nodes) to plan calls: strings, NULL handling, math.

One entry per sqlglot node kind (or, for what sqlglot leaves ``Anonymous``, per function name); each reads the
node's arguments and builds the call of :mod:`ddflow.plan.strings`, :mod:`ddflow.plan.nulls` or
:mod:`ddflow.plan.maths` through :func:`ddflow.plan.functions.typed`.  A call whose types do not fit, or whose
argument must be a constant and is not, is refused here, at planning, naming the function and quoting the SQL
with its line and column.

>>> from ddflow.base.schema import Schema
>>> from ddflow.sql.planner import plan_sql
>>> plan_sql("SELECT lpad(s, 3, '0') AS p, pmod(n, 7) AS m FROM t",
...          {"t": Schema.of({"s": "string", "n": "bigint"})}).schema.types
('string', 'bigint')
"""
from __future__ import annotations

from typing import Callable

from sqlglot import exp

from ddflow.errors import SchemaError
from ddflow.plan import datetimes
from ddflow.sql.dialect import LIBRARY
from ddflow.plan import functions as F
from ddflow.plan.expr import Call, Expr, Lit

Eval = Callable[[exp.Expression], Expr]


def refusal(node: exp.Expression, message: str) -> SchemaError:
    """``SQL: message at line L, column C (in `text`)``: what is wrong, where, and the user's text."""
    text = node.sql(dialect="spark")
    if len(text) > 80:
        text = text[:77] + "..."
    where = ""
    for inner in node.walk():
        m = getattr(inner, "meta", None) or {}
        if "line" in m:
            where = f" at line {m['line']}, column {m['col']}"
            break
    return SchemaError(f"SQL: {message}{where} (in `{text}`)")


def _call(name: str, args, node: exp.Expression) -> Call:
    try:
        return F.typed(name, args)
    except SchemaError as err:
        msg = str(err).removeprefix("SQL: ")
        raise refusal(node, msg if name in msg else f"{name}: {msg}") from None


def _string(a: Expr) -> Expr:
    return a if a.type in ("string", "null") else F.cast(a, "string")


def _optional(node: exp.Expression, key: str, e: Eval) -> list[Expr]:
    v = node.args.get(key)
    return [] if v is None else [e(v)]


def _only(node: exp.Expression, name: str, *allowed: str) -> None:
    extra = [k for k, v in node.args.items() if v not in (None, False, []) and k not in allowed]
    if extra:
        raise refusal(node, f"{name} with the argument(s) {', '.join(extra)} is not supported")


def _pad(node, e, ex):
    name = "lpad" if node.args.get("is_left") else "rpad"
    _only(node, name, "this", "expression", "fill_pattern", "is_left")
    return _call(name, [_string(e(node.this)), e(node.expression)] + _optional(node, "fill_pattern", e), node)


def _initcap(node, e, ex):
    delim = node.args.get("expression")
    if delim is not None and not (isinstance(delim, exp.Literal) and delim.this == " "):
        raise refusal(node, "initcap takes one argument")
    return _call("initcap", [_string(e(node.this))], node)


def _regexp_replace(node, e, ex):
    _only(node, "regexp_replace", "this", "expression", "replacement", "position")
    args = [_string(e(node.this)), e(node.expression), e(node.args["replacement"])]
    return _call("regexp_replace", args + _optional(node, "position", e), node)


def _regexp_extract(node, e, ex):
    _only(node, "regexp_extract", "this", "expression", "group", "null_if_pos_overflow")  # a flag of sqlglot's
    group = e(node.args["group"]) if node.args.get("group") is not None else Lit(1, "bigint")
    return _call("regexp_extract", [_string(e(node.this)), e(node.expression), group], node)


def _levenshtein(node, e, ex):
    _only(node, "levenshtein", "this", "expression", "ins_cost")  # sqlglot reads Spark's threshold as ins_cost
    return _call("levenshtein", [_string(e(node.this)), _string(e(node.expression))] +
                 _optional(node, "ins_cost", e), node)


def _format(node, e, ex):
    parts = [node.this] + list(node.expressions) if isinstance(node, exp.Format) else list(node.expressions)
    return _call("format_string", [e(x) for x in parts], node)


def _position(node, e, ex):
    """instr(s, sub) and locate(sub, s[, pos]); a plain position(sub, s) of a constant stays Arrow's."""
    sub = e(node.args["substr"])
    if node.args.get("position") is None and isinstance(sub, Lit):
        return None
    return _call("locate", [sub, e(node.this)] + _optional(node, "position", e), node)


def _chr(node, e, ex):
    if node.args.get("charset") or len(node.expressions) != 1:
        raise refusal(node, "chr takes one argument")
    return _call("chr", [e(node.expressions[0])], node)


def _nvl2(node, e, ex):
    test = Call("is_not_null", (e(node.this),), "boolean")
    return ex._cased("case", [test, e(node.args["true"]), e(node.args["false"])], [1, 2], node)


def _null_safe_eq(node, e, ex):
    eq = _call("=", [e(node.this), e(node.expression)], node)  # a string constant beside a date is that date
    out = _call("<=>", eq.args, node)
    return out if isinstance(node, exp.NullSafeEQ) else Call("not", (out,), "boolean")


def _log(node, e, ex):
    base = node.this
    if isinstance(base, exp.Literal) and not base.meta and base.this in ("2", "10"):  # log2(x), log10(x)
        return _call(f"log{base.this}", [e(node.expression)], node)
    return _call("log", [e(base), e(node.expression)], node)


def _rounding(name: str):
    def plan(node, e, ex):
        if node.args.get("decimals") is not None:
            raise refusal(node, f"{name} with a scale is not supported")
        return _call(name, [e(node.this)], node)
    return plan


def _binary(name: str, string_first: bool = False):
    def plan(node, e, ex):
        a = e(node.this)
        return _call(name, [_string(a) if string_first else a, e(node.expression)], node)
    return plan


def _unary(name: str, string: bool = False):
    def plan(node, e, ex):
        a = e(node.this)
        return _call(name, [_string(a) if string else a], node)
    return plan


_NODES = {
    exp.Pad: _pad, exp.Repeat: lambda n, e, ex: _call("repeat", [_string(e(n.this)), e(n.args["times"])], n),
    exp.Initcap: _initcap,
    exp.Translate: lambda n, e, ex: _call("translate", [_string(e(n.this)), e(n.args["from_"]), e(n.args["to"])], n),
    exp.RegexpReplace: _regexp_replace, exp.RegexpExtract: _regexp_extract, exp.Levenshtein: _levenshtein, exp.Format: _format,
    exp.Left: _binary("left", True), exp.Right: _binary("right", True), exp.StrPosition: _position,
    exp.Ascii: _unary("ascii", True), exp.Chr: _chr,
    exp.Nvl2: _nvl2, exp.NullSafeEQ: _null_safe_eq, exp.NullSafeNEQ: _null_safe_eq,
    exp.SafeAdd: _binary("try_add"), exp.SafeSubtract: _binary("try_subtract"),
    exp.SafeMultiply: _binary("try_multiply"),
    exp.Log: _log, exp.Ln: _unary("ln"), exp.Exp: _unary("exp"), exp.Pow: _binary("pow"),
    exp.Sqrt: _unary("sqrt"), exp.Cbrt: _unary("cbrt"), exp.Sign: _unary("sign"),
    exp.Ceil: _rounding("ceil"), exp.Floor: _rounding("floor"),
    exp.Round: lambda n, e, ex: _round("round", n, n.this, n.args.get("decimals"), e),
    exp.BitwiseAnd: _binary("bitand"), exp.BitwiseOr: _binary("bitor"), exp.BitwiseXor: _binary("bitxor"),
    exp.BitwiseNot: _unary("bitnot"), exp.BitwiseLeftShift: _binary("shiftleft"),
    exp.BitwiseRightShift: _binary("shiftright"), exp.BitwiseCount: _unary("bit_count"),
    exp.Getbit: _binary("getbit"),
    exp.Overlay: lambda n, e, ex: _call("overlay", [_string(e(n.this)), _string(e(n.expression)), e(n.args["from_"])]
                                        + ([e(n.args["for_"])] if n.args.get("for_") is not None else []), n),
    exp.Reverse: _unary("reverse", True), exp.Soundex: _unary("soundex", True), exp.ToBase64: _unary("base64", True),
    exp.Factorial: _unary("factorial"),
    exp.Elt: lambda n, e, ex: _call("elt", [e(n.this)] + [_string(e(a)) for a in n.expressions], n),  # as strings
    exp.RegexpCount: lambda n, e, ex: _regexp("regexp_count", n, e, ()),
    exp.RegexpSubstr: lambda n, e, ex: _regexp("regexp_substr", n, e, ()),
    exp.RegexpInstr: lambda n, e, ex: _regexp("regexp_instr", n, e, ("position",)),  # sqlglot's name of Spark's idx
    exp.WidthBucket: lambda n, e, ex: _call("width_bucket", [e(n.this), e(n.args["min_value"]), e(n.args["max_value"]),
                                                             e(n.args["num_buckets"])], n),
}


def _regexp(name: str, node, e: Eval, more: tuple[str, ...]) -> Call:
    """regexp_count(str, regexp), regexp_substr(str, regexp), regexp_instr(str, regexp[, idx])."""
    _only(node, name, "this", "expression", *more)
    return _call(name, [_string(e(node.this)), e(node.expression)] +
                 [e(node.args[k]) for k in more if node.args.get(k) is not None], node)


#: Datetime functions' arguments that are a date or timestamp, by position: a string there is CAST, as Spark does.
_TIME_ARGS = {"date_format": {0: "timestamp"}, "last_day": {0: "date"}, "next_day": {0: "date"},
              "months_between": {0: "timestamp", 1: "timestamp"}, "unix_date": {0: "date"},
              "unix_seconds": {0: "timestamp"}, "unix_millis": {0: "timestamp"}, "unix_micros": {0: "timestamp"}}


_ALIASES = {"to_unix_timestamp": "unix_timestamp", "sha": "sha1"}


def _datetime(name: str, node: exp.Anonymous, e: Eval) -> Call:
    if name == "unix_timestamp" and not node.expressions:
        raise refusal(node, "unix_timestamp() without an argument (a view's answer must not depend on the wall "
                            "clock)")
    casts = _TIME_ARGS.get(name, {})
    args = [e(a) for a in node.expressions]
    args = [F.cast(a, casts[i]) if i in casts and a.type == "string" else a for i, a in enumerate(args)]
    return _call(name, args, node)


def _round(name: str, node: exp.Expression, x: exp.Expression, scale: exp.Expression | None, e: Eval) -> Call:
    d = e(scale) if scale is not None else Lit(0, "bigint")
    if not isinstance(d, Lit) or d.type != "bigint":
        raise refusal(node, f"{name}'s scale must be a constant integer")
    return _call(name, [e(x), d], node)


def _anonymous(node: exp.Anonymous, e: Eval, ex):
    name = str(node.this).lower()
    args = list(node.expressions)
    name = _ALIASES.get(name, name)
    if name in datetimes.NAMES:
        return _datetime(name, node, e)
    if name.upper() in LIBRARY:
        return _call(name, [e(a) for a in args], node)
    if name == "printf":
        return _format(node, e, ex)
    if name == "conv" and len(args) == 3:  # a number's text, as Spark casts it
        return _call("conv", [_string(e(args[0])), e(args[1]), e(args[2])], node)
    if name == "pmod":
        if len(args) != 2:
            raise refusal(node, "pmod takes two arguments")
        return _call("pmod", [e(a) for a in args], node)
    if name == "bround":
        if len(args) not in (1, 2):
            raise refusal(node, "bround takes one or two arguments")
        return _round("bround", node, args[0], args[1] if len(args) == 2 else None, e)
    return None


def library_call(ex, node: exp.Expression, e: Eval) -> Expr | None:
    """The plan call of a library function node, or None if ``node`` is not one of them.  O(1) per node."""
    plan = _NODES.get(type(node))
    if plan is not None:
        return plan(node, e, ex)
    if isinstance(node, exp.Anonymous):
        return _anonymous(node, e, ex)
    return None


__all__ = ["library_call", "refusal"]
