"""Datalog terms nested deep and long (issue 58): the naive evaluator's answer (tests/datalog/naive.py), or a clear
error naming the depth, never a RecursionError.

A term nested ``NESTING_LIMIT`` levels (parentheses around arithmetic) is
taken and one level more refused with its line and column; a chain (a
10,000-term sum) is one node.  The oracle's recursive evaluator runs on a
deep stack itself (``on_deep_stack``), so the test measures ddflow, not the
oracle's limits.  Timeouts bound each test.
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ddflow
from ddflow.datalog.syntax import DatalogError
from ddflow.plan.deep import NESTING_LIMIT, on_deep_stack
from tests.datalog import naive

FACTS = {"e2": {(0, 1), (1, 2), (2, 2), (3, 0), (4, 4)}, "f2": set(), "u1": set()}
_SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
                 derandomize=True)


def render(t, bare: bool = False) -> str:
    """Soufflé text of a naive term without recursion; ``bare``: a left-deep chain of one operator unparenthesized."""
    out: list[str] = []
    stack: list = [(t, False)]
    while stack:
        x, sub = stack.pop()
        if isinstance(x, str):
            out.append(x)
        elif x[0] == "v":
            out.append(x[1])
        elif x[0] == "c":
            out.append(str(x[1]))
        elif bare and x[0] == "+" and not sub:
            stack.extend([(x[2], True), (" + ", False), (x[1], False)])
        else:
            stack.extend([(")", False), (x[2], True), (f" {x[0]} ", False), (x[1], True), ("(", False)])
    return "".join(out)


def program_text(term, bare: bool = False) -> str:
    return (".decl e2(a: number, b: number)\n.input e2\n.decl r(x: number, v: number)\n"
            f"r(x, v) :- e2(x, y), v = {render(term, bare)}.\n.output r\n")


def oracle(term) -> set[tuple]:
    p = naive.Program()
    p.arity["r"], p.types["r"], p.strata = 2, ["number", "number"], [["r"]]
    p.rules = [("r", [("v", "x"), ("v", "v")], [("atom", "e2", [("v", "x"), ("v", "y")], False),
                                                 ("cmp", "=", ("v", "v"), term)])]
    return on_deep_stack(lambda: naive.evaluate(p, FACTS)["r"])


def derived(text: str) -> set[tuple]:
    flow = ddflow.Dataflow()
    e_in, _ = flow.new_collection("e2", schema={"c0": "bigint", "c1": "bigint"})
    cap = flow.datalog(text)["r"].capture()
    rows = sorted(FACTS["e2"])
    e_in.update(rows, times=0)
    flow.advance_to(1)
    flow.run()
    return set(cap.contents(0))


def wrapped(kinds: list[int]):
    """A term nested one level per kind: ``(t + c)``, ``(t * 1)``, ``(c + t)``, ``(t % 7)`` over x and y."""
    t = ("+", ("v", "x"), ("v", "y"))
    for i, k in enumerate(kinds):
        c = ("c", i % 3)
        t = [("+", t, c), ("*", t, ("c", 1)), ("+", c, t), ("%", t, ("c", 7))][k % 4]
    return t


@pytest.mark.timeout(300)
@settings(max_examples=8, **_SETTINGS)
@given(st.data())
def test_random_nested_terms_equal_the_naive_evaluator_or_are_refused(data):
    depth = data.draw(st.one_of(st.integers(1, 50), st.sampled_from([NESTING_LIMIT - 2, NESTING_LIMIT + 1])),
                      label="depth")
    kinds = data.draw(st.lists(st.integers(0, 3), min_size=depth, max_size=depth), label="kinds")
    term = wrapped(kinds)
    text = program_text(term)
    if depth + 1 > NESTING_LIMIT:  # the base (x + y) is parenthesized too
        with pytest.raises(DatalogError, match=rf"line 4, column [\d,]+: expression nested [\d,]+ deep; the limit is "
                                               rf"{NESTING_LIMIT:,}"):
            derived(text)
    else:
        assert derived(text) == oracle(term)


@pytest.mark.timeout(300)
@settings(max_examples=4, **_SETTINGS)
@given(st.integers(2, 4000))
def test_long_sums_are_one_chain(n):
    """A sum of ``n`` terms (487 raised RecursionError before), written without parentheses."""
    term = ("v", "x")
    for i in range(n - 1):
        term = ("+", term, ("v", "y") if i % 2 else ("c", i % 5))
    assert derived(program_text(term, bare=True)) == oracle(term)


@pytest.mark.timeout(120)
def test_signs_and_calls_nested_past_the_limit_are_refused():
    head = ".decl e2(a: number, b: number)\n.input e2\n.decl r(x: number, v: number)\n"
    for body in ("- " * (NESTING_LIMIT + 3) + "x", "abs(" * (NESTING_LIMIT + 3) + "x" + ")" * (NESTING_LIMIT + 3),
                 "(" * (NESTING_LIMIT + 3) + "x" + ")" * (NESTING_LIMIT + 3)):
        with pytest.raises(DatalogError, match="nested [\\d,]+ deep; the limit is"):
            derived(head + f"r(x, v) :- e2(x, y), v = {body}.\n")
    ok = derived(head + "r(x, v) :- e2(x, y), v = " + "- " * 500 + "max(x, y, " + "abs(" * 400 + "y"
                 + ")" * 400 + ").\n")
    assert ok == {(x, max(x, y)) for x, y in FACTS["e2"]}
