"""Scalar expressions of the plan IR, evaluated over whole columns with SQL NULLs.

A column in evaluation is a pair ``(values, null)``: a numpy array of
values (int64 for bigint, decimal (unscaled), date (days) and timestamp
(microseconds); float64; bool; objects for strings) and a bool array
that is True where the value is NULL.  Every operator works on whole
arrays.  NULL semantics are SQL's: arithmetic and comparisons with a
NULL are NULL, AND/OR/NOT use three-valued logic, WHERE keeps only TRUE.
The forms are evaluated here, the short-circuit ones by
:mod:`ddflow.plan.forms`: AND and OR (of any number of arguments), NOT, IS
NULL, CASE, COALESCE, and those that hold a value for their steps
(:class:`Held`): an arithmetic ``chain``, ``switch`` (``CASE x WHEN``),
``between`` and ``in`` (a :class:`ValueSet` tested by binary search).
Every other operator and function is one entry of
:mod:`ddflow.plan.functions`, its typing and its kernel together.  No pass
here recurses: evaluation, printing, hashing, equality and pickling walk
with their own stacks, so an expression nested as deep as a front end
allows costs nothing at run time.

>>> a = Col(0, "bigint", "a")
>>> e = Call("+", (a, Lit(1, "bigint")), "bigint")
>>> vals, null = evaluate(e, [(np.array([1, 0]), np.array([False, True]))])
>>> vals.tolist(), null.tolist()
([2, 0], [False, True])
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ddflow.base.schema import KIND, NULL_VALUE, decimal_ps, from_unscaled
from ddflow.errors import SchemaError

_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1

Column = tuple[np.ndarray, np.ndarray]


class Expr:
    """A scalar expression; ``type`` is its canonical SQL type ("null" for a bare NULL literal)."""

    type: str

    def children(self) -> tuple["Expr", ...]:
        return ()

    def columns(self) -> set[int]:
        """Input column positions the expression reads.  O(size), without recursion."""
        out: set[int] = set()
        stack: list[Expr] = [self]
        while stack:
            e = stack.pop()
            if isinstance(e, Col):
                out.add(e.index)
            else:
                stack.extend(e.children())
        return out


@dataclass(frozen=True)
class Col(Expr):
    """Input column ``index`` (``name`` for plans and errors only)."""

    index: int
    type: str
    name: str = ""

    def columns(self) -> set[int]:
        return {self.index}

    def __str__(self) -> str:
        return self.name or f"#{self.index}"


@dataclass(frozen=True)
class Lit(Expr):
    """A constant; ``None`` is NULL."""

    value: Any
    type: str

    def __str__(self) -> str:
        if self.value is None:
            return "NULL"
        if self.type in ("date", "timestamp") or self.type.startswith("decimal("):
            from ddflow.base.schema import decode_value
            v = decode_value(self.value, self.type)
            return f"{self.type.split('(')[0].upper()} '{v}'"
        if self.type.startswith("interval"):
            return f"INTERVAL {self.value} {'MONTHS' if self.type == 'interval_ym' else 'MICROSECONDS'}"
        return repr(self.value)


@dataclass(frozen=True)
class Held(Expr):
    """In a step of a form (``chain``, ``switch``, ``between``, ``in``): the value the form holds, of ``type``.

    The form evaluates that value once (a chain's value so far, a CASE's
    subject, the left side of BETWEEN or IN) and hands it to the step's
    kernel as this argument; a Held is never evaluated on its own.
    """

    type: str

    def __str__(self) -> str:
        return "?"


@dataclass(frozen=True)
class ValueSet(Expr):
    """The constants of an IN list, in the form the ``in`` form compares them: sorted, distinct, no NULL.

    ``type`` is the list's common type; ``values`` are in the representation
    :func:`ddflow.plan.functions.comparable_values` gives them beside the
    tested expression (so one ``searchsorted`` tests a whole column);
    ``has_null``: the list holds a NULL.  Hashed once (lists may hold
    100,000 values).
    """

    values: tuple
    type: str
    has_null: bool = False
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "_hash", hash((self.values, self.type, self.has_null)))

    def __hash__(self) -> int:
        return self._hash

    def array(self) -> np.ndarray:
        """The values as one sorted numpy array (made once)."""
        got = self.__dict__.get("_array")
        if got is None:
            sample = self.values[0] if self.values else 0
            kind = (np.float64 if isinstance(sample, float) else np.int64 if isinstance(sample, int)
                    and not isinstance(sample, bool) and all(-(1 << 63) <= v < (1 << 63) for v in self.values)
                    else object)
            got = np.array(self.values, dtype=kind) if self.values else np.zeros(0, dtype=np.int64)
            object.__setattr__(self, "_array", got)
        return got

    def __str__(self) -> str:
        more = len(self.values) - 5
        shown = [repr(v) for v in self.values[:5]] + ([f"... {more:,} more"] if more > 0 else [])
        return ", ".join(shown + (["NULL"] if self.has_null else []))


@dataclass(frozen=True, eq=False)
class Call(Expr):
    """An operator or function applied to argument expressions (see :data:`OPS`).

    ``and``, ``or`` and ``concat`` take any number of arguments, so a chain
    of 10,000 conditions is one node, not 10,000 nested ones; ``chain``
    is a left-to-right chain of arithmetic (``a + b - c``): its first
    argument, then steps ``Call(op, (Held, x))`` each applied to the value
    so far.  Every pass over expressions here (evaluation, printing,
    columns, pickling) walks with its own stack, never Python's.
    """

    op: str
    args: tuple[Expr, ...]
    type: str

    def __post_init__(self):
        if self.op not in OPS:
            raise SchemaError(f"unknown operator {self.op!r}")

    def children(self) -> tuple[Expr, ...]:
        return self.args

    def __str__(self) -> str:
        return bottom_up(self, _render)

    def __hash__(self) -> int:
        h = self.__dict__.get("_hash")
        if h is None:  # children first, with a stack; each node's hash kept (a plan hashes its nodes often)
            stack: list = [(self, False)]
            while stack:
                x, ready = stack.pop()
                if "_hash" in x.__dict__:
                    continue
                if ready:
                    object.__setattr__(x, "_hash", hash((x.op, x.type, tuple(hash(a) for a in x.args))))
                else:
                    stack.append((x, True))
                    stack.extend((a, False) for a in x.args if isinstance(a, Call) and "_hash" not in a.__dict__)
            h = self.__dict__["_hash"]
        return h

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Call):
            return NotImplemented
        stack = [(self, other)]
        while stack:  # pairwise, with a stack: an expression may be nested thousands deep
            a, b = stack.pop()
            if a is b:
                continue
            if isinstance(a, Call) and isinstance(b, Call):
                if a.op != b.op or a.type != b.type or len(a.args) != len(b.args) or hash(a) != hash(b):
                    return False
                stack.extend(zip(a.args, b.args))
            elif type(a) is not type(b) or a != b:
                return False
        return True

    def __reduce__(self):
        # Flat (postfix), so pickling a deep expression (to ship it to a worker) never recurses.
        out: list = []
        stack: list = [self]
        while stack:
            e = stack.pop()
            if isinstance(e, tuple):
                out.append(e)
            elif isinstance(e, Call):
                stack.append((e.op, len(e.args), e.type))
                stack.extend(reversed(e.args))
            else:
                out.append(e)
        return (_rebuilt, (tuple(out),))


def _rebuilt(items: tuple) -> Call:
    """The Call a postfix list of leaves and ``(op, arity, type)`` marks stands for (see ``Call.__reduce__``)."""
    stack: list = []
    for it in items:
        if isinstance(it, tuple):
            op, k, typ = it
            args = tuple(stack[len(stack) - k:])
            del stack[len(stack) - k:]
            stack.append(Call(op, args, typ))
        else:
            stack.append(it)
    return stack[0]


def bottom_up(e: Expr, fn: Callable[[Expr, list], Any]) -> Any:
    """``fn(node, [results of its children])`` for every node of ``e``, children first, with an explicit stack.

    The one way passes over expressions recurse: a plan may hold an
    expression nested as deep as the front ends allow, and a Python
    recursion that deep would hit the interpreter's limit.  O(size).

    >>> e = Call("+", (Col(0, "bigint", "a"), Lit(1, "bigint")), "bigint")
    >>> bottom_up(e, lambda node, kids: 1 + sum(kids))
    3
    """
    out: list = []
    stack: list = [(e, False)]
    while stack:
        node, ready = stack.pop()
        kids = node.children()
        if not kids:
            out.append(fn(node, []))
        elif ready:
            k = len(kids)
            got = out[len(out) - k:]
            del out[len(out) - k:]
            out.append(fn(node, got))
        else:
            stack.append((node, True))
            stack.extend((c, False) for c in reversed(kids))
    return out[0]


def _render(e: Expr, kids: list[str]) -> str:
    """One node's text from its children's (``bottom_up``'s function for ``str``).

    A step (a call on a :class:`Held`) reads ``op x``: the form around it
    says what it is applied to.
    """
    if not isinstance(e, Call):
        return str(e)
    op = e.op
    if len(kids) == 2 and isinstance(e.args[0], Held):
        return f"{op} {kids[1]}"
    if op == "chain":
        return f"({' '.join(kids)})"
    if op == "in":
        return f"({kids[0]} IN ({', '.join(_operand(a, t) for a, t in zip(e.args[1:], kids[1:]))}))"
    if op == "between":
        return f"({kids[0]} BETWEEN {_operand(e.args[1], kids[1])} AND {_operand(e.args[2], kids[2])})"
    if op == "switch":
        whens = [f"WHEN {_operand(e.args[i], kids[i])} THEN {kids[i + 1]}" for i in range(1, len(kids) - 1, 2)]
        return f"CASE {kids[0]} {' '.join(whens)} ELSE {kids[-1]} END"
    if op in BINARY and len(kids) >= 2 and (len(kids) == 2 or op in ("and", "or")):
        return "(" + f" {op} ".join(kids) + ")"
    return f"{op}({', '.join(kids)})"


def _operand(step: Expr, text: str) -> str:
    """A step's own operand, ``x`` of ``op x`` (a value set as it is)."""
    if isinstance(step, Call) and len(step.args) == 2 and isinstance(step.args[0], Held):
        return text[len(step.op) + 1:]
    return text


def conjuncts(e: Expr) -> list[Expr]:
    """The parts of a chain of ANDs, in order.  O(size of the chain), without recursion."""
    out: list[Expr] = []
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, Call) and x.op == "and":
            stack.extend(reversed(x.args))
        else:
            out.append(x)
    return out


