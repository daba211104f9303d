"""bench/datalog.py runs and checks itself at tiny sizes (no timing asserts), generated and from a facts directory."""
from __future__ import annotations

import json

from bench import datalog


def test_generated_workloads_tiny(capsys):
    rc = datalog.main(["--workloads", "tc,cspa", "--scale", "0.1", "--inc-scale", "0.05", "--workers", "1",
                       "--ks", "1,3", "--min-updates", "4", "--batches", "1", "--rounds", "1", "--no-pydbsp"])
    lines = [json.loads(x) for x in capsys.readouterr().out.strip().splitlines()]
    assert rc == 0 and all(x["ok"] for x in lines)
    assert {(x["workload"], x["mode"]) for x in lines} >= {("tc", "scratch"), ("cspa", "incremental")}
    tc = next(x for x in lines if x["workload"] == "tc" and x["mode"] == "scratch")
    assert "duckdb" in tc["seconds"]  # TC is the one DuckDB's WITH RECURSIVE expresses


def test_a_souffle_facts_directory(tmp_path, capsys):
    (tmp_path / "facts").mkdir()
    (tmp_path / "facts" / "e.facts").write_text("".join(f"{i}\t{(i * 7) % 11}\n" for i in range(11)))
    (tmp_path / "p.dl").write_text(".decl e(x: number, y: number)\n.input e\n.decl r(x: number, y: number)\n"
                                   ".output r\nr(x, y) :- e(x, y).\nr(x, z) :- r(x, y), e(y, z).\n")
    rc = datalog.main(["--facts", str(tmp_path / "facts"), "--program", str(tmp_path / "p.dl"), "--workers", "1",
                       "--ks", "1", "--min-updates", "4", "--rounds", "1", "--no-pydbsp"])
    lines = [json.loads(x) for x in capsys.readouterr().out.strip().splitlines()]
    # e is i -> 7i mod 11: 0 -> 0, and 1..10 one cycle, so r has 1 + 10 * 10 pairs
    assert rc == 0 and all(x["ok"] for x in lines) and lines[0]["tuples"] == {"r": 101}
