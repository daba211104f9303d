"""The Datalog program as written: Soufflé's syntax tree, every node with its line and column.

The parser (:mod:`ddflow.datalog.parser`) builds these; the checks
(:mod:`ddflow.datalog.program`) read them; nothing here knows the plan
IR.  Terms are variables, ``_``, constants, arithmetic and functor
calls, and aggregates; a rule's body is a list of literals: atoms
(maybe negated) and comparisons.

>>> Atom("edge", (Var("x", Pos(1, 6)), Const(2, "number", Pos(1, 9))), Pos(1, 1))
edge(x, 2)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ddflow.errors import SchemaError


@dataclass(frozen=True)
class Pos:
    """A place in the program text: 1-based line and column."""

    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.line}:{self.col}"


class DatalogError(SchemaError):
    """A program ddflow refuses, with where: ``line:col: what`` (a :class:`~ddflow.errors.SchemaError`)."""

    def __init__(self, message: str, pos: Pos | None = None, source: str = "Datalog"):
        self.pos = pos
        self.bare = message
        where = f" at line {pos.line}, column {pos.col}" if pos is not None else ""
        super().__init__(f"{source}{where}: {message}")


class Term:
    """A term of an atom or an expression."""

    pos: Pos

    def variables(self) -> set[str]:
        """Names of the variables the term reads (an aggregate's own body variables excluded)."""
        return set()


@dataclass(frozen=True)
class Var(Term):
    name: str
    pos: Pos = field(compare=False)

    def variables(self) -> set[str]:
        return {self.name}

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Wild(Term):
    """``_``: any value, bound to nothing."""

    pos: Pos = field(compare=False)

    def __repr__(self) -> str:
        return "_"


@dataclass(frozen=True)
class Const(Term):
    """A literal: ``kind`` is ``number``, ``float`` or ``symbol`` (an ``unsigned`` literal is a number)."""

    value: Any
    kind: str
    pos: Pos = field(compare=False)

    def __repr__(self) -> str:
        return f'"{self.value}"' if self.kind == "symbol" else repr(self.value)


@dataclass(frozen=True)
class BinOp(Term):
    """Arithmetic: ``+ - * / % ^`` and the bitwise and logical functors written infix (``band`` ...)."""

    op: str
    left: Term
    right: Term
    pos: Pos = field(compare=False)

    def variables(self) -> set[str]:
        return self.left.variables() | self.right.variables()

    def __repr__(self) -> str:
        return f"({self.left!r} {self.op} {self.right!r})"


@dataclass(frozen=True)
class Chain(Term):
    """Arithmetic of one precedence read left to right, ``a + b - c ...`` (three operands or more), as one node:
    a generated 10,000-term sum nests no deeper than a short one in any pass over the program."""

    first: Term
    rest: tuple[tuple[str, Term], ...]
    pos: Pos = field(compare=False)

    def operands(self) -> tuple[Term, ...]:
        return (self.first, *(t for _, t in self.rest))

    def variables(self) -> set[str]:
        return set().union(*(t.variables() for t in self.operands()))

    def __repr__(self) -> str:
        return "(" + repr(self.first) + "".join(f" {op} {t!r}" for op, t in self.rest) + ")"


@dataclass(frozen=True)
class Functor(Term):
    """A built-in functor call (``cat``, ``strlen``, ``min`` ...) or unary minus (``neg``)."""

    name: str
    args: tuple[Term, ...]
    pos: Pos = field(compare=False)

    def variables(self) -> set[str]:
        return set().union(*(a.variables() for a in self.args)) if self.args else set()

    def __repr__(self) -> str:
        return f"{self.name}({', '.join(map(repr, self.args))})"


@dataclass(frozen=True)
class Aggregate(Term):
    """``func expr : { body }`` (``count`` has no expression); ``func expr : atom`` is a body of one atom."""

    func: str
    expr: Term | None
    body: tuple["Literal", ...]
    pos: Pos = field(compare=False)
    #: The variables injected from the rule (one value per binding of them), as Soufflé scopes them
    #: (:mod:`ddflow.datalog.scope`); None until the rule is scoped.
    injected: frozenset[str] | None = field(default=None, compare=False)

    def variables(self) -> set[str]:
        return set()  # its body's variables are its own or injected: see ``injected``

    def inner_variables(self) -> set[str]:
        """Every variable the aggregate mentions (expression and body)."""
        out = self.expr.variables() if self.expr is not None else set()
        for lit in self.body:
            out |= lit.variables()
        return out

    def __repr__(self) -> str:
        e = f" {self.expr!r}" if self.expr is not None else ""
        return f"{self.func}{e} : {{ {', '.join(map(repr, self.body))} }}"


class Literal:
    """A literal of a rule body."""

    pos: Pos

    def variables(self) -> set[str]:
        return set()


@dataclass(frozen=True)
class Atom(Literal):
    """``rel(t1, ..., tn)``; ``negated``: ``!rel(...)``."""

    rel: str
    args: tuple[Term, ...]
    pos: Pos = field(compare=False)
    negated: bool = False

    def variables(self) -> set[str]:
        return set().union(*(a.variables() for a in self.args)) if self.args else set()

    def __repr__(self) -> str:
        return f"{'!' if self.negated else ''}{self.rel}({', '.join(map(repr, self.args))})"


@dataclass(frozen=True)
class Compare(Literal):
    """``left op right`` with ``op`` one of ``= != < <= > >=``."""

    op: str
    left: Term
    right: Term
    pos: Pos = field(compare=False)

    def variables(self) -> set[str]:
        return self.left.variables() | self.right.variables()

    def aggregates(self) -> list[Aggregate]:
        return [t for t in (self.left, self.right) if isinstance(t, Aggregate)]

    def __repr__(self) -> str:
        return f"{self.left!r} {self.op} {self.right!r}"


@dataclass(frozen=True)
class Test(Literal):
    """``contains(sub, s)`` (``sub`` occurs in ``s``) or ``match(pattern, s)`` (the regular expression matches
    all of ``s``): Soufflé's string constraints."""

    name: str
    args: tuple[Term, ...]
    pos: Pos = field(compare=False)
    negated: bool = False

    def variables(self) -> set[str]:
        return set().union(*(a.variables() for a in self.args))

    def __repr__(self) -> str:
        return f"{'!' if self.negated else ''}{self.name}({', '.join(map(repr, self.args))})"


@dataclass(frozen=True)
class Rule:
    """``head :- body.``; a fact has an empty body."""

    head: Atom
    body: tuple[Literal, ...]
    pos: Pos = field(compare=False)

    def __repr__(self) -> str:
        return f"{self.head!r} :- {', '.join(map(repr, self.body))}." if self.body else f"{self.head!r}."


@dataclass(frozen=True)
class Subsumption:
    """``r(dominated...) <= r(dominating...) :- body.``: a tuple of ``r`` that another tuple of ``r`` dominates
    (the body holding of the two) is deleted (see :func:`~ddflow.datalog.program.subsumption_rules`)."""

    dominated: Atom
    dominating: Atom
    body: tuple[Literal, ...]
    pos: Pos = field(compare=False)

    def __repr__(self) -> str:
        return f"{self.dominated!r} <= {self.dominating!r} :- {', '.join(map(repr, self.body))}."


@dataclass(frozen=True)
class Decl:
    """``.decl name(attr: type, ...)``: the attribute names and their type names as written."""

    name: str
    attrs: tuple[tuple[str, str], ...]
    pos: Pos = field(compare=False)
    #: ``eqrel``: an equivalence relation (closed by :func:`~ddflow.datalog.program.equivalence_rules`).
    eqrel: bool = False


@dataclass(frozen=True)
class IO:
    """``.input`` / ``.output`` / ``.printsize`` of one relation, with its ``(key=value, ...)`` parameters."""

    kind: str
    rel: str
    params: tuple[tuple[str, str], ...]
    pos: Pos = field(compare=False)

    def param(self, key: str, default: str | None = None) -> str | None:
        for k, v in self.params:
            if k == key:
                return v
        return default


@dataclass(frozen=True)
class Pragma:
    """``.pragma "key" "value"`` (the hints are pragmas: see :mod:`ddflow.datalog.hints`)."""

    key: str
    value: str
    pos: Pos = field(compare=False)


@dataclass
class Source:
    """A parsed program: declarations, type aliases, rules (facts included), I/O directives and pragmas, in order."""

    decls: list[Decl] = field(default_factory=list)
    types: dict[str, tuple[str, Pos]] = field(default_factory=dict)  # alias -> (the type it names, where)
    rules: list[Rule] = field(default_factory=list)
    io: list[IO] = field(default_factory=list)
    pragmas: list[Pragma] = field(default_factory=list)
    subsumptions: list[Subsumption] = field(default_factory=list)
    components: dict[str, "Component"] = field(default_factory=dict)  # .comp definitions by name
    inits: list["Init"] = field(default_factory=list)  # .init instances, in order
    overrides: list[tuple[str, Pos]] = field(default_factory=list)  # .override (inside a component)


@dataclass
class Component:
    """``.comp Name<T, ...> : Base<A, ...>, ... { items }``: its items as a Source of its own (names relative)."""

    name: str
    params: tuple[str, ...]
    bases: tuple[tuple[str, tuple[str, ...], Pos], ...]
    body: Source
    pos: Pos


@dataclass(frozen=True)
class Init:
    """``.init name = Comp<A, ...>``."""

    name: str
    comp: str
    args: tuple[str, ...]
    pos: Pos = field(compare=False)