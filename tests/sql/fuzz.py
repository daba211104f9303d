"""A random differential tester of ddflow's SQL views against DuckDB (SQLancer-style): the oracle of ``flow.sql``.

Each *case* is a random schema (2-3 tables of 2-5 typed columns), a random
update stream (inserts, and deletes of present rows, at several data times
per frontier advance) and a dozen random queries, all built in one dataflow.
At every complete time each query's accumulated output must equal DuckDB's
answer on the accumulated tables (the query transpiled by sqlglot from
Spark to DuckDB).  Ternary logic partitioning (TLP) adds a metamorphic check
that needs no oracle: ``WHERE p`` + ``WHERE NOT p`` + ``WHERE p IS NULL`` is
the whole table.

Outcomes per query: *pass*; *refused* (``SchemaError`` at ``flow.sql``,
counted by construct); *both-error* (``run()`` raised and DuckDB raised too
on that data: an ANSI runtime error); *skipped* (sqlglot or DuckDB cannot
handle the query: a generator or oracle limit, not ddflow's); *bug*: any
other exception (at build or at run: a query must be refused when built,
never fail at run), a mismatch, or rows at a complete time that change later.
A bug is shrunk (fewer updates, fewer times, one advance) and printed as a
runnable reproduction.

Run ``python -m tests.sql.fuzz --minutes 2 --seed 1 [--features joins,subqueries]
[--workers 2] [--avoid TAG,...] [--known REGEX]`` from the repository root.

Spark 4 (ANSI) and DuckDB differ in places; the generator avoids those
queries (each is noted where it is avoided) or the comparison normalises:

* ``/`` and ``%`` only divide by non-zero literals: Spark ANSI raises on a
  division by zero, DuckDB returns NULL (and sqlglot rewrites ``a / b`` to
  ``a / NULLIF(b, 0)``, Spark's legacy rule).
* Decimal division and AVG of a decimal are decimals in Spark (rounded
  HALF_UP at the result scale), doubles in DuckDB: such results are only
  projected or compared with literals of at most two decimals (where the
  rounding cannot flip the comparison), and compared within half a unit in
  the last place of ddflow's decimal.  They never feed GROUP BY, DISTINCT or
  set operations.
* CAST: only casts both agree on (numbers to double, bigint to decimal,
  anything but double to string); never string to a number (Spark ANSI
  raises, sqlglot writes TRY_CAST), never double/decimal to bigint (Spark
  truncates, DuckDB rounds), never double to string (formatting differs).
* ``CONCAT(a, NULL)`` is NULL in Spark, ``a`` in DuckDB: only ``||``.
* LIKE patterns hold no backslash (Spark's default escape, none in DuckDB).
* Doubles in the data and literals are dyadic (0.5, 2.25): sums are exact in
  any order; other float results compare within 1e-9 relative.
* A date plus an interval is a DATE in Spark, a TIMESTAMP in DuckDB: a
  timestamp at midnight compares equal to the date; its text differs, so
  a column a CAST to string may read is a plain column, or (in views)
  the interval arithmetic wrapped in ``CAST(... AS date)`` (found by the
  30-minute run, seed 2159: a view column ``d - interval '3' day`` cast to
  string gave '1994-12-28' in Spark and ddflow, '1994-12-28 00:00:00' in DuckDB).
* Scalar subqueries are aggregates (one row): Spark errors on several rows.
* ORDER BY / LIMIT only with every output column among the keys (opt-in
  ``limits``): a view is a bag, and LIMIT with ties is otherwise not determined;
  no string/number comparisons (Spark casts, DuckDB may refuse), no mixed
  decimal/bigint in UNION branches or CASE arms beyond what both widen
  alike, no NaN (no 0/0: divisors are non-zero).
* Values are small (no bigint or decimal overflow): Spark ANSI raises where
  DuckDB's TRY_CAST would be NULL.
"""
from __future__ import annotations

import argparse
import datetime
import math
import random
import re
import sys
import time
import traceback
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from decimal import Decimal

import duckdb
import sqlglot

import ddflow
from ddflow.errors import SchemaError

#: Feature groups the CLI can select (``--features``); all are on by default.
FEATURES = ("exprs", "like", "decimal", "date", "joins", "aggregates", "distinct", "setops", "subqueries",
            "scalar", "ctes", "views", "tlp")
#: Feature groups off by default (``--features`` names them): their options would change every seed's queries.
OPT_IN = ("library",  # Spark library functions DuckDB agrees on: lpad, rpad, repeat, left, right, nvl, instr
          "limits",  # ORDER BY ... LIMIT [OFFSET] on expressions, unselected columns and aggregates
          "setops_all",  # INTERSECT ALL and EXCEPT ALL
          "windows",  # window functions in SELECT (rankings, LAG / LEAD, aggregates OVER frames) and QUALIFY
          "correlated_in")  # x IN (SELECT y FROM ... WHERE y2 = outer) as a WHERE conjunct

DUCK_TYPE = {"bigint": "BIGINT", "double": "DOUBLE", "string": "VARCHAR", "boolean": "BOOLEAN", "date": "DATE"}
BIGINTS = [-2, -1, 0, 1, 2, 3, 5]
DOUBLES = [-1.5, 0.0, 0.5, 1.0, 2.25, 3.0]
STRINGS = ["", "a", "b", "ab", "ba", "abc", "B", "a_c"]
DATES = [datetime.date(1994, 12, 31), datetime.date(1995, 1, 31), datetime.date(1995, 3, 15),
         datetime.date(1995, 3, 16), datetime.date(1996, 2, 29), datetime.date(1998, 12, 1)]
DEC_LITERALS = ["0.06", "1.5", "0.5", "2.25", "10.00", "0.1", "3.0", "-1.25"]
LIKE_CHARS = ["a", "b", "c", "%", "_", "%", "_"]


def base_type(t: str) -> str:
    """The generator's type class: decimals of any precision are one class."""
    return "decimal" if t.startswith("decimal") else t


# ---------------------------------------------------------------------------------------------- data


@dataclass
class Table:
    name: str
    cols: list[tuple[str, str]]  # (name, canonical type)
    domains: list[list] = field(default_factory=list)

    @property
    def schema(self) -> dict[str, str]:
        return dict(self.cols)


@dataclass
class Query:
    """One query (with the views it needs created first); ``same_as``: a query ddflow must answer identically (TLP)."""

    sql: str
    tags: set[str]
    setup: list[str] = field(default_factory=list)
    same_as: str | None = None


@dataclass
class Case:
    seed: int
    tables: list[Table]
    steps: list[tuple[list[tuple[str, tuple, int, int]], int]]  # (events (table, row, time, diff), frontier)
    queries: list[Query]


def _decimal_domain(rng: random.Random, p: int, s: int) -> list:
    top = 10 ** p - 1
    units = {0, min(top, 1), min(top, 10 ** s), min(top, 6)}
    while len(units) < 7:
        units.add(rng.randint(-min(top, 2000), min(top, 2000)))
    return [Decimal(u).scaleb(-s) for u in sorted(units)]


def gen_tables(rng: random.Random, features: set[str]) -> list[Table]:
    types = ["bigint", "bigint", "double", "string", "string", "boolean"]
    if "decimal" in features:
        types += ["decimal", "decimal"]
    if "date" in features:
        types += ["date"]
    key = rng.choice(["bigint", "bigint", "string"])  # every table's first column: joins always have a key
    tables = []
    for i in range(rng.randint(2, 3)):
        prefix = "abc"[i]
        cols, domains = [], []
        for j in range(rng.randint(2, 5)):
            t = key if j == 0 else rng.choice(types)
            if t == "decimal":
                p = rng.randint(2, 9)
                s = rng.randint(0, min(3, p - 1))
                t, dom = f"decimal({p},{s})", _decimal_domain(rng, p, s)
            else:
                dom = {"bigint": BIGINTS, "double": DOUBLES, "string": STRINGS, "boolean": [True, False],
                       "date": DATES}[t]
            if j == 0:
                dom = dom[:4] if t == "string" else [0, 1, 2, 3]  # small key domains: joins hit
            cols.append((f"{prefix}{j}", t))
            domains.append(list(dom))
        tables.append(Table(f"t{i}", cols, domains))
    return tables


def gen_row(rng: random.Random, table: Table, null_p: float) -> tuple:
    return tuple(None if rng.random() < null_p else rng.choice(dom) for dom in table.domains)


