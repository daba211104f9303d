"""Soufflé's fact files: ``facts/rel.facts`` in, ``out/rel.csv`` out (tab-separated), with the directives' options.

Options read from the directive's parameters: ``IO=file`` (and
``IO=stdout`` for an output; ``stdin``, ``sqlite`` and the rest are refused),
``filename`` (default ``rel.facts`` in the facts directory, ``rel.csv``
in the output directory; a relative name is read from those
directories), ``delimiter`` (default a tab) and ``headers=true`` (a
first line of attribute names, skipped on input, written on output).
Values: numbers and unsigned as integers, floats as floats, symbols as
the text between delimiters.  A nullary relation that holds is written
as one line ``()``.

>>> from ddflow.datalog.program import Relation
>>> from ddflow.datalog.syntax import Pos
>>> r = Relation("e", ("x", "s"), ("number", "symbol"), Pos(1, 1))
>>> parse_rows(["1\\tone", "2\\ttwo"], r, "\\t", "e.facts")
[(1, 'one'), (2, 'two')]
>>> format_rows([(1, 'one'), (2, 'two')], r, "\\t")
['1\\tone', '2\\ttwo']
"""
from __future__ import annotations

import os
from typing import Iterable

from ddflow.datalog.program import Relation
from ddflow.datalog.syntax import IO, DatalogError


def _options(io: IO | None, default_name: str, directory: str) -> tuple[str, str, bool]:
    kind = (io.param("IO", "file") if io is not None else "file").lower()
    if kind != "file" and not (kind == "stdout" and io.kind != "input"):
        raise DatalogError(f".{io.kind} {io.rel}: IO={kind} is not supported (only IO=file)", io.pos)
    name = io.param("filename", default_name) if io is not None else default_name
    delimiter = io.param("delimiter", "\t") if io is not None else "\t"
    headers = (io.param("headers", "false") if io is not None else "false").lower() == "true"
    return os.path.join(directory, name), delimiter, headers


def read_facts(io: IO | None, rel: Relation, directory: str) -> list[tuple]:
    """The rows of ``rel``'s fact file (a missing file is an empty relation, as Soufflé warns and goes on).

    Cost: O(size of the file), Python per line.
    """
    path, delimiter, headers = _options(io, f"{rel.name}.facts", directory)
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    if headers and lines:
        lines = lines[1:]
    return parse_rows(lines, rel, delimiter, path)


def parse_rows(lines: Iterable[str], rel: Relation, delimiter: str, where: str) -> list[tuple]:
    """Typed rows of delimited lines; a line of the wrong width or a bad number is refused with file and line."""
    out = []
    for i, line in enumerate(lines, 1):
        if not line.strip() and rel.arity != 1:
            continue
        if rel.arity == 0:
            out.append(())
            continue
        fields = line.split(delimiter)
        if len(fields) != rel.arity:
            raise DatalogError(f"{where}, line {i}: {len(fields)} field{'s' * (len(fields) != 1)}, relation "
                               f"{rel.name} has {rel.arity}")
        row = []
        for v, t, a in zip(fields, rel.types, rel.attrs):
            try:
                row.append(v if t == "symbol" else float(v) if t == "float" else int(v, 0) if v.strip()[:2].lower()
                           in ("0x", "0b") else int(v))
            except ValueError:
                raise DatalogError(f"{where}, line {i}: {rel.name}.{a} is a {t}, got {v!r}") from None
        out.append(tuple(row))
    return out


def format_rows(rows: Iterable[tuple], rel: Relation, delimiter: str) -> list[str]:
    """Lines of a relation's rows, sorted as Soufflé's output is (``()`` for a nullary fact that holds)."""
    if rel.arity == 0:
        return ["()"] if any(True for _ in rows) else []
    lines = []
    for row in sorted(rows):
        lines.append(delimiter.join(_show(v, t) for v, t in zip(row, rel.types)))
    return lines


def _show(v, t: str) -> str:
    if t == "float":
        return f"{v:g}"
    return str(v)


def write_relation(io: IO | None, rel: Relation, rows: Iterable[tuple], directory: str) -> str:
    """Write ``rows`` as Soufflé writes ``rel.csv`` (``directory`` ``-``: to standard output); returns the path."""
    path, delimiter, headers = _options(io, f"{rel.name}.csv", directory)
    if io is not None and (io.param("IO", "file") or "").lower() == "stdout":
        directory = "-"
    lines = format_rows(rows, rel, delimiter)
    if headers:
        lines = [delimiter.join(rel.attrs)] + lines
    text = "".join(line + "\n" for line in lines)
    if directory == "-":
        print(f"---------------\n{rel.name}\n===============\n{text}===============", flush=True)
        return "-"
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path