def conjunction(parts: list[Expr]) -> Expr | None:
    """The AND of ``parts`` (None for none), one n-ary node: nested ANDs among them are spliced in."""
    flat = [q for p in parts for q in conjuncts(p)]
    if not flat:
        return None
    return flat[0] if len(flat) == 1 else Call("and", tuple(flat), "boolean")


def remapped(e: Expr, m) -> Expr:
    """``e`` reading column ``m[i]`` wherever it read column ``i`` (``m`` a mapping or a function).  O(size)."""
    f = m if callable(m) else m.__getitem__

    def node(x: Expr, kids: list[Expr]) -> Expr:
        if isinstance(x, Col):
            return Col(f(x.index), x.type, x.name)
        if isinstance(x, Call):
            return Call(x.op, tuple(kids), x.type)
        return x

    return bottom_up(e, node)


BINARY = {"+", "-", "*", "/", "%", "=", "<>", "<", "<=", ">", ">=", "and", "or", "like", "ilike", "rlike"}
#: The logical forms :func:`evaluate` handles itself (their arguments are not all evaluated alike).
FORMS = {"and", "or", "not", "is_null", "is_not_null", "coalesce", "case", "switch", "chain", "between", "in"}
#: Kernels of every other operator, by name: filled by :mod:`ddflow.plan.functions`, the one table.
KERNELS: dict = {}