def gen_steps(rng: random.Random, tables: list[Table]) -> list:
    """1-4 advances of 1-3 data times each; inserts, and deletes of rows present at that time."""
    null_p = rng.choice([0.1, 0.25, 0.4])
    present = {t.name: Counter() for t in tables}
    steps, t = [], 0
    for step in range(rng.randint(1, 4)):
        events = []
        for _ in range(rng.randint(1, 3)):
            for table in tables:
                n = rng.randint(2, 7) if t == 0 else rng.randint(0, 4)
                for _ in range(n):
                    acc = present[table.name]
                    if acc and rng.random() < 0.35:
                        row = rng.choice(sorted(acc, key=repr))
                        acc[row] -= 1
                        if acc[row] == 0:
                            del acc[row]
                        events.append((table.name, row, t, -1))
                    else:
                        row = rng.choice(sorted(acc, key=repr)) if acc and rng.random() < 0.1 else \
                            gen_row(rng, table, null_p)
                        acc[row] += 1
                        events.append((table.name, row, t, 1))
            t += rng.choice([1, 1, 2])
        steps.append((events, t))
    return steps


# ---------------------------------------------------------------------------------------------- queries


@dataclass
class Source:
    """A relation a FROM clause can name: its text (a table, a CTE or view name) and typed columns."""

    text: str
    cols: list[tuple[str, str]]


