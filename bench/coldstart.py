"""What a new user waits for (issue 59): the wheel's build, then the first results in a venv that never ran ddflow.

    python -m bench.coldstart                  # build a wheel of this checkout, install it in a new venv, time
    python -m bench.coldstart --wheel dist/ddflow-0.1.0-cp311-cp311-linux_x86_64.whl --runs 5

Steps, each timed by the wall clock of this machine:

1. ``python -m pip wheel --no-deps .`` of a fresh ``git clone`` of this
   checkout's HEAD (the extension compiled from nothing, in pip's own
   isolated build environment; its size is reported);
2. a new venv under a temporary directory, the wheel installed into it
   (numpy, pyarrow and sqlglot from the package index or pip's cache);
3. ``--runs`` times each, in a new interpreter started from that venv, from a
   directory outside the checkout (so nothing of the checkout is imported):
   the README's first example (``examples/reachability.py``, 5 edges) to
   its last output line, and a SQL ``GROUP BY`` over 1,000 rows to its first
   result, then one 4-row change.

Nothing is cached between runs but what Python itself writes (the venv's
bytecode, which pip compiles at install).  Medians are reported; the last
line printed is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

GROUP_BY = r'''
import time
t0 = time.perf_counter()
import ddflow
flow = ddflow.Dataflow()
orders_in, orders = flow.new_collection("orders", schema={"k": "bigint", "v": "bigint"})
out = flow.sql("SELECT k, count(*) AS n, sum(v) AS s FROM orders GROUP BY k").capture()
orders_in.update([(i % 10, i) for i in range(1000)], times=0)
flow.advance_to(1); flow.run()
first = out.drain()
t1 = time.perf_counter()
orders_in.update([(1, 5), (2, 7), (3, 9), (11, 1)], times=1)
flow.advance_to(2); flow.run()
later = out.drain()
t2 = time.perf_counter()
assert len(first) == 10 and len(later) == 7, (first, later)
print(f"{t1 - t0} {t2 - t1}")
'''


def build_wheel(out: Path) -> tuple[Path, float]:
    """A wheel of this checkout's HEAD, built from a fresh clone; ``(path, seconds)``."""
    src = out / "src"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(src)], check=True)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out / "dist"), str(src)],
                   check=True)
    seconds = time.perf_counter() - t
    return next((out / "dist").glob("ddflow-*.whl")), seconds


def fresh_venv(where: Path, wheel: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    py = where / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", str(wheel)], check=True)
    return py


def timed(cmd: list[str], cwd: Path) -> tuple[float, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DDFLOW_", "PYTHON"))}
    t = time.perf_counter()
    run = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env, timeout=600, check=True)
    return time.perf_counter() - t, run.stdout


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--wheel", type=Path, help="time this wheel instead of building one")
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ddflow-coldstart-") as tmp:
        tmp = Path(tmp)
        result: dict = {}
        if args.wheel is None:
            wheel, seconds = build_wheel(tmp)
            result["build_s"] = round(seconds, 1)
            print(f"wheel built from a fresh clone in {seconds:.1f} s ({os.cpu_count()} cores)")
        else:
            wheel = args.wheel.resolve()
        result["wheel_bytes"] = wheel.stat().st_size
        t = time.perf_counter()
        py = fresh_venv(tmp / "venv", wheel)
        result["install_s"] = round(time.perf_counter() - t, 1)
        example = ROOT / "examples" / "reachability.py"
        (tmp / "group_by.py").write_text(GROUP_BY)
        first_example, group_by_first, group_by_next = [], [], []
        for _ in range(args.runs):
            seconds, out = timed([str(py), str(example)], tmp)
            assert "time 2:" in out, out
            first_example.append(seconds)
            seconds, out = timed([str(py), str(tmp / "group_by.py")], tmp)
            first, later = map(float, out.split())
            group_by_first.append(first)
            group_by_next.append(later)
        result.update({
            "runs": args.runs,
            "first_example_s": round(statistics.median(first_example), 3),
            "group_by_first_result_s": round(statistics.median(group_by_first), 3),
            "group_by_next_change_s": round(statistics.median(group_by_next), 4),
        })
        print(f"wheel {result['wheel_bytes'] / 1e6:.2f} MB, installed in a new venv in {result['install_s']} s")
        print(f"README's first example, interpreter start to its end: {result['first_example_s']} s (median)")
        print(f"SQL GROUP BY over 1,000 rows, first result: {result['group_by_first_result_s']} s after the script "
              f"starts; the next 4-row change {result['group_by_next_change_s'] * 1000:.1f} ms")
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