class _Ops:
    """Every operator ``evaluate`` knows (the forms and the function table's names)."""

    def __contains__(self, op) -> bool:
        return op in FORMS or op in KERNELS

    def __iter__(self):
        return iter(sorted(FORMS | set(KERNELS)))


OPS = _Ops()

#: The numpy dtype of each SQL type's values in evaluation (any other type: Python objects).
DTYPES = {"bigint": np.int64, "double": np.float64, "boolean": bool, "date": np.int64, "timestamp": np.int64,
          "interval_ym": np.int64, "interval_dt": np.int64}


def dtype_of(typ: str):
    return np.int64 if typ.startswith("decimal(") else DTYPES.get(typ, object)


def as_type(vals: np.ndarray, typ: str) -> np.ndarray:
    """``vals`` as the numpy dtype of SQL type ``typ`` (no copy when it already is).

    A decimal's values past int64 stay Python ints: a wide intermediate
    (:func:`ddflow.plan.functions.fitted`), exact until it is stored.
    """
    if vals.dtype == object and typ.startswith("decimal("):
        return unscaled(vals)
    return vals.astype(dtype_of(typ), copy=False)


def unscaled(vals: np.ndarray) -> np.ndarray:
    """Unscaled decimal values as int64 when they all fit it, else as they are (Python ints, an object array).

    >>> unscaled(np.array([1, 2], dtype=object)).dtype, unscaled(np.array([10 ** 20], dtype=object)).dtype
    (dtype('int64'), dtype('O'))
    """
    if vals.dtype != object:
        return vals.astype(np.int64, copy=False)
    if all(_I64_MIN <= v <= _I64_MAX for v in vals.tolist()):
        return vals.astype(np.int64)
    return vals