class QueryGen:
    """Random typed Spark SQL over a case's tables; records the constructs it used in ``tags``."""

    def __init__(self, rng: random.Random, tables: list[Table], features: set[str], view_ids):
        self.rng, self.features = rng, features
        self.sources = [Source(t.name, t.cols) for t in tables]
        self.tags: set[str] = set()
        self.setup: list[str] = []
        self.ctes: list[str] = []
        self._alias = 0
        self._view_ids = view_ids
        self.in_setop = False
        self._row_window = False  # this SELECT has a window function that reads rows one by one

    def on(self, feature: str, p: float = 1.0) -> bool:
        return feature in self.features and self.rng.random() < p

    def alias(self) -> str:
        self._alias += 1
        return f"x{self._alias}"

    # -- expressions ----------------------------------------------------------------------------------
    def literal(self, t: str) -> str:
        r = self.rng
        t = base_type(t)
        if t == "bigint":
            return str(r.choice(BIGINTS))
        if t == "double":
            return f"{r.choice(DOUBLES)}E0"  # 1.5 alone is a decimal in Spark
        if t == "decimal":
            self.tags.add("decimal_literal")
            return r.choice(DEC_LITERALS)
        if t == "string":
            return "'" + r.choice(STRINGS) + "'"
        if t == "boolean":
            return r.choice(["TRUE", "FALSE"])
        if t == "date":
            return f"date '{r.choice(DATES).isoformat()}'"
        raise ValueError(t)

    def cols_of(self, scope, t: str) -> list[str]:
        return [c for c, ct in scope if base_type(ct) == t]

    def expr(self, scope, t: str, depth: int = 2, inexact: bool = False) -> str:
        """An expression of type class ``t``; ``inexact``: may be a decimal division (Spark rounds, DuckDB does not)."""
        r = self.rng
        cols = self.cols_of(scope, t)
        if depth <= 0 or not self.on("exprs", 0.45):
            if cols and r.random() < 0.8:
                return r.choice(cols)
            return self.literal(t)
        d = depth - 1
        opts = []
        if t in ("bigint", "double", "decimal"):
            opts += ["arith"] * 3 + ["neg", "case", "coalesce"]
        if t == "bigint":
            opts += ["mod", "abs"] + (["length"] if self.cols_of(scope, "string") else [])
            if "date" in self.features and self.cols_of(scope, "date"):
                opts += ["extract"]
        if t == "double":
            opts += ["div", "cast_double"]
        if t == "decimal":
            opts += ["cast_decimal"] + (["div"] if inexact else [])
        if t == "string":
            opts += ["concat", "upper", "lower", "substring", "case", "coalesce", "cast_string"]
        if t == "date":
            opts += ["interval", "interval", "case", "coalesce"]
        if "library" in self.features and t == "string":
            opts += ["pad", "repeat", "left_right", "nvl"]
        if "library" in self.features and t == "bigint" and self.cols_of(scope, "string"):
            opts += ["instr"]
        if t == "boolean":
            return self.pred(scope, depth)
        k = r.choice(opts)
        if k == "arith":
            op = r.choice(["+", "-", "*"])
            if t == "bigint":
                a, b = self.expr(scope, "bigint", d), self.expr(scope, "bigint", 0)
            elif t == "double":
                a, b = self.expr(scope, "double", d), self.expr(scope, r.choice(["double", "bigint"]), 0)
            else:
                # Decimal products only with a leaf: precision stays far below 38 (no precision loss).
                a, b = self.expr(scope, "decimal", d), self.expr(scope, r.choice(["decimal", "bigint"]), 0)
                self.tags.add("decimal_arith")
            if r.random() < 0.5:
                a, b = b, a
            return f"({a} {op} {b})"
        if k == "neg":
            return f"(- {self.expr(scope, t, d)})"
        if k == "case":
            self.tags.add("case")
            n = r.randint(1, 2)
            whens = " ".join(f"WHEN {self.pred(scope, 1)} THEN {self.expr(scope, t, d)}" for _ in range(n))
            other = f" ELSE {self.expr(scope, t, d)}" if r.random() < 0.7 else ""
            return f"CASE {whens}{other} END"
        if k == "coalesce":
            self.tags.add("coalesce")
            return f"COALESCE({self.expr(scope, t, d)}, {self.expr(scope, t, 0)})"
        if k == "mod":  # a non-zero divisor: Spark ANSI raises on % 0, DuckDB too
            return f"({self.expr(scope, 'bigint', d)} % {r.choice([2, 3, -2])})"
        if k == "abs":
            return f"abs({self.expr(scope, 'bigint', d)})"
        if k == "length":
            return f"length({self.expr(scope, 'string', d)})"
        if k == "extract":
            self.tags.add("extract")
            return f"EXTRACT(YEAR FROM {self.expr(scope, 'date', d)})"
        if k == "div":  # non-zero literal divisors: Spark ANSI raises on / 0, DuckDB gives NULL
            if t == "double":
                self.tags.add("division")
                return f"({self.expr(scope, r.choice(['bigint', 'double']), d)} / {r.choice(['2', '4', '3', '2.0E0'])})"
            self.tags.add("decimal_division")
            return f"({self.expr(scope, 'decimal', d)} / {r.choice(['2', '3', '0.5', '7'])})"
        if k == "cast_double":
            self.tags.add("cast")
            return f"CAST({self.expr(scope, r.choice(['bigint', 'decimal'] if 'decimal' in self.features else ['bigint']), d)} AS double)"
        if k == "cast_decimal":
            self.tags.add("cast")
            return f"CAST({self.expr(scope, 'bigint', d)} AS decimal({r.choice([6, 10])},{r.choice([0, 2])}))"
        if k == "concat":
            return f"({self.expr(scope, 'string', d)} || {self.expr(scope, 'string', 0)})"
        if k in ("upper", "lower"):
            return f"{k}({self.expr(scope, 'string', d)})"
        if k == "substring":
            args = r.choice(["1, 2", "2", "2, 1", "1, 1"])
            return f"substring({self.expr(scope, 'string', d)}, {args})"
        if k == "cast_string":  # only plain columns: the text of a computed decimal depends on its scale
            srcs = [c for c, ct in scope if base_type(ct) in ("bigint", "boolean", "date", "decimal", "string")]
            if not srcs:
                return self.literal("string")
            self.tags.add("cast")
            return f"CAST({r.choice(srcs)} AS string)"
        if k == "pad":  # lengths >= 0: both truncate a longer string to its first characters
            self.tags.add("pad")
            return (f"{r.choice(['lpad', 'rpad'])}({self.expr(scope, 'string', d)}, {r.choice([0, 2, 5])}, "
                    f"{r.choice(['x', 'ab'])!r})")
        if k == "repeat":
            self.tags.add("repeat")
            return f"repeat({self.expr(scope, 'string', d)}, {r.choice([0, 1, 3])})"
        if k == "left_right":  # lengths > 0: DuckDB's left(s, -1) drops the last character, Spark's is ''
            self.tags.add("left_right")
            return f"{r.choice(['left', 'right'])}({self.expr(scope, 'string', d)}, {r.choice([1, 2, 9])})"
        if k == "nvl":
            self.tags.add("nvl")
            return f"{r.choice(['nvl', 'ifnull'])}({self.expr(scope, 'string', d)}, {self.expr(scope, 'string', 0)})"
        if k == "instr":
            self.tags.add("instr")
            return f"instr({self.expr(scope, 'string', d)}, {r.choice(['a', 'b', 'ab', ''])!r})"
        if k == "interval":
            self.tags.add("interval")
            unit = r.choice(["day", "month", "year"])
            n = r.choice([1, 2, 3, 30, 12]) if unit == "day" else r.choice([1, 2, 3, 12])
            text = f"({self.expr(scope, 'date', d)} {r.choice(['+', '-'])} interval '{n}' {unit})"
            # Spark types it DATE, DuckDB TIMESTAMP: a CAST of it (or of a view's column made of it) to string
            # would differ in text.  CAST(... AS date) is Spark's no-op and DuckDB's way back to a DATE.
            return f"CAST({text} AS date)"
        raise AssertionError(k)

    def pred(self, scope, depth: int = 2) -> str:
        """A boolean expression (three-valued)."""
        r = self.rng
        types = sorted({base_type(t) for _, t in scope} - {"boolean"}) or ["bigint"]
        opts = ["cmp"] * 4 + ["null"]
        if depth > 0:
            opts += ["and", "or", "not", "between", "in"]
        if "like" in self.features and self.cols_of(scope, "string"):
            opts += ["like", "like"]
        if self.cols_of(scope, "boolean"):
            opts += ["boolcol"]
        k = r.choice(opts)
        d = max(depth - 1, 0)
        if k == "cmp":
            t = r.choice(types)
            op = r.choice(["=", "<>", "<", "<=", ">", ">="])
            rhs = self.expr(scope, t, d) if r.random() < 0.4 else self.literal(t)
            return f"({self.expr(scope, t, d)} {op} {rhs})"
        if k == "null":
            t = r.choice(types + ["boolean"] if self.cols_of(scope, "boolean") else types)
            return f"({self.expr(scope, t, d)} IS {r.choice(['', 'NOT '])}NULL)"
        if k in ("and", "or"):
            return f"({self.pred(scope, d)} {k.upper()} {self.pred(scope, d)})"
        if k == "not":
            return f"(NOT {self.pred(scope, d)})"
        if k == "between":
            t = r.choice([x for x in types if x != "boolean"])
            self.tags.add("between")
            return f"({self.expr(scope, t, d)} {r.choice(['', 'NOT '])}BETWEEN {self.literal(t)} AND {self.literal(t)})"
        if k == "in":
            t = r.choice(types)
            # Sometimes long (past nesting.ASIDE_AT: set aside while sqlglot qualifies), sometimes with an expression.
            n = r.randint(65, 120) if r.random() < 0.1 else r.randint(1, 3)
            lits = [self.literal(t) for _ in range(n)] + (["NULL"] if r.random() < 0.15 else [])
            if r.random() < 0.15:
                lits.insert(r.randrange(len(lits) + 1), self.expr(scope, t, 0))
            neg = r.random() < 0.3
            self.tags.add("not_in_list" if neg else "in_list")
            return f"({self.expr(scope, t, d)} {'NOT ' if neg else ''}IN ({', '.join(lits)}))"
        if k == "like":
            pat = "".join(r.choice(LIKE_CHARS + ["a", "b"]) for _ in range(r.randint(1, 3)))
            neg = r.random() < 0.4
            self.tags.add("not_like" if neg else "like")
            return f"({self.expr(scope, 'string', d)} {'NOT ' if neg else ''}LIKE '{pat}')"
        if k == "boolcol":
            return r.choice(self.cols_of(scope, "boolean"))
        raise AssertionError(k)

    # -- relations ------------------------------------------------------------------------------------
    def from_clause(self, depth: int):
        """FROM (and the join conditions that go to WHERE for comma / CROSS joins): text, scope, extra conjuncts."""
        r = self.rng
        src = self.source(depth)
        a = self.alias()
        scope = [(f"{a}.{c}", t) for c, t in src.cols]
        text = f"{src.text} {a}"
        where: list[str] = []
        n_joins = 0
        if self.on("joins", 0.55):
            n_joins = 1 if r.random() < 0.8 else 2
        for _ in range(n_joins):
            src2 = self.source(depth)
            b = self.alias()
            scope2 = [(f"{b}.{c}", t) for c, t in src2.cols]
            pairs = [(x, y) for x, xt in scope for y, yt in scope2 if base_type(xt) == base_type(yt)
                     and base_type(xt) not in ("boolean", "double")]
            kind = r.choice(["JOIN", "JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN", "comma", "cross",
                             "LEFT OUTER JOIN", "INNER JOIN"])
            conds = []
            if pairs:
                x, y = r.choice(pairs)
                conds.append(f"{x} = {y}")
                if len(pairs) > 1 and r.random() < 0.25:
                    x, y = r.choice(pairs)
                    conds.append(f"{x} = {y}")
            if r.random() < 0.3 or not conds:
                conds.append(self.pred(scope + scope2, 1))
                self.tags.add("join_residual")
            if kind == "comma":
                self.tags.add("comma_join")
                text += f", {src2.text} {b}"
                where += conds
            elif kind == "cross":
                self.tags.add("cross_join")
                text += f" CROSS JOIN {src2.text} {b}"
                where += conds
            else:
                self.tags.add(kind.lower().replace(" outer", "").replace(" ", "_"))
                text += f" {kind} {src2.text} {b} ON {' AND '.join(conds)}"
            scope = scope + scope2
        return text, scope, where

    def source(self, depth: int) -> Source:
        """A base table, or (ctes / views) a generated query as a CTE, derived table or view."""
        r = self.rng
        if depth < 1 and (self.on("ctes", 0.2) or self.on("views", 0.12)):
            sql, types = self.select(depth + 1, allow_inexact=False)
            cols = [(f"o{i}", t) for i, t in enumerate(types)]
            kind = r.choice([k for k in ("ctes", "views") if k in self.features])
            if kind == "views":
                name = f"v{next(self._view_ids)}"
                self.setup.append(f"CREATE VIEW {name} AS {sql}")
                self.tags.add("view")
                return Source(name, cols)
            if r.random() < 0.5:
                self.tags.add("derived_table")
                return Source(f"({sql})", cols)
            name = f"c{len(self.ctes)}"
            self.ctes.append(f"{name} AS ({sql})")
            self.tags.add("cte")
            return Source(name, cols)
        return r.choice(self.sources)

    def where_subquery(self, scope, depth: int) -> str | None:
        """A WHERE conjunct with a subquery: [NOT] IN, [NOT] EXISTS (correlated), a scalar comparison."""
        r = self.rng
        kinds = []
        if "subqueries" in self.features:
            kinds += ["in", "exists", "exists"]
        if "scalar" in self.features:
            kinds += ["scalar", "scalar_corr"]
        if not kinds:
            return None
        k = r.choice(kinds)
        src = r.choice(self.sources)
        b = self.alias()
        inner = [(f"{b}.{c}", t) for c, t in src.cols]
        pairs = [(x, y) for x, xt in scope for y, yt in inner if base_type(xt) == base_type(yt)
                 and base_type(xt) not in ("boolean", "double")]
        inner_where = [self.pred(inner, 1)] if r.random() < 0.4 else []
        if k == "in":
            if not pairs:
                return None
            x, y = r.choice(pairs)
            if self.on("correlated_in", 0.5):  # correlated by another pair: p (outer) = q (inner)
                p, q = r.choice(pairs)
                self.tags.add("in_correlated")
                conds = [f"{q} = {p}"] + inner_where
                return f"{x} IN (SELECT {y} FROM {src.text} {b} WHERE {' AND '.join(conds)})"
            neg = r.random() < 0.4
            self.tags.add("not_in_subquery" if neg else "in_subquery")
            if base_type(dict(scope)[x]) == "decimal":
                self.tags.add("in_subquery_decimal")
            w = f" WHERE {' AND '.join(inner_where)}" if inner_where else ""
            return f"{x} {'NOT ' if neg else ''}IN (SELECT {y} FROM {src.text} {b}{w})"
        if k == "exists":
            if not pairs:
                return None
            x, y = r.choice(pairs)
            conds = [f"{y} = {x}"]
            others = [(p, q) for p, q in pairs if (p, q) != (x, y)]
            if others and r.random() < 0.4:  # Q21: l2.k = l1.k AND l2.s <> l1.s
                p, q = r.choice(others)
                conds.append(f"{q} <> {p}")
                self.tags.add("exists_nonequality")
            neg = r.random() < 0.4
            self.tags.add("not_exists" if neg else "exists")
            return f"{'NOT ' if neg else ''}EXISTS (SELECT 1 FROM {src.text} {b} WHERE {' AND '.join(conds + inner_where)})"
        # A scalar subquery: an aggregate, one row (Spark errors on several).
        t = r.choice(sorted({base_type(yt) for _, yt in inner} & {"bigint", "decimal", "date", "string", "double"})
                     or ["bigint"])
        ys = self.cols_of(inner, t)
        if not ys:
            t = "bigint"
        agg = r.choice(["MIN", "MAX"] + (["SUM"] if t in ("bigint", "decimal", "double") else []))
        if t == "bigint" and (r.random() < 0.3 or not ys):
            agg_text, t = "COUNT(*)", "bigint"
        elif agg == "SUM" and t == "decimal":  # see agg_call: DuckDB's DECIMAL(38, s) sum
            agg_text = f"CAST(SUM({r.choice(ys)}) AS decimal(20,4))"
        else:
            agg_text = f"{agg}({r.choice(ys)})"
        conds = list(inner_where)
        if k == "scalar_corr":
            if not pairs:
                return None
            x, y = r.choice(pairs)
            conds.append(f"{y} = {x}")
            self.tags.add("correlated_scalar_where")
        else:
            self.tags.add("scalar_subquery_where")
        w = f" WHERE {' AND '.join(conds)}" if conds else ""
        lhs = self.expr(scope, t, 1)
        return f"({lhs} {r.choice(['=', '<', '>', '<=', '>='])} (SELECT {agg_text} FROM {src.text} {b}{w}))"

    def select(self, depth: int = 0, want: list[str] | None = None, allow_inexact: bool = True,
               allow_agg: bool = True) -> tuple[str, list[str]]:
        """A SELECT; ``want``: the output type classes (the second half of a set operation)."""
        r = self.rng
        from_text, scope, where = self.from_clause(depth)
        if self.on("exprs", 0.6) or "exprs" not in self.features and r.random() < 0.5:
            where.append(self.pred(scope, 2))
        if depth < 2 and r.random() < 0.5:
            sub = self.where_subquery(scope, depth)
            if sub:
                where.append(sub)
        where_text = f" WHERE {' AND '.join(where)}" if where else ""
        aggregated = allow_agg and want is None and self.on("aggregates", 0.4)
        if aggregated:
            items, types, tail = self.aggregate(scope, allow_inexact, depth)
        else:
            types = list(want) if want is not None else \
                [r.choice([base_type(t) for _, t in scope]) for _ in range(r.randint(1, 4))]
            items = [self.expr(scope, t, 2, inexact=allow_inexact) for t in types]
            if want is None and depth == 0 and self.on("scalar", 0.2):
                pairs = [(x, y) for x, xt in scope for y, yt in self.sources[0].cols
                         if base_type(xt) == base_type(yt) and base_type(xt) not in ("boolean", "double")]
                if pairs:
                    x, y = r.choice(pairs)
                    b = self.alias()
                    if r.random() < 0.5:
                        items.append(f"(SELECT COUNT(*) FROM {self.sources[0].text} {b} WHERE {b}.{y} = {x})")
                        self.tags.add("correlated_scalar_select")
                    else:
                        items.append(f"(SELECT COUNT(*) FROM {self.sources[0].text} {b})")
                        self.tags.add("scalar_subquery_select")
                    types.append("bigint")
            tail = ""
            if "windows" in self.features and not self.in_setop and r.random() < 0.6:
                self._row_window = False
                for _ in range(r.randint(1, 2)):
                    text, t = self.window(scope)
                    items.append(text)
                    types.append(t)
                if r.random() < 0.3:
                    text, t = self.window(scope, ranking=True)
                    tail = f" QUALIFY {text} {r.choice(['<=', '=', '>'])} {r.choice([1, 2])}"
                    self.tags.add("qualify")
        distinct = ""
        if self.on("distinct", 0.2) and "inexact" not in types:
            distinct = "DISTINCT "
            self.tags.add("distinct")
        sel = ", ".join(f"{e} AS o{i}" for i, e in enumerate(items))
        if depth == 0 and not self.in_setop and self.on("limits", 0.5):
            tail += self.order_limit(scope, types, aggregated, distinct=bool(distinct))
        return f"SELECT {distinct}{sel} FROM {from_text}{where_text}{tail}", types

    def window(self, scope, ranking: bool = False) -> tuple[str, str]:
        """A window function and its type class.  Its answer is one bag whatever order ties take: a ranking or an
        aggregate over a RANGE frame (peers together) may order by any keys; anything that reads rows one by one
        (ROW_NUMBER, LAG, LEAD, FIRST_VALUE, NTILE, a ROWS frame) orders by every column of the FROM, so rows
        tied on all keys are equal rows.  Equal rows still differ in such a function's value (one is first), so
        a SELECT has at most one of them, its QUALIFY included: two would pair their values across equal rows
        in any order.  NULLS FIRST / LAST always written (Spark and DuckDB differ)."""
        r = self.rng
        nulls = lambda: r.choice([" NULLS FIRST", " NULLS LAST"])  # noqa: E731
        way = lambda: r.choice(["", " DESC"])  # noqa: E731
        keyed = [c for c, t in scope if base_type(t) not in ("double", "boolean")]
        part = r.sample(keyed, min(len(keyed), r.choice([0, 1, 1, 2])))
        over_part = f"PARTITION BY {', '.join(part)} " if part else ""
        some = ", ".join(f"{k}{way()}{nulls()}" for k in r.sample([c for c, _ in scope], r.randint(1, min(2, len(scope)))))
        every = ", ".join(f"{c}{way()}{nulls()}" for c, _ in scope)
        by_row = ["row_number", "lag", "lead", "first_value", "ntile", "sum_rows"]
        kinds = ["rank", "dense_rank", "row_number"] if ranking else \
            ["rank", "dense_rank", "agg_range", "agg_partition"] + by_row
        if self._row_window:
            kinds = [k for k in kinds if k not in by_row]
        k = r.choice(kinds)
        self._row_window = self._row_window or k in by_row
        self.tags.add(f"window_{k}")
        if k in ("rank", "dense_rank"):
            return f"{k.upper()}() OVER ({over_part}ORDER BY {some})", "bigint"
        if k == "row_number":
            return f"ROW_NUMBER() OVER ({over_part}ORDER BY {every})", "bigint"
        if k == "ntile":
            return f"NTILE({r.choice([1, 2, 3])}) OVER ({over_part}ORDER BY {every})", "bigint"
        t = r.choice(sorted({base_type(ct) for _, ct in scope} - {"boolean"}) or ["bigint"])
        if k in ("lag", "lead"):
            arg = self.expr(scope, t, 1)
            extra = r.choice(["", f", {r.choice([1, 2])}", f", {r.choice([1, 2])}, {self.literal(t)}"])
            return f"{k.upper()}({arg}{extra}) OVER ({over_part}ORDER BY {every})", t
        if k == "first_value":
            return f"FIRST_VALUE({self.expr(scope, t, 1)}) OVER ({over_part}ORDER BY {every})", t
        numeric = [x for x in ("bigint", "double") if self.cols_of(scope, x)]
        agg = r.choice(["COUNT", "MIN", "MAX"] + (["SUM"] if numeric else []))
        if agg == "SUM":  # no decimal SUM: Spark's type is DECIMAL(p + 10, s), DuckDB's DECIMAL(38, s)
            t = r.choice(numeric)
        arg = self.expr(scope, t, 1)
        out = "bigint" if agg == "COUNT" else t
        if k == "sum_rows":
            lo, hi = r.choice([("1 PRECEDING", "CURRENT ROW"), ("UNBOUNDED PRECEDING", "CURRENT ROW"),
                               ("CURRENT ROW", "2 FOLLOWING"), ("1 PRECEDING", "1 FOLLOWING")])
            return f"{agg}({arg}) OVER ({over_part}ORDER BY {every} ROWS BETWEEN {lo} AND {hi})", out
        if k == "agg_range":
            return f"{agg}({arg}) OVER ({over_part}ORDER BY {some})", out
        return f"{agg}({arg}) OVER ({over_part.strip()})", out

    def order_limit(self, scope, types: list[str], aggregated: bool, distinct: bool) -> str:
        """ORDER BY ... LIMIT k [OFFSET m]: a first key that is an expression over the FROM's columns (not
        selected), an aggregate (in a grouped query) or an output; then every output column, so rows tied on
        all keys are equal rows and the answer is one bag.  NULLS FIRST / LAST always written (Spark and DuckDB
        default differently).  No inexact (decimal division) key: Spark and DuckDB round it differently."""
        r = self.rng
        keys = []
        nulls = lambda: r.choice([" NULLS FIRST", " NULLS LAST"])  # noqa: E731
        way = lambda: r.choice(["", " DESC"])  # noqa: E731
        exact = [t for t in ("bigint", "string", "date", "decimal") if self.cols_of(scope, t)]
        if aggregated and not distinct:
            text, t = self.agg_call(scope, allow_inexact=False)
            if t != "inexact" and r.random() < 0.6:
                keys.append(text)
                self.tags.add("order_by_aggregate")
        elif not aggregated and not distinct and exact and r.random() < 0.7:
            key = self.expr(scope, r.choice(exact), 1)
            if re.search(r"\bx\d+\.", key):  # a constant key would be an ordinal (ORDER BY 2) or refused
                keys.append(key)
                self.tags.add("order_by_expression")
        keys += [f"o{i}" for i, t in enumerate(types) if t != "inexact"]
        if len(keys) < len(types):  # an inexact output breaks no tie then: no LIMIT
            return ""
        order = ", ".join(f"{k}{way()}{nulls()}" for k in keys)
        self.tags.add("order_limit")
        tail = f" ORDER BY {order} LIMIT {r.choice([0, 1, 2, 3, 5])}"
        if r.random() < 0.3:
            tail += f" OFFSET {r.choice([1, 2])}"
            self.tags.add("offset")
        return tail

    def aggregate(self, scope, allow_inexact: bool, depth: int):
        r = self.rng
        self.tags.add("group_by")
        keys = [self.expr(scope, r.choice([base_type(t) for _, t in scope if base_type(t) != "double"] or ["bigint"]), 1)
                for _ in range(r.choice([0, 1, 1, 2]))]
        # A key without a column could be an integer literal: GROUP BY 3 is an ordinal in Spark and DuckDB.
        keys = [k for k in dict.fromkeys(keys) if re.search(r"\bx\d+\.", k)]
        if not keys:
            self.tags.add("global_aggregate")
        items = list(keys)
        types = []
        for k in keys:
            types.append(self.type_of(k, scope))
        for _ in range(r.randint(1, 3)):
            text, t = self.agg_call(scope, allow_inexact, plain=depth == 0 and not self.in_setop)
            items.append(text)
            types.append(t)
        tail = f" GROUP BY {', '.join(keys)}" if keys else ""
        if r.random() < 0.35:
            self.tags.add("having")
            text, t = self.agg_call(scope, allow_inexact=False)
            if "scalar" in self.features and r.random() < 0.3 and t in ("bigint", "double", "decimal"):
                src = r.choice(self.sources)
                ys = self.cols_of([(c, ct) for c, ct in src.cols], "bigint")
                b = self.alias()
                rhs = f"(SELECT {'SUM(' + b + '.' + ys[0] + ')' if ys else 'COUNT(*)'} FROM {src.text} {b})"
                self.tags.add("scalar_subquery_having")
            else:
                rhs = self.literal(t if t != "inexact" else "bigint")
            tail += f" HAVING {text} {r.choice(['>', '<', '>=', '=', '<>'])} {rhs}"
        return items, types, tail

    def type_of(self, key: str, scope) -> str:
        """The type class of a generated group key (the generator knows it from the choice; recomputed here)."""
        for c, t in scope:
            if key == c:
                return base_type(t)
        return self._last_key_types.get(key, "bigint")

    def agg_call(self, scope, allow_inexact: bool, plain: bool = False) -> tuple[str, str]:
        """An aggregate call and its type class; ``plain``: a top-level output (a decimal SUM left uncast).

        DuckDB types SUM of a decimal as DECIMAL(38, s), Spark as DECIMAL(p + 10, s): beside a decimal of a
        larger scale (UNION, COALESCE, a comparison) DuckDB cannot widen past 38 digits and rounds the other
        side to scale s.  Elsewhere a decimal SUM is cast to DECIMAL(20, 4) in both.
        """
        r = self.rng
        kinds = ["count_star", "count", "sum", "avg", "min", "max", "count_distinct"]
        k = r.choice(kinds)
        if k == "count_star":
            return "COUNT(*)", "bigint"
        numeric = [t for t in ("bigint", "double", "decimal") if self.cols_of(scope, t)]
        if k in ("sum", "avg") and numeric:
            t = r.choice(numeric)
            if k == "avg" and t == "decimal" and not allow_inexact:
                t = "bigint"
            arg = self.expr(scope, t, 1)
            self.tags.add(f"{k}_{t}")
            if k == "avg":
                return f"AVG({arg})", "double" if t != "decimal" else "inexact"
            if t == "decimal" and not plain:
                return f"CAST(SUM({arg}) AS decimal(20,4))", t
            return f"SUM({arg})", t
        t = r.choice(sorted({base_type(ct) for _, ct in scope}))
        arg = self.expr(scope, t, 1)
        if k == "count":
            return f"COUNT({arg})", "bigint"
        if k == "count_distinct":
            self.tags.add("count_distinct")
            return f"COUNT(DISTINCT {arg})", "bigint"
        if k in ("sum", "avg"):
            return "COUNT(*)", "bigint"
        return f"{k.upper()}({arg})", t

    def query(self) -> Query:
        r = self.rng
        self._last_key_types = {}
        self.in_setop = False
        if self.on("setops", 0.2):
            self.in_setop = True
            left, types = self.select(0, allow_inexact=False, allow_agg=True)
            right, _ = self.select(0, want=types, allow_inexact=False)
            op = r.choice(["UNION", "UNION ALL", "EXCEPT", "INTERSECT"])
            if op in ("EXCEPT", "INTERSECT") and self.on("setops_all", 0.5):
                op += " ALL"
            self.tags.add(op.lower().replace(" ", "_"))
            sql = f"{left} {op} {right}"
        else:
            sql, _ = self.select(0)
        if self.ctes:
            sql = f"WITH {', '.join(self.ctes)} {sql}"
        return Query(sql, self.tags, self.setup)


