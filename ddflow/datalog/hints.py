"""Coordination hints (seed 002): where a relation's rows live and which ready stratum runs first.

Hints change speed and memory, never results.  They are written as
Soufflé pragmas, so a program with hints still runs unchanged in
Soufflé (which ignores keys it does not know)::

    .pragma "ddflow.place" "reach(y)"        // partition reach by its attribute y
    .pragma "ddflow.priority" "cspa_alias"   // evaluate this relation's stratum first among ready ones

- **placement** ``rel(attr)``: ``rel`` is stored with ``attr`` first, so
  the distinct that ends its plan leaves each row on the worker owning
  its ``attr`` value, and a join on ``attr`` (inside the loop too) needs
  no exchange.  With one worker it changes nothing.
- **priority** ``rel[, rel...]`` (earlier in the list: higher): among
  strata whose inputs are all evaluated, those holding a listed relation
  come first (the engine steps operators in creation order where the
  data allows any order), so a relation someone waits for is ready
  sooner within a run.

``flow.datalog(program, hints=False)`` ignores every hint (the property
test compares both ways).  A hint naming an unknown relation or
attribute is refused with its line and column; other ``.pragma`` keys
are Soufflé's and are ignored.

>>> from ddflow.datalog.program import load
>>> p = load('.decl r(x: number, y: number)\\n.pragma "ddflow.place" "r(y)"\\n.pragma "ddflow.priority" "r"')
>>> hints_of(p)
Hints(placement={'r': 1}, priority={'r': 1})
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ddflow.datalog.syntax import DatalogError

if TYPE_CHECKING:
    from ddflow.datalog.program import Program

PLACE, PRIORITY = "ddflow.place", "ddflow.priority"


@dataclass
class Hints:
    """``placement``: relation -> declared index of the attribute it is partitioned by; ``priority``:
    relation -> rank (higher first)."""

    placement: dict[str, int] = field(default_factory=dict)
    priority: dict[str, int] = field(default_factory=dict)


def hints_of(p: "Program") -> Hints:
    """The hints of a program's pragmas, checked against its relations.  O(pragmas)."""
    h = Hints()
    for pr in p.pragmas:
        if pr.key == PLACE:
            m = re.fullmatch(r"\s*([A-Za-z_?][\w?]*)\s*\(\s*([A-Za-z_?][\w?]*)\s*\)\s*", pr.value)
            if m is None:
                raise DatalogError(f'the placement hint is "rel(attribute)", got {pr.value!r}', pr.pos)
            rel, attr = m.groups()
            if rel not in p.relations:
                raise DatalogError(f"placement hint: unknown relation {rel}", pr.pos)
            attrs = p.relations[rel].attrs
            if attr not in attrs:
                raise DatalogError(f"placement hint: {rel} has no attribute {attr} (it has {', '.join(attrs)})",
                                   pr.pos)
            h.placement[rel] = attrs.index(attr)
        elif pr.key == PRIORITY:
            names = [n.strip() for n in pr.value.split(",") if n.strip()]
            for i, n in enumerate(names):
                if n not in p.relations:
                    raise DatalogError(f"priority hint: unknown relation {n}", pr.pos)
                h.priority[n] = max(h.priority.get(n, 0), len(names) - i)
    return h
