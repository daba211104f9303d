"""Soufflé's Datalog syntax, read by a small recursive-descent parser that says line and column on every error.

What it reads: ``.decl`` (one relation or several of one signature,
``.decl A, B(x: number)``; attribute types by name; qualifiers such as
``brie``, ``btree`` or ``inline`` are storage or evaluation choices and
are ignored, ``eqrel`` is kept), ``.type`` aliases (``=`` or ``<:`` a
type, or a union of types of one base), ``.number_type`` /
``.symbol_type``, ``.input``, ``.output`` and ``.printsize`` with
``(key=value, ...)`` parameters, ``.pragma "key" "value"``, ``.plan`` (a
join-order hint; results never depend on it, so it is read and
ignored); rules with one or more head atoms and a body of atoms, ``!``
atoms, comparisons (``= != < <= > >=``), ``contains`` / ``match``,
``true``/``false`` and ``;`` disjunction (parenthesized too: one rule per
alternative); subsumptive rules
``r(...) <= r(...) :- body.`` (:mod:`ddflow.datalog.subsume`); components
(``.comp``, ``.init``, ``.override``, names ``inst.rel``; expanded by
:mod:`ddflow.datalog.components`); facts; terms with
variables, ``_``, numbers (decimal, ``0x``, ``0b``, floats), strings,
the binary operators at Soufflé's precedence (:data:`BINARY_LEVELS`:
``lor lxor land bor bxor band``, shifts, ``+ -``, ``* / %``), the signs
``- bnot lnot`` and ``^`` (tighter than a sign), the functors of
:data:`FUNCTORS`, ``as(x, T)``, and aggregates ``count``, ``sum``,
``min``, ``max``, ``mean`` over ``{ body }`` or one atom, wherever a
term stands.  Comments ``//`` and ``/* */``.

Everything else is refused by name with its line and column
(:data:`~ddflow.datalog.directives.REFUSED_DIRECTIVES`, :data:`UNSUPPORTED_FUNCTORS`, records,
ADTs, ``$``, ``@`` functors, ``#include``, ``choice-domain``, a
negated parenthesized body): a program either means
what Soufflé means or does not run.  docs/datalog.md lists
every construct and its status.

>>> src = parse('.decl e(x: number, y: number)\\n.input e\\n.decl r(x: number)\\nr(x) :- e(x, _), x > 1.')
>>> src.rules
[r(x) :- e(x, _), x > 1.]
>>> parse("r(x) :- e(x) ^ 2.")
Traceback (most recent call last):
  ...
ddflow.datalog.syntax.DatalogError: Datalog at line 1, column 14: unexpected '^' (expected ',', ';' or '.')
"""
from __future__ import annotations

from ddflow.datalog.components import expand
from ddflow.datalog.directives import Directives
from ddflow.datalog.syntax import (Aggregate, Atom, BinOp, Chain, Compare, Const, DatalogError, Functor, Literal, Rule,
                                   Source, Subsumption, Term, Test, Var, Wild)
from ddflow.datalog.tokens import Token, check_nesting, tokens
from ddflow.datalog.tokens import unquote as _unquote
from ddflow.plan.deep import NESTING_LIMIT

AGGREGATES = {"count", "sum", "min", "max", "mean"}
#: Functors with their arity (``min``/``max`` with two arguments; with ``:`` they are aggregates).
FUNCTORS = {"cat": None, "strlen": 1, "substr": 3, "to_number": 1, "to_string": 1, "to_float": 1, "min": None,
            "max": None, "abs": 1, "itof": 1, "utof": 1, "ftoi": 1, "as": 2, "range": None}
#: The most rules one body's parenthesized disjunctions may expand to.
ALTERNATIVES_LIMIT = 1024
#: Binary operators from the loosest to the tightest (Soufflé's parser.yy); ``^`` binds tighter than signs.
BINARY_LEVELS = (("lor",), ("lxor",), ("land",), ("bor",), ("bxor",), ("band",), ("bshl", "bshr", "bshru"),
                 ("+", "-"), ("*", "/", "%"))
