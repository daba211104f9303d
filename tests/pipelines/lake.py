"""Test helpers for pipelines: random commit histories written to real Delta, Iceberg and Parquet tables, and
the oracle (DuckDB on the source tables as of a version) to compare every view's tables with.

A history is a list of runs; a run a list of commits; a commit a list of operations on table ``t``
(``k`` bigint, ``g`` string, ``amt`` decimal(10,2), ``d`` date, ``ts`` timestamp, ``flag`` boolean, NULLs
everywhere but ``k``) or ``dim`` (``g`` string, ``label`` string): ``("insert", rows)``, ``("delete", k)``,
``("update", k, amt)``.  A run of no commits is allowed.
"""
from __future__ import annotations

import collections
import datetime
import decimal
import random
from typing import Any

import duckdb
import pyarrow as pa

T_SCHEMA = pa.schema([("k", pa.int64()), ("g", pa.string()), ("amt", pa.decimal128(10, 2)), ("d", pa.date32()),
                      ("ts", pa.timestamp("us", tz="UTC")), ("flag", pa.bool_())])
DIM_SCHEMA = pa.schema([("g", pa.string()), ("label", pa.string())])
GROUPS = ["a", "b", "c", None]

#: The views every oracle test keeps, with their keys: an aggregate (keyed), a filter (a bag, no key), a join
#: of two sources with a global aggregate.
VIEWS = {
    "by_g": ("SELECT g, COUNT(*) AS n, SUM(amt) AS total, MAX(d) AS last_d, MIN(ts) AS first_ts "
             "FROM t GROUP BY g", ["g"]),
    "flagged": ("SELECT k, g, amt FROM t WHERE flag", None),
    "labelled": ("SELECT dim.label, COUNT(*) AS n, SUM(t.amt) AS total FROM t JOIN dim ON t.g = dim.g "
                 "GROUP BY dim.label", ["label"]),
}


def random_row(rng: random.Random, k: int) -> dict:
    def maybe(v):
        return None if rng.random() < 0.2 else v
    return {"k": k, "g": rng.choice(GROUPS),
            "amt": maybe(decimal.Decimal(rng.randint(-5000, 5000)).scaleb(-2)),
            "d": maybe(datetime.date(2020, 1, 1) + datetime.timedelta(days=rng.randint(0, 900))),
            "ts": maybe(datetime.datetime(2021, 1, 1, tzinfo=datetime.timezone.utc)
                        + datetime.timedelta(microseconds=rng.randint(0, 10**12))),
            "flag": maybe(rng.random() < 0.5)}


def random_history(seed: int, runs: int = 4, inserts_only: bool = False) -> list[list[list[tuple]]]:
    """A random history: ``runs`` runs of 0-3 commits each (the first run at least one), on ``t`` and ``dim``."""
    rng = random.Random(seed)
    live: set[int] = set()
    next_k = 0
    dims: set[str] = set()
    history = []
    for r in range(runs):
        run = []
        for _ in range(rng.choice([0, 1, 2, 3]) if r else rng.choice([1, 2])):
            ops = []
            if r == 0 and not run or rng.random() < 0.25:
                fresh = [g for g in ("a", "b", "c") if g not in dims]
                if fresh:
                    g = rng.choice(fresh)
                    dims.add(g)
                    ops.append(("insert_dim", [{"g": g, "label": rng.choice(["x", "y"])}]))
            n = rng.randint(1, 4)
            rows = [random_row(rng, next_k + i) for i in range(n)]
            next_k += n
            live |= {row["k"] for row in rows}
            ops.append(("insert", rows))
            if not inserts_only and live and rng.random() < 0.8:
                k = rng.choice(sorted(live))
                if rng.random() < 0.5:
                    ops.append(("delete", k))
                    live.discard(k)
                else:
                    ops.append(("update", k, decimal.Decimal(rng.randint(0, 999)).scaleb(-2)))
            run.append(ops)
        history.append(run)
    return history


