"""Soufflé's constructs beyond rules and aggregates, each built (against the naive evaluator on random
insert/delete streams, or a direct Python computation) or refused by name (its message checked).

Built: components (.comp/.init/.override), eqrel relations, subsumption (``<=``) of relations that are not
recursive, bitwise and logical functors and ``^``, ``contains`` and ``match``, ``range`` of constant bounds, ``as``,
``itof`` / ``ftoi``, ``+`` of symbols, facts of constant expressions, parenthesized disjunctions, expressions in
negated atoms.  Refused: see ``REFUSED`` below (docs/datalog.md lists every construct and its
status).
"""
from __future__ import annotations

import collections
import doctest
import importlib
import random
import re

import pytest

import ddflow
from ddflow.datalog.program import load
from ddflow.datalog.syntax import DatalogError
from tests.datalog.naive import INPUTS, evaluate, generate, random_facts
from tests.datalog.test_oracle import _check


@pytest.mark.parametrize("seed", range(340, 352))
def test_eqrel_relations_match_naive_evaluation(seed):
    rng = random.Random(seed)
    _check([generate(rng, n_strata=rng.randrange(2, 5), kinds=("eqrel", "eqrel", "neg", "agg", "join"))], seed,
           workers=1)


@pytest.mark.parametrize("seed", range(360, 376))
def test_bitwise_logical_and_power_functors_match_naive_evaluation(seed):
    rng = random.Random(seed)
    _check([generate(rng, n_strata=rng.randrange(2, 4), kinds=("ops", "ops", "join"))], seed, workers=1)


@pytest.mark.parametrize("seed", range(380, 394))
def test_subsumption_matches_naive_evaluation(seed):
    rng = random.Random(seed)
    _check([generate(rng, n_strata=rng.randrange(2, 5), kinds=("subsume", "subsume", "join", "rec", "agg"))], seed,
           workers=1)


def test_subsumption_of_an_input_relation_under_updates():
    rng = random.Random(11)
    live: collections.Counter = collections.Counter()
    steps, states = [], []
    for _ in range(6):
        ups = []
        for _ in range(5):
            row = (rng.randrange(3), rng.randrange(6))
            d = -1 if live[row] and rng.random() < 0.45 else 1
            live[row] += d
            ups.append((row, d))
        steps.append(ups)
        states.append({r for r, n in live.items() if n > 0})
    got = _run_stream(".decl e(x: number, y: number)\n.input e\ne(x, y1) <= e(x, y2) :- y1 < y2.\n"
                      ".decl top(x: number, y: number)\ntop(x, y) :- e(x, y).", "e",
                      {"x": "bigint", "y": "bigint"}, steps, "top")
    for g, present in zip(got, states):
        assert g == {(x, y): 1 for x, y in present if y == max(b for a, b in present if a == x)}


def test_soufflé_subsumption_tests():
    # issue2322 and issue2551 of Soufflé's evaluation tests.
    with ddflow.Dataflow() as flow:
        rels = flow.datalog(".decl m(s: number)\n.decl r(s: number)\nr(1).\nm(1).\nm(2).\n"
                            "m(x) <= m(y) :- !r(x), m(y).\n"
                            ".decl buyh(A:unsigned) magic\n.decl eozn(A:unsigned)\nbuyh(6).\nbuyh(7).\nbuyh(3).\n"
                            "eozn(E) :- buyh(E).\neozn(E1) <= eozn(E2) :- E1<E2.\n")
        assert sorted(rels) == ["buyh", "eozn", "m", "r"]  # the relations subsumption makes stay hidden
        caps = {n: c.capture() for n, c in rels.items()}
        flow.advance_to(1)
        flow.run()
        assert caps["m"].contents(0) == {(1,): 1} and caps["eozn"].contents(0) == {(7,): 1}


