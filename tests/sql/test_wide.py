"""Tables and query results of any width (70 to 215 columns) against DuckDB at every complete time.

A row of more than 63 columns carries several null-mask words
(:mod:`ddflow.base.nullmask`): these queries put NULLs past columns 63
and 126, join wide tables (the mask words of both sides concatenated),
NULL-pad outer joins across a word boundary, and group, deduplicate,
combine and rank wide rows, over random streams of inserts and deletes
at several data times per advance (:func:`fuzz.gen_steps`).  A comma
join of 8 tables of 25 columns (200 before its columns are pruned) is
TPC-DS's common shape.
"""
from __future__ import annotations

import datetime
import random
from collections import Counter

import pyarrow as pa
import pytest

import ddflow
import fuzz
from ddflow.base import nullmask
from ddflow.base.schema import ARROW, Schema
from ddflow.plan import aggregate, lower
from ddflow.plan.ir import Join, Rel, SemiJoin
from ddflow.plan.owner import PlanOwner
from ddflow.sql.planner import plan_sql

_TYPES = ["bigint", "string", "double", "boolean", "decimal(7,2)", "date"]
_DOMAIN = {"bigint": fuzz.BIGINTS, "string": fuzz.STRINGS, "double": fuzz.DOUBLES, "boolean": [True, False],
           "date": fuzz.DATES}


def table(name: str, prefix: str, n: int, rng: random.Random, start: int | None = None) -> fuzz.Table:
    """``n`` columns: a small bigint key first, then the types in turn (from ``start``, else random), small domains."""
    start = rng.randrange(len(_TYPES)) if start is None else start
    cols, domains = [(f"{prefix}0", "bigint")], [[0, 1, 2, 3]]
    for j in range(1, n):
        t = _TYPES[(start + j) % len(_TYPES)]
        cols.append((f"{prefix}{j}", t))
        domains.append(fuzz._decimal_domain(rng, 7, 2) if t.startswith("decimal") else list(_DOMAIN[t])[:3])
    return fuzz.Table(name, cols, domains)


def columns(t: fuzz.Table, idx) -> str:
    return ", ".join(t.cols[j][0] for j in idx)


def check(tables: list[fuzz.Table], queries: list[str], seed: int) -> None:
    rng = random.Random(seed)
    steps = fuzz.gen_steps(rng, tables)
    outcomes = fuzz.execute(tables, steps, [fuzz.Query(q, set()) for q in queries])
    bad = [(q, o) for q, o in zip(queries, outcomes) if o.status != "pass"]
    assert not bad, "\n\n".join(f"{q}\n-> {o.status}: {o.detail}\nours: {fuzz._show(o.ours or [])}\n"
                                f"theirs: {o.theirs if isinstance(o.theirs, (str, Exception)) else fuzz._show(o.theirs or [])}"
                                for q, o in bad)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_wide_rows_joins_and_outer_padding(seed):
    rng = random.Random(seed)
    w, v, s = table("w", "w", 140, rng), table("v", "v", 75, rng), table("s", "s", 60, rng)
    queries = [
        "SELECT * FROM w",  # NULLs past 63 and 126
        "SELECT w0, w64, w127, w139 FROM w WHERE w130 IS NULL OR w65 IS NOT NULL",
        "SELECT * FROM w JOIN v ON w.w0 = v.v0",  # 215 columns: three words and two concatenated
        "SELECT * FROM s JOIN v ON s.s0 = v.v0",  # one word and two words: 135 columns
        "SELECT * FROM s LEFT JOIN v ON s.s0 = v.v0",  # padding from bit 60 across the word at 63
        "SELECT * FROM v RIGHT JOIN s ON v.v0 = s.s0",  # padding of bits 0..74, the left side's two words
        "SELECT * FROM w FULL JOIN v ON w.w0 = v.v0",
        f"SELECT * FROM s LEFT JOIN v ON s.s0 = v.v0 AND ({v.cols[70][0]} IS NOT NULL OR s.{s.cols[59][0]} IS NULL)",
        f"SELECT * FROM v FULL JOIN s ON v.v0 = s.s0 AND v.{v.cols[66][0]} IS NOT NULL",  # residual: whole-row antijoins
        f"SELECT s0, {columns(s, range(55, 60))} FROM s WHERE NOT EXISTS "
        f"(SELECT 1 FROM v WHERE v.v0 = s.s0 AND v.{v.cols[64][0]} IS NOT NULL)",
        "SELECT * FROM w WHERE w0 IN (SELECT v0 FROM v WHERE v74 IS NULL)",
        "SELECT * FROM w WHERE EXISTS (SELECT 1 FROM v WHERE v.v0 = w.w0 AND v.v70 IS NULL AND w.w129 IS NULL)",
    ]
    check([w, v, s], queries, seed)


