"""The directives of a Soufflé program (``.decl``, ``.type``, I/O, ``.pragma``, ``.plan``, ``.comp``, ``.init``,
``.override``) and the token helpers every part of the parser uses: the base of :class:`~ddflow.datalog.parser._Parser`.

>>> from ddflow.datalog.parser import parse
>>> [(d.name, d.attrs) for d in parse(".decl A, B(x: number) brie").decls]
[('A', (('x', 'number'),)), ('B', (('x', 'number'),))]
"""
from __future__ import annotations

from ddflow.datalog.syntax import IO, Component, DatalogError, Decl, Init, Pragma, Source
from ddflow.datalog.tokens import Token
from ddflow.datalog.tokens import unquote as _unquote

#: Directives Soufflé has that ddflow refuses, each with why.
REFUSED_DIRECTIVES = {
    "functor": ".functor (user-defined functors) is not supported: their code is C++ that ddflow cannot run",
    "limitsize": ".limitsize is not supported: it stops a relation early, so its contents would depend on the "
                 "order of evaluation",
    "include": ".include is not supported: pass the included program's text as part of the program",
    "once": ".once is not supported",
}
_ADT = "algebraic data types (.type T = A {x: number} | B {}) are not supported"
QUALIFIERS_IGNORED = {"brie", "btree", "btree_delete", "inline", "no_inline", "magic", "no_magic", "overridable",
                      "input", "output", "printsize"}