@pytest.mark.parametrize("seed", range(400, 410))
def test_parenthesized_disjunctions_and_negated_expressions_match_naive_evaluation(seed):
    rng = random.Random(seed)
    _check([generate(rng, n_strata=rng.randrange(2, 5), kinds=("disj", "disj", "join", "rec"))], seed, workers=1)


@pytest.mark.parametrize("seed", [430, 431])
def test_the_built_constructs_on_two_workers(seed):
    rng = random.Random(seed)
    kinds = ("eqrel", "subsume", "ops", "disj", "agg2", "rec")
    _check([generate(rng, n_strata=rng.randrange(3, 6), kinds=kinds) for _ in range(3)], seed, workers=2, steps=3)


def _as_component(p) -> tuple[str, dict[str, str]]:
    """Program ``p`` with its derived relations inside ``.comp C``, instantiated plainly, through a derived
    component and nested in another; the inputs stay the program's.  Also ``{instance relation: p's}``."""
    glob, inner = [], []
    for line in p.text().splitlines():
        (glob if any(line.startswith(f"{k} {r}") for r in INPUTS for k in (".decl", ".input")) else inner).append(line)
    text = "\n".join(glob) + "\n.comp C {\n" + "\n".join(inner) + "\n}\n.comp D : C { }\n" \
        ".comp W {\n.init inner = C\n}\n.init c = C\n.init d = D\n.init w = W\n"
    names = {f"{i}.{r}": r for i in ("c", "d", "w.inner") for r in p.derived()}
    return text, names


@pytest.mark.parametrize("seed", range(420, 426))
def test_components_match_naive_evaluation(seed):
    rng = random.Random(seed)
    p = generate(rng, n_strata=rng.randrange(2, 5))
    text, names = _as_component(p)
    live: collections.Counter = collections.Counter()
    with ddflow.Dataflow() as flow:
        handles = {r: flow.new_collection(r, schema={f"c{i}": "bigint" for i in range(a)})[0]
                   for r, a in INPUTS.items()}
        rels = flow.datalog(text)
        assert sorted(rels) == sorted(names)
        caps = {n: c.capture() for n, c in rels.items()}
        for t in range(4):
            for rel, row in random_facts(rng, 6):
                d = -1 if live[(rel, row)] and rng.random() < 0.4 else 1
                live[(rel, row)] += d
                handles[rel].update([row], times=t, diffs=d)
            flow.advance_to(t + 1)
            flow.run()
            want = evaluate(p, {r: {row for (rr, row), k in live.items() if rr == r and k > 0} for r in INPUTS})
            for n, r in names.items():
                assert caps[n].contents(t) == {row: 1 for row in want[r]}, (seed, t, n, text)


def test_soufflé_components_test():
    # Soufflé's evaluation test `components`: inheritance, nested instances, qualified names.
    text = """
    .symbol_type node
    .comp DiGraph {
        .decl node (n:node)
        .decl edge (a:node,b:node)
        node(X) :- edge(X,_).
        node(X) :- edge(_,X).
        .decl reachable (a:node,b:node)
        reachable(X,Y) :- edge(X,Y).
        reachable(X,Z) :- reachable(X,Y),reachable(Y,Z).
    }
    .comp Graph : DiGraph {
        edge(X,Y) :- edge(Y,X).
    }
    .comp Traffic {
        .init train = DiGraph
        .init ship = DiGraph
        .decl reachable(a:node,b:node)
        reachable(X,Y) :- train.reachable(X,Y).
        reachable(X,Y) :- ship.reachable(X,Y).
        reachable(X,Z) :- reachable(X,Y), reachable(Y,Z).
    }
    .comp Once : DiGraph {
        .override reachable
        reachable(X,Y) :- edge(X,Y).
    }
    .init SocialNet = DiGraph
    SocialNet.edge("luke","leia").
    SocialNet.edge("han","luke").
    .init Equal = Graph
    Equal.edge("5","five").
    Equal.edge("5","V").
    .init O = Once
    O.edge("a", "b"). O.edge("b", "c").
    .decl result (x:symbol)
    result("Star Wars IV-VI happened!") :- SocialNet.reachable("han","leia").
    result("Luke isn't a good buddy!") :- !SocialNet.reachable("leia","han").
    result("V is five") :- Equal.reachable("V","five").
    result("five is V") :- Equal.reachable("five","V").
    result("no a to c") :- !O.reachable("a", "c").
    .init London = Traffic
    London.train.edge("Airport","Waterloo").
    London.ship.edge("Waterloo","Big Ben").
    result("Connected") :- London.reachable("Airport","Big Ben").
    """
    with ddflow.Dataflow() as flow:
        rels = flow.datalog(text)
        cap = rels["result"].capture()
        assert "London.train.reachable" in rels and "O.reachable" in rels
        flow.advance_to(1)
        flow.run()
        assert sorted(cap.contents(0)) == [("Connected",), ("Luke isn't a good buddy!",),
                                           ("Star Wars IV-VI happened!",), ("V is five",), ("five is V",),
                                           ("no a to c",)]


