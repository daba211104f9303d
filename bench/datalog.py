"""Datalog: transitive closure, Andersen and CSPA from scratch against pydbsp and DuckDB, then incrementally.

    python -m bench.datalog                                  # every workload, W=1 and 2, K=1,100,1000
    python -m bench.datalog --workloads cspa --workers 1 --ks 1
    python -m bench.datalog --facts DIR --program P.dl        # any Soufflé facts directory

From scratch (each round alternates the systems; medians): ddflow at
each W (workers forked before the clock starts; one warm-up round not
counted), pydbsp's ``IncrementalDatalogStratified`` (pure Python, run
in its own Python >= 3.12 interpreter: ``--pydbsp-python`` or
``$DDFLOW_PYDBSP_PYTHON``; fewer rounds, it is slow) and DuckDB's
``WITH RECURSIVE`` where the program is one linear recursion (TC: SQL's
recursive CTE reads only the last iteration's rows, so the non-linear,
mutually recursive Andersen and CSPA are not expressible).  Outputs are
checked equal (row counts and an order-free checksum per relation).

Incremental (ddflow, at each W): after the full load, single-fact
updates (a deletion of a present fact or an insertion of a new one,
alternating), each at its own data time, K per frontier advance; per
batch the wall time to run it.  Reported: updates/s, the speed-up over
re-evaluating from scratch after every update (updates/s x full-run
time), and wirelog's ratio, full-run time / time of one update (K=1:
one update's latency; K>1: the batch's time / K).  At the end the
relations are checked against a from-scratch run on the final facts.

``--hint``: TC with and without the placement hint ``tc(y)`` at W=2
(the hint makes the loop's join skip one exchange): from scratch and
K=1, alternated.

Each result is one JSON line (also appended to ``--json``); a failed
check exits with status 1.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import zlib

import numpy as np

import ddflow
from ddflow.datalog.files import read_facts
from ddflow.datalog.program import Program, load
from ddflow.datalog.syntax import Atom, Const, Var, Wild

TC = """
.decl edge(x: number, y: number)
.input edge
.decl tc(x: number, y: number)
.output tc
tc(x, y) :- edge(x, y).
tc(x, z) :- tc(x, y), edge(y, z).
"""

ANDERSEN = """
.decl addressOf(y: number, x: number)
.decl assign(y: number, x: number)
.decl load(y: number, x: number)
.decl store(y: number, x: number)
.input addressOf, assign, load, store
.decl pointsTo(y: number, x: number)
.output pointsTo
pointsTo(y, x) :- addressOf(y, x).
pointsTo(y, x) :- assign(y, z), pointsTo(z, x).
pointsTo(y, w) :- load(y, x), pointsTo(x, z), pointsTo(z, w).
pointsTo(z, w) :- store(y, x), pointsTo(y, z), pointsTo(x, w).
"""

CSPA = """
.decl assign(a: number, b: number)
.decl dereference(a: number, b: number)
.input assign, dereference
.decl valueFlow(a: number, b: number)
.decl valueAlias(a: number, b: number)
.decl memoryAlias(a: number, b: number)
.output valueFlow, valueAlias, memoryAlias
valueFlow(y, x) :- assign(y, x).
valueFlow(x, y) :- assign(x, z), memoryAlias(z, y).
valueFlow(x, y) :- valueFlow(x, z), valueFlow(z, y).
memoryAlias(x, w) :- dereference(y, x), valueAlias(y, z), dereference(z, w).
valueAlias(x, y) :- valueFlow(z, x), valueFlow(z, y).
valueAlias(x, y) :- valueFlow(z, x), memoryAlias(z, w), valueFlow(w, y).
valueFlow(x, x) :- assign(x, _).
valueFlow(x, x) :- assign(_, x).
memoryAlias(x, x) :- assign(_, x).
memoryAlias(x, x) :- assign(x, _).
"""


def _edges(rng: random.Random, nodes: int, n: int) -> list[tuple]:
    out: set = set()
    while len(out) < n:
        out.add((rng.randrange(nodes), rng.randrange(nodes)))
    return sorted(out)


def _local(rng: random.Random, nodes: int, n: int, group: int = 16, cross: float = 0.02) -> list[tuple]:
    """``n`` edges of a program-analysis shape: within groups of ``group`` nodes (a function's variables), a
    fraction ``cross`` between groups (calls), so the closures stay near-linear in the size."""
    out: set = set()
    while len(out) < n:
        x = rng.randrange(nodes)
        if rng.random() < cross:
            y = rng.randrange(nodes)
        else:
            base = x - x % group
            y = min(nodes - 1, base + rng.randrange(group))
        out.add((x, y))
    return sorted(out)


#: Default sizes: from scratch, where pydbsp finishes in about a minute; incremental (ddflow only), larger.
SCRATCH_SCALE = {"tc": 1.0, "andersen": 0.5, "cspa": 0.25}
INCREMENTAL_SCALE = {"tc": 3.0, "andersen": 4.0, "cspa": 2.0}


def generate(workload: str, scale: float, seed: int) -> tuple[str, dict[str, list[tuple]]]:
    """A workload's program and random input facts; ``scale`` multiplies the sizes (1: 200 TC nodes, 2000
    Andersen variables, 1000 CSPA variables)."""
    rng = random.Random(seed)
    if workload == "tc":
        n = int(200 * scale)
        return TC, {"edge": _edges(rng, n, int(1.5 * n))}
    if workload == "andersen":
        v = int(2000 * scale)
        return ANDERSEN, {"addressOf": _local(rng, v, v // 2), "assign": _local(rng, v, v),
                          "load": _local(rng, v, v // 5), "store": _local(rng, v, v // 5)}
    if workload == "cspa":
        n = int(1000 * scale)
        return CSPA, {"assign": _local(rng, n, n), "dereference": _local(rng, n, n // 2)}
    raise SystemExit(f"unknown workload {workload!r} (tc, andersen, cspa)")


# -- checks ------------------------------------------------------------------------------------

def _h(v) -> int:
    if isinstance(v, (int,)) or hasattr(v, "__index__"):
        return int(v)
    return zlib.crc32(repr(v).encode())


def digest(rows) -> tuple[int, int]:
    """(count, order-free checksum) of a set of rows."""
    total, n = 0, 0
    for r in rows:
        x = 0
        for v in r:
            x = (x * 1000003 + _h(v)) % ((1 << 61) - 1)
        total = (total + x * 2654435761) % ((1 << 61) - 1)
        n += 1
    return n, total


# -- ddflow ------------------------------------------------------------------------------------

class Ddflow:
    """One dataflow of the program; the workers forked (an empty run) before anything is timed."""

    def __init__(self, program: Program, text: str, workers: int, hints: bool = True):
        self.flow = ddflow.Dataflow(workers=workers)
        self.handles = {}
        for name in program.inputs:
            rel = program.relations[name]
            schema = {f"c{i}": t for i, t in enumerate(rel.sql_types)} or {"c0": "bigint"}
            self.handles[name] = self.flow.new_collection(name, schema=schema)[0]
        rels = self.flow.datalog(text, hints=hints)
        outs = [n for n in rels if n in program.outputs] or list(rels)
        self.caps = {n: rels[n].capture() for n in outs}
        self.flow.run()  # forks the workers (W > 1) with no input yet
        self.t = 0

    def load(self, facts: dict[str, list[tuple]]) -> float:
        t0 = time.perf_counter()
        for name, rows in facts.items():
            if rows:
                self.handles[name].update(rows, times=0)
        self.flow.advance_to(1)
        self.flow.run()
        self.t = 1
        return time.perf_counter() - t0

    def batch(self, ups: list[tuple[str, tuple, int]]) -> float:
        """Each update at its own data time, all under one frontier advance."""
        t0 = time.perf_counter()
        for i, (name, row, diff) in enumerate(ups):
            self.handles[name].update([row], times=self.t + i, diffs=diff)
        self.t += len(ups)
        self.flow.advance_to(self.t)
        self.flow.run()
        return time.perf_counter() - t0

    def digests(self) -> dict[str, tuple[int, int]]:
        out = {}
        for n, c in self.caps.items():
            rows = [r for r, m in c.contents(self.t - 1).items() if m > 0]
            out[n] = digest(rows)
        return out

    def close(self) -> None:
        self.flow.close()


def ddflow_scratch(program, text, facts, workers, hints=True) -> tuple[float, dict]:
    d = Ddflow(program, text, workers, hints)
    try:
        secs = d.load(facts)
        return secs, d.digests()
    finally:
        d.close()


# -- pydbsp (in its own interpreter) -------------------------------------------------------------

_PYDBSP = r"""
import json, sys, time, zlib
from pydbsp.zset import ZSet
from pydbsp.datalog_stratified import IncrementalDatalogStratified
job = json.load(open(sys.argv[1]))
def conv(a):
    return (a[0], tuple(x if not (isinstance(x, str) and x.startswith("?")) else x for x in a[1]))