@pytest.mark.parametrize("seed, reference", [(3, False), (4, False), (5, True)])
def test_wide_grouping_sets_and_rankings(seed, reference, monkeypatch):
    """``reference``: aggregates and rankings through the per-key reduces (Python per row) instead."""
    monkeypatch.setattr(aggregate, "GENERIC", reference)
    monkeypatch.setattr(lower, "TOPK_REDUCE", reference)
    rng = random.Random(seed)
    start = rng.randrange(len(_TYPES))  # w and v alike: UNION and EXCEPT of them
    w, v, e = table("w", "w", 130, rng, start), table("v", "v", 130, rng, start), table("e", "e", 63, rng)
    g = columns(w, range(1, 70))  # a group key of 69 columns: two words
    ints = [c for c, t in w.cols if t == "bigint"][1:]
    strs = [c for c, t in w.cols if t == "string"]
    aggs = ", ".join([f"SUM({c}) AS s_{c}" for c in ints] + [f"MIN({c}) AS m_{c}" for c in strs]
                     + [f"COUNT({c}) AS n_{c}" for c in strs])  # global: a default row of many NULLs
    queries = [
        f"SELECT {g}, COUNT(*) AS n, SUM(w0) AS s, MAX({strs[-1]}) AS m FROM w GROUP BY {g}",
        f"SELECT {aggs} FROM w",
        f"SELECT w0, {columns(w, range(100, 130))}, COUNT(*) AS n FROM w GROUP BY w0, {columns(w, range(100, 130))}",
        "SELECT DISTINCT * FROM w",
        "SELECT * FROM w UNION SELECT * FROM v",
        "SELECT * FROM w UNION ALL SELECT * FROM v",
        "SELECT * FROM w EXCEPT SELECT * FROM v",
        "SELECT * FROM w INTERSECT SELECT * FROM v",
        # orders of every column (the last ones first): ties of whole rows only, so DuckDB keeps the same rows
        f"SELECT {columns(w, range(130))} FROM w ORDER BY {columns(w, range(129, -1, -1))} LIMIT 3",
        f"SELECT * FROM (SELECT {columns(w, range(130))}, ROW_NUMBER() OVER (PARTITION BY w0 ORDER BY "
        f"{columns(w, range(127, 0, -1))}) AS rn FROM w) q WHERE rn <= 2",
        # 63 columns and a row number: the 64th column needs a second word
        f"SELECT * FROM (SELECT {columns(e, range(63))}, ROW_NUMBER() OVER (PARTITION BY e0 ORDER BY "
        f"{columns(e, range(62, 0, -1))}) AS rn FROM e) q WHERE rn <= 2",
        f"SELECT {columns(e, range(63))}, RANK() OVER (PARTITION BY e0 ORDER BY e1) AS r FROM e",
        f"SELECT {columns(w, range(130))}, DENSE_RANK() OVER (PARTITION BY w0 ORDER BY w100 DESC) AS r FROM w",
    ]
    check([w, v, e], queries, seed)


def _dims() -> list[fuzz.Table]:
    rng = random.Random(7)
    fact = fuzz.Table("fact", [("f_id", "bigint")] + [(f"f_k{d}", "bigint") for d in range(1, 8)]
                      + [(f"f_v{i}", "decimal(7,2)") for i in range(17)],
                      [[0, 1, 2, 3]] + [[0, 1, 2] for _ in range(7)] + [fuzz._decimal_domain(rng, 7, 2) for _ in range(17)])
    tables = [fact]
    for d in range(1, 8):
        cols = [(f"d{d}_k", "bigint")] + [(f"d{d}_a{i}", "string" if i % 3 else "bigint") for i in range(24)]
        tables.append(fuzz.Table(f"dim{d}", cols, [[0, 1, 2]] + [["a", "b"] if i % 3 else [1, 2] for i in range(24)]))
    return tables


_COMMA = "fact, " + ", ".join(f"dim{d}" for d in range(1, 8))
_WHERE = " AND ".join(f"f_k{d} = d{d}_k" for d in range(1, 8))