def _run_stream(program: str, table: str, schema: dict, steps: list[list[tuple]], rel: str):
    """Contents of ``rel`` after each step of (row, diff) updates, one data time per step."""
    with ddflow.Dataflow() as flow:
        h, _ = flow.new_collection(table, schema=schema)
        cap = flow.datalog(program)[rel].capture()
        out = []
        for t, ups in enumerate(steps):
            for row, d in ups:
                h.update([row], times=t, diffs=d)
            flow.advance_to(t + 1)
            flow.run()
            out.append(cap.contents(t))
        return out


@pytest.mark.parametrize("seed", range(3))
def test_contains_and_match_under_updates(seed):
    rng = random.Random(seed)
    words = ["".join(rng.choice("abz") for _ in range(rng.randrange(0, 5))) for _ in range(12)]
    program = ('.decl w(x: symbol)\n.input w\n.decl r(x: symbol, k: number)\n'
               'r(x, 1) :- w(x), contains("ab", x).\nr(x, 2) :- w(x), match("a.*b", x).\n'
               'r(x, 3) :- w(x), !match("(a|b)+", x), !contains("z", x).\n')
    live: collections.Counter = collections.Counter()
    steps = []
    for _ in range(5):
        ups = []
        for _ in range(4):
            x = rng.choice(words)
            d = -1 if live[x] and rng.random() < 0.4 else 1
            live[x] += d
            ups.append(((x,), d))
        steps.append((ups, {x for x, m in live.items() if m > 0}))
    got = _run_stream(program, "w", {"x": "string"}, [u for u, _ in steps], "r")
    for g, (_, present) in zip(got, steps):
        want = {(x, 1) for x in present if "ab" in x} | {(x, 2) for x in present if re.fullmatch("a.*b", x)} | \
               {(x, 3) for x in present if not re.fullmatch("(a|b)+", x) and "z" not in x}
        assert g == {row: 1 for row in want}