class Lake:
    """Tables ``t`` and ``dim`` of one format on disk, written op by op, with every version's rows kept."""

    def __init__(self, fmt: str, root: str, cdf: bool = True):
        import os
        os.makedirs(root, exist_ok=True)
        self.fmt, self.root, self.cdf = fmt, root, cdf
        self.rows = {"t": {}, "dim": []}
        self.snapshots: dict[str, dict[int, pa.Table]] = {"t": {}, "dim": {}}
        self.catalog = None
        self._files = 0
        for name, schema in (("t", T_SCHEMA), ("dim", DIM_SCHEMA)):
            self._create(name, schema)
            self.snapshots[name][self.version(name)] = schema.empty_table()

    def path(self, name: str) -> str:
        return f"{self.root}/{name}"

    def _create(self, name: str, schema: pa.Schema) -> None:
        import os
        if self.fmt == "delta":
            from deltalake import write_deltalake
            write_deltalake(self.path(name), schema.empty_table(),
                            configuration={"delta.enableChangeDataFeed": "true"} if self.cdf else None)
        elif self.fmt == "iceberg":
            from pyiceberg.catalog.sql import SqlCatalog
            if self.catalog is None:
                self.catalog = SqlCatalog("lake", uri=f"sqlite:///{self.root}/catalog.db",
                                          warehouse=f"file://{self.root}/warehouse")
                self.catalog.create_namespace("db")
            self.catalog.create_table(f"db.{name}", schema=schema)
        else:
            os.makedirs(self.path(name))
            self._parquet(name, schema.empty_table())

    def _parquet(self, name: str, rows: pa.Table) -> None:
        import os
        import pyarrow.parquet as pq
        self._files += 1
        tmp = f"{self.path(name)}/.part-{self._files:05d}.parquet"
        pq.write_table(rows, tmp)
        os.replace(tmp, f"{self.path(name)}/part-{self._files:05d}.parquet")

    def version(self, name: str) -> int:
        if self.fmt == "delta":
            from deltalake import DeltaTable
            return DeltaTable(self.path(name)).version()
        if self.fmt == "iceberg":
            snap = self.catalog.load_table(f"db.{name}").current_snapshot()
            return 0 if snap is None else snap.sequence_number
        import os
        return len([f for f in os.listdir(self.path(name)) if f.endswith(".parquet") and not f.startswith(".")]) - 1

    def table_now(self, name: str) -> pa.Table:
        if name == "t":
            return pa.Table.from_pylist(list(self.rows["t"].values()), schema=T_SCHEMA)
        return pa.Table.from_pylist(self.rows["dim"], schema=DIM_SCHEMA)

    def apply(self, op: tuple) -> None:
        """One operation, one commit of its table (a delete or update of a row that is not there commits
        nothing new in some formats: the version then stays)."""
        name = "dim" if op[0] == "insert_dim" else "t"
        if op[0] in ("insert", "insert_dim"):
            schema = T_SCHEMA if name == "t" else DIM_SCHEMA
            data = pa.Table.from_pylist(op[1], schema=schema)
            if name == "t":
                for row in op[1]:
                    self.rows["t"][row["k"]] = dict(row)
            else:
                self.rows["dim"] += op[1]
            self._append(name, data)
        elif op[0] == "delete":
            self.rows["t"].pop(op[1], None)
            self._delete(op[1])
        elif op[0] == "update":
            if self.fmt == "iceberg":  # two snapshots: the row deleted, then the new row appended
                if op[1] in self.rows["t"]:
                    row = dict(self.rows["t"][op[1]], amt=op[2])
                    self.apply(("delete", op[1]))
                    self.apply(("insert", [row]))
                return
            if op[1] in self.rows["t"]:
                self.rows["t"][op[1]]["amt"] = op[2]
            self._update(op[1], op[2])
        self.snapshots[name][self.version(name)] = self.table_now(name)

    def _append(self, name: str, data: pa.Table) -> None:
        if self.fmt == "delta":
            from deltalake import write_deltalake
            write_deltalake(self.path(name), data, mode="append")
        elif self.fmt == "iceberg":
            self.catalog.load_table(f"db.{name}").append(data)
        else:
            self._parquet(name, data)

    def _delete(self, k: int) -> None:
        if self.fmt == "delta":
            from deltalake import DeltaTable
            DeltaTable(self.path("t")).delete(f"k = {k}")
        elif self.fmt == "iceberg":
            from pyiceberg.expressions import EqualTo
            self.catalog.load_table("db.t").delete(EqualTo("k", k))
        else:
            raise ValueError("a Parquet directory only grows")

    def _update(self, k: int, amt: decimal.Decimal) -> None:
        if self.fmt == "delta":
            from deltalake import DeltaTable
            DeltaTable(self.path("t")).update(updates={"amt": f"CAST('{amt}' AS DECIMAL(10, 2))"}, predicate=f"k = {k}")
        else:
            raise ValueError("a Parquet directory only grows")

    def tables_at(self, versions: dict[str, int]) -> dict[str, pa.Table]:
        """Each table as of a version (the latest kept at or before it)."""
        out = {}
        for name, v in versions.items():
            kept = [x for x in self.snapshots[name] if x <= v]
            empty = (T_SCHEMA if name == "t" else DIM_SCHEMA).empty_table()
            out[name] = self.snapshots[name][max(kept)] if kept else empty
        return out


def norm(v: Any) -> Any:
    if isinstance(v, decimal.Decimal):
        return v.normalize() if v != 0 else decimal.Decimal(0)
    if isinstance(v, datetime.datetime):
        return v.astimezone(datetime.timezone.utc) if v.tzinfo else v.replace(tzinfo=datetime.timezone.utc)
    return v


def bag(rows: list[dict] | pa.Table, columns: list[str]) -> collections.Counter:
    if isinstance(rows, pa.Table):
        rows = rows.to_pylist()
    return collections.Counter(tuple(norm(r[c]) for c in columns) for r in rows)


def duckdb_answer(sql: str, tables: dict[str, pa.Table], columns: list[str]) -> collections.Counter:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    for name, t in tables.items():
        con.register(name, t)
    cur = con.execute(sql)
    names = [d[0] for d in cur.description]
    out = [dict(zip(names, r)) for r in cur.fetchall()]
    con.close()
    return bag([{c: r[n] for c, n in zip(columns, names)} for r in out], columns)


def changelog_at(rows: pa.Table, version: int, columns: list[str]) -> collections.Counter:
    """A changelog table accumulated up to ``_commit_version <= version``: inserts minus deletes."""
    acc: collections.Counter = collections.Counter()
    for r in rows.to_pylist():
        if r["_commit_version"] > version:
            continue
        key = tuple(norm(r[c]) for c in columns)
        acc[key] += 1 if r["_change_type"] in ("insert", "update_postimage") else -1
    assert min(acc.values(), default=0) >= 0, "a changelog row count went below zero"
    return +acc