#: Functors Soufflé has that ddflow does not, each with why: refused by name.
UNSUPPORTED_FUNCTORS = {
    "ord": "it is a symbol's number in Soufflé's symbol table, which depends on the order symbols were first seen",
    "to_unsigned": "unsigned values are 64-bit signed numbers here: a negative number's conversion would differ",
    "itou": "unsigned values are 64-bit signed numbers here: a negative number's conversion would differ",
    "utoi": "unsigned values are 64-bit signed numbers here: a large unsigned's conversion would differ",
    "ftou": "unsigned values are 64-bit signed numbers here: the conversion would differ",
    "autoinc": "its values depend on the order of evaluation, which an incremental engine does not fix",
    "nil": "records are not supported",
}

def parse(text: str) -> Source:
    """The syntax tree of a Soufflé program; a :class:`DatalogError` with line and column if it does not parse.

    Nesting deeper than :data:`~ddflow.plan.deep.NESTING_LIMIT` levels is refused before the parser (a
    recursive descent) reads it: :func:`check_nesting`.
    """
    toks = tokens(text)
    check_nesting(toks)
    return expand(_Parser(toks).program())


class _Parser(Directives):
    """Rules, literals and terms (the directives and token helpers: :class:`Directives`)."""

    # -- rules ---------------------------------------------------------------------
    def rule(self) -> None:
        start = self.tok.pos
        heads = [self.atom()]
        while self.at(","):
            self.take()
            heads.append(self.atom())
        if self.at("<="):
            self.subsumption(heads, start)
            return
        bodies: list[list[Literal]] = [[]]
        if self.at(":-"):
            self.take()
            bodies = self.disjunction()
        elif not self.at("."):
            self.fail("expected ':-' or '.'" if len(heads) == 1 else "expected ':-'")
        self.expect(".", "'.' at the end of the rule")
        if bodies == [[]] and len(heads) > 1:
            raise DatalogError("a fact has one atom", heads[1].pos)
        for head in heads:
            if head.negated:
                raise DatalogError("a rule's head cannot be negated", head.pos)
            for body in bodies:
                self.src.rules.append(Rule(head, tuple(body), start))
        if self.at("."):  # ``.plan`` after a rule is a directive token; a stray '.' is not
            self.fail("expected a rule or a directive")

    def subsumption(self, heads: list[Atom], start) -> None:
        """``r(...) <= r(...) :- body.`` (at the ``<=``)."""
        le = self.take()
        if len(heads) > 1:
            raise DatalogError("a subsumptive rule has one dominated head", heads[1].pos)
        dominating = self.atom()
        for h in (heads[0], dominating):
            if h.rel != heads[0].rel or dominating.rel != heads[0].rel:
                raise DatalogError("a subsumptive rule's two heads name one relation", dominating.pos)
            for t in h.args:
                if isinstance(t, Wild):
                    raise DatalogError("a subsumptive rule's heads name their values (no _)", t.pos)
        self.expect(":-", "':-' and the body of the subsumptive rule")
        bodies = self.disjunction()
        self.expect(".", "'.' at the end of the rule")
        for body in bodies:
            self.src.subsumptions.append(Subsumption(heads[0], dominating, tuple(body), le.pos))

    def disjunction(self) -> list[list[Literal]]:
        """Bodies separated by ``;``, each a conjunction: the alternatives, one rule each (Soufflé's meaning)."""
        out = self.conjunction()
        while self.at(";"):
            self.take()
            out.extend(self.conjunction())
        return out

    def conjunction(self) -> list[list[Literal]]:
        """Literals separated by ``,``; a parenthesized disjunction among them multiplies the alternatives
        (``a, (b ; c)`` is ``a, b`` or ``a, c``), at most :data:`ALTERNATIVES_LIMIT` of them."""
        start = self.tok
        alts = self.group()
        while self.at(","):
            self.take()
            item = self.group()
            alts = [a + b for a in alts for b in item]
            if len(alts) > ALTERNATIVES_LIMIT:
                raise DatalogError(f"the disjunctions of this body expand to more than {ALTERNATIVES_LIMIT:,} "
                                   "rules", start.pos)
        if not self.at(".") and not self.at(";") and not self.at("}") and not self.at(")"):
            self.fail("expected ',', ';' or '.'")
        return alts

    def group(self) -> list[list[Literal]]:
        """One literal, or a parenthesized disjunction (its alternatives)."""
        if self.at("(") and self._parenthesized_body():
            self.take()
            alts = self.disjunction()
            self.expect(")", "')' at the end of the parenthesized body")
            return alts
        return [[self.literal()]]

    def literal(self) -> Literal:
        t = self.tok
        if self.at("!"):
            self.take()
            if self.tok.text in ("contains", "match") and self.peek().text == "(":
                inner = self.literal()
                return Test(inner.name, inner.args, t.pos, negated=True)
            if self._atom_ahead():
                a = self.atom()
                return Atom(a.rel, a.args, t.pos, negated=True)
            if self.tok.kind != "id" or not self.peek().text == "(" or self.tok.text in FUNCTORS:
                if self.at("("):
                    raise DatalogError("negation of a parenthesized body is not supported", self.tok.pos)
                self.fail("expected an atom after '!'")
            a = self.atom()
            return Atom(a.rel, a.args, t.pos, negated=True)
        if t.kind == "id" and t.text in ("true", "false") and self.peek().text != "(":
            self.take()
            return Compare("=", Const(1, "number", t.pos), Const(1 if t.text == "true" else 0, "number", t.pos), t.pos)
        if t.kind == "id" and t.text in ("contains", "match") and self.peek().text == "(":
            self.take()
            self.take()
            args = [self.term()]
            while self.at(","):
                self.take()
                args.append(self.term())
            self.expect(")", "')' or ','")
            if len(args) != 2:
                raise DatalogError(f"{t.text} takes 2 arguments, got {len(args)}", t.pos)
            return Test(t.text, tuple(args), t.pos)
        if self._atom_ahead():
            return self.atom()
        if t.kind == "id" and self.peek().text == "(" and t.text not in FUNCTORS and t.text not in AGGREGATES \
                and t.text not in UNSUPPORTED_FUNCTORS:
            return self.atom()
        left = self.term()
        op = self.tok
        if op.text not in ("=", "!=", "<", "<=", ">", ">="):
            self.fail("expected a comparison (= != < <= > >=)")
        self.take()
        right = self.term()
        return Compare(op.text, left, right, op.pos)

    def _parenthesized_body(self) -> bool:
        """At '(': does it hold a body (an atom or ';' inside) rather than an expression?"""
        depth, j = 0, self.i
        while j < len(self.toks):
            t = self.toks[j]
            if t.text == "(":
                depth += 1
            elif t.text == ")":
                depth -= 1
                if depth == 0:
                    return False
            elif depth == 1 and t.text in (";", ","):
                return True
            elif t.kind in ("end",) or t.text == ".":
                return False
            j += 1
        return False

    def atom(self) -> Atom:
        name = self.qualified("a relation name")
        self.expect("(", "'(' after the relation name")
        args: list[Term] = []
        if not self.at(")"):
            while True:
                args.append(self.term())
                if not self.at(","):
                    break
                self.take()
        self.expect(")", "')' or ','")
        return Atom(name.text, tuple(args), name.pos)

    # -- terms ---------------------------------------------------------------------
    def term(self, level: int = 0) -> Term:
        """Binary operators by Soufflé's precedence (:data:`BINARY_LEVELS`, loosest first), each level's run
        one node (:func:`_chained`)."""
        if level == len(BINARY_LEVELS):
            return self.unary()
        ops = BINARY_LEVELS[level]
        left = self.term(level + 1)
        rest = []
        while self.tok.kind in ("op", "id") and self.tok.text in ops:
            op = self.take()
            rest.append((op, self.term(level + 1)))
        if level == 0 and self.tok.kind == "id" and self.tok.text in UNSUPPORTED_FUNCTORS:
            name = self.tok.text
            raise DatalogError(f"the functor {name} is not supported ({UNSUPPORTED_FUNCTORS[name]})", self.tok.pos)
        return _chained(left, rest)

    def unary(self) -> Term:
        """``-``, ``bnot``, ``lnot`` (looser than ``^``: ``-2 ^ 2`` is -4), then a power."""
        if self.at("-") or self.at("bnot") or self.at("lnot"):
            ops = []
            while self.at("-") or self.at("bnot") or self.at("lnot"):  # a run of signs: no parser frames
                ops.append(self.take())
                self._nest(len(ops), ops[-1])
            self.depth += len(ops)
            try:
                inner = self.power()
            finally:
                self.depth -= len(ops)
            for op in reversed(ops):
                if op.text == "-" and isinstance(inner, Const) and inner.kind in ("number", "float"):
                    inner = Const(-inner.value, inner.kind, op.pos)
                else:
                    inner = Functor("neg" if op.text == "-" else op.text, (inner,), op.pos)
            return inner
        return self.power()

    def power(self) -> Term:
        """``a ^ b``, right-associative; its right side may be signed (``2 ^ -1``)."""
        base = self.primary()
        if not self.at("^"):
            return base
        op = self.take()
        self.depth += 1
        try:
            self._nest(0, op)
            exponent = self.unary()
        finally:
            self.depth -= 1
        return BinOp("^", base, exponent, op.pos)

    def _nest(self, extra: int, tok: Token) -> None:
        """Refuse nesting past :data:`~ddflow.plan.deep.NESTING_LIMIT` levels (the parser recurses per level)."""
        if self.depth + extra > NESTING_LIMIT:
            raise DatalogError(f"expression nested {self.depth + extra:,} deep; the limit is {NESTING_LIMIT:,}",
                               tok.pos)

    def primary(self) -> Term:
        self.depth += 1
        try:
            self._nest(0, self.tok)
            return self._primary()
        finally:
            self.depth -= 1

    def _primary(self) -> Term:
        t = self.tok
        if t.kind == "num":
            self.take()
            text = t.text.rstrip("u")
            base = 16 if text[:2].lower() == "0x" else 2 if text[:2].lower() == "0b" else 10
            return Const(int(text[2:] if base != 10 else text, base), "number", t.pos)
        if t.kind == "float":
            self.take()
            return Const(float(t.text), "float", t.pos)
        if t.kind == "str":
            self.take()
            return Const(_unquote(t.text), "symbol", t.pos)
        if self.at("("):
            self.take()
            inner = self.term()
            self.expect(")")
            return inner
        if self.at("$"):
            if self.peek().kind == "id" and self.peek().pos.col == t.pos.col + 1:
                raise DatalogError(f"algebraic data type constructors (${self.peek().text}(...)) are not supported",
                                   t.pos)
            raise DatalogError("the counter $ is not supported (its values depend on the order of evaluation, "
                               "which an incremental engine does not fix)", t.pos)
        if self.at("["):
            raise DatalogError("records ([a, b, ...]) are not supported", t.pos)
        if self.at("@"):
            raise DatalogError(f"user-defined functors (@{self.peek().text}) are not supported: their code is C++ "
                               "that ddflow cannot run", t.pos)
        if t.kind != "id":
            self.fail("expected a term")
        if t.text == "_":
            self.take()
            return Wild(t.pos)
        if t.text in UNSUPPORTED_FUNCTORS:
            raise DatalogError(f"the functor {t.text} is not supported ({UNSUPPORTED_FUNCTORS[t.text]})", t.pos)
        if t.text in AGGREGATES and (self.peek().text != "(" or t.text not in FUNCTORS or self._colon_after_parens()):
            return self.aggregate()
        if t.text == "as" and self.peek().text == "(":  # as(x, T): the second argument names a type
            self.take()
            self.take()
            x = self.term()
            self.expect(",", "',' and a type name")
            typ = self.ident("a type name")
            self.expect(")")
            return Functor("as", (x, Const(typ.text, "type", typ.pos)), t.pos)
        if t.text in FUNCTORS and self.peek().text == "(":
            self.take()
            self.take()
            args: list[Term] = []
            if not self.at(")"):
                while True:
                    args.append(self.term())
                    if not self.at(","):
                        break
                    self.take()
            self.expect(")", "')' or ','")
            arity = FUNCTORS[t.text]
            if arity is not None and len(args) != arity:
                raise DatalogError(f"{t.text} takes {arity} argument{'s' * (arity != 1)}, got {len(args)}", t.pos)
            if t.text == "range" and len(args) not in (2, 3):
                raise DatalogError(f"range takes 2 or 3 arguments, got {len(args)}", t.pos)
            if t.text in ("min", "max", "cat") and len(args) < 2:
                raise DatalogError(f"the functor {t.text} takes at least 2 arguments, got {len(args)}", t.pos)
            return Functor(t.text, tuple(args), t.pos)
        if self.peek().text == "(":
            raise DatalogError(f"unknown functor {t.text!r} (an atom is not a term)", t.pos)
        self.take()
        return Var(t.text, t.pos)

    def _colon_after_parens(self) -> bool:
        """At ``min (``: is the parenthesized group followed by ``:`` (an aggregate, not the functor)?"""
        depth, j = 0, self.i + 1
        while j < len(self.toks) and self.toks[j].kind != "end":
            if self.toks[j].text == "(":
                depth += 1
            elif self.toks[j].text == ")":
                depth -= 1
                if depth == 0:
                    return self.toks[j + 1].text == ":"
            j += 1
        return False

    def aggregate(self) -> Aggregate:
        """``func [expr] : { body }`` or ``func [expr] : atom``."""
        t = self.take()
        expr = None
        if not self.at(":"):
            if t.text == "count":
                self.fail("expected ':' after count")
            expr = self.term()
            if not self.at(":"):
                self.fail(f"expected ':' after the {t.text} expression")
        elif t.text != "count":
            self.fail(f"expected the expression {t.text} aggregates before ':'")
        self.take()
        if self.at("{"):
            self.take()
            if self.at("}"):
                raise DatalogError(f"the {t.text} aggregate's body {{}} is empty: write what it ranges over, "
                                   f"as in {t.text}{' x' if t.text != 'count' else ''} : {{ r(x) }}", self.tok.pos)
            bodies = self.disjunction()
            if len(bodies) > 1:
                raise DatalogError("a disjunction inside an aggregate is not supported", t.pos)
            self.expect("}", "'}' at the end of the aggregate's body")
            body = bodies[0]
        else:
            if self.tok.kind != "id" or self.peek().text != "(":
                self.fail("expected '{' or an atom after ':'")
            body = [self.atom()]
        return Aggregate(t.text, expr, tuple(body), t.pos)


def _chained(first: Term, rest: list[tuple[Token, Term]]) -> Term:
    """``first op1 t1 op2 t2 ...``: itself, one BinOp, or one :class:`~ddflow.datalog.syntax.Chain` (3 or more)."""
    if not rest:
        return first
    if len(rest) == 1:
        (op, t), = rest
        return BinOp(op.text, first, t, op.pos)
    return Chain(first, tuple((op.text, t) for op, t in rest), rest[0][0].pos)