def test_contains_match_and_substr_of_variables_under_updates():
    # Soufflé's contains test (the substring a variable) and issue2532 (a POSIX class, substr of a variable length).
    rng = random.Random(5)
    words = ["a", "ab", "cab", "aaaa", "abba", "bcab", "bdab", "x1y", "é1"]
    pats = ["a.*", "[[:digit:]]+", "(a|b)+", ".b.*"]
    program = (".decl w(x: symbol)\n.input w\n.decl p(x: symbol)\n" + "".join(f'p("{q}").\n' for q in pats) +
               ".decl c(sub: symbol, s: symbol)\nc(x, y) :- w(x), w(y), contains(x, y).\n"
               ".decl m(p: symbol, s: symbol)\nm(q, y) :- p(q), w(y), match(q, y), !contains(\"1\", q).\n"
               ".decl d(s: symbol, t: symbol, n: number)\n"
               "d(x, t, n) :- w(x), n = strlen(x), t = substr(x, 1, n - 2).\n")
    live: collections.Counter = collections.Counter()
    with ddflow.Dataflow() as flow:
        h, _ = flow.new_collection("w", schema={"x": "string"})
        caps = {n: c.capture() for n, c in flow.datalog(program).items()}
        for t in range(5):
            for _ in range(4):
                x = rng.choice(words)
                d = -1 if live[x] and rng.random() < 0.4 else 1
                live[x] += d
                h.update([(x,)], times=t, diffs=d)
            flow.advance_to(t + 1)
            flow.run()
            ws = {x for x, k in live.items() if k > 0}
            assert caps["c"].contents(t) == {(x, y): 1 for x in ws for y in ws if x in y}
            digit = re.compile("[0-9]+")
            assert caps["m"].contents(t) == {(q, y): 1 for q in pats for y in ws if "1" not in q and
                                             (digit if q == "[[:digit:]]+" else re.compile(q)).fullmatch(y)}
            want_d = {}
            for x in ws:
                b = x.encode()  # bytes, as Soufflé's std::string counts
                want_d[(x, b[1:1 + len(b) - 2].decode(errors="replace") if len(b) >= 1 else "", len(b))] = 1
            assert caps["d"].contents(t) == want_d


def test_a_type_of_no_definition_is_a_symbol_type():
    # Soufflé's subtype2 test: `.type E` is the old `.symbol_type E` (Soufflé warns); unions of its subtypes.
    p = load(".type A = B | C\n.type B\n.type C = D\n.type D\n.decl r(x: A)\n.decl s(x: D)\nr(x) :- s(x).")
    assert p.relations["r"].types == ("symbol",) and p.relations["s"].types == ("symbol",)


def test_to_number_reads_soufflés_forms_and_refuses_the_rest():
    with ddflow.Dataflow() as flow:
        h, _ = flow.new_collection("w", schema={"x": "string"})
        cap = flow.datalog(".decl w(x: symbol)\n.input w\n.decl r(x: symbol, n: number)\n"
                           "r(x, to_number(x)) :- w(x).")["r"].capture()
        h.update([("42",), ("-0x1F",), ("0b101",), (" 7 ",)], times=0)
        flow.advance_to(1)
        flow.run()
        assert sorted(cap.contents(0)) == [(" 7 ", 7), ("-0x1F", -31), ("0b101", 5), ("42", 42)]
        h.update([("12abc",)], times=1)
        flow.advance_to(2)
        with pytest.raises(Exception, match="to_number: '12abc' is not a number"):
            flow.run()


def test_conversions_as_and_constant_facts():
    program = (".type Id <: number\n.decl e(x: number)\n.input e\n.decl r(x: Id, f: float, n: number)\n"
               "r(as(x, Id), itof(x) / 2.0, ftoi(itof(x) / 2.0 - 0.5)) :- e(x).\n"
               ".decl c(x: number, s: symbol)\nc(2 ^ 10, cat(\"a\", to_string(3 band 6))).\nc(-2 ^ 2, \"neg\").\n")
    with ddflow.Dataflow() as flow:
        h, _ = flow.new_collection("e", schema={"x": "bigint"})
        rels = flow.datalog(program)
        r, c = rels["r"].capture(), rels["c"].capture()
        h.update([(3,), (-5,)], times=0)
        flow.advance_to(1)
        flow.run()
        assert sorted(r.contents(0)) == [(-5, -2.5, -3), (3, 1.5, 1)]  # ftoi truncates toward zero
        assert sorted(c.contents(0)) == [(-4, "neg"), (1024, "a2")]


