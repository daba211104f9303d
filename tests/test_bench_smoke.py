"""The benchmark harness runs, checks itself, and renders its report (tiny sizes; no timing asserts)."""
import json

import pytest

from bench import components, harness, ratios, reach, report, sssp, topk


@pytest.mark.parametrize("system,batch", [("ddflow", 1), ("ddflow", 7), ("naive", 5)])
def test_reach_tiny_is_correct(tmp_path, capsys, system, batch):
    out = tmp_path / "r.jsonl"
    rc = reach.main(["--nodes", "40", "--edges", "80", "--roots", "3", "--updates", "60", "--batch", str(batch),
                     "--system", system, "--checkpoints", "20,60", "--verify-every", "10", "--json", str(out)])
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert rc == 0 and line["correct"] is True
    assert line["system"] == system and line["updates"] == 60
    cps = [cp["updates"] for cp in line["checkpoints"]]
    assert len(cps) == 2 and 20 <= cps[0] < 20 + batch and cps[1] == 60  # checkpoints land on batch boundaries
    assert json.loads(out.read_text().splitlines()[-1]) == line


@pytest.mark.parametrize("bench,args", [
    (sssp, ["--nodes", "40", "--edges", "80"]),
    (components, ["--nodes", "40", "--edges", "40"]),
    (topk, ["--keys", "10", "--window", "100", "--values", "50", "--k", "2"]),
])
@pytest.mark.parametrize("system,batch", [("ddflow", 1), ("ddflow", 7), ("naive", 5)])
def test_other_benches_tiny_are_correct(capsys, bench, args, system, batch):
    rc = bench.main([*args, "--updates", "40", "--batch", str(batch), "--system", system,
                     "--checkpoints", "40", "--verify-every", "10"])
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert rc == 0 and line["correct"] is True and line["system"] == system


def test_wrong_answer_is_detected(monkeypatch, capsys):
    """A system that drops an output change must fail the check (exit 1)."""
    real_step = harness.DdflowSystem.step

    def lossy(self, removed, added, t0):
        return real_step(self, removed, added, t0)[1:]

    monkeypatch.setattr(harness.DdflowSystem, "step", lossy)
    rc = reach.main(["--nodes", "30", "--edges", "60", "--roots", "3", "--updates", "40", "--batch", "4",
                     "--checkpoints", "40", "--verify-every", "4"])
    assert rc == 1
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["correct"] is False


def test_report_renders(tmp_path, capsys):
    res = tmp_path / "r.jsonl"
    for batch in (1, 5):
        reach.main(["--nodes", "30", "--edges", "60", "--roots", "2", "--updates", "30", "--batch", str(batch),
                    "--checkpoints", "10,30", "--json", str(res)])
    reach.main(["--nodes", "30", "--edges", "60", "--roots", "2", "--updates", "30", "--batch", "5", "--workers", "2",
                "--checkpoints", "10,30", "--json", str(res)])
    capsys.readouterr()
    assert report.main([str(res), "--out", str(tmp_path / "plots")]) == 0
    names = {p.name for p in (tmp_path / "plots").iterdir()}
    assert {"throughput.png", "state.png", "coordination.png", "table.md"} <= names
    md = (tmp_path / "plots" / "table.md").read_text()
    assert "| ddflow | 5 | 1 |" in md and "| ddflow | 5 | 2 |" in md
    row = [line for line in md.splitlines() if line.startswith("| 2 | 5 |")]  # the coordination table
    assert len(row) == 1 and "nan" not in row[0]


def test_ratios_alternate_both_systems_and_report_medians(capsys):
    assert ratios.main(["--runs", "1", "--only", "topk", "--batches", "7", "--updates", "21"]) == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    (row,) = line["ratios"]
    assert row["bench"] == "topk" and row["batch"] == 7 and len(row["ddflow_all"]) == len(row["naive_all"]) == 1
    assert row["ratio"] == row["ddflow_updates_per_s"] / row["naive_updates_per_s"] > 0


def test_split_accounts_for_the_whole_update():
    """bench.split wraps kernels and steps globally, so it runs in its own interpreter, as users run it."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "bench.split", "--updates", "20", "--warmup", "10"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    line = json.loads(out.stdout.strip().splitlines()[-1])
    # The kernels were wrapped before the operators imported them, and each share is a part, not a remainder gone negative.
    assert line["bench"] == "reach" and line["kernel_calls"] > 0 and line["operator_steps"] > 0
    assert all(ms >= 0 for ms in line["ms"].values()), line["ms"]
    # Each kernel's calls add up to the kernel calls counted (a kernel wrapped twice, or not at all, would not).
    per_kernel = line["per_kernel_us"]
    assert "loop_step" in per_kernel and all(k["us_per_call"] > 0 for k in per_kernel.values())
    assert abs(sum(k["calls_per_update"] for k in per_kernel.values()) - line["kernel_calls"]) < 1e-9


def test_calls_counts_the_same_for_the_same_run():
    """bench.calls' claim: the count is exact (the same workload and seed count the same).  The kernels are native,
    built ahead of time: nothing compiles or loads while the measured updates run, so the first count in this
    process is already the others' (a compile or a first load would add its calls to it)."""
    from bench import calls

    def count():
        return calls.count("reach", updates=30, warmup=40, nodes=40, edges=80, top=100_000)  # every function called

    first, a, b = count(), count(), count()
    assert first["calls_per_update"] == a["calls_per_update"] == b["calls_per_update"] > 0
    for c in (first, a, b):
        assert not c["compiles_during_measure"] and not c["loads_during_measure"]
    names = [name for _, name in a["top"]]
    assert any(name.endswith(" step") and name.startswith("join.py:") for name in names)
    assert not any(name.endswith(" histories") for name in names)  # a helper inside the loop's native step
