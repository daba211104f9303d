"""The tokens of a Soufflé program, each with its line and column; and the nesting check run before parsing.

Comments (``//``, ``/* */``) and blanks are dropped; ``.word`` at the start
of an item is a directive token when ``word`` is one of :data:`DIRECTIVES`;
the C preprocessor's ``#`` is refused.

>>> [t.text for t in tokens('r(x) :- e(x, "a"). // done')]
['r', '(', 'x', ')', ':-', 'e', '(', 'x', ',', '"a"', ')', '.', '']
"""
from __future__ import annotations

import re

from ddflow.datalog.syntax import DatalogError, Pos
from ddflow.plan.deep import NESTING_LIMIT

DIRECTIVES = {"decl", "type", "input", "output", "printsize", "pragma", "plan", "number_type", "symbol_type",
              "comp", "init", "functor", "override", "limitsize", "include", "once"}

_TOKEN = re.compile(r"""
    (?P<ws>[ \t\r]+|\n)
  | (?P<lcomment>//[^\n]*)
  | (?P<bcomment>/\*.*?\*/)
  | (?P<float>\d+\.\d+(?:[eE][-+]?\d+)?)
  | (?P<num>0[xX][0-9a-fA-F]+|0[bB][01]+|\d+)(?P<unsigned>u?)
  | (?P<str>"(?:[^"\\\n]|\\.)*")
  | (?P<id>[A-Za-z_?][A-Za-z0-9_?]*)
  | (?P<op>:-|<=|>=|!=|<:|::|[-+*/%^(),.:;=<>!{}\[\]|$#@&~])
""", re.VERBOSE | re.DOTALL)


class Token:
    __slots__ = ("kind", "text", "pos")

    def __init__(self, kind: str, text: str, pos: Pos):
        self.kind, self.text, self.pos = kind, text, pos

    def __repr__(self) -> str:
        return f"{self.kind}:{self.text!r}@{self.pos}"


def tokens(text: str) -> list[Token]:
    """The program's tokens with their positions (comments and blanks dropped); an unknown character is refused."""
    out: list[Token] = []
    i, line, col = 0, 1, 1
    n = len(text)
    while i < n:
        m = _TOKEN.match(text, i)
        if m is None:
            if text.startswith("/*", i):
                raise DatalogError("a /* comment is never closed", Pos(line, col))
            if text[i] == '"':
                raise DatalogError("a string is never closed on its line", Pos(line, col))
            raise DatalogError(f"unexpected character {text[i]!r}", Pos(line, col))
        kind = m.lastgroup if m.lastgroup != "unsigned" else "num"
        s = m.group(0)
        pos = Pos(line, col)
        if kind not in ("ws", "lcomment", "bcomment"):
            if kind == "op" and s == "." and i + 1 < n and text[i + 1].isalpha():
                w = re.match(r"[A-Za-z_]+", text[i + 1:]).group(0)
                if w in DIRECTIVES and (not out or out[-1].text == "." or _item_start(out)):
                    out.append(Token("dir", w, pos))
                    col += 1 + len(w)
                    i += 1 + len(w)
                    continue
            if kind == "op" and s == "#":
                raise DatalogError("the C preprocessor (#include, #define) is not supported", pos)
            out.append(Token(kind, s, pos))
        nl = s.count("\n")
        if nl:
            line += nl
            col = len(s) - s.rfind("\n")
        else:
            col += len(s)
        i = m.end()
    out.append(Token("end", "", Pos(line, col)))
    return out


def _item_start(out: list[Token]) -> bool:
    """The previous token ends an item (a directive's last word or parenthesis), so ``.word`` starts the next."""
    last = out[-1]
    return last.kind in ("id", "str", "num") or last.text in (")", "]", "{", "}")

def check_nesting(toks: list[Token]) -> None:
    """A DatalogError naming the depth if parentheses, braces and runs of signs nest past the limit.  O(tokens).

    >>> check_nesting(tokens("r(x) :- e(x, y), x = " + "(" * 1500 + "y" + ")" * 1500 + "."))
    Traceback (most recent call last):
      ...
    ddflow.datalog.syntax.DatalogError: Datalog at line 1, column 1022: expression nested 1,500 deep; the limit is 1,000
    """
    depth = run = deepest = 0
    first = None
    for t in toks:
        if (t.text == "-" and t.kind == "op") or (t.text in ("bnot", "lnot") and t.kind == "id"):
            run += 1
        else:
            run = 0
            if t.text in ("(", "{"):
                depth += 1
            elif t.text in (")", "}"):
                depth -= 1
        if depth + run > deepest:
            deepest = depth + run
            if deepest == NESTING_LIMIT + 1:
                first = t
    if deepest > NESTING_LIMIT:
        raise DatalogError(f"expression nested {deepest:,} deep; the limit is {NESTING_LIMIT:,}", first.pos)


def unquote(s: str) -> str:
    body = s[1:-1]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t", "r": "\r"}.get(m.group(1), m.group(1)), body)
