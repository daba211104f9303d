"""How plan nodes show their expressions in ``explain``: columns by name, told apart where two share one.

A self-join's second ``k`` reads as ``k_2`` (its position's unique name), so
``ON k = k_2`` says which is which.  Display only: nothing here changes a plan.

>>> from ddflow.plan.expr import Col
>>> shown([Col(0, "bigint", "k"), Col(1, "bigint", "k")], ("k", "k"))
['k', 'k_2']
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from ddflow.plan.expr import Call, Col, Expr, bottom_up, remapped

if TYPE_CHECKING:
    from ddflow.plan.ir import Rel


def unique_names(names: tuple[str, ...]) -> tuple[str, ...]:
    """Column names made unique (a join of two tables with an ``id`` each): later duplicates get ``_2``, ``_3``."""
    used: set[str] = set()
    out = []
    for n in names:
        name, i = n, 1
        while name.lower() in used:  # a third ``k`` after ``k, k_2`` is ``k_3``, never a second ``k_2``
            i += 1
            name = f"{n}_{i}"
        used.add(name.lower())
        out.append(name)
    return tuple(out)


@dataclass(frozen=True)
class Text(Expr):
    """An expression already rendered (for labels only)."""

    text: str
    type: str = ""

    def __str__(self) -> str:
        return self.text


def shown(exprs: Sequence[Expr], names: Sequence[str]) -> list[str]:
    """``exprs`` (reading columns named ``names``) as text, a column shown by its own name unless another column
    would read the same: then by the name its position has in ``names`` made unique (a join's second ``k``
    is ``k_2``), or ``#i`` past them."""
    unique = unique_names(tuple(names))
    cols: dict[int, str] = {}
    stack = list(reversed(exprs))
    while stack:  # in order, without recursion: an expression may be nested thousands deep
        e = stack.pop()
        if isinstance(e, Col):
            cols.setdefault(e.index, str(e))
        stack.extend(reversed(e.children()))
    taken = {n.lower(): i for i, n in enumerate(unique)}
    owners: dict[str, set[int]] = {}
    for i, own in cols.items():
        owners.setdefault(own.lower(), set()).add(i)
    shown = {}
    for i, own in cols.items():
        clash = taken.get(own.lower(), i) != i or len(owners[own.lower()]) > 1
        shown[i] = (unique[i] if i < len(unique) else f"#{i}") if clash else own

    return [str(remapped_named(e, shown)) for e in exprs]


def join_condition(left: "Rel", right: "Rel", lkeys: tuple[Expr, ...], rkeys: tuple[Expr, ...], residual: Expr | None) -> str:
    """A join's condition: its key pairs and residual, columns read as the join's output (left's, then right's)."""
    nl = len(left.schema)
    moved = tuple(_shifted(k, nl) for k in rkeys)
    texts = shown(lkeys + moved + ((residual,) if residual is not None else ()), left.schema.names + right.schema.names)
    k = len(lkeys)
    on = " AND ".join(f"{a} = {b}" for a, b in zip(texts[:k], texts[k:2 * k])) or "TRUE"
    return on + (f" WHERE {texts[-1]}" if residual is not None else "")


def _shifted(e: Expr, by: int) -> Expr:
    return remapped(e, lambda i: i + by)


def remapped_named(e: Expr, names: dict[int, str]) -> Expr:
    """``e`` with each column named ``names[index]`` (for display)."""
    def node(x: Expr, kids: list[Expr]) -> Expr:
        if isinstance(x, Col):
            return Col(x.index, x.type, names[x.index])
        if isinstance(x, Call):
            return Call(x.op, tuple(kids), x.type)
        return x

    return bottom_up(e, node)