def test_range_of_constants_under_updates():
    # Soufflé's evaluation tests issue2160 and issue2486, and ranges joined with an input under updates.
    program = (".decl e(x: number)\n.input e\n.decl c(n: number)\n"
               "c(n) :- n = count : { i = range(0, 10), i % 2 = 0 }.\n"
               ".decl t(n: number)\nt(n) :- x = 1, n = count : { _y = range(x, 10) }.\n"
               ".decl d(x: number)\nd(x) :- x = range(5, 2).\nd(x) :- x = range(100, 90, -4).\n"
               ".decl m(x: number)\nm(x) :- e(x), x = range(0, 20, 3).\n"
               ".decl k(x: number, y: number)\nk(x, y) :- e(x), y = range(0, 3), !e(y).\n")
    rng = random.Random(7)
    live: collections.Counter = collections.Counter()
    with ddflow.Dataflow() as flow:
        h, _ = flow.new_collection("e", schema={"x": "bigint"})
        caps = {n: c.capture() for n, c in flow.datalog(program).items()}
        for t in range(6):
            for _ in range(5):
                x = rng.randrange(-2, 22)
                d = -1 if live[x] and rng.random() < 0.4 else 1
                live[x] += d
                h.update([(x,)], times=t, diffs=d)
            flow.advance_to(t + 1)
            flow.run()
            present = {x for x, n in live.items() if n > 0}
            assert caps["c"].contents(t) == {(5,): 1} and caps["t"].contents(t) == {(9,): 1}
            assert caps["d"].contents(t) == {(x,): 1 for x in (5, 4, 3, 100, 96, 92)}
            assert caps["m"].contents(t) == {(x,): 1 for x in present if 0 <= x < 20 and x % 3 == 0}
            assert caps["k"].contents(t) == {(x, y): 1 for x in present for y in range(3) if y not in present}


def test_plus_joins_symbols_and_to_string_of_a_float_prints_six_places():
    # Soufflé's evaluation test symbol_operations, with its expected Add.csv.
    program = ('.decl Add(s:symbol)\nAdd("pre-" + "-post").\nAdd("pre-" + s) :- some_symbol(s).\n'
               'Add(s + "-post") :- some_symbol(s).\n'
               'Add(s1 + s2 + s3) :- some_symbol(s1), some_symbol(s2), some_symbol(s3), s1 != s2, s1 != s3.\n'
               'Add("one:" + to_string(1) + ", pi:" + to_string(3.14) + "\\n").\n'
               '.decl some_symbol(s:symbol)\nsome_symbol("(a)").\nsome_symbol("(b)").\n')
    with ddflow.Dataflow() as flow:
        cap = flow.datalog(program)["Add"].capture()
        flow.advance_to(1)
        flow.run()
        assert sorted(cap.contents(0)) == sorted((s,) for s in ["pre--post", "pre-(a)", "pre-(b)", "(a)-post",
                                                                "(b)-post", "(b)(a)(a)", "(a)(b)(b)",
                                                                "one:1, pi:3.140000\n"])
    with pytest.raises(DatalogError, match=r"arithmetic \+ on a symbol and a number \(\+ joins two symbols\)"):
        ddflow.Dataflow().datalog('.decl s(x: symbol)\ns("a" + 1).')


@pytest.mark.parametrize("module", ["ddflow.datalog.scope", "ddflow.datalog.functors", "ddflow.datalog.tokens",
                                    "ddflow.datalog.subsume", "ddflow.datalog.expressions",
                                    "ddflow.datalog.components", "ddflow.datalog.directives"])