def stored_unscaled(vals: np.ndarray, null: np.ndarray, typ: str, what: str) -> np.ndarray:
    """A decimal column as stored: int64, or an overflow error naming ``what`` for a value past 18 digits.

    ddflow stores decimals in int64, so a wide type's value is exact inside
    an expression but stored only if it fits (a ROUND, or a CAST to fewer
    places, can make it fit).  O(n).

    >>> stored_unscaled(np.array([150], dtype=object), np.array([False]), "decimal(38,2)", "x").tolist()
    [150]
    """
    vals = unscaled(np.where(null, 0, vals) if vals.dtype == object else vals)
    if vals.dtype == object:
        big = next(v for v in vals.tolist() if not _I64_MIN <= v <= _I64_MAX)
        raise SchemaError(f"decimal overflow in {what}: the value {from_unscaled(big, decimal_ps(typ)[1])} of {typ} "
                          "needs more than 18 digits, and ddflow stores decimals in int64 (ROUND it, or CAST it to "
                          "fewer places)")
    return vals


def null_values(typ: str, n: int) -> np.ndarray:
    """``n`` value fields of NULLs of SQL type ``typ``: its canonical value (0, 0.0, False or None)."""
    return np.full(n, NULL_VALUE[KIND.get(typ, "i")], dtype=dtype_of(typ))


