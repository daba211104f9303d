"""Exactly-once across crashes: kill the job inside a micro-batch, restart it, compare.

The job (``crash_job.py``, a subprocess with its own local Spark) reads
edge updates between string-named nodes from Kafka with
``maxOffsetsPerTrigger`` (six micro-batches), runs reachability and an
out-degree count in ddflow and writes each output to Parquet and to
Kafka.  One chain of runs over the same checkpoint and state directories
is killed (SIGKILL to the job's whole process tree: driver, Spark's JVM,
PySpark's worker daemon and workers, from the driver's ``_fault`` test
hook) at points where a crash is interesting:

1. batch 2, ``mid_output``: the first sink has the batch, the others not;
2. ``restore`` (of batch 1's state): the dataflow was being rebuilt;
3. batch 3, ``in_snapshot``: the manifest names a new snapshot, the files
   it replaces are still there, and Spark has not committed the batch, so
   Spark replays it and the driver must skip it;
4. batch 4, ``before_state``: every sink has the batch, the state not; the
   restart restores from the snapshot of batch 3 (compacted: it interns
   the strings in another order than the run that wrote batch 4) and
   replays batch 4, whose Kafka records are all on the topics already;
5. no crash: the job runs to the end (in this test's own Spark session,
   which saves a Spark start-up; it is still a new process for the job).

The long run, with kills at random moments, is ``bench/kill_matrix.py``.
Each restart first replays the batch that crashed.  The final outputs
(Parquet; Kafka read plainly, no de-duplication) and
the dead letters must equal those of an uninterrupted run of the same job
(in this process's Spark session) exactly, batch by batch, and the
accumulated outputs must equal the answers computed from scratch.
"""
from __future__ import annotations

import collections
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ddflow.streaming.broker import create_topics, produce
from ddflow.streaming.demo import bfs
from ddflow.streaming.sinks import JsonLinesSink, ParquetSink, _read_all, accumulate, read_topic
from ddflow.streaming.state import StateError, StateStore

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

JOB = Path(__file__).with_name("crash_job.py")
_spec = importlib.util.spec_from_file_location("ddflow_tests_crash_job", JOB)
crash_job = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(crash_job)

MAX_OFFSETS = 10
CRASHES = [("mid_output", 2), ("restore", 1), ("in_snapshot", 3), ("before_state", 4)]
RUN_TIMEOUT = 180
KEYS = "string"


def workload(seed: int = 7) -> tuple[list[bytes], list[tuple[int, int]]]:
    """Edge updates with strictly increasing data times, plus three bad messages.

    Returns the message values and the final edge multiset.
    """
    import random

    rng = random.Random(seed)
    nodes = [crash_job.node(i, KEYS) for i in range(14)]
    window = collections.deque((rng.choice(nodes), rng.choice(nodes)) for _ in range(12))
    msgs: list[bytes] = []
    t = 0
    for s, d in window:
        t += 1
        msgs.append(json.dumps({"src": s, "dst": d, "t": t, "diff": 1}).encode())
    for i in range(20):
        old = window.popleft()
        new = (rng.choice(nodes), rng.choice(nodes))
        window.append(new)
        msgs.append(json.dumps({"src": old[0], "dst": old[1], "t": t + 1, "diff": -1}).encode())
        msgs.append(json.dumps({"src": new[0], "dst": new[1], "t": t + 2, "diff": 1}).encode())
        t += 2
        if i == 3:
            msgs.append(b"{not json")
        if i == 8:  # a number where the node's name belongs
            msgs.append(json.dumps({"src": nodes[1], "dst": 1, "t": t, "diff": 1}).encode())
        if i == 13:
            msgs.append(json.dumps({"src": nodes[1], "dst": nodes[2], "t": 0, "diff": 1}).encode())  # late
    return msgs, list(window)


def expected(window: list[tuple[int, int]]) -> tuple[dict, dict]:
    reach = {pair: 1 for pair in bfs(window, crash_job.roots(KEYS))}
    degree = {(s, c): 1 for s, c in collections.Counter(s for s, _ in window).items()}
    return reach, degree


def kafka_changes(bootstrap: str, topic: str) -> tuple[dict, int]:
    """Deduplicated records ``(batch_id, seq) -> change`` of a KafkaSink topic, and the raw count."""
    raw = read_topic(bootstrap, topic)
    out: dict[tuple[int, int], dict] = {}
    for value, headers in raw:
        h = {k: v.decode() for k, v in headers}
        out.setdefault((int(h["batch_id"]), int(h["seq"])), json.loads(value))
    return out, len(raw)


def partitioned(bootstrap: str, topic: str) -> dict[int, list]:
    """Each partition's (key, value, batch_id, seq) in offset order (the authenticator depends on the query's key)."""
    out: dict[int, list] = collections.defaultdict(list)
    for part, _, key, value, headers in sorted(_read_all(bootstrap, topic), key=lambda r: r[:2]):
        h = dict(headers)
        out[part].append((key, value, h["batch_id"], h["seq"]))
    return dict(out)


def parquet_batches(work: Path, name: str) -> dict[str, list[dict]]:
    d = work / name
    if not d.is_dir():
        return {}
    import pyarrow.parquet as pq

    return {f: pq.read_table(d / f).to_pylist() for f in sorted(os.listdir(d)) if f.endswith(".parquet")}


def committed(work: Path) -> set[int]:
    d = work / "checkpoint" / "commits"
    return {int(f) for f in os.listdir(d) if f.isdigit()} if d.is_dir() else set()


def wait_gone(pidfile: Path, timeout: float = 30.0) -> None:
    """Wait for the crashed job's Spark JVM (it exits when its Python parent dies)."""
    if not pidfile.exists():
        return
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return  # exited, not yet reaped by its new parent
        except FileNotFoundError:
            return
        except OSError:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
        time.sleep(0.2)
    os.kill(pid, signal.SIGKILL)  # the JVM this test started