@pytest.mark.parametrize("workers", [1, 2])
def test_a_comma_join_of_eight_tables_of_25_columns_equals_duckdb(workers, monkeypatch):
    """At 2 workers too: wide rows (all 200 columns, four mask words) exchanged between worker processes."""
    monkeypatch.setattr(fuzz, "WORKERS", workers)
    queries = [
        f"SELECT d1_a1, d2_a3, SUM(f_v2) AS s, COUNT(*) AS n FROM {_COMMA} WHERE {_WHERE} AND d3_a5 = 'a' "
        "GROUP BY d1_a1, d2_a3",
        f"SELECT * FROM {_COMMA} WHERE {_WHERE} AND d7_a0 = 1",  # all 200 columns: nothing to prune
        f"SELECT f_id, d4_a4, d7_a23 FROM {_COMMA} WHERE {_WHERE} ORDER BY f_id, d4_a4, d7_a23 LIMIT 5",
    ]
    check(_dims(), queries, 11)


def _nodes(rel: Rel, kind: type) -> list[Rel]:
    out = [rel] if isinstance(rel, kind) else []
    for r in rel.inputs():
        out += _nodes(r, kind)
    return out


def test_a_comma_join_arranges_only_the_columns_used_above_it():
    tables = {t.name: Schema.of(t.schema) for t in _dims()}
    sql = f"SELECT d1_a1, SUM(f_v2) AS s FROM {_COMMA} WHERE {_WHERE} GROUP BY d1_a1"
    flow = ddflow.Dataflow()
    for t in _dims():
        flow.new_collection(t.name, schema=t.schema)
    joins = _nodes(PlanOwner(flow).rewritten(plan_sql(sql, tables)), Join)
    assert len(joins) == 7
    for j in joins:  # each side: its join key and what something above reads (f_k*, f_v2, d1_a1), never 25
        assert len(j.left.schema) <= 9 and len(j.right.schema) <= 2, (j.left.schema.names, j.right.schema.names)
        assert nullmask.words(len(j.schema)) == 1


def test_arrow_rows_of_130_columns_in_and_out_with_an_event_time_past_column_63():
    """Arrow input (several mask columns) and Arrow output of a wide table, its event time at column 100."""
    rng = random.Random(9)
    n = 130
    spec = {f"c{j}": ("timestamp" if j == 100 else "string" if j % 3 == 0 else "bigint") for j in range(n)}
    flow = ddflow.Dataflow()
    handle, _ = flow.new_collection("t", schema=spec, event_time="c100")
    cap = flow.sql("SELECT * FROM t").capture()
    rows = []
    for i in range(20):
        rows.append({c: (datetime.datetime(1970, 1, 1) + datetime.timedelta(microseconds=i // 4) if c == "c100" else
                         None if rng.random() < 0.3 else (str(rng.randint(0, 3)) if t == "string" else rng.randint(0, 3)))
                     for c, t in spec.items()})
    for lo in range(0, 20, 5):  # five rows per advance, event times i // 4: several data times per batch
        batch = rows[lo:lo + 5]
        handle.update(pa.table({c: pa.array([r[c] for r in batch], type=ARROW[t]) for c, t in spec.items()}))
        flow.advance_to(batch[-1]["c100"].microsecond)  # its last time stays open for the next batch
        flow.run()
    flow.advance_to(5)
    flow.run()
    want = Counter(tuple(r.values()) for r in rows)
    assert Counter({r: m for r, m in cap.contents(4).items()}) == want
    out = cap.to_arrow()
    got = Counter()
    for rec, d in zip(out.select(list(spec)).to_pylist(), out.column("diff").to_pylist()):
        got[tuple(rec.values())] += d
    assert +got == want
    with pytest.raises(ddflow.errors.SchemaError, match="no event time"):
        bad = dict(rows[0], c100=None)
        handle.update(pa.table({c: pa.array([bad[c]], type=ARROW[t]) for c, t in spec.items()}))


def test_an_exists_over_a_wide_comma_join_arranges_only_its_keys():
    tables = {t.name: Schema.of(t.schema) for t in _dims()}
    sql = ("SELECT d1_k, d1_a2 FROM dim1 WHERE EXISTS (SELECT * FROM fact, dim2, dim3 WHERE f_k1 = d1_k AND f_k2 = d2_k "
           "AND f_k3 = d3_k AND d3_a1 = 'a') AND d1_a4 NOT IN (SELECT d4_a4 FROM dim4)")
    flow = ddflow.Dataflow()
    for t in _dims():
        flow.new_collection(t.name, schema=t.schema)
    rel = PlanOwner(flow).rewritten(plan_sql(sql, tables))
    semis = _nodes(rel, SemiJoin)
    assert len(semis) == 2 and len(_nodes(rel, Join)) == 2
    for j in semis + _nodes(rel, Join):  # keys and what is read above: never a table's 25 columns
        assert len(j.left.schema) <= 4 and len(j.right.schema) <= 3, (j.left.schema.names, j.right.schema.names)
    check(_dims(), [sql], 12)