def _put(vals: np.ndarray, idx: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``vals`` with ``vals[idx] = v``, as an object array if ``v`` is one (a wide decimal's Python ints)."""
    if v.dtype == object and vals.dtype != object:
        vals = vals.astype(object)
    vals[idx] = v
    return vals


def filled(vals: np.ndarray, null: np.ndarray, typ: str) -> np.ndarray:
    """``vals`` with every NULL position holding the type's canonical value."""
    if not null.any():
        return vals
    out = vals.copy()
    out[null] = NULL_VALUE[KIND.get(typ, "i")]
    return out


def evaluate(e: Expr, cols: Sequence[Column], stored: bool = True) -> Column:
    """``(values, null)`` of ``e`` over columns ``cols`` (all of one length).  O(n) numpy/Arrow calls per node.

    Without recursion: a leaf, or a call of leaves, is computed at once
    (most predicates); anything else runs on an explicit stack of
    evaluations, one generator per node (:func:`ddflow.plan.forms.form`) that asks for its
    arguments' values, each over the rows it needs.

    Inside the expression a decimal is exact to its type's 38 digits (Python
    ints where int64 is too small); its result is as stored, int64, or an
    overflow error naming ``e`` (:func:`stored_unscaled`), unless
    ``stored`` is False (a constant folded at planning).
    """
    vals, null = _evaluated(e, cols)
    if stored and vals.dtype == object and e.type.startswith("decimal("):
        vals = stored_unscaled(vals, null, e.type, f"`{e}`")
    return vals, null


def _evaluated(e: Expr, cols: Sequence[Column]) -> Column:
    n = len(cols[0][0]) if cols else 0
    got = _direct(e, cols, n)
    if got is not None:
        return got
    stack = [forms.form(e, cols, n)]
    value = None
    while True:
        try:
            sub, sub_cols = stack[-1].send(value)
        except StopIteration as done:
            stack.pop()
            if not stack:
                return done.value
            value = done.value
            continue
        m = len(sub_cols[0][0]) if sub_cols else 0
        value = _direct(sub, sub_cols, m)
        if value is None:
            stack.append(forms.form(sub, sub_cols, m))


def _leaf(e: Expr, cols: Sequence[Column], n: int) -> Column:
    if isinstance(e, Col):
        return cols[e.index]
    if isinstance(e, Lit):
        typ = e.type if e.type != "null" else "bigint"
        if e.value is None:
            return null_values(typ, n), np.ones(n, dtype=bool)
        wide = typ.startswith("decimal(") and not _I64_MIN <= e.value <= _I64_MAX
        vals = np.empty(n, dtype=object if wide else dtype_of(typ))
        vals[:] = e.value
        return vals, np.zeros(n, dtype=bool)
    raise SchemaError(f"cannot evaluate {type(e).__name__} {e} on its own")


def _direct(e: Expr, cols: Sequence[Column], n: int) -> Column | None:
    """``e``'s value when it needs no stack (a leaf, or a kernel or NOT / IS NULL of leaves); else None."""
    if not isinstance(e, Call):
        return _leaf(e, cols, n)
    op = e.op
    if op in FORMS and op not in _SIMPLE_FORMS:
        return None
    args = []
    for a in e.args:
        if isinstance(a, Call):
            return None
        args.append(cols[a.index] if isinstance(a, Col) else _leaf(a, cols, n))
    return _apply(e, args, n)


#: Forms that evaluate every argument on every row, like a kernel.
_SIMPLE_FORMS = {"not", "is_null", "is_not_null"}


def _apply(e: Call, args: list[Column], n: int) -> Column:
    """A kernel (or NOT / IS [NOT] NULL) over its arguments' values."""
    op = e.op
    if op == "not":
        (a, an), = args
        return ~a.astype(bool) & ~an, an
    if op == "is_null":
        return args[0][1].copy(), np.zeros(n, dtype=bool)
    if op == "is_not_null":
        return ~args[0][1], np.zeros(n, dtype=bool)
    kernel = KERNELS.get(op)
    if kernel is None:
        raise SchemaError(f"unknown operator {op!r}")
    return kernel(args, e, n)


from ddflow.plan import functions  # noqa: E402,F401  (fills KERNELS: the function table)
from ddflow.plan import forms  # noqa: E402  (the short-circuit forms, evaluated through this module's stack)
