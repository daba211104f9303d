"""``python -m ddflow.datalog PROGRAM.dl -F facts/ -D out/``: run a Soufflé program on fact files, as Soufflé does.

Reads each ``.input`` relation from ``facts/rel.facts`` (tab-separated;
see :mod:`ddflow.datalog.files` for the options), evaluates the program
once (all facts at time 0), writes each ``.output`` relation to
``out/rel.csv`` and prints each ``.printsize`` relation's size as
``rel<TAB>n``.  ``-D -`` prints the outputs instead.  ``-j N`` runs N
workers.  ``--explain`` prints the plan and exits.  Exit status 1 with
the error (its line and column) on a refused program.
"""
from __future__ import annotations

import argparse
import sys
import time

from ddflow.dataflow import EngineDataflow
from ddflow.datalog.files import read_facts, write_relation
from ddflow.datalog.frontend import DatalogFrontend
from ddflow.datalog.program import load
from ddflow.errors import SchemaError
from ddflow.plan.owner import PlanOwner


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit status.  Cost: reading the facts plus one from-scratch evaluation."""
    ap = argparse.ArgumentParser(prog="python -m ddflow.datalog", description=__doc__.splitlines()[0])
    ap.add_argument("program", help="the Datalog program (.dl)")
    ap.add_argument("-F", "--fact-dir", default=".", help="directory of the input facts (rel.facts)")
    ap.add_argument("-D", "--output-dir", default=".", help="directory of the outputs (rel.csv); '-' prints them")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("--explain", action="store_true", help="print the plan and exit")
    ap.add_argument("--no-hints", action="store_true", help="ignore the program's coordination hints")
    ap.add_argument("--time", action="store_true", help="print the evaluation's wall time to standard error")
    args = ap.parse_args(argv)
    try:
        with open(args.program, encoding="utf-8") as f:
            text = f.read()
        program = load(text)
        with EngineDataflow(workers=args.jobs) as flow:
            handles = {}
            for name in program.inputs:
                rel = program.relations[name]
                schema = {f"c{i}": t for i, t in enumerate(rel.sql_types)} or {"c0": "bigint"}
                handles[name] = flow.new_collection(name, schema=schema)[0]
            front = DatalogFrontend(PlanOwner(flow))
            if args.explain:
                print(front.explain(program, hints=not args.no_hints))
                return 0
            rels = front.datalog(program, hints=not args.no_hints)
            wanted = set(program.outputs) | set(program.printsize)
            caps = {n: rels[n].capture() for n in wanted if n in rels}
            for name, h in handles.items():
                rows = read_facts(program.inputs[name], program.relations[name], args.fact_dir)
                if program.relations[name].arity == 0:
                    rows = [(0,)] if rows else []
                if rows:
                    h.update(rows, times=0)
            t0 = time.perf_counter()
            flow.advance_to(1)
            flow.run()
            elapsed = time.perf_counter() - t0
            for name in wanted:
                rel = program.relations[name]
                if name in caps:
                    rows = [r for r, m in caps[name].contents(0).items() if m > 0]
                else:  # a pure input relation named as an output: its facts
                    rows = sorted(set(read_facts(program.inputs.get(name), rel, args.fact_dir)))
                if name in program.outputs:
                    write_relation(program.outputs[name], rel, rows, args.output_dir)
                if name in program.printsize:
                    print(f"{name}\t{len(rows)}")
            if args.time:
                print(f"evaluated in {elapsed:.3f} s", file=sys.stderr)
    except (SchemaError, OSError) as err:
        print(f"{args.program}: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
