"""A random Datalog program generator and a plain-Python naive bottom-up evaluator: the Datalog tests' oracle.

Programs are built as Python data (never parsed: the evaluator shares
no code with ddflow's front end) and rendered to Soufflé text.  A
program has three input relations over a small domain (``e2(a, b)``,
``f2(a, b)``, ``u1(a)``), then strata of derived relations: joins,
filters, arithmetic kept in the domain with ``%``, recursion (linear,
non-linear and mutual), negation of an earlier stratum, and aggregates
(``count``, ``sum``, ``min``, ``max``, ``mean``, grouped by an injected
variable or global) of an earlier stratum.

Terms: ``("v", name)``, ``("c", int)``, ``("_",)``, ``("+", t, t)``,
``("%", t, t)``, ``("*", t, t)``.  Literals: ``("atom", rel, terms,
negated)``, ``("cmp", op, t, t)``, ``("agg", var, func, expr, [atoms])``.
"""
from __future__ import annotations

import itertools
import random

DOMAIN = 5
INPUTS = {"e2": 2, "f2": 2, "u1": 1}
OPS = {"=": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
       ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


class Program:
    """Relations in evaluation order (``strata``: lists of relation names evaluated together) and rules."""

    def __init__(self):
        self.arity: dict[str, int] = dict(INPUTS)
        self.types: dict[str, list[str]] = {r: ["number"] * a for r, a in INPUTS.items()}
        self.strata: list[list[str]] = []
        self.rules: list[tuple] = []  # (head rel, head terms, body literals)
        self.eqrel: set[str] = set()  # equivalence relations: closed after every round
        self.subsumptions: list[tuple] = []  # (rel, dominated terms, dominating terms, body literals)

    def text(self, hints: list[str] = ()) -> str:
        out = []
        for r, a in self.arity.items():
            attrs = ", ".join(f"a{i}: {t}" for i, t in enumerate(self.types[r]))
            out.append(f".decl {r}({attrs}){' eqrel' if r in self.eqrel else ''}")
            if r in INPUTS:
                out.append(f".input {r}")
        out.extend(hints)
        for rel, t1, t2, body in self.subsumptions:
            out.append(f"{rel}({', '.join(map(_t, t1))}) <= {rel}({', '.join(map(_t, t2))}) :- "
                       f"{', '.join(map(_lit, body))}.")
        for head, terms, body in self.rules:
            terms, body = _inline(terms, body)
            out.append(f"{head}({', '.join(map(_t, terms))}) :- {', '.join(map(_lit, body)) or 'true'}.")
        return "\n".join(out) + "\n"

    def derived(self) -> list[str]:
        return [r for s in self.strata for r in s]


def _inline(terms, body):
    """An aggregate marked ``inline`` written where its variable stands (head and atom arguments), its
    ``var = aggregate`` literal dropped: the same rule in Soufflé's other spelling."""
    for lit in body:
        if lit[0] == "agg" and len(lit) > 5 and lit[5].get("inline"):
            def sub(t, lit=lit):
                return ("aggt", lit) if t == ("v", lit[1]) else t
            terms = [sub(t) for t in terms]
            body = [lt if lt is lit else (lt[0], lt[1], [sub(t) for t in lt[2]], lt[3]) if lt[0] == "atom" else lt
                    for lt in body if lt is not lit]
    return terms, body


def _agg_text(lit) -> str:
    _, var, func, expr, atoms = lit[:5]
    e = f" {_t(expr)}" if expr is not None else ""
    return f"{func}{e} : {{ {', '.join(map(_lit, atoms))} }}"


def _t(t) -> str:
    if t[0] == "aggt":
        return _agg_text(t[1])
    if t[0] == "v":
        return t[1]
    if t[0] == "c":
        return str(t[1])
    if t[0] == "_":
        return "_"
    if t[0] in ("bnot", "lnot"):
        return f"({t[0]} {_t(t[1])})"
    if t[0] == "neg":
        return f"(-{_t(t[1])})"
    return f"({_t(t[1])} {t[0]} {_t(t[2])})"


def _lit(lit) -> str:
    if lit[0] == "or":
        return "(" + " ; ".join(", ".join(map(_lit, alt)) for alt in lit[1]) + ")"
    if lit[0] == "atom":
        return f"{'!' if lit[3] else ''}{lit[1]}({', '.join(map(_t, lit[2]))})"
    if lit[0] == "cmp":
        return f"{_t(lit[2])} {lit[1]} {_t(lit[3])}"
    return f"{lit[1]} = {_agg_text(lit)}"


# -- the generator --------------------------------------------------------------------------------

#: Kinds of strata :func:`generate` draws from (a test may pass its own).
KINDS = ("join", "rec", "rec", "mutual", "neg", "agg", "agg")


def generate(rng: random.Random, n_strata: int = 4, kinds: tuple[str, ...] = KINDS) -> Program:
    """A random stratified program: each stratum one or two relations, maybe recursive."""
    p = Program()
    for s in range(n_strata):
        earlier = list(p.arity)  # inputs and every earlier stratum
        kind = rng.choice(kinds)
        if kind == "mutual":
            a, b = f"m{s}a", f"m{s}b"
            p.arity[a] = p.arity[b] = 2
            p.types[a] = p.types[b] = ["number", "number"]
            src = _binary(rng, earlier, p)
            p.rules.append((a, [("v", "x"), ("v", "y")], [("atom", src, [("v", "x"), ("v", "y")], False)]))
            p.rules.append((b, [("v", "x"), ("v", "z")], [("atom", a, [("v", "x"), ("v", "y")], False),
                                                          ("atom", _binary(rng, earlier, p), [("v", "y"), ("v", "z")],
                                                           False)]))
            p.rules.append((a, [("v", "y"), ("v", "x")], [("atom", b, [("v", "x"), ("v", "y")], False),
                                                          ("cmp", rng.choice(["!=", "<=", ">="]), ("v", "x"),
                                                           ("v", "y"))]))
            p.strata.append([a, b])
            continue
        name = f"r{s}"
        if kind == "eqrel":  # q(x, y) :- a(x, y)[, x < c]; maybe q(x, z) :- q(x, y), b(y, z): closed as eqrel
            p.arity[name], p.types[name] = 2, ["number", "number"]
            p.eqrel.add(name)
            a, b = _binary(rng, earlier, p), _binary(rng, earlier, p)
            p.rules.append((name, [("v", "x"), ("v", "y")], [("atom", a, [("v", "x"), ("v", "y")], False)]
                            + ([("cmp", "<", ("v", "x"), ("c", rng.randrange(1, DOMAIN)))] if rng.random() < 0.5
                               else [])))
            if rng.random() < 0.5:
                p.rules.append((name, [("v", "x"), ("v", "z")], [("atom", name, [("v", "x"), ("v", "y")], False),
                                                                 ("atom", b, [("v", "y"), ("v", "z")], False)]))
            p.strata.append([name])
            continue
        if kind == "disj":  # r(x, y) :- a(x, y), (alternatives), !c(x + k, y): disjunction, negated expression
            p.arity[name], p.types[name] = 2, ["number", "number"]
            a, b, c = (_binary(rng, earlier, p) for _ in range(3))
            x, y = ("v", "x"), ("v", "y")
            alts = [[("cmp", "<", x, ("c", rng.randrange(1, DOMAIN)))],
                    [("cmp", "=", y, ("c", rng.randrange(DOMAIN))), ("atom", b, [y, ("_",)], False)],
                    [("atom", c, [y, x], True)]]
            rng.shuffle(alts)
            body = [("atom", a, [x, y], False), ("or", alts[:rng.randrange(2, 4)])]
            if rng.random() < 0.6:
                body.append(("atom", c, [("%", ("+", x, ("c", rng.randrange(1, 3))), ("c", DOMAIN)), y], True))
            p.rules.append((name, [x, y], body))
            p.strata.append([name])
            continue
        if kind == "subsume":  # r(x, y) :- a(x, y). [r(x, z) :- a(x, y), b(y, z).] and a partial order's <=
            p.arity[name], p.types[name] = 2, ["number", "number"]
            a, b, c = (_binary(rng, earlier, p) for _ in range(3))
            x, y, u, v = (("v", n) for n in ("x", "y", "u", "v"))
            p.rules.append((name, [x, y], [("atom", a, [x, y], False)]))
            if rng.random() < 0.5:
                p.rules.append((name, [x, ("v", "z")], [("atom", a, [x, y], False),
                                                        ("atom", b, [y, ("v", "z")], False)]))
            variant = rng.choice(["max", "min_x", "unless"])
            if variant == "max":  # the largest y of each x
                p.subsumptions.append((name, [x, y], [x, v], [("cmp", "<", y, v)]))
            elif variant == "min_x":  # the smallest x of each y
                p.subsumptions.append((name, [x, y], [u, y], [("cmp", ">", x, u)]))
            else:  # a tuple not in c is dominated by any tuple of a larger x
                p.subsumptions.append((name, [x, y], [u, v], [("atom", c, [x, y], True), ("cmp", "<", x, u)]))
            p.strata.append([name])
            continue
        if kind == "ops":  # r(x, e) :- a(x, y)[, e op c]: e of bitwise, logical, ^ and signs over x, y
            p.arity[name], p.types[name] = 2, ["number", "number"]
            e = _op_term(rng, 3)
            body = [("atom", _binary(rng, earlier, p), [("v", "x"), ("v", "y")], False)]
            if rng.random() < 0.5:
                body.append(("cmp", rng.choice(["<", ">=", "!="]), e, ("c", rng.randrange(-2, DOMAIN))))
            p.rules.append((name, [("v", "x"), e], body))
            p.strata.append([name])
            continue
        if kind == "agg2":
            _scoped_aggregate(rng, p, name, earlier)
            p.strata.append([name])
            continue
        if kind == "agg":
            func = rng.choice(["count", "sum", "min", "max", "mean"])
            grouped = rng.random() < 0.7
            src = _binary(rng, earlier, p)
            expr = None if func == "count" else rng.choice([("v", "y"), ("+", ("v", "y"), ("c", 1)),
                                                            ("*", ("v", "y"), ("c", 2))])
            typ = "float" if func == "mean" else "number"
            if grouped:
                p.arity[name] = 2
                p.types[name] = ["number", typ]
                outer = _binary(rng, earlier, p)
                body = [("atom", outer, [("v", "x"), ("_",)], False),
                        ("agg", "n", func, expr, [("atom", src, [("v", "x"), ("v", "y")], False)])]
                p.rules.append((name, [("v", "x"), ("v", "n")], body))
            else:
                p.arity[name] = 1
                p.types[name] = [typ]
                body = [("agg", "n", func, expr, [("atom", src, [("_",), ("v", "y")], False)])]
                if rng.random() < 0.5:
                    body[0][4].append(("cmp", "<", ("v", "y"), ("c", rng.randrange(1, DOMAIN))))
                p.rules.append((name, [("v", "n")], body))
            p.strata.append([name])
            continue
        p.arity[name] = 2
        p.types[name] = ["number", "number"]
        a = _binary(rng, earlier, p)
        b = _binary(rng, earlier, p)
        p.rules.append((name, [("v", "x"), ("v", "y")], [("atom", a, [("v", "x"), ("v", "y")], False)]
                       + ([("cmp", rng.choice(["<", ">=", "!="]), ("v", "x"), ("c", rng.randrange(DOMAIN)))]
                          if rng.random() < 0.3 else [])))
        if kind == "join":
            p.rules.append((name, [("v", "x"), ("%", ("+", ("v", "z"), ("c", 1)), ("c", DOMAIN))],
                            [("atom", a, [("v", "x"), ("v", "y")], False),
                             ("atom", b, [("v", "y"), ("v", "z")], False)]))
        elif kind == "rec":
            if rng.random() < 0.5:  # linear
                p.rules.append((name, [("v", "x"), ("v", "z")], [("atom", name, [("v", "x"), ("v", "y")], False),
                                                                 ("atom", b, [("v", "y"), ("v", "z")], False)]))
            else:  # non-linear, arithmetic in the domain
                p.rules.append((name, [("v", "x"), ("%", ("+", ("v", "z"), ("v", "x")), ("c", DOMAIN))],
                                [("atom", name, [("v", "x"), ("v", "y")], False),
                                 ("atom", name, [("v", "y"), ("v", "z")], False)]))
        else:  # negation of an earlier relation
            c = _binary(rng, earlier, p)
            p.rules.append((name, [("v", "y"), ("v", "x")], [("atom", a, [("v", "x"), ("v", "y")], False),
                                                             ("atom", c, [("v", "y"), ("_",)], True)]
                            if rng.random() < 0.5 else
                            [("atom", a, [("v", "x"), ("v", "y")], False),
                             ("atom", c, [("v", "x"), ("v", "y")], True)]))
        p.strata.append([name])
    return p


def _op_term(rng: random.Random, depth: int):
    """A random term of Soufflé's bitwise and logical functors, ``^`` (small exponents), ``-`` and ``%``."""
    if depth == 0 or rng.random() < 0.25:
        return rng.choice([("v", "x"), ("v", "y"), ("c", rng.randrange(-3, 8))])
    op = rng.choice(list(BINARY) + list(UNARY) + ["%", "+"])
    if op in UNARY:
        return (op, _op_term(rng, depth - 1))
    if op == "^":
        return (op, _op_term(rng, depth - 1), ("c", rng.randrange(0, 4)))
    if op == "%":
        return (op, _op_term(rng, depth - 1), ("c", rng.randrange(1, 5)))
    if op in ("bshl", "bshr", "bshru"):
        return (op, _op_term(rng, depth - 1), rng.choice([("c", rng.randrange(0, 5)), ("c", 64), ("v", "y")]))
    return (op, _op_term(rng, depth - 1), _op_term(rng, depth - 1))


def _scoped_aggregate(rng: random.Random, p: Program, name: str, earlier: list[str]) -> None:
    """An aggregate written where a term stands (a head, an atom's argument), or one whose names Soufflé
    scopes: a name of the aggregated expression is the aggregate's own even where the rule binds it outside;
    a name only in the body and bound outside is the rule's; a min/max witness binds the rule's name."""
    src, outer, other = (_binary(rng, earlier, p) for _ in range(3))
    x, y, z, n = (("v", v) for v in "xyzn")
    variant = rng.choice(["head", "atom", "own", "own_result", "correlated", "witness", "nested"])
    func = rng.choice(["count", "sum", "min", "max", "mean"] if variant in ("head", "correlated") else
                      ["min", "max"] if variant == "witness" else ["count", "sum", "min", "max"])
    expr = None if func == "count" else z
    typ = "float" if func == "mean" else "number"
    if variant == "head":  # r(x, f z : {src(x, z)}) :- outer(x, _).
        p.arity[name], p.types[name] = 2, ["number", typ]
        p.rules.append((name, [x, n], [("atom", outer, [x, ("_",)], False),
                                       ("agg", "n", func, expr, [("atom", src, [x, z], False)], {"inline": True})]))
    elif variant == "atom":  # r(x, y) :- outer(x, y), other(y, f z : {src(x, z)}).
        p.arity[name], p.types[name] = 2, ["number", "number"]
        p.rules.append((name, [x, y], [("atom", outer, [x, y], False), ("atom", other, [y, n], False),
                                       ("agg", "n", func, expr, [("atom", src, [x, z], False)], {"inline": True})]))
    elif variant == "own":  # r(x, y, n) :- outer(x, y), n = f y : {src(x, y)}: the inner y is its own
        e = None if func == "count" else rng.choice([y, ("+", y, ("c", 1))])
        p.arity[name], p.types[name] = 3, ["number"] * 3
        p.rules.append((name, [x, y, n], [("atom", outer, [x, y], False),
                                          ("agg", "n", func, e, [("atom", src, [x, y], False)],
                                           {"local": ["y"] if e is not None else []})]))
    elif variant == "own_result":  # r(n) :- n = f z + n : {src(a, z), other(b, n), a != b}
        e = ("+", z, n) if func != "count" else None
        p.arity[name], p.types[name] = 1, ["number"]
        body = [("atom", src, [("v", "a"), z], False), ("atom", other, [("v", "b"), n], False),
                ("cmp", "!=", ("v", "a"), ("v", "b"))]
        p.rules.append((name, [n], [("agg", "n", func, e, body, {"local": ["n"]})]))
    elif variant == "correlated":  # r(x, y, n) :- outer(x, y), n = f z : {src(x, z), z != y}: y is the rule's
        p.arity[name], p.types[name] = 3, ["number", "number", typ]
        p.rules.append((name, [x, y, n], [("atom", outer, [x, y], False),
                                          ("agg", "n", func, expr, [("atom", src, [x, z], False),
                                                                    ("cmp", rng.choice(["!=", "<"]), z, y)])]))
    elif variant == "nested":  # an aggregate in an aggregate's body, reading the rule's x or the body's y
        k = rng.choice(["x", "y"])
        inner = ("agg", "m", rng.choice(["max", "min", "count"]), None, [("atom", other, [("v", k), ("v", "w")],
                                                                            False)])
        if inner[2] != "count":
            inner = inner[:3] + (("v", "w"),) + inner[4:]
        p.arity[name], p.types[name] = 2, ["number", "number"]
        body = [("atom", src, [y, z], False), inner, ("cmp", rng.choice(["<", "<=", "!="]), z, ("v", "m"))]
        p.rules.append((name, [x, n], [("atom", outer, [x, ("_",)], False), ("agg", "n", func, expr, body)]))
    else:  # r(x, n) :- n = min z : src(x, z): x witnesses the value
        p.arity[name], p.types[name] = 2, ["number", "number"]
        p.rules.append((name, [x, n], [("agg", "n", func, z, [("atom", src, [x, z], False)], {"witness": ["x"]})]))


def _binary(rng: random.Random, earlier: list[str], p: Program) -> str:
    """An earlier relation of two number columns (a unary one is never picked)."""
    pick = [r for r in earlier if p.arity[r] == 2 and p.types[r] == ["number", "number"]]
    return rng.choice(pick)


# -- the evaluator ------------------------------------------------------------------------------

def evaluate(p: Program, facts: dict[str, set[tuple]]) -> dict[str, set[tuple]]:
    """Every relation's tuples: naive bottom-up, stratum by stratum, each to its fixpoint."""
    db = {r: set(facts.get(r, ())) for r in INPUTS}
    for stratum in p.strata:
        for r in stratum:
            db[r] = set()
        rules = [rule for rule in p.rules if rule[0] in stratum]
        while True:
            new = {r: set(db[r]) for r in stratum}
            for head, terms, body in rules:
                for env in _solve(body, {}, db):
                    new[head].add(tuple(_val(t, env) for t in terms))
            for r in stratum:
                if r in p.eqrel:
                    new[r] = _equivalence(new[r])
            if all(new[r] == db[r] for r in stratum):
                break
            db.update(new)
        for rel, t1, t2, body in p.subsumptions:  # (a subsumed relation is never recursive)
            if rel in stratum:
                db[rel] = db[rel] - _dominated(db[rel], t1, t2, body, db)
    return db


def _dominated(tuples: set[tuple], t1, t2, body, db) -> set[tuple]:
    """The tuples ``u`` such that another tuple ``v`` dominates them: ``t1`` matches ``u``, ``t2`` matches ``v``
    and ``body`` holds (``db`` holding every tuple, dominated or not)."""
    out = set()
    for u in tuples:
        for v in tuples:
            if u == v:
                continue
            env = _match(t1, u, {})
            env = _match(t2, v, env) if env is not None else None
            if env is not None and next(iter(_solve(body, env, db)), None) is not None:
                out.add(u)
                break
    return out


def _match(terms, tup, env):
    env = dict(env)
    for t, v in zip(terms, tup):
        if t[0] == "v" and t[1] not in env:
            env[t[1]] = v
        elif _val(t, env) != v:
            return None
    return env


def _equivalence(pairs: set[tuple]) -> set[tuple]:
    """The smallest equivalence relation on the values of ``pairs`` holding them: all pairs within each class
    of a union-find over the pairs."""
    parent: dict = {}

    def find(v):
        while parent.setdefault(v, v) != v:
            v = parent[v]
        return v

    for a, b in pairs:
        parent[find(a)] = find(b)
    classes: dict = {}
    for v in list(parent):
        classes.setdefault(find(v), []).append(v)
    return {(a, b) for members in classes.values() for a in members for b in members}


def _val(t, env):
    if t[0] == "v":
        return env[t[1]]
    if t[0] == "c":
        return t[1]
    if t[0] in UNARY:
        return UNARY[t[0]](_val(t[1], env))
    a, b = _val(t[1], env), _val(t[2], env)
    if t[0] == "+":
        return a + b
    if t[0] == "*":
        return a * b
    if t[0] == "%":  # C's remainder: the dividend's sign
        return (abs(a) % abs(b)) * (1 if a >= 0 else -1)
    return BINARY[t[0]](a, b)


def _wrap(v: int) -> int:
    """``v`` as a 64-bit two's-complement number."""
    return ((v + (1 << 63)) % (1 << 64)) - (1 << 63)


#: Soufflé's bitwise and logical functors and ``^`` on numbers (64-bit; shift counts modulo 64).
BINARY = {
    "band": lambda a, b: a & b, "bor": lambda a, b: a | b, "bxor": lambda a, b: a ^ b,
    "bshl": lambda a, b: _wrap(a << (b & 63)), "bshr": lambda a, b: a >> (b & 63),
    "bshru": lambda a, b: _wrap((a % (1 << 64)) >> (b & 63)),
    "land": lambda a, b: int(a != 0 and b != 0), "lor": lambda a, b: int(a != 0 or b != 0),
    "lxor": lambda a, b: int((a != 0) != (b != 0)), "^": lambda a, b: a ** b,
}
UNARY = {"bnot": lambda a: ~a, "lnot": lambda a: int(a == 0), "neg": lambda a: -a}


def _bound(t, env) -> bool:
    if t[0] in UNARY:
        return _bound(t[1], env)
    return t[0] in ("c",) or (t[0] == "v" and t[1] in env) or (t[0] not in ("v", "_") and _bound(t[1], env)
                                                                and _bound(t[2], env))


def _solve(body, env, db):
    """Every binding of ``body``'s variables (positive atoms first, then the rest in order), with repeats:
    one per combination of matching tuples."""
    pos = [lit for lit in body if lit[0] == "atom" and not lit[3]]
    rest = [lit for lit in body if not (lit[0] == "atom" and not lit[3])]
    for env2 in _atoms(pos, env, db):
        yield from _rest(rest, env2, db)


def _atoms(atoms, env, db):
    if not atoms:
        yield env
        return
    _, rel, terms, _ = atoms[0]
    for tup in db[rel]:
        e = dict(env)
        ok = True
        for t, v in zip(terms, tup):
            if t[0] == "_":
                continue
            if t[0] == "v" and t[1] not in e:
                e[t[1]] = v
            elif _val(t, e) != v:
                ok = False
                break
        if ok:
            yield from _atoms(atoms[1:], e, db)


def _rest(lits, env, db):
    if not lits:
        yield env
        return
    lit = lits[0]
    if lit[0] == "or":  # a parenthesized disjunction: the bindings of each alternative
        for alt in lit[1]:
            for e in _solve(alt, env, db):
                yield from _rest(lits[1:], e, db)
        return
    if lit[0] == "atom":  # negated: no tuple matches
        _, rel, terms, _ = lit
        if not any(all(t[0] == "_" or _val(t, env) == v for t, v in zip(terms, tup)) for tup in db[rel]):
            yield from _rest(lits[1:], env, db)
        return
    if lit[0] == "cmp":
        _, op, a, b = lit
        if op == "=" and a[0] == "v" and a[1] not in env:
            yield from _rest(lits[1:], {**env, a[1]: _val(b, env)}, db)
        elif OPS[op](_val(a, env), _val(b, env)):
            yield from _rest(lits[1:], env, db)
        return
    _, var, func, expr, atoms = lit[:5]
    opts = lit[5] if len(lit) > 5 else {}
    inner = {k: v for k, v in env.items() if k not in opts.get("local", ())}  # the aggregate's own names
    solutions = list(_solve(atoms, inner, db))
    values = [(_val(expr, e) if expr is not None else 1) for e in solutions]
    if func == "count":
        result = len(values)
    elif func == "sum":
        result = sum(values)
    elif not values:
        return
    elif func == "min":
        result = min(values)
    elif func == "max":
        result = max(values)
    else:
        result = sum(values) / len(values)
    if var in env and env[var] != result:
        return
    if opts.get("witness"):  # min/max: each solution attaining the value binds the witnesses
        seen = set()
        for e, v in zip(solutions, values):
            w = tuple(e[x] for x in opts["witness"])
            if v == result and w not in seen:
                seen.add(w)
                yield from _rest(lits[1:], {**env, **dict(zip(opts["witness"], w)), var: result}, db)
        return
    yield from _rest(lits[1:], {**env, var: result}, db)


def random_facts(rng: random.Random, n: int) -> list[tuple[str, tuple]]:
    """``n`` random input facts over the domain."""
    out = []
    for _ in range(n):
        r = rng.choice(list(INPUTS))
        out.append((r, tuple(rng.randrange(DOMAIN) for _ in range(INPUTS[r]))))
    return out


def all_facts() -> list[tuple[str, tuple]]:
    return [(r, tup) for r, a in INPUTS.items() for tup in itertools.product(range(DOMAIN), repeat=a)]