def _fix_key_types(gen: QueryGen):
    """Group keys are typed by the expression generator; remember each key's class for ``type_of``."""
    orig = gen.expr

    def expr(scope, t, depth=2, inexact=False):
        text = orig(scope, t, depth, inexact)
        gen._last_key_types.setdefault(text, t)
        return text

    gen.expr = expr


def tlp_queries(rng: random.Random, table: Table, features: set[str]) -> list[Query]:
    """Ternary logic partitioning: p, NOT p and p IS NULL partition the table (ddflow alone, and against DuckDB)."""
    gen = QueryGen(rng, [table], features | {"exprs"}, iter(()))
    _fix_key_types(gen)
    gen._last_key_types = {}
    scope = [(f"x.{c}", t) for c, t in table.cols]
    p = gen.pred(scope, 2)
    base = f"SELECT * FROM {table.name} x"
    parts = [f"{base} WHERE {p}", f"{base} WHERE NOT ({p})", f"{base} WHERE ({p}) IS NULL"]
    return [Query(" UNION ALL ".join(parts), gen.tags | {"tlp"}, same_as=base)]


def gen_case(seed: int, features: set[str], n_queries: int, avoid: frozenset[str] = frozenset(),
             n_tlp: int = 2) -> Case:
    """The case of ``seed``; a query using a construct in ``avoid`` (a tag, e.g. a known open bug) is drawn again."""
    rng = random.Random(seed)
    tables = gen_tables(rng, features)
    steps = gen_steps(rng, tables)
    queries = []
    view_ids = iter(range(10 ** 6))
    for _ in range(n_queries):
        for _ in range(50):
            g = QueryGen(rng, tables, features, view_ids)
            _fix_key_types(g)
            q = g.query()
            if not q.tags & avoid:
                queries.append(q)
                break
    if "tlp" in features:
        for _ in range(n_tlp):
            for _ in range(50):
                q = tlp_queries(rng, rng.choice(tables), features)[0]
                if not q.tags & avoid:
                    queries.append(q)
                    break
    return Case(seed, tables, steps, queries)


