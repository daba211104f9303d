"""Every refused program raises a DatalogError naming what and where (line and column), before anything runs."""
from __future__ import annotations

import pytest

import ddflow
from ddflow.datalog.syntax import DatalogError

DECLS = ".decl e(x: number, y: number)\n.input e\n.decl r(x: number, y: number)\n.decl s(x: symbol)\n"

CASES = [
    # (name, rules after DECLS (line 5 on), message fragment, line, column)
    ("negation on a cycle", "r(x, y) :- e(x, y), !r(y, x).", "cannot be stratified: r depends on r through negation",
     5, 21),
    ("negation on a longer cycle", ".decl q(x: number)\nq(x) :- r(x, _).\nr(x, y) :- e(x, y), !q(x).",
     "on the cycle r -> !q -> r", 7, 21),
    ("aggregation on a cycle", "r(x, n) :- e(x, _), n = count : { r(x, _) }.", "through aggregation", 5, 35),
    ("unbound head variable", "r(x, z) :- e(x, y).", "variable z of the head is not bound", 5, 6),
    ("unbound negated variable", "r(x, y) :- e(x, y), !e(z, x).", "variable z of a negated atom", 5, 24),
    ("unbound comparison variable", "r(x, y) :- e(x, y), z < x.", "variable z of a comparison", 5, 21),
    ("a witness of count", "r(y, n) :- e(y, n), n = count : { e(x, _) }, x < 3.",
     "variable x of the rule is bound only inside the count aggregate (a witness)", 5, 25),
    ("unknown relation", "r(x, y) :- e(x, y), q(y).", "unknown relation q", 5, 21),
    ("arity mismatch", "r(x, y) :- e(x, y, 1).", "e has 2 attributes", 5, 12),
    ("head arity mismatch", "r(x) :- e(x, _).", "r has 2 attributes", 5, 1),
    ("type clash in a join", "r(x, y) :- e(x, y), s(x).", "variable x is a number in one atom and a symbol", 5, 21),
    ("symbol fact in a number", 'r("a", 1).', "r.x is a number", 5, 3),
    ("counter", "r(x, $) :- e(x, _).", "the counter $ is not supported", 5, 6),
    ("ord", "r(x, ord(y)) :- e(x, _), s(y).", "the functor ord is not supported (it is a symbol's number", 5, 6),
    ("power of a symbol", 'r(x, "a" ^ 2) :- e(x, _).', "arithmetic ^ on a symbol", 5, 10),
    ("bitwise on a float", "r(x, y) :- e(x, y), 1.5 band 1 = 0.", "band takes 2 numbers", 5, 25),
    ("unknown component", ".init c = C", ".init c: unknown component 'C'", 5, 7),
    ("eqrel of three", ".decl q(x: number, y: number, z: number) eqrel", "eqrel relation q must have two", 5, 7),
    ("record type", ".type P = [a: number]", "record types (.type T = [a: number, ...]) are not supported", 5, 11),
    ("subsumption of a recursive relation", "r(x, y) :- r(y, x).\nr(x, y) <= r(x, z) :- y < z.",
     "subsumption of r, which its own rules read back", 6, 9),
    ("negated parenthesized body", "r(x, y) :- e(x, y), !(x = 1 ; y = 1).", "negation of a parenthesized body",
     5, 22),
    ("preprocessor", "#include \"x.dl\"", "the C preprocessor", 5, 1),
    ("missing dot", "r(x, y) :- e(x, y)\nr(x, x) :- e(x, _).", "unexpected 'r'", 6, 1),
    ("unknown type", ".decl q(x: Foo)", "unknown type 'Foo'", 5, 7),
    ("hint on an unknown attribute", '.pragma "ddflow.place" "r(z)"', "r has no attribute z", 5, 1),
]


@pytest.mark.parametrize("name, rules, fragment, line, col", CASES, ids=[c[0] for c in CASES])
def test_refused_with_line_and_column(name, rules, fragment, line, col):
    flow = ddflow.Dataflow()
    flow.new_collection("e", schema={"a": "bigint", "b": "bigint"})
    with pytest.raises(DatalogError) as err:
        flow.datalog(DECLS + rules)
    assert fragment in str(err.value), str(err.value)
    assert err.value.pos is not None and (err.value.pos.line, err.value.pos.col) == (line, col), str(err.value)
    assert f"line {line}, column {col}" in str(err.value)


def test_an_input_without_its_table_is_refused_at_its_directive():
    flow = ddflow.Dataflow()
    with pytest.raises(DatalogError, match=r"line 2, column 8: .input e: the dataflow has no table 'e'"):
        flow.datalog(DECLS + "r(x, y) :- e(x, y).")
    flow.new_collection("e", schema={"a": "bigint"})
    with pytest.raises(DatalogError, match="the table 'e' has 1 columns, the relation 2"):
        flow.datalog(DECLS + "r(x, y) :- e(x, y).")


def test_a_refused_program_is_a_schema_error_and_explain_refuses_it_too():
    flow = ddflow.Dataflow()
    flow.new_collection("e", schema={"a": "bigint", "b": "bigint"})
    with pytest.raises(ddflow.SchemaError):
        flow.explain(DECLS + "r(x, y) :- e(x, y), !r(y, x).")