rules = [tuple((r, tuple(args)) for r, args in rule) for rule in job["rules"]]
facts = {(r, tuple(row)): 1 for r, rows in job["facts"].items() for row in rows}
t0 = time.perf_counter()
d = IncrementalDatalogStratified(max_inner=1 << 30)
d.push_rules(ZSet({r: 1 for r in rules}))
d.push_facts(ZSet(facts))
out = d.saturate()
secs = time.perf_counter() - t0
M = (1 << 61) - 1
def h(v):
    return int(v) if isinstance(v, int) else zlib.crc32(repr(v).encode())
dig = {}
for (rel, row), w in out.inner.items():
    if w <= 0 or rel not in job["outputs"]:
        continue
    x = 0
    for v in row:
        x = (x * 1000003 + h(v)) % M
    n, t = dig.get(rel, (0, 0))
    dig[rel] = (n + 1, (t + x * 2654435761) % M)
print(json.dumps({"seconds": secs, "digests": dig}))
"""


def pydbsp_rules(program: Program) -> list | str:
    """The program as pydbsp rules, or why it cannot be one (pydbsp's Datalog has no comparisons or aggregates)."""
    out = []
    for r in program.rules:
        fresh = iter(range(10 ** 6))

        def term(t):
            if isinstance(t, Var):
                return f"?{t.name}"
            if isinstance(t, Wild):
                return f"?_w{next(fresh)}"
            if isinstance(t, Const):
                return t.value
            raise ValueError(repr(t))

        atoms = []
        for lit in (r.head, *r.body):
            if not isinstance(lit, Atom):
                return f"rule {r!r}: pydbsp has no comparisons or aggregates"
            try:
                atoms.append([("!" if lit.negated else "") + lit.rel, [term(t) for t in lit.args]])
            except ValueError as err:
                return f"rule {r!r}: pydbsp has no expression {err}"
        out.append(atoms)
    return out


def pydbsp_scratch(python: str, program: Program, facts: dict, outputs: list[str]) -> tuple[float, dict] | str:
    rules = pydbsp_rules(program)
    if isinstance(rules, str):
        return rules
    if program.facts:
        facts = {**facts}
        for name, rows in program.facts.items():
            facts[name] = list(facts.get(name, [])) + list(rows)
    with tempfile.TemporaryDirectory() as tmp:
        job, script = os.path.join(tmp, "job.json"), os.path.join(tmp, "run.py")
        with open(job, "w") as f:
            json.dump({"rules": rules, "facts": facts, "outputs": outputs}, f)
        with open(script, "w") as f:
            f.write(_PYDBSP)
        run = subprocess.run([python, script, job], capture_output=True, text=True)
    if run.returncode != 0:
        return f"pydbsp failed: {run.stderr.strip().splitlines()[-1] if run.stderr.strip() else run.returncode}"
    got = json.loads(run.stdout.strip().splitlines()[-1])
    return got["seconds"], {k: tuple(v) for k, v in got["digests"].items()}


# -- DuckDB WITH RECURSIVE (linear recursion only: TC) ------------------------------------------------

def duckdb_tc(facts: dict) -> tuple[float, dict]:
    import duckdb
    import numpy as np

    con = duckdb.connect()
    edges = np.array(facts["edge"], dtype=np.int64).reshape(-1, 2)
    import pyarrow as pa

    tbl = pa.table({"x": edges[:, 0], "y": edges[:, 1]})  # noqa: F841 (read by DuckDB's replacement scan)
    con.execute("CREATE TABLE edge AS SELECT x, y FROM tbl")
    t0 = time.perf_counter()
    rows = con.execute("WITH RECURSIVE tc(x, y) AS (SELECT x, y FROM edge UNION "
                       "SELECT tc.x, edge.y FROM tc JOIN edge ON tc.y = edge.x) SELECT x, y FROM tc").fetchall()
    secs = time.perf_counter() - t0
    return secs, {"tc": digest(rows)}


# -- runs ----------------------------------------------------------------------------------------

def emit(out: dict, args) -> None:
    line = json.dumps(out)
    print(line, flush=True)
    if args.json:
        with open(args.json, "a") as f:
            f.write(line + "\n")


def scratch(name: str, program: Program, text: str, facts: dict, args) -> tuple[dict, float]:
    """From-scratch times of every system, alternated over rounds; returns the result and ddflow W=1's median."""
    outputs = list(program.outputs) or program.derived()
    systems = [f"ddflow-w{w}" for w in args.workers]
    py = args.pydbsp_python
    if py and not args.no_pydbsp:
        systems.append("pydbsp")
    linear_tc = text == TC
    if linear_tc:
        systems.append("duckdb")
    times: dict[str, list[float]] = {s: [] for s in systems}
    digests: dict[str, dict] = {}
    notes = {}
    for r in range(args.rounds + 1):  # round 0 warms up (numba's cache, imports): not counted
        order = systems[r % len(systems):] + systems[:r % len(systems)]
        for s in order:
            if s == "pydbsp" and len(times["pydbsp"]) >= args.pydbsp_rounds:
                continue
            if s.startswith("ddflow"):
                secs, dig = ddflow_scratch(program, text, facts, int(s[len("ddflow-w"):]))
            elif s == "pydbsp":
                if r == 0:
                    continue
                got = pydbsp_scratch(py, program, facts, outputs)
                if isinstance(got, str):
                    notes["pydbsp"] = got
                    systems.remove("pydbsp")
                    continue
                secs, dig = got
            else:
                secs, dig = duckdb_tc(facts)
            if r > 0 or s == "pydbsp":
                times[s].append(secs)
            digests[s] = dig
    base = digests["ddflow-w1" if "ddflow-w1" in digests else systems[0]]
    ok = True
    for s, dig in digests.items():
        for rel, d in dig.items():
            if rel in base and tuple(base[rel]) != tuple(d):
                ok = False
                notes[f"mismatch {s}"] = f"{rel}: {d} vs ddflow {base[rel]}"
    med = {s: statistics.median(v) for s, v in times.items() if v}
    out = {"bench": "datalog", "mode": "scratch", "workload": name,
           "facts": sum(len(v) for v in facts.values()),
           "tuples": {rel: base[rel][0] for rel in base},
           "seconds": {s: round(v, 4) for s, v in med.items()},
           "rounds": {s: len(v) for s, v in times.items()},
           "ok": ok, **({"notes": notes} if notes else {})}
    d1 = med.get("ddflow-w1") or min(v for k, v in med.items() if k.startswith("ddflow"))
    for s, v in med.items():
        if not s.startswith("ddflow"):
            out[f"{s}/ddflow-w1"] = round(v / d1, 2)
    return out, med


def updates_for(rng: random.Random, facts: dict, n: int, workload: str = "") -> tuple[list, dict]:
    """``n`` single-fact updates: alternately delete a present fact and insert one (back a deleted fact, or a
    fresh one of the workload's shape: a random edge for TC, an edge inside one group of 16 variables for the
    program analyses; for a facts directory, a deleted fact)."""
    live = {name: set(rows) for name, rows in facts.items()}
    names = [nm for nm in facts if facts[nm]]
    pools = {nm: sorted(live[nm]) for nm in names}
    top = {nm: max(max(r) for r in pools[nm]) + 1 if pools[nm] and isinstance(pools[nm][0][0], int) else 0
           for nm in names}
    out: list = []
    gone: list[tuple[str, tuple]] = []
    while len(out) < n:
        if len(out) % 2 == 0 or not gone:
            nm = rng.choice(names)
            row = rng.choice(pools[nm])
            if row not in live[nm]:
                continue
            live[nm].discard(row)
            gone.append((nm, row))
            out.append((nm, row, -1))
            continue
        nm, row = gone.pop(rng.randrange(len(gone)))
        if rng.random() < 0.5 and workload in ("tc", "andersen", "cspa"):
            x = rng.randrange(top[nm])
            y = rng.randrange(top[nm]) if workload == "tc" else min(top[nm] - 1, x - x % 16 + rng.randrange(16))
            row = (x, y)
        if row in live[nm]:
            continue
        live[nm].add(row)
        out.append((nm, row, 1))
    return out, live


def incremental(name: str, program: Program, text: str, facts: dict, args, full: dict) -> list[dict]:
    out = []
    for w in args.workers:
        full_s = full.get(f"ddflow-w{w}")
        for k in args.ks:
            rng = random.Random(args.seed + k)
            n = args.min_updates if k == 1 else k * (args.batches if k < 1000 else 1)  # K=1000: one advance
            ups, live = updates_for(rng, facts, n, name)
            d = Ddflow(program, text, w)
            try:
                d.load(facts)
                batch_s = []
                for i in range(0, len(ups), k):
                    batch_s.append(d.batch(ups[i:i + k]))
                got = d.digests()
            finally:
                d.close()
            _, want = ddflow_scratch(program, text, {nm: sorted(v) for nm, v in live.items()}, 1)
            ok = all(tuple(got[r]) == tuple(want[r]) for r in want)
            med = statistics.median(batch_s)
            per_update = med / k
            res = {"bench": "datalog", "mode": "incremental", "workload": name, "workers": w, "k": k,
                   "updates": len(ups), "batch_ms_median": round(med * 1e3, 3),
                   "batch_ms_p90": round(float(np.percentile(batch_s, 90)) * 1e3, 3), "batches": len(batch_s),
                   "updates_per_s": round(k / med, 1), "full_run_s": round(full_s, 4) if full_s else None,
                   "ok": ok}
            if full_s:
                res["speedup_vs_rerun"] = round(full_s / per_update, 1)
                res["full_over_update"] = round(full_s / per_update, 1)
            out.append(res)
    return out


def hint_run(args) -> dict:
    """TC at W=2 with and without ``tc(y)`` placement, alternated: from scratch and single updates."""
    text, facts = generate("tc", args.inc_scale * INCREMENTAL_SCALE["tc"], args.seed)
    program = load(text)
    hinted = text + '.pragma "ddflow.place" "tc(y)"\n'
    res: dict[str, list] = {"plain": [], "placed": [], "plain_k1": [], "placed_k1": []}
    digs = {}
    rng = random.Random(args.seed)
    ups, _ = updates_for(rng, facts, 60, "tc")
    for r in range(args.rounds + 1):
        for kind in (("plain", "placed") if r % 2 == 0 else ("placed", "plain")):
            d = Ddflow(program, hinted, 2, hints=(kind == "placed"))
            try:
                secs = d.load(facts)
                one = [d.batch([u]) for u in ups]
                digs[kind] = d.digests()
            finally:
                d.close()
            if r > 0:
                res[kind].append(secs)
                res[f"{kind}_k1"].append(statistics.median(one))
    med = {k: statistics.median(v) for k, v in res.items()}
    return {"bench": "datalog", "mode": "hint", "workload": "tc", "workers": 2, "hint": "place tc(y)",
            "scratch_s": {"plain": round(med["plain"], 4), "placed": round(med["placed"], 4)},
            "k1_ms": {"plain": round(med["plain_k1"] * 1e3, 3), "placed": round(med["placed_k1"] * 1e3, 3)},
            "speedup_scratch": round(med["plain"] / med["placed"], 2),
            "speedup_k1": round(med["plain_k1"] / med["placed_k1"], 2),
            "ok": digs["plain"] == digs["placed"]}


def plot(path: str, out: str) -> str:
    """``out``: from-scratch seconds per system (log scale) and incremental updates/s against K, from a results file."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [json.loads(x) for x in open(path) if x.strip()]
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    scratch_rows = {}
    for r in rows:
        if r["mode"] == "scratch" and ("pydbsp" in r["seconds"] or r["workload"] not in scratch_rows):
            scratch_rows[r["workload"]] = r
    systems = ["ddflow-w1", "ddflow-w2", "pydbsp", "duckdb"]
    for i, s in enumerate(systems):
        xs = [j + i * 0.2 for j, r in enumerate(scratch_rows.values()) if s in r["seconds"]]
        ys = [r["seconds"][s] for r in scratch_rows.values() if s in r["seconds"]]
        a.bar(xs, ys, width=0.2, label=s)
    a.set_xticks([j + 0.3 for j in range(len(scratch_rows))],
                 [f"{w}\n{sum(r['tuples'].values()):,} tuples" for w, r in scratch_rows.items()])
    a.set_yscale("log")
    a.set_ylabel("seconds, from scratch (log)")
    a.legend()
    inc: dict = {}
    for r in rows:
        if r["mode"] == "incremental":
            inc[(r["workload"], r["workers"], r["full_run_s"])] = inc.get((r["workload"], r["workers"],
                                                                             r["full_run_s"]), []) + [r]
    for (w, workers, full), rs in inc.items():
        if len(rs) < 2:
            continue
        rs.sort(key=lambda r: r["k"])
        b.plot([r["k"] for r in rs], [r["updates_per_s"] for r in rs], marker="o", label=f"{w} W={workers}")
    b.set_xscale("log")
    b.set_yscale("log")
    b.set_xlabel("K (single-fact updates per frontier advance, each at its own time)")
    b.set_ylabel("updates/s")
    b.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.datalog", description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default="tc,andersen,cspa")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="multiplies the from-scratch sizes (SCRATCH_SCALE: where pydbsp takes about a minute)")
    ap.add_argument("--inc-scale", type=float, default=1.0,
                    help="multiplies the incremental sizes (INCREMENTAL_SCALE); their full run is measured again")
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--ks", default="1,100,1000")
    ap.add_argument("--batches", type=int, default=3,
                    help="frontier advances per K (K=1: --min-updates; K>=1000: one)")
    ap.add_argument("--min-updates", type=int, default=60, help="single updates at K=1")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pydbsp-rounds", type=int, default=1)
    ap.add_argument("--pydbsp-python", default=os.environ.get("DDFLOW_PYDBSP_PYTHON",
                                                            os.path.expanduser("~/.venvs/pydbsp/bin/python")))
    ap.add_argument("--no-pydbsp", action="store_true")
    ap.add_argument("--no-incremental", action="store_true")
    ap.add_argument("--hint", action="store_true", help="only the placement-hint comparison (TC, W=2)")
    ap.add_argument("--facts", default=None, help="a Soufflé facts directory (with --program)")
    ap.add_argument("--program", default=None, help="a Soufflé program (with --facts)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", default=None, help="append each result line to this file")
    ap.add_argument("--plot", default=None, metavar="RESULTS", help="plot a results file to bench/plots/datalog.png")
    args = ap.parse_args(argv)
    if args.plot:
        print(plot(args.plot, os.path.join(os.path.dirname(__file__), "plots", "datalog.png")))
        return 0
    args.workers = [int(w) for w in args.workers.split(",")]
    args.ks = [int(k) for k in args.ks.split(",")]
    if args.pydbsp_python and not os.path.exists(args.pydbsp_python):
        print(f"pydbsp: no interpreter at {args.pydbsp_python} (pydbsp needs Python >= 3.12: make a venv with "
              "`pip install pydbsp` and pass --pydbsp-python); comparing against DuckDB only", file=sys.stderr)
        args.pydbsp_python = None
    status = 0
    if args.hint:
        res = hint_run(args)
        emit(res, args)
        return 0 if res["ok"] else 1
    if args.facts or args.program:
        if not (args.facts and args.program):
            raise SystemExit("--facts and --program go together")
        text = open(args.program).read()
        program = load(text)
        facts = {n: read_facts(program.inputs[n], program.relations[n], args.facts) for n in program.inputs}
        jobs = [(os.path.basename(args.program), program, text, facts, facts)]
    else:
        jobs = []
        for name in args.workloads.split(","):
            text, facts = generate(name, args.scale * SCRATCH_SCALE[name], args.seed)
            inc_scale = args.inc_scale * INCREMENTAL_SCALE[name]
            inc = generate(name, inc_scale, args.seed)[1] if inc_scale != args.scale * SCRATCH_SCALE[name] else facts
            jobs.append((name, load(text), text, facts, inc))
    for name, program, text, facts, inc_facts in jobs:
        res, med = scratch(name, program, text, facts, args)
        emit(res, args)
        status |= 0 if res["ok"] else 1
        if args.no_incremental:
            continue
        if inc_facts is not facts:
            saved = (args.pydbsp_python, args.rounds)
            args.pydbsp_python = None
            res, med = scratch(name, program, text, inc_facts, args)
            args.pydbsp_python = saved[0]
            res["mode"] = "scratch-incremental-size"
            emit(res, args)
            status |= 0 if res["ok"] else 1
        for r in incremental(name, program, text, inc_facts, args, med):
            emit(r, args)
            status |= 0 if r["ok"] else 1
    return status


if __name__ == "__main__":
    sys.exit(main())
