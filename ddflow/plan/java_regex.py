"""Java regular expressions (Spark's) read by Python's ``re``: the shared syntax translated, the rest refused.

Spark compiles patterns with ``java.util.regex``.  Most of its syntax means the same in Python's ``re`` with
``re.ASCII`` (Java's ``\\d \\w \\s`` and ``(?i)`` are ASCII by default); the differences are handled here, once per
pattern, when the query is planned:

- translated: ``.`` (Java's excludes every line terminator: ``\\r``, ``\\u0085``, ``\\u2028``, ``\\u2029`` too),
  ``$`` and ``\\Z`` (before a final line terminator of any kind), ``\\z``, ``\\e``, named groups ``(?<name>...)``
  and ``\\k<name>``;
- refused, naming the construct: ``\\p{...}`` classes, ``\\Q...\\E`` quoting, ``\\b`` (Java's word boundary counts
  Unicode letters), ``\\h \\v \\R \\X \\G \\c``, ``\\x{...}``, nested classes and ``&&`` intersections, inline flags
  other than a leading ``(?i)``, comments ``(?#...)``.

Possessive quantifiers and atomic groups mean the same in Python 3.11's ``re``; a pattern Python cannot compile
is refused with its error.

>>> python_pattern("(?<y>a+)\\\\k<y>\\\\z")
'(?P<y>a+)(?P=y)\\\\Z'
>>> python_replacement("<$1>", 1)(re.match("(a)", "a"))
'<a>'
"""
from __future__ import annotations

import re
from typing import Callable

from ddflow.plan.functions import TypeMismatch

_DOT = "[^\\n\\r\x85\u2028\u2029]"
_END = "(?:\\Z|(?=\\r\\n\\Z)|(?<!\\r)(?=\\n\\Z)|(?=[\\r\x85\u2028\u2029]\\Z))"
_REFUSED_ESCAPES = {"p": "the Unicode class \\p{...}", "P": "the Unicode class \\P{...}",
                    "Q": "\\Q...\\E quoting", "E": "\\Q...\\E quoting",
                    "b": "\\b (Java's word boundary counts Unicode letters, its \\w does not)", "B": "\\B",
                    "h": "\\h", "H": "\\H", "v": "\\v (Java's vertical whitespace)", "V": "\\V", "R": "\\R",
                    "X": "\\X", "G": "\\G", "c": "\\c (a control character)", "N": "\\N{...}"}


def _refuse(pattern: str, what: str) -> TypeMismatch:
    return TypeMismatch(f"the Java regular expression {pattern!r} uses {what}, which ddflow does not read")


def python_pattern(pattern: str) -> str:
    """``pattern`` (Java syntax) as a Python pattern meaning the same, for ``re.compile(..., re.ASCII)``.

    Raises :class:`~ddflow.plan.functions.TypeMismatch` naming a Java-only construct.  O(len(pattern)).
    """
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class = False
    if pattern.startswith("(?i)"):
        out.append("(?i)")
        i = 4
    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 >= n:
                raise _refuse(pattern, "a trailing backslash")
            d = pattern[i + 1]
            if d in _REFUSED_ESCAPES:
                raise _refuse(pattern, _REFUSED_ESCAPES[d])
            if d == "x" and pattern.startswith("{", i + 2):
                raise _refuse(pattern, "\\x{...}")
            if d == "k" and not in_class:
                m = re.compile(r"<([A-Za-z][A-Za-z0-9]*)>").match(pattern, i + 2)
                if m is None:
                    raise _refuse(pattern, "\\k without <name>")
                out.append(f"(?P={m.group(1)})")
                i = m.end()
                continue
            if d == "z":
                out.append("\\Z")
            elif d == "Z":
                out.append(_END)
            elif d == "e":
                out.append("\\x1b")
            else:
                out.append(pattern[i:i + 2])
            i += 2
            continue
        if in_class:
            if c == "[":
                raise _refuse(pattern, "a class inside a class (Java's union)")
            if pattern.startswith("&&", i):
                raise _refuse(pattern, "a class intersection &&")
            if c == "]":
                in_class = False
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            j = i + 1 + pattern.startswith("^", i + 1)
            if pattern.startswith("]", j):
                raise _refuse(pattern, "']' first in a class")
            out.append(pattern[i:j])
            i = j
            continue
        if c == "(" and pattern.startswith("(?", i):
            if pattern.startswith("(?#", i):
                raise _refuse(pattern, "a comment (?#...)")
            m = re.compile(r"\(\?<([A-Za-z][A-Za-z0-9]*)>").match(pattern, i)
            if m is not None:
                out.append(f"(?P<{m.group(1)}>")
                i = m.end()
                continue
            m = re.compile(r"\(\?([a-zA-Z-]+)[):]").match(pattern, i)
            if m is not None:
                if set(m.group(1)) - {"i"}:
                    raise _refuse(pattern, f"the inline flag group {m.group(0)!r}")
                if m.group(0).endswith(")"):
                    raise _refuse(pattern, "an inline flag after the pattern's start")
        if c == "{" and pattern.startswith("{,", i):
            raise _refuse(pattern, "a quantifier {,n} (not Java)")
        if c == ".":
            out.append(_DOT)
        elif c == "$":
            out.append(_END)
        else:
            out.append(c)
        i += 1
    if in_class:
        raise _refuse(pattern, "an unclosed class")
    text = "".join(out)
    try:
        re.compile(text, re.ASCII)
    except re.error as err:
        raise TypeMismatch(f"the regular expression {pattern!r} does not compile: {err}") from None
    return text


def compiled(pattern: str) -> re.Pattern:
    """``pattern`` (Java syntax) compiled by Python's ``re`` with Java's meaning."""
    return re.compile(python_pattern(pattern), re.ASCII)


def python_replacement(rep: str, groups: int) -> Callable[[re.Match], str]:
    """Java's replacement string (``$n``, ``\\x`` a literal x) as a function of a match; ``${name}`` refused.

    ``$n`` takes as many digits as still name a group (Java's rule); a group that did not take part is empty.
    A reference to a group the pattern lacks is refused (Java raises).  O(len(rep)).
    """
    parts: list = []  # literal text, and (group,) references
    i, n = 0, len(rep)
    lit: list[str] = []
    while i < n:
        c = rep[i]
        if c == "\\":
            if i + 1 >= n:
                raise TypeMismatch(f"the replacement {rep!r} ends with a backslash")
            lit.append(rep[i + 1])
            i += 2
        elif c == "$":
            if i + 1 < n and rep[i + 1] == "{":  # Spark 4 gave '' for ${x} of a group (?<x>...) that matched
                raise TypeMismatch(f"the replacement {rep!r} names a group (${{name}}): use its number, $n")
            if i + 1 < n and rep[i + 1].isdigit():
                k = int(rep[i + 1])
                j = i + 2
                while j < n and rep[j].isdigit() and int(rep[i + 1:j + 1]) <= groups:
                    k = int(rep[i + 1:j + 1])
                    j += 1
                if k > groups:
                    raise TypeMismatch(f"the replacement {rep!r} refers to group {k}; the pattern has {groups}")
                ref, i = k, j
            else:
                raise TypeMismatch(f"the replacement {rep!r} has a '$' naming no group (write \\$ for a dollar)")
            parts.append("".join(lit))
            lit = []
            parts.append((ref,))
        else:
            lit.append(c)
            i += 1
    parts.append("".join(lit))

    def render(m: re.Match) -> str:
        return "".join(p if isinstance(p, str) else (m.group(p[0]) or "") for p in parts)
    return render


__all__ = ["python_pattern", "python_replacement", "compiled"]