def test_the_new_modules_examples_run(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


DECLS = ".decl e(x: number, y: number)\n.decl r(x: number)\n.decl s(x: symbol)\n.decl f(x: float)\n"

#: (construct, line after DECLS, what the message says)
REFUSED = [
    (".functor", ".functor g(x: number): number", ".functor (user-defined functors) is not supported"),
    ("@functor", "r(@g(x)) :- e(x, _).", "user-defined functors (@g) are not supported"),
    (".init of no component", ".init c = C", ".init c: unknown component 'C'"),
    (".override outside a component", ".override q", ".override q outside a component"),
    (".override of nothing inherited", ".comp C { .decl q(x: number) }\n.comp D : C { .override z }\n.init d = D",
     ".override z: no base of D declares z"),
    ("a component instantiating itself", ".comp C { .init c = C }\n.init c = C", "component C instantiates itself"),
    ("type arguments", ".comp C<T> { .decl q(x: T) }\n.init c = C", "component C takes 1 type argument, got 0"),
    ("nested component definition", ".comp C { .comp D { } }", "a component defined inside a component"),
    ("record type", ".type P = [a: number, b: number]", "record types (.type T = [a: number, ...])"),
    ("record", "r(x) :- e(x, _), [x, x] = [1, 2].", "records ([a, b, ...]) are not supported"),
    ("nil", "r(x) :- e(x, _), nil = nil.", "the functor nil is not supported (records are not supported)"),
    ("ADT type", ".type T = A {x: number} | B {}", "algebraic data types (.type T = A {x: number} | B {})"),
    ("ADT constructor", "r(x) :- e(x, _), $A(x) = $A(1).", "algebraic data type constructors ($A(...))"),
    ("choice-domain", ".decl q(x: number, y: number) choice-domain x", "choice-domain is not supported: which"),
    (".limitsize", ".limitsize r(n=5)", ".limitsize is not supported: it stops a relation early"),
    (".include", '.include "x.dl"', ".include is not supported: pass the included program's text"),
    ("#include", '#include "x.dl"', "the C preprocessor (#include, #define) is not supported"),
    ("subsumption of a recursive relation", "e(x, z) :- e(x, y), e(y, z).\ne(x, y) <= e(x, z) :- y < z.",
     "subsumption of e, which its own rules read back (a recursive relation), is not supported"),
    ("subsumption across relations", "e(x, y) <= r(x) :- y < 1.", "a subsumptive rule's two heads name one relation"),
    ("range in a head", "r(range(0, 5)) :- r(_).", "range gives many values: bind them to a variable"),
    ("range of a variable", "r(x) :- e(y, _), x = range(0, y).", "range with an argument that is not a constant"),
    ("range of step 0", "r(x) :- x = range(0, 5, 0).", "range with a step of 0 is not supported"),
    ("ord", "r(x) :- s(y), x = ord(y).", "the functor ord is not supported (it is a symbol's number"),
    ("autoinc", "r(autoinc()) :- r(_).", "the functor autoinc is not supported (its values depend on the order"),
    ("$ counter", "r($) :- r(_).", "the counter $ is not supported (its values depend on the order"),
    ("to_unsigned", "r(to_unsigned(x)) :- r(x).", "the functor to_unsigned is not supported (unsigned values"),
    ("itou", "r(itou(x)) :- r(x).", "the functor itou is not supported"),
    ("as across base types", "s(as(x, symbol)) :- r(x).", "as(x, symbol) converts between base types"),
    ("match RE2 refuses", 'r(1) :- s(x), match("(?=a)a", x).', "match: the pattern '(?=a)a' is not supported"),
    ("aggregate in an aggregate's expression", "r(n) :- n = max (y + count : e(_, _)) : { e(_, y) }.",
     "an aggregate inside an aggregate's expression is not supported"),
    ("witness of sum", "r(x) :- n = sum y : { e(x, y) }, n > 0.", "variable x of the rule is bound only inside the "
                                                                   "sum aggregate (a witness)"),
    ("empty aggregate body", "r(n) :- n = count : {}.", "the count aggregate's body {} is empty"),
    ("negated parenthesized body", "r(x) :- e(x, _), !(x = 1 ; x = 2).", "negation of a parenthesized body"),
    ("disjunction in an aggregate", "r(n) :- n = count : { e(x, _), (x = 1 ; x = 2) }.",
     "a disjunction inside an aggregate is not supported"),
]


@pytest.mark.parametrize("construct, line, message", REFUSED, ids=[c[0] for c in REFUSED])
def test_refused_by_name(construct, line, message):
    flow = ddflow.Dataflow()
    with pytest.raises(DatalogError) as err:
        flow.datalog(DECLS + line)
    assert message in str(err.value), str(err.value)
    assert err.value.pos is not None and err.value.pos.line >= 5, str(err.value)
