"""``python -m ddflow.datalog PROGRAM.dl -F facts/ -D out/`` on a tiny facts directory, Soufflé's conventions."""
from __future__ import annotations

import subprocess
import sys

from ddflow.datalog.__main__ import main

PROGRAM = """
.type Node <: symbol
.decl edge(x: Node, y: Node)
.input edge
.decl weight(x: Node, w: float)
.input weight(IO=file, filename="w.csv", delimiter=",")
.decl path(x: Node, y: Node)
.output path
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
.decl cyclic()
.output cyclic
cyclic() :- path(x, x).
.decl acyclic()
.output acyclic
acyclic() :- !cyclic().
.decl heavy(x: Node, total: float)
.output heavy(IO=file, filename="heavy.tsv", headers=true)
heavy(x, t) :- edge(x, _), t = sum w : { edge(x, y), weight(y, w) }.
.decl n(c: number)
.printsize path
"""


def test_cli_reads_facts_and_writes_csv(tmp_path, capsys):
    (tmp_path / "facts").mkdir()
    (tmp_path / "facts" / "edge.facts").write_text("a\tb\nb\tc\nc\ta\nc\td\n")
    (tmp_path / "facts" / "w.csv").write_text("b,1.5\nc,2\nd,0.25\n")
    (tmp_path / "p.dl").write_text(PROGRAM)
    out = tmp_path / "out"
    assert main([str(tmp_path / "p.dl"), "-F", str(tmp_path / "facts"), "-D", str(out)]) == 0
    assert capsys.readouterr().out == "path\t12\n"
    paths = (out / "path.csv").read_text().splitlines()
    assert len(paths) == 12 and paths[0] == "a\ta" and "c\td" in paths
    assert (out / "cyclic.csv").read_text() == "()\n"
    assert (out / "acyclic.csv").read_text() == ""
    assert (out / "heavy.tsv").read_text() == "x\ttotal\na\t1.5\nb\t2\nc\t0.25\n"


def test_cli_refuses_a_bad_program_with_line_and_column(tmp_path):
    (tmp_path / "bad.dl").write_text(".decl e(x: number)\n.decl r(x: number)\nr(y) :- e(x).\n")
    run = subprocess.run([sys.executable, "-m", "ddflow.datalog", str(tmp_path / "bad.dl"), "-F", str(tmp_path),
                          "-D", "-"], capture_output=True, text=True)
    assert run.returncode == 1
    assert "line 3, column 3: variable y of the head is not bound" in run.stderr
