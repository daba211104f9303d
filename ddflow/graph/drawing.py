"""A dataflow's operator graph drawn: Graphviz DOT text, and SVG (Graphviz's where it is installed, else our own).

What ``flow.explain(format="dot")`` and ``flow.draw(path)`` show: every
operator with its kind, loops as boxes around their bodies, arrangements
(operators that keep a trace) marked with a double outline, and, on a
flow that has run, the rows and bytes each one holds.  The built-in SVG
layout is a plain layered drawing (each operator one row below its
deepest input, feedback edges dashed), enough to read a plan without
Graphviz; with ``dot`` on the PATH, Graphviz lays it out instead and PNG
is available too.
"""
from __future__ import annotations

import html
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ddflow.errors import UsageError

if TYPE_CHECKING:
    from ddflow.graph.scope import Scope


@dataclass
class Drawing:
    """Operators (id, label lines, arranged, loop), loops (id, name, parent loop) and edges (from, to, feedback)."""

    nodes: list[tuple[int, list[str], bool, int | None]] = field(default_factory=list)
    loops: list[tuple[int, str, int | None]] = field(default_factory=list)
    edges: list[tuple[int, int, bool]] = field(default_factory=list)


def drawing(scope: "Scope", sizes: bool = True) -> Drawing:
    """The operator graph under ``scope``; ``sizes`` labels each operator with the state it holds.

    Cost: O(operators + edges), plus, with ``sizes``, O(trace batches).
    """
    from ddflow.graph.scope import IterativeScope

    d = Drawing()
    ids: dict[int, int] = {}
    members: list = []

    def walk(s: "Scope", loop: int | None) -> None:
        for m in s.nodes:
            if isinstance(m, IterativeScope):
                lid = len(d.loops)
                d.loops.append((lid, m.name, loop))
                walk(m, lid)
                continue
            ids[id(m)] = len(d.nodes)
            members.append(m)
            arranged = m.arranges or bool(m.trace_handles())
            label = [m.name, type(m).__name__.removesuffix("Node")]
            if sizes:
                rows = m.records_held()
                if rows or arranged:
                    label.append(f"{rows:,} rows, {_bytes(m.bytes_held())}")
            d.nodes.append((ids[id(m)], label, arranged, loop))

    walk(scope, None)
    for i, node in enumerate(members):
        for target, port in node.targets:
            j = ids.get(id(target))
            if j is not None:
                # A loop variable's feedback port (``feedback_port``) takes the body's result one round later.
                d.edges.append((i, j, port == getattr(target, "feedback_port", None)))
    return d


def _bytes(n: int) -> str:
    for div, unit in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if n >= div:
            return f"{n / div:.1f} {unit}"
    return f"{n} B"


def to_dot(d: Drawing, title: str = "dataflow") -> str:
    """Graphviz DOT text of ``d``: loops as clusters, arrangements with a double outline (``peripheries=2``).

    >>> print(to_dot(Drawing([(0, ["e", "Input"], True, None), (1, ["count(e)", "Reduce"], False, None)],
    ...                      [], [(0, 1, False)]), "q"))
    digraph "q" {
      rankdir=TB;
      node [shape=box, style=rounded, fontname="Helvetica", fontsize=10];
      n0 [label="e\\nInput", peripheries=2];
      n1 [label="count(e)\\nReduce"];
      n0 -> n1;
    }
    """
    out = [f"digraph {_q(title)} {{", "  rankdir=TB;",
           '  node [shape=box, style=rounded, fontname="Helvetica", fontsize=10];']

    def emit(loop: int | None, indent: str) -> None:
        for nid, label, arranged, where in d.nodes:
            if where == loop:
                extra = ", peripheries=2" if arranged else ""
                out.append(f"{indent}n{nid} [label={_q(chr(10).join(label))}{extra}];")
        for lid, name, parent in d.loops:
            if parent == loop:
                out.append(f"{indent}subgraph cluster_{lid} {{")
                out.append(f"{indent}  label={_q('loop ' + name)}; style=dashed;")
                emit(lid, indent + "  ")
                out.append(f"{indent}}}")

    emit(None, "  ")
    for a, b, back in d.edges:
        out.append(f"  n{a} -> n{b}{' [style=dashed, constraint=false]' if back else ''};")
    out.append("}")
    return "\n".join(out) + "\n"


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def graphviz() -> str | None:
    """The path of Graphviz's ``dot``, or None where it is not installed."""
    return shutil.which("dot")


def render(dot: str, fmt: str = "svg") -> bytes:
    """``dot`` laid out by Graphviz as ``fmt`` (``svg``, ``png``, ``pdf``); a UsageError naming Graphviz if absent.

    Cost: one ``dot`` process.
    """
    exe = graphviz()
    if exe is None:
        raise UsageError(f"drawing a plan as {fmt} needs Graphviz's `dot` on the PATH (apt-get install graphviz, "
                         "brew install graphviz); SVG without it: format='svg' uses ddflow's own layout")
    done = subprocess.run([exe, f"-T{fmt}"], input=dot.encode(), capture_output=True, timeout=120)
    if done.returncode != 0:
        raise UsageError(f"Graphviz could not draw the plan: {done.stderr.decode(errors='replace')[:500]}")
    return done.stdout