def run_job(bootstrap: str, topic: str, out_prefix: str, work: Path, fault: tuple[str, int] | None):
    pidfile = work.parent / f"{work.name}.jvm.pid"
    cmd = [sys.executable, str(JOB), "--bootstrap", bootstrap, "--topic", topic, "--out-prefix", out_prefix,
           "--work", str(work), "--max-offsets", str(MAX_OFFSETS), "--pidfile", str(pidfile), "--keys", KEYS]
    if fault is not None:
        cmd += ["--fault", f"{fault[0]}:{fault[1]}"]
    # Its own session: the kill reaches the job's process group and nothing else.
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT, start_new_session=True)
    wait_gone(pidfile)
    return p


def out_topics(kafka_bootstrap: str, prefix: str) -> None:
    create_topics(kafka_bootstrap, [f"{prefix}-{n}" for n in crash_job.OUTPUTS], partitions=1)


def test_crash_at_each_point_then_restart_matches_uninterrupted_run(spark, kafka_bootstrap, new_topic, tmp_path):
    msgs, window = workload()
    topic = new_topic(partitions=1, prefix="crash-edges")
    produce(kafka_bootstrap, topic, [(None, m) for m in msgs])
    n_batches = -(-len(msgs) // MAX_OFFSETS)
    assert n_batches >= 5

    # The reference: the same job, uninterrupted, in this process's Spark session.
    ref = tmp_path / "reference"
    out_topics(kafka_bootstrap, "ref-" + topic)
    done = crash_job.run(spark, kafka_bootstrap, topic, "ref-" + topic, str(ref), MAX_OFFSETS, keys=KEYS)
    assert done == list(range(n_batches))

    # The same job, crashed at each point in turn and restarted over the same directories.
    work = tmp_path / "crashy"
    prefix = "crashy-" + topic
    out_topics(kafka_bootstrap, prefix)
    for point, batch in CRASHES:
        p = run_job(kafka_bootstrap, topic, prefix, work, (point, batch))
        assert p.returncode == -signal.SIGKILL, (point, batch, p.returncode, p.stdout[-3000:], p.stderr[-3000:])
        manifest = StateStore(str(work / "state")).manifest
        if point == "mid_output":
            assert f"batch-{batch:012d}.parquet" in parquet_batches(work, "reach")
            assert f"batch-{batch:012d}.parquet" not in parquet_batches(work, "degree")
            assert manifest.batch_id == batch - 1 and committed(work) == set(range(batch))
        elif point == "restore":
            assert manifest.batch_id == batch and committed(work) == set(range(batch + 1))
        elif point == "in_snapshot":
            assert manifest.batch_id == batch and max(committed(work)) == batch - 1
            assert manifest.files == [f"snapshot-{batch:012d}.arrow"]
            assert len(os.listdir(work / "state")) > 3  # the replaced files are still there (and the key)
        else:  # before_state: every output of the batch is out, the state is at the snapshot before it
            assert manifest.batch_id == batch - 1 and manifest.files == [f"snapshot-{batch - 1:012d}.arrow"]
            for name in crash_job.OUTPUTS:
                assert f"batch-{batch:012d}.parquet" in parquet_batches(work, name)
                assert batch in {b for b, _ in kafka_changes(kafka_bootstrap, f"{prefix}-{name}")[0]}
    # The last restart runs to the end; it needs no crash hook, so it runs in this process's session
    # (one Spark start less).  It restores from the snapshot of batch 3 and replays batch 4, whose outputs
    # are all out already.
    done = crash_job.run(spark, kafka_bootstrap, topic, prefix, str(work), MAX_OFFSETS, keys=KEYS)
    assert done == [4, 5]
    assert committed(work) == set(range(n_batches))

    want = dict(zip(crash_job.OUTPUTS, expected(window)))
    for name in crash_job.OUTPUTS:
        # Parquet: the same files with the same rows as the uninterrupted run.
        assert parquet_batches(work, name) == parquet_batches(ref, name), name
        assert accumulate(ParquetSink(str(work / name)).table()) == want[name], name
        # Kafka: after dropping replayed duplicates, the same records under the same ids.
        got, raw = kafka_changes(kafka_bootstrap, f"{prefix}-{name}")
        ref_changes, ref_raw = kafka_changes(kafka_bootstrap, f"ref-{topic}-{name}")
        assert ref_raw == len(ref_changes)
        assert got == ref_changes, name
        acc = collections.Counter()
        for ch in got.values():
            acc[tuple(ch["record"])] += ch["diff"]
        assert {k: v for k, v in acc.items() if v} == want[name], name
        # Read plainly, with no de-duplication: batch 4's outputs went out before its crash (before its state
        # commit) and the restart's sink found them on the topic and wrote nothing twice.
        assert raw == ref_raw == len(got), name
        assert partitioned(kafka_bootstrap, f"{prefix}-{name}") == partitioned(kafka_bootstrap, f"ref-{topic}-{name}")
    # Dead letters: the same records as the uninterrupted run.
    dead = JsonLinesSink(str(work / "dead")).rows()
    assert dead == JsonLinesSink(str(ref / "dead")).rows()
    assert len(dead) == 3

    # ddflow's state deleted while Spark's checkpoint is kept: the restart refuses before Spark runs a batch.
    shutil.rmtree(work / "state")
    stream = crash_job.make_stream(kafka_bootstrap, prefix, str(work), KEYS)
    with pytest.raises(StateError, match=f"has committed batches up to {n_batches - 1}"):
        stream.start(spark.readStream.format("rate").load(), checkpointLocation=str(work / "checkpoint"))