# ---------------------------------------------------------------------------------------------- comparing


def _norm_value(v):
    if hasattr(v, "item") and not isinstance(v, (Decimal, str)):
        v = v.item()  # a numpy scalar
    return v


def _key(v):
    """A hashable exact key; floats to 12 significant digits (near floats meet in the greedy pass)."""
    if v is None:
        return ("n",)
    if isinstance(v, bool):
        return ("b", v)
    if isinstance(v, float):
        return ("f", float(f"{v:.12g}") if math.isfinite(v) else repr(v))
    if isinstance(v, Decimal):
        return ("d", v.normalize() if v else Decimal(0))
    if isinstance(v, int):
        return ("i", v)
    if isinstance(v, datetime.datetime):
        return ("t", v) if v.time() != datetime.time(0) else ("D", v.date())
    if isinstance(v, datetime.date):
        return ("D", v)
    return (type(v).__name__, v)


def values_match(x, y) -> bool:
    """ddflow's value ``x`` against DuckDB's ``y`` (see the module notes for the tolerated differences)."""
    if x is None or y is None:
        return x is None and y is None
    if isinstance(y, datetime.datetime) and not isinstance(x, datetime.datetime) and isinstance(x, datetime.date):
        return y.time() == datetime.time(0) and y.date() == x  # DuckDB: date + interval is a timestamp
    if isinstance(x, bool) or isinstance(y, bool):
        return type(x) is bool and type(y) is bool and x == y
    if isinstance(x, Decimal):
        if isinstance(y, Decimal):
            return x == y
        if isinstance(y, float):  # Spark's decimal AVG / division, rounded HALF_UP; DuckDB's double
            return abs(float(x) - y) <= 0.5 * 10.0 ** x.as_tuple().exponent + 1e-9 * abs(y)
        return False
    if isinstance(x, float):
        if isinstance(y, float):
            return (math.isnan(x) and math.isnan(y)) or math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)
        return False  # a float where DuckDB has a decimal: decimal arithmetic done in binary floats
    if isinstance(x, int):
        return type(y) is int and x == y
    return type(x) is type(y) and x == y