#: The built-in layout's sizes, in SVG units (px).
_ROW, _CHAR, _LINE, _PAD, _GAP = 90, 6.6, 14, 10, 24


def to_svg(d: Drawing, title: str = "dataflow") -> str:
    """SVG of ``d`` in a layered layout of our own (no Graphviz): a row per depth, edges as lines, feedback dashed.

    Each operator sits one row below the deepest operator feeding it
    (feedback edges left out), in plan order within its row; loops are
    dashed boxes around their operators.  Cost: O(operators + edges).

    >>> svg = to_svg(Drawing([(0, ["e", "Input"], True, None), (1, ["count(e)", "Reduce"], False, None)],
    ...                      [], [(0, 1, False)]))
    >>> svg.startswith("<svg") and "count(e)" in svg and svg.count("<rect") == 2
    True
    """
    depth = {nid: 0 for nid, *_ in d.nodes}
    forward = [(a, b) for a, b, back in d.edges if not back]
    for _ in range(len(d.nodes)):  # longest path over the forward edges (they follow plan order: one pass each)
        changed = False
        for a, b in forward:
            if depth[b] < depth[a] + 1:
                depth[b], changed = depth[a] + 1, True
        if not changed:
            break
    rows: dict[int, list[int]] = {}
    for nid, *_ in d.nodes:
        rows.setdefault(depth[nid], []).append(nid)
    width = {nid: max(len(s) for s in lines) * _CHAR + 2 * _PAD for nid, lines, _, _ in d.nodes}
    height = {nid: len(lines) * _LINE + _PAD for nid, lines, _, _ in d.nodes}
    pos: dict[int, tuple[float, float]] = {}
    total_w = 0.0
    for r, members in sorted(rows.items()):
        x = _GAP
        for nid in members:
            pos[nid] = (x, _GAP + r * _ROW)
            x += width[nid] + _GAP
        total_w = max(total_w, x)
    total_h = _GAP + (max(rows, default=0) + 1) * _ROW
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_w:.0f}" height="{total_h:.0f}" '
           f'font-family="Helvetica, Arial, sans-serif" font-size="11">',
           f"<title>{html.escape(title)}</title>",
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" '
           'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z"/></marker></defs>']
    loop_of = {nid: where for nid, _, _, where in d.nodes}
    for lid, name, _parent in d.loops:
        inside = [nid for nid in pos if _within(loop_of[nid], lid, d)]
        if not inside:
            continue
        x0 = min(pos[n][0] for n in inside) - 8
        y0 = min(pos[n][1] for n in inside) - 18
        x1 = max(pos[n][0] + width[n] for n in inside) + 8
        y1 = max(pos[n][1] + height[n] for n in inside) + 8
        out.append(f'<rect x="{x0:.0f}" y="{y0:.0f}" width="{x1 - x0:.0f}" height="{y1 - y0:.0f}" fill="none" '
                   f'stroke="#888" stroke-dasharray="4 3"/>')
        out.append(f'<text x="{x0 + 4:.0f}" y="{y0 + 12:.0f}" fill="#555">loop {html.escape(name)}</text>')
    for a, b, back in d.edges:
        (xa, ya), (xb, yb) = pos[a], pos[b]
        x1, y1 = xa + width[a] / 2, ya + height[a]
        x2, y2 = xb + width[b] / 2, yb
        dash = ' stroke-dasharray="5 4"' if back else ""
        out.append(f'<line x1="{x1:.0f}" y1="{y1:.0f}" x2="{x2:.0f}" y2="{y2:.0f}" stroke="#333"{dash} '
                   f'marker-end="url(#arrow)"/>')
    for nid, lines, arranged, _ in d.nodes:
        x, y = pos[nid]
        w, h = width[nid], height[nid]
        stroke = ' stroke-width="2.5"' if arranged else ""
        out.append(f'<rect x="{x:.0f}" y="{y:.0f}" width="{w:.0f}" height="{h:.0f}" rx="5" fill="#f6f8ff" '
                   f'stroke="#223"{stroke}/>')
        for i, line in enumerate(lines):
            weight = ' font-weight="bold"' if i == 0 else ""
            out.append(f'<text x="{x + _PAD:.0f}" y="{y + _PAD + (i + 0.6) * _LINE:.0f}"{weight}>'
                       f"{html.escape(line)}</text>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _within(loop: int | None, lid: int, d: Drawing) -> bool:
    """Whether an operator in ``loop`` lies inside loop ``lid`` (directly or in a nested loop)."""
    parents = {i: p for i, _, p in d.loops}
    while loop is not None:
        if loop == lid:
            return True
        loop = parents.get(loop)
    return False
