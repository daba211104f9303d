"""The parser, the checks, strata and fact files on their own: what Soufflé programs write is read as Soufflé reads it."""
from __future__ import annotations

import pytest

from ddflow.datalog.files import format_rows, parse_rows
from ddflow.datalog.parser import parse
from ddflow.datalog.program import load
from ddflow.datalog.stratify import strata
from ddflow.datalog.syntax import Aggregate, Compare, Const, DatalogError


def test_soufflé_forms_parse():
    src = parse("""
    // a comment
    .type Id <: number
    .type Name = symbol
    .decl a(x: Id, s: Name) brie
    .decl b(x: number) input            /* the old syntax */
    .decl c(x: number), d(x: number)
    .input a(IO=file, filename="a.tsv", delimiter="\\t")
    .output c, d
    .pragma "ddflow.place" "c(x)"
    a(0x10, "q\\"uote"). a(-3, "x").
    c(x), d(x) :- a(x, _) ; b(x).
    d(n) :- n = sum x * 2 : { a(x, _), x > 0 }, true.
    .plan 0:(1,2)
    """)
    assert [d.name for d in src.decls] == ["a", "b", "c", "d"]
    assert [(i.kind, i.rel) for i in src.io] == [("input", "b"), ("input", "a"), ("output", "c"), ("output", "d")]
    assert src.io[1].param("delimiter") == "\t" and src.pragmas[0].value == "c(x)"
    facts = [r for r in src.rules if not r.body]
    assert [f.head.args[0].value for f in facts] == [16, -3] and facts[0].head.args[1].value == 'q"uote'
    assert len([r for r in src.rules if r.body]) == 5  # two heads x two bodies, then one rule
    agg = src.rules[-1].body[0]
    assert isinstance(agg, Compare) and isinstance(agg.right, Aggregate) and agg.right.func == "sum"
    assert isinstance(src.rules[-1].body[1], Compare) and src.rules[-1].body[1].right == Const(1, "number", None)


def test_min_max_are_functors_or_aggregates_by_what_follows():
    src = parse("r(m) :- e(x, y), m = max(x, y).\nr(m) :- m = min (y + 1) : { e(_, y) }.")
    assert repr(src.rules[0].body[1]) == "m = max(x, y)"
    assert isinstance(src.rules[1].body[0].right, Aggregate)


def test_types_resolve_and_clash():
    p = load(".type A <: number\n.type B = A\n.decl r(x: B, y: float)")
    assert p.relations["r"].types == ("number", "float") and p.relations["r"].sql_types == ("bigint", "double")
    with pytest.raises(DatalogError, match="mixes base types"):
        load(".type A = number | symbol")


def test_strata_put_each_component_after_what_it_reads():
    p = load(".decl e(x: number)\n.decl a(x: number)\n.decl b(x: number)\n.decl c(x: number)\n"
             "c(x) :- b(x), !a(x).\nb(x) :- a(x).\nb(x) :- b(x), e(x).\na(x) :- e(x).")
    assert [s.relations for s in strata(p)] == [("e",), ("a",), ("b",), ("c",)]
    assert [s.recursive for s in strata(p)] == [False, False, True, False]


def test_fact_lines_round_trip_and_refuse_bad_values():
    p = load(".decl r(n: number, f: float, s: symbol)")
    rel = p.relations["r"]
    rows = parse_rows(["1\t2.5\ta b", "-4\t3\tc"], rel, "\t", "r.facts")
    assert rows == [(1, 2.5, "a b"), (-4, 3.0, "c")]
    assert format_rows(rows, rel, "\t") == ["-4\t3\tc", "1\t2.5\ta b"]
    with pytest.raises(DatalogError, match="r.facts, line 2: r.n is a number, got 'x'"):
        parse_rows(["1\t2\ta", "x\t1\tb"], rel, "\t", "r.facts")
    with pytest.raises(DatalogError, match="line 1: 2 fields, relation r has 3"):
        parse_rows(["1\t2"], rel, "\t", "r.facts")