def bags_match(dd_rows: list[tuple], duck_rows: list[tuple]) -> bool:
    if len(dd_rows) != len(duck_rows):
        return False
    a = Counter(tuple(_key(v) for v in r) for r in dd_rows)
    b = Counter(tuple(_key(v) for v in r) for r in duck_rows)
    exact = a & b
    left = [r for r in dd_rows if _take(exact, r)]
    exact2 = a & b
    right = [r for r in duck_rows if _take(exact2, r)]
    # Exact keys that matched are gone; the rest must pair up within the tolerances (greedy).
    for r in left:
        for i, s in enumerate(right):
            if s is not None and len(r) == len(s) and all(values_match(x, y) for x, y in zip(r, s)):
                right[i] = None
                break
        else:
            return False
    return True


def _take(exact: Counter, row) -> bool:
    """True for a row left over once the exact matches are taken out."""
    k = tuple(_key(v) for v in row)
    if exact[k] > 0:
        exact[k] -= 1
        return False
    return True


def expand(contents: dict) -> list[tuple]:
    return [tuple(_norm_value(v) for v in row) for row, m in contents.items() for _ in range(max(m, 0))]


def _show(rows: list[tuple], limit: int = 30) -> str:
    rows = sorted(rows, key=lambda r: tuple(_key(v) for v in r).__repr__())
    text = "\n".join(f"      {r!r}" for r in rows[:limit])
    return (text + (f"\n      ... {len(rows) - limit} more" if len(rows) > limit else "")) or "      (no rows)"


# ---------------------------------------------------------------------------------------------- running


class Duck:
    """DuckDB holding the accumulated tables; a case's views created once (they read the tables lazily)."""

    def __init__(self, tables: list[Table]):
        self.con = duckdb.connect()
        self.tables = tables
        for t in tables:
            cols = ", ".join(f"{c} {DUCK_TYPE.get(ty, ty.upper())}" for c, ty in t.cols)
            self.con.execute(f"CREATE TABLE {t.name} ({cols})")

    def load(self, acc: dict[str, Counter]) -> None:
        for t in self.tables:
            self.con.execute(f"DELETE FROM {t.name}")
            rows = [r for r, m in acc.get(t.name, Counter()).items() for _ in range(m)]
            if rows:
                self.con.executemany(f"INSERT INTO {t.name} VALUES ({', '.join('?' * len(t.cols))})", rows)

    def answer(self, sql: str):
        """The rows, or the exception DuckDB raised."""
        try:
            return [tuple(r) for r in self.con.execute(sql).fetchall()]
        except Exception as err:  # noqa: BLE001 - DuckDB's own error classes vary
            return err


def transpile(sql: str) -> str:
    return sqlglot.transpile(sql, read="spark", write="duckdb")[0]


@dataclass
class Outcome:
    status: str  # pass | refused | both-error | skipped | bug | known (an open bug's message)
    detail: str = ""
    kind: str = ""  # for bugs: build-crash | run-error | mismatch | late-change | negative | tlp
    time: int | None = None
    ours: list | None = None
    theirs: object = None


def _construct(msg: str) -> str:
    """A refusal's message with the quoted query text cut: the construct it names."""
    return re.sub(r"\s*\(in `.*|`.*", "", msg.split("\n")[0])[:120]


def _accumulated(steps, raw: bool = False):
    """time -> {table: Counter of rows} accumulated at that time, for every time before the last frontier.

    ``raw``: keep rows of multiplicity <= 0 (to check a shrunk stream is valid)."""
    acc: dict[str, Counter] = defaultdict(Counter)
    states = {}
    prev_frontier = 0
    for events, frontier in steps:
        by_t = defaultdict(list)
        for table, row, t, d in events:
            by_t[t].append((table, row, d))
        for t in range(prev_frontier, frontier):
            for table, row, d in by_t.get(t, ()):
                acc[table][row] += d
            states[t] = {k: Counter(v) if raw else +v for k, v in acc.items()}
        prev_frontier = frontier
    return states


#: Workers per dataflow (``--workers``): above 1 the rows are exchanged between forked worker processes.
WORKERS = 1


def execute(tables: list[Table], steps, queries: list[Query], isolate: bool = True) -> list[Outcome]:
    """Run ``queries`` over the stream in one dataflow; compare with DuckDB at every complete time."""
    flow = ddflow.Dataflow(workers=WORKERS) if WORKERS > 1 else ddflow.Dataflow()
    try:
        return _execute(flow, tables, steps, queries, isolate)
    finally:
        if WORKERS > 1:
            flow.close()  # the worker processes


def _execute(flow, tables: list[Table], steps, queries: list[Query], isolate: bool) -> list[Outcome]:
    out: list[Outcome | None] = [None] * len(queries)
    handles = {t.name: flow.new_collection(t.name, schema=t.schema)[0] for t in tables}
    caps: dict[int, tuple] = {}
    for i, q in enumerate(queries):
        try:
            for s in q.setup:
                flow.sql(s)
            cap = flow.sql(q.sql).capture()
            twin = flow.sql(q.same_as).capture() if q.same_as else None
            caps[i] = (cap, twin)
        except SchemaError as err:
            if str(err).startswith("SQL:"):
                out[i] = Outcome("refused", _construct(str(err)))
            else:  # a refusal must name a SQL construct; an internal check firing on a valid query is a bug
                out[i] = Outcome("bug", f"refused with an internal error: {err}", "internal-refusal",
                                 theirs=traceback.format_exc(limit=-3))
        except Exception as err:  # noqa: BLE001 - anything but a refusal is a bug
            out[i] = Outcome("bug", f"{type(err).__name__}: {err}", "build-crash",
                             theirs=traceback.format_exc(limit=-3))
    duck = Duck(tables)
    duck_sql: dict[int, str] = {}
    for i in list(caps):
        q = queries[i]
        try:
            for s in q.setup:
                duck.con.execute(transpile(s))
            duck_sql[i] = transpile(q.sql)
        except Exception as err:  # noqa: BLE001
            out[i] = Outcome("skipped", f"oracle: {type(err).__name__}: {str(err)[:100]}")
            del caps[i]
    states = _accumulated(steps)
    snapshots: dict[tuple[int, int], dict] = {}
    loaded, answers = None, {}
    prev = 0
    failed_at = None
    for events, frontier in steps:
        by_table = defaultdict(lambda: ([], [], []))
        for table, row, t, d in events:
            rows, times, diffs = by_table[table]
            rows.append(row), times.append(t), diffs.append(d)
        try:
            for table, (rows, times, diffs) in by_table.items():
                handles[table].update(rows, times=times, diffs=diffs)
            flow.advance_to(frontier)
            flow.run()
        except Exception as err:  # noqa: BLE001
            failed_at = (frontier, err, traceback.format_exc(limit=-3))
            break
        for t in range(prev, frontier):
            if states[t] != loaded:
                duck.load(states[t])
                loaded, answers = states[t], {}
            for i, (cap, twin) in list(caps.items()):
                if out[i] is not None:
                    continue
                contents = cap.contents(t)
                snapshots[i, t] = contents
                ours = expand(contents)
                if any(m <= 0 for m in contents.values()):
                    out[i] = Outcome("bug", f"a row with multiplicity <= 0 at time {t}", "negative", t, ours)
                    continue
                if i not in answers:
                    answers[i] = duck.answer(duck_sql[i])
                theirs = answers[i]
                if isinstance(theirs, Exception):
                    out[i] = Outcome("skipped", f"DuckDB raised at time {t} where ddflow did not: "
                                                f"{type(theirs).__name__}: {str(theirs)[:160]}", time=t)
                    continue
                if not bags_match(ours, theirs):
                    out[i] = Outcome("bug", f"ddflow and DuckDB differ at time {t}", "mismatch", t, ours, theirs)
                    continue
                if twin is not None and Counter(twin.contents(t)) != Counter(contents):
                    out[i] = Outcome("bug", f"TLP: the three partitions differ from the table at time {t}", "tlp",
                                     t, ours, expand(twin.contents(t)))
        prev = frontier
    if failed_at is not None:
        frontier, err, tb = failed_at
        live = [i for i in caps if out[i] is None]
        if isolate and len(live) > 1:  # which query raised: each alone
            for i in live:
                out[i] = execute(tables, steps, [queries[i]], isolate=False)[0]
            if not any(out[i].status in ("bug", "both-error") for i in live):
                out[live[0]] = Outcome("bug", f"run() raised with the case's queries together, never alone: "
                                              f"{type(err).__name__}: {err}", "run-error", theirs=tb)
        else:
            for i in live:
                # Acceptable only where DuckDB raises too on the data so far (a Spark ANSI runtime error).
                duck_err = None
                for t in range(0, frontier):
                    if t in states:
                        duck.load(states[t])
                        a = duck.answer(duck_sql[i])
                        if isinstance(a, Exception):
                            duck_err = a
                            break
                if duck_err is not None:
                    out[i] = Outcome("both-error", f"{type(err).__name__}: {err} / DuckDB: {duck_err}")
                else:
                    out[i] = Outcome("bug", f"run() raised: {type(err).__name__}: {err}", "run-error",
                                     theirs=tb)
    else:
        for i, (cap, _) in caps.items():  # a complete time's rows never change afterwards
            if out[i] is None:
                for (j, t), snap in snapshots.items():
                    if j == i and cap.contents(t) != snap:
                        out[i] = Outcome("bug", f"rows at complete time {t} changed later", "late-change", t,
                                         expand(cap.contents(t)), expand(snap))
                        break
    return [o if o is not None else Outcome("pass") for o in out]