class Directives:
    """Token helpers and directives; :meth:`rule` (a subclass's) reads everything else."""

    def __init__(self, toks: list[Token]):
        self.toks = toks
        self.i = 0
        self.src = self.top = Source()
        self.depth = 0  # terms nested around the current one (parentheses, calls, aggregates)

    # -- token helpers -------------------------------------------------------------
    @property
    def tok(self) -> Token:
        return self.toks[self.i]

    def peek(self, k: int = 1) -> Token:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def take(self) -> Token:
        t = self.toks[self.i]
        self.i += 1
        return t

    def at(self, text: str) -> bool:
        return self.tok.kind in ("op", "id") and self.tok.text == text

    def expect(self, text: str, what: str | None = None) -> Token:
        if not self.at(text):
            self.fail(f"expected {what or repr(text)}")
        return self.take()

    def fail(self, expected: str, tok: Token | None = None) -> None:
        tok = tok or self.tok
        shown = "the end of the program" if tok.kind == "end" else repr(tok.text)
        raise DatalogError(f"unexpected {shown} ({expected})", tok.pos)

    def ident(self, what: str) -> Token:
        if self.tok.kind != "id":
            self.fail(f"expected {what}")
        return self.take()

    # -- items ---------------------------------------------------------------------
    def program(self) -> Source:
        while self.tok.kind != "end":
            if self.tok.kind == "dir":
                self.directive()
            else:
                self.rule()
        return self.src

    def directive(self) -> None:
        d = self.take()
        name = d.text
        if name == "decl":
            self.decl()
        elif name == "type":
            self.type_decl()
        elif name in ("number_type", "symbol_type"):
            t = self.ident("a type name")
            self.src.types[t.text] = ("number" if name == "number_type" else "symbol", t.pos)
        elif name in ("input", "output", "printsize"):
            self.io(name)
        elif name == "pragma":
            key = self.string("a pragma key")
            value = self.string("a pragma value") if self.tok.kind == "str" else ""
            self.src.pragmas.append(Pragma(key, value, d.pos))
        elif name == "plan":
            self.skip_plan()
        elif name == "comp":
            self.component(d)
        elif name == "init":
            inst = self.ident("an instance name")
            self.expect("=", "'=' and a component")
            comp = self.ident("a component name")
            self.src.inits.append(Init(inst.text, comp.text, self.type_args(), inst.pos))
        elif name == "override":
            rel = self.ident("a relation name")
            self.src.overrides.append((rel.text, rel.pos))
        else:
            raise DatalogError(REFUSED_DIRECTIVES[name], d.pos)

    def type_args(self) -> tuple[str, ...]:
        """``<A, B>`` after a component's name (none: ``()``)."""
        if not self.at("<"):
            return ()
        self.take()
        args = [self.ident("a type").text]
        while self.at(","):
            self.take()
            args.append(self.ident("a type").text)
        self.expect(">", "'>' or ','")
        return tuple(args)

    def component(self, d: Token) -> None:
        """``.comp Name<T...> : Base<...>, ... { items }``: its items parsed into a Source of their own."""
        if self.src is not self.top:
            raise DatalogError("a component defined inside a component is not supported: define it at the top",
                               d.pos)
        name = self.ident("a component name")
        params = self.type_args()
        bases = []
        if self.at(":"):
            self.take()
            while True:
                b = self.ident("a base component")
                bases.append((b.text, self.type_args(), b.pos))
                if not self.at(","):
                    break
                self.take()
        self.expect("{", "'{' and the component's items")
        body = Source()
        self.src = body
        try:
            while not self.at("}"):
                if self.tok.kind == "end":
                    self.fail("expected '}' at the end of the component")
                if self.tok.kind == "dir":
                    self.directive()
                else:
                    self.rule()
        finally:
            self.src = self.top
        self.take()
        if name.text in self.src.components:
            raise DatalogError(f"component {name.text} is defined twice", name.pos)
        self.src.components[name.text] = Component(name.text, params, tuple(bases), body, name.pos)

    def qualified(self, what: str) -> Token:
        """A name, maybe qualified by instances: ``London.train.edge`` (no blanks around the dots)."""
        first = self.ident(what)
        parts, end = [first.text], first.pos.col + len(first.text)
        while self.at(".") and self.tok.pos.col == end and self.peek().kind == "id" \
                and self.peek().pos.col == end + 1 and self.tok.pos.line == first.pos.line:
            self.take()
            nxt = self.take()
            parts.append(nxt.text)
            end = nxt.pos.col + len(nxt.text)
        return Token("id", ".".join(parts), first.pos)

    def _atom_ahead(self) -> bool:
        """At a (maybe qualified) relation name followed by '('."""
        j, line = self.i, self.tok.pos.line
        if self.toks[j].kind != "id":
            return False
        while self.toks[j + 1].text == "." and self.toks[j + 2].kind == "id" and self.toks[j + 1].pos.line == line \
                and self.toks[j + 1].pos.col == self.toks[j].pos.col + len(self.toks[j].text) \
                and self.toks[j + 2].pos.col == self.toks[j + 1].pos.col + 1:
            j += 2
        return self.toks[j + 1].text == "(" and j > self.i

    def string(self, what: str) -> str:
        if self.tok.kind != "str":
            self.fail(f"expected {what} (a string)")
        return _unquote(self.take().text)

    def decl(self) -> None:
        while True:
            names = [self.ident("a relation name")]
            while self.at(","):  # ``.decl A, B(x: number)``: several relations of one signature
                self.take()
                names.append(self.ident("a relation name"))
            name = names[0]
            self.expect("(", "'(' or ','")
            attrs: list[tuple[str, str]] = []
            if not self.at(")"):
                while True:
                    a = self.ident("an attribute name")
                    self.expect(":")
                    t = self.ident("a type")
                    attrs.append((a.text, t.text))
                    if attrs.count(attrs[-1]) > 1 or [x for x, _ in attrs].count(a.text) > 1:
                        raise DatalogError(f"relation {name.text}: attribute {a.text!r} is declared twice", a.pos)
                    if not self.at(","):
                        break
                    self.take()
            self.expect(")", "')' or ','")
            eqrel = False
            while self.tok.kind == "id" and self.tok.text in QUALIFIERS_IGNORED | {"eqrel"}:
                q = self.take()
                eqrel = eqrel or q.text == "eqrel"
                if q.text in ("input", "output", "printsize"):  # the old syntax: `.decl r(x: number) input`
                    self.src.io.extend(IO(q.text, n.text, (), q.pos) for n in names)
            for n in names:
                self.src.decls.append(Decl(n.text, tuple(attrs), n.pos, eqrel))
            if self.at("choice") or (self.tok.kind == "id" and self.tok.text.startswith("choice")):
                raise DatalogError("choice-domain is not supported: which tuple it keeps depends on the order "
                                   "tuples arrive, so results would depend on the history of updates", self.tok.pos)
            if not self.at(","):
                return
            self.take()

    def type_decl(self) -> None:
        name = self.ident("a type name")
        if self.at("<:"):
            self.take()
            base = self.ident("a type")
            self.src.types[name.text] = (base.text, name.pos)
            return
        if not self.at("="):  # ``.type T`` alone: Soufflé's old spelling of ``.symbol_type T``
            self.src.types[name.text] = ("symbol", name.pos)
            return
        self.take()
        if self.at("["):
            raise DatalogError("record types (.type T = [a: number, ...]) are not supported", self.tok.pos)
        first = self.ident("a type")
        if self.at("{"):
            raise DatalogError(_ADT, first.pos)
        members = [first]
        while self.at("|"):
            self.take()
            m = self.ident("a type")
            if self.at("{"):
                raise DatalogError(_ADT, m.pos)
            members.append(m)
        if len(members) == 1:
            self.src.types[name.text] = (first.text, name.pos)
        else:
            self.src.types[name.text] = ("|".join(m.text for m in members), name.pos)

    def io(self, kind: str) -> None:
        while True:
            rel = self.qualified("a relation name")
            params: list[tuple[str, str]] = []
            if self.at("("):
                self.take()
                while not self.at(")"):
                    key = self.ident("a parameter name")
                    self.expect("=")
                    if self.tok.kind == "str":
                        value = _unquote(self.take().text)
                    elif self.tok.kind in ("id", "num"):
                        value = self.take().text
                    else:
                        self.fail("expected a parameter value")
                    params.append((key.text, value))
                    if self.at(","):
                        self.take()
                    elif not self.at(")"):
                        self.fail("expected ',' or ')'")
                self.take()
            self.src.io.append(IO(kind, rel.text, tuple(params), rel.pos))
            if not self.at(","):
                return
            self.take()

    def skip_plan(self) -> None:
        """``.plan 0:(1,2), 1:(2,1)``: Soufflé's join orders; they never change results, so they are skipped."""
        while self.tok.kind == "num" or self.tok.text in (":", "(", ")", ","):
            self.take()
