"""Datalog terms as plan IR expressions: variables, constants, arithmetic and Soufflé's functors, typed.

What each Soufflé operation becomes: ``/`` of numbers truncates (``div``),
``+`` of two symbols is ``cat``, ``^`` of numbers is exact
(:mod:`ddflow.datalog.functors`), of floats ``pow``; ``substr`` is 0-based;
``to_string`` of a float prints six places; ``as(x, T)`` keeps ``x``
(within one base type); a type that does not fit is refused with where.

>>> from ddflow.datalog.syntax import BinOp, Const, Pos
>>> class One:  # a binding of one variable
...     def col(self, name): return Col(0, "bigint", name)
>>> Expressions({}).expr(BinOp("/", Var("x", Pos(1, 1)), Const(2, "number", Pos(1, 5)), Pos(1, 3)), One()).op
'div'
"""
from __future__ import annotations

import re
from typing import Protocol

from ddflow.datalog.functors import IR_NAMES
from ddflow.datalog.program import BASE_TYPES
from ddflow.datalog.syntax import BinOp, Chain, Const, DatalogError, Functor, Pos, Term, Var
from ddflow.errors import SchemaError
from ddflow.plan.expr import Call, Col, Expr, Held, Lit
from ddflow.plan.functions import TypeMismatch, cast, common_type, typed


class Columns(Protocol):
    """Where a term's variables are: a binding of the planner (:class:`~ddflow.datalog.planner.Binding`)."""

    def col(self, name: str) -> Col: ...


class Expressions:
    """Translates terms over a binding (anything with ``col(name)``), given the program's types by name."""

    def __init__(self, types: dict[str, str]):
        self.types = types

    def expr(self, t: Term, b: Columns, want: str | None = None) -> Expr:
        """The IR expression of a term over a binding's columns (``want``: the Soufflé type a constant takes)."""
        if isinstance(t, Var):
            return b.col(t.name)
        if isinstance(t, Const):
            if t.kind == "symbol":
                return Lit(t.value, "string")
            if t.kind == "float" or want == "float":
                return Lit(float(t.value), "double")
            return Lit(int(t.value), "bigint")
        if isinstance(t, BinOp):
            l, r = self.expr(t.left, b, want), self.expr(t.right, b, want)
            return self._typed(self._op(t.op, l.type, r.type, t.pos), (l, r), t.pos)
        if isinstance(t, Chain):  # one IR ``chain``: each step applied to the value so far (see ddflow.plan.expr)
            first = self.expr(t.first, b, want)
            steps: list[Call] = []
            for op, x in t.rest:
                r = self.expr(x, b, want)
                left = steps[-1].type if steps else first.type
                op = self._op(op, left, r.type, x.pos)
                call = self._typed(op, (Held(left) if steps else first, r), x.pos)
                steps.append(Call(call.op, (Held(left), call.args[1]), call.type))
            return Call("chain", (first, *steps), steps[-1].type)
        if isinstance(t, Functor):
            if t.name == "as":
                return self._as(t, self.expr(t.args[0], b, want))
            if t.name == "range":
                raise DatalogError("range gives many values: bind them to a variable in the body, "
                                   "x = range(from, to[, step])", t.pos)
            args = [self.expr(a, b) for a in t.args]
            name = t.name
            if name == "neg":
                return self._typed("neg", args, t.pos)
            if name in ("bnot", "lnot"):
                return self._typed(IR_NAMES[name], args, t.pos)
            if name in ("itof", "utof", "ftoi"):
                want_in = "double" if name == "ftoi" else "bigint"
                if args[0].type != want_in:
                    raise DatalogError(f"{name} converts a {_souffle(want_in)}, got a {_souffle(args[0].type)}",
                                       t.pos)
                return cast(args[0], "bigint" if name == "ftoi" else "double")
            if name == "abs":
                return self._typed("abs", args, t.pos)
            if name == "cat":
                return self._typed("concat", args, t.pos)
            if name in ("strlen", "substr"):
                return self._typed(IR_NAMES[name], args, t.pos)
            if name == "to_string" and args[0].type == "double":
                return self._typed(IR_NAMES["to_string"], args, t.pos)
            if name == "to_number" and args[0].type == "string":
                return self._typed(IR_NAMES["to_number"], args, t.pos)
            if name in ("to_number", "to_string", "to_float"):
                to = {"to_number": "bigint", "to_string": "string", "to_float": "double"}[name]
                try:
                    return cast(args[0], to)
                except SchemaError as err:
                    raise DatalogError(_bare(err), t.pos) from None
            if name in ("min", "max"):  # one least / greatest call (a number meets a float as a float)
                try:
                    typ = common_type([a.type for a in args], f"{name}")
                except TypeMismatch as err:
                    raise DatalogError(str(err), t.pos) from None
                args = [cast(a, typ) if a.type != typ else a for a in args]
                return self._typed("least" if name == "min" else "greatest", args, t.pos)
        raise DatalogError(f"{t!r} is not supported here", t.pos)

    def _op(self, op: str, left: str, right: str, pos: Pos) -> str:
        """The IR function of Datalog's binary ``op`` on values of types ``left`` and ``right`` (``+`` of two
        symbols is ``cat``); arithmetic on a symbol otherwise is refused."""
        if op == "+" and left == right == "string":
            return "concat"
        if "string" in (left, right):
            raise DatalogError(f"arithmetic {op} on a symbol" + (" and a number (+ joins two symbols)"
                                                                   if op == "+" else ""), pos)
        if op == "/" and left == "bigint" and right == "bigint":
            return "div"
        if op == "^":
            return IR_NAMES["^"] if left == right == "bigint" else "pow"
        return IR_NAMES.get(op, op)

    def _as(self, t: Functor, value: Expr) -> Expr:
        """``as(x, T)``: ``x`` read as type ``T``, which must have ``x``'s base type (a subtype or alias of it)."""
        name = t.args[1].value
        if name not in self.types:
            raise DatalogError(f"as(x, T): unknown type {name!r}", t.args[1].pos)
        base = self.types[name]
        if BASE_TYPES[base] != value.type:
            raise DatalogError(f"as({t.args[0]!r}, {name}) converts between base types ({_souffle(value.type)} to "
                               f"{base}); use to_number, to_string, to_float, itof or ftoi", t.pos)
        return value

    def _typed(self, op: str, args, pos: Pos) -> Expr:
        try:
            return typed(op, tuple(args))
        except SchemaError as err:
            raise DatalogError(_bare(err), pos) from None


def _bare(err: Exception) -> str:
    """An IR typing error in Soufflé's words: its types ``number``, ``float``, ``symbol``."""
    msg = str(err)
    msg = msg[5:] if msg.startswith("SQL: ") else msg
    return re.sub(r"\b(bigint|double|string)\b", lambda m: {"bigint": "number", "double": "float",
                                                            "string": "symbol"}[m.group(1)], msg)


def _souffle(sql_type: str) -> str:
    return {v: k for k, v in BASE_TYPES.items() if k != "unsigned"}.get(sql_type, sql_type)