# ---------------------------------------------------------------------------------------------- shrinking


def _valid(steps) -> bool:
    """Every row's multiplicity is >= 0 at every time (DuckDB holds bags)."""
    prev = 0
    for evs, f in steps:
        if f < prev or any(not prev <= e[2] < f for e in evs):
            return False
        prev = f
    return all(m >= 0 for st in _accumulated(steps, raw=True).values() for c in st.values() for m in c.values())


def _same_failure(a: Outcome, b: Outcome) -> bool:
    return b.status == "bug" and b.kind == a.kind


def shrink(tables, steps, query: Query, first: Outcome, budget_s: float = 20.0):
    """Fewer updates, fewer advances, fewer times, while the same kind of bug shows."""
    deadline = time.monotonic() + budget_s

    def fails(st) -> bool:
        if time.monotonic() > deadline or not _valid(st):
            return False
        return _same_failure(first, execute(tables, st, [query], isolate=False)[0])

    if first.kind in ("build-crash", "internal-refusal"):
        return [([], 1)]
    # One advance holding every update.
    flat = [([e for evs, _ in steps for e in evs], steps[-1][1])]
    if fails(flat):
        steps = flat
    # Remove chunks of updates (delta debugging, per step).
    changed = True
    while changed and time.monotonic() < deadline:
        changed = False
        for si in range(len(steps)):
            evs = steps[si][0]
            n = max(len(evs) // 2, 1)
            while n >= 1 and time.monotonic() < deadline:
                i = 0
                while i < len(steps[si][0]):
                    evs = steps[si][0]
                    cand = steps[:si] + [(evs[:i] + evs[i + n:], steps[si][1])] + steps[si + 1:]
                    if fails(cand):
                        steps, changed = cand, True
                    else:
                        i += n
                n //= 2
        # Drop empty advances; merge times into one.
        cand = [s for s in steps if s[0]] or steps[:1]
        if cand != steps and fails(cand):
            steps, changed = cand, True
        times = sorted({e[2] for evs, _ in steps for e in evs})
        if len(times) > 1:
            for t in times[1:]:
                j = times.index(t)
                cand = [([(a, r, times[j - 1] if tt == t else tt, d) for a, r, tt, d in evs], f) for evs, f in steps]
                if fails(cand):
                    steps, changed = cand, True
                    break
    # Renumber the times 0, 1, ... (and the frontiers after them).
    times = sorted({e[2] for evs, _ in steps for e in evs})
    remap = {t: i for i, t in enumerate(times)}
    cand, last = [], 0
    for evs, f in steps:
        new = [(a, r, remap[t], d) for a, r, t, d in evs]
        f2 = max([remap[t] + 1 for _, _, t, _ in evs] + [last, 1])
        cand.append((new, f2))
        last = f2
    if fails(cand):
        steps = cand
    return steps


_PREDICATES = ("EQ", "NEQ", "LT", "LTE", "GT", "GTE", "Like", "Is", "In", "Between", "Exists")
_ARITH = ("Add", "Sub", "Mul", "Div", "Mod")


def _variants(node) -> list:
    """Simpler replacements of one sqlglot node (None: remove it from its parent)."""
    from sqlglot import exp

    name = type(node).__name__
    out = []
    if name in ("And", "Or") or name in _ARITH:
        out += [node.left, node.right]
    elif name in ("Union", "Except", "Intersect"):
        for side in (node.left, node.right):
            side = side.copy()
            for key in ("with_", "with"):
                if node.args.get(key) is not None:
                    side.set(key, node.args[key].copy())
            out.append(side)
    elif name in ("Not", "Paren", "Neg", "Abs", "Upper", "Lower"):
        out.append(node.this)
    elif name == "Coalesce":
        out.append(node.this)
    elif name == "Case":
        if node.args.get("default") is not None:
            out.append(node.args["default"])
        out += [w.args["true"] for w in node.args.get("ifs") or ()][:1]
    if name in _PREDICATES:
        out.append(exp.true())
    return [v.copy() for v in out]


def _select_variants(node) -> list:
    """A SELECT without its WHERE, HAVING or DISTINCT, without one select item, or a join made inner."""
    out = []
    for key in ("where", "having", "distinct"):
        if node.args.get(key) is not None:
            c = node.copy()
            c.set(key, None)
            out.append(c)
    if len(node.expressions) > 1:
        for i in range(len(node.expressions)):
            c = node.copy()
            c.set("expressions", [e for j, e in enumerate(c.expressions) if j != i])
            out.append(c)
    for i, j in enumerate(node.args.get("joins") or ()):
        c = node.copy()
        c.set("joins", [x for k, x in enumerate(c.args["joins"]) if k != i])
        out.append(c)
        if j.side:
            c = node.copy()
            c.args["joins"][i].set("side", None)
            out.append(c)
    return out


def query_candidates(sql: str):
    """Queries one step simpler than ``sql`` (each a sqlglot rewrite of one node), smallest change first."""
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(sql, read="spark")
    except Exception:  # noqa: BLE001
        return
    n = sum(1 for _ in tree.walk())
    for i in range(n):
        node = next(x for k, x in enumerate(tree.walk()) if k == i)
        alts = _variants(node) + (_select_variants(node) if isinstance(node, exp.Select) else [])
        for key in ("with_", "with"):  # an unused CTE
            if isinstance(node, exp.Query) and node.args.get(key) is not None:
                c = node.copy()
                c.set(key, None)
                alts.append(c)
        for alt in alts:
            t2 = tree.copy()
            target = next(x for k, x in enumerate(t2.walk()) if k == i)
            if target is t2:
                t2 = alt
            else:
                target.replace(alt)
            try:
                text = t2.sql(dialect="spark")
            except Exception:  # noqa: BLE001
                continue
            if text != sql:
                yield text


def shrink_query(tables, steps, query: Query, first: Outcome, budget_s: float = 15.0) -> Query:
    """The query rewritten smaller (conjuncts, set-operation sides, select items, CASE arms dropped) while it fails alike."""
    deadline = time.monotonic() + budget_s
    best = query
    improved = True
    while improved and time.monotonic() < deadline:
        improved = False
        for text in query_candidates(best.sql):
            if time.monotonic() > deadline:
                break
            if len(text) >= len(best.sql):
                continue
            cand = Query(text, best.tags, best.setup, best.same_as)
            o = execute(tables, steps, [cand], isolate=False)[0]
            if _same_failure(first, o) and (first.kind not in ("build-crash", "run-error", "internal-refusal")
                                            or _err_sig(o.detail) == _err_sig(first.detail)):
                best, improved = cand, True
                break
    return best


def _err_sig(detail: str) -> str:
    return re.sub(r"\d+|'[^']*'|`[^`]*`|\[.*\]", "_", detail.split("\n")[0])[:100]


def repro(tables, steps, query: Query, o: Outcome) -> str:
    """A runnable reproduction: schema, the update stream, the query, and both answers."""
    lines = ["import datetime", "from decimal import Decimal", "import ddflow", "", "flow = ddflow.Dataflow()"]
    for t in tables:
        lines.append(f"{t.name}, _ = flow.new_collection({t.name!r}, schema={t.schema!r})")
    for s in query.setup:
        lines.append(f"flow.sql({s!r})")
    lines.append(f"cap = flow.sql({query.sql!r}).capture()")
    if query.same_as:
        lines.append(f"whole = flow.sql({query.same_as!r}).capture()")
    for evs, f in steps:
        by_table = defaultdict(lambda: ([], [], []))
        for table, row, t, d in evs:
            by_table[table][0].append(row), by_table[table][1].append(t), by_table[table][2].append(d)
        for table, (rows, times, diffs) in by_table.items():
            lines.append(f"{table}.update({rows!r}, times={times!r}, diffs={diffs!r})")
        lines.append(f"flow.advance_to({f}); flow.run()")
    if o.time is not None:
        lines.append(f"print(cap.contents({o.time}))")
    text = "\n".join("    " + x for x in lines)
    out = [f"  [{o.kind}] {o.detail}", "  reproduction:", text]
    if o.kind in ("mismatch", "tlp", "late-change"):
        out += [f"  ddflow at time {o.time}:", _show(o.ours or []),
                f"  {'DuckDB' if o.kind == 'mismatch' else 'expected'} at time {o.time}:",
                _show(o.theirs if isinstance(o.theirs, list) else [])]
        if o.kind == "mismatch":
            out.append(f"  DuckDB SQL: {transpile(query.sql)}")
    elif o.theirs:
        out.append("  " + str(o.theirs).strip().replace("\n", "\n  "))
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------- driver


@dataclass
class Summary:
    tried: int = 0
    statuses: Counter = field(default_factory=Counter)
    refused: Counter = field(default_factory=Counter)
    skipped: Counter = field(default_factory=Counter)
    bugs: dict = field(default_factory=dict)  # signature -> (count, first report)
    tag_counts: Counter = field(default_factory=Counter)
    shapes: dict = field(default_factory=dict)  # shrunk bug shape -> its report (one report per shape)
    cases: int = 0

    def text(self) -> str:
        s = self.statuses
        lines = [f"cases {self.cases}, queries tried {self.tried}: passed {s['pass']}, refused {s['refused']}, "
                 f"both errored {s['both-error']}, skipped {s['skipped']}, known open bugs {s['known']}, bugs {s['bug']} "
                 f"({len(self.bugs)} distinct)"]
        if self.refused:
            lines.append("refused by construct:")
            lines += [f"  {n:5d}  {c}" for c, n in self.refused.most_common(25)]
        if self.skipped:
            lines.append("skipped (oracle or generator limits):")
            lines += [f"  {n:5d}  {c}" for c, n in self.skipped.most_common(10)]
        if self.bugs:
            lines.append("bugs by signature:")
            lines += [f"  {n:5d}  {sig}" for sig, (n, _) in sorted(self.bugs.items(), key=lambda kv: -kv[1][0])]
        return "\n".join(lines)


def _signature(o: Outcome, q: Query) -> str:
    if o.kind in ("build-crash", "run-error", "internal-refusal"):
        return f"{o.kind}: {_err_sig(o.detail)}"
    tags = sorted(q.tags - {"case", "coalesce", "between", "cast"})
    return f"{o.kind}: {','.join(tags)}"


def _shape(q: Query, o: Outcome) -> str:
    """A shrunk bug's shape: its kind and the SQL constructs left in the minimal query (or its error)."""
    if o.kind in ("build-crash", "run-error", "internal-refusal"):
        return f"{o.kind}: {_err_sig(o.detail)}"
    try:
        tree = sqlglot.parse_one(q.sql, read="spark")
    except Exception:  # noqa: BLE001
        return q.sql
    boring = {"Column", "Identifier", "Table", "TableAlias", "Alias", "Literal", "Paren", "Select", "From",
              "Where", "Star", "Boolean"}
    kinds = sorted({type(n).__name__ for n in tree.walk()} - boring)
    return f"{o.kind}: {','.join(kinds)}"


def run_cases(seeds, features: set[str], n_queries: int, do_shrink: bool = True, out=sys.stdout,
              deadline: float | None = None, verbose: bool = False, avoid: frozenset[str] = frozenset(),
              n_tlp: int = 2, known: tuple[str, ...] = ()) -> Summary:
    """Run the cases of ``seeds`` (until ``deadline``), printing each new bug shrunk; the tally.

    ``known``: regular expressions of open bugs' messages (a run error, an internal refusal): a bug
    whose message matches one is counted as ``known`` and not reported again.
    """
    summary = Summary()
    for seed in seeds:
        if deadline is not None and time.monotonic() > deadline:
            break
        case = gen_case(seed, features, n_queries, avoid, n_tlp)
        outcomes = execute(case.tables, case.steps, case.queries)
        summary.cases += 1
        for q, o in zip(case.queries, outcomes):
            summary.tried += 1
            if o.status == "bug" and any(re.search(k, o.detail) for k in known):
                o = Outcome("known", o.detail)
            summary.statuses[o.status] += 1
            summary.tag_counts.update(q.tags)
            if o.status == "refused":
                summary.refused[o.detail] += 1
            elif o.status == "skipped":
                summary.skipped[re.sub(r"\d+", "N", o.detail)[:100]] += 1
            elif o.status == "bug":
                sig = _signature(o, q)
                if sig in summary.bugs:
                    n, rep = summary.bugs[sig]
                    summary.bugs[sig] = (n + 1, rep)
                    continue
                steps, small, final = case.steps, q, o
                if do_shrink:
                    steps = shrink(case.tables, case.steps, q, o)
                    small = shrink_query(case.tables, steps, q, o)
                    steps = shrink(case.tables, steps, small, o, budget_s=10.0)
                    final = execute(case.tables, steps, [small], isolate=False)[0]
                    if final.status != "bug":
                        steps, small, final = case.steps, q, o
                sig2 = _shape(small, final)
                if sig2 in summary.shapes:
                    summary.bugs[sig] = (1, summary.shapes[sig2])
                    continue
                report = f"BUG (seed {seed}) {sig}\n  original query: {q.sql}\n" + repro(case.tables, steps, small, final)
                summary.bugs[sig] = (1, report)
                summary.shapes[sig2] = report
                print(report, file=out, flush=True)
        if verbose or summary.cases % 10 == 0:
            s = summary.statuses
            print(f"[{summary.cases} cases] tried {summary.tried}: pass {s['pass']} refused {s['refused']} "
                  f"both-error {s['both-error']} skipped {s['skipped']} bugs {s['bug']}", file=out, flush=True)
    return summary


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.sql.fuzz", description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=1.0, help="stop starting new cases after this long")
    ap.add_argument("--cases", type=int, default=None, help="run exactly this many cases (ignores --minutes)")
    ap.add_argument("--seed", type=int, default=None, help="the first case's seed (random if absent)")
    ap.add_argument("--features", default=",".join(FEATURES),
                    help=f"comma-separated feature groups (default all): {','.join(FEATURES)}")
    ap.add_argument("--queries", type=int, default=10, help="random queries per case (plus 2 TLP checks)")
    ap.add_argument("--avoid", default="", help="comma-separated constructs (tags, e.g. exists_nonequality) "
                                                "never to generate: known open bugs")
    ap.add_argument("--known", action="append", default=[],
                    help="a regular expression of an open bug's error message not to report again (repeatable)")
    ap.add_argument("--workers", type=int, default=1, help="workers per dataflow (forked processes above 1)")
    ap.add_argument("--no-shrink", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    features = {f.strip() for f in args.features.split(",") if f.strip()}
    unknown = features - set(FEATURES) - set(OPT_IN)
    if unknown:
        ap.error(f"unknown features {sorted(unknown)}; known: {','.join(FEATURES)}")
    global WORKERS
    WORKERS = args.workers
    seed = args.seed if args.seed is not None else random.randrange(10 ** 6)
    print(f"fuzz: seed {seed}, features {','.join(sorted(features))}", flush=True)
    if args.cases is not None:
        seeds, deadline = range(seed, seed + args.cases), None
    else:
        seeds, deadline = range(seed, seed + 10 ** 9), time.monotonic() + args.minutes * 60
    summary = run_cases(seeds, features, args.queries, not args.no_shrink, deadline=deadline,
                        verbose=args.verbose, avoid=frozenset(a for a in args.avoid.split(",") if a), known=tuple(args.known))
    print(summary.text(), flush=True)
    return 1 if summary.bugs else 0


if __name__ == "__main__":
    sys.exit(main())
