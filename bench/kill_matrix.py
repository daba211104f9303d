"""Kill matrix: exactly-once across SIGKILLs of the whole streaming query, at many random moments.

The long-run version of ``tests/streaming/test_crash_recovery.py`` and
``test_exactly_once.py`` (a bench, not CI: it starts local Spark a few
dozen times per configuration; about 20-40 minutes per configuration on
a 2-core machine).

    python -m bench.kill_matrix                      # the full matrix: w1-string, w2-string, 30 kills each
    python -m bench.kill_matrix --configs w1-string --kills 10 --seed 3
    python -m bench.kill_matrix --configs routed-string   # workers on executors (local-cluster): heavy

A configuration (:data:`CONFIGS`) is the job's key kind (``int`` nodes, or
``string`` nodes, which the dataflow interns, so a process restored from
a snapshot computes the same changes in another order), its worker count
(1, or 2 forked workers) and whether its input is routed (``.workers(2,
spark=spark)`` on a ``local-cluster[2,1,1024]``: the executors feed the
workers directly).  For each, an embedded broker (or ``--bootstrap``)
gets a seeded workload of edge updates (``--steps`` sliding-window
steps, 2 messages each, plus four bad messages for the dead letters) on
a one-partition topic.  The job is ``tests/streaming/crash_job.py``: Kafka
-> Spark (``ddkafka``, availableNow, ``maxOffsetsPerTrigger``) -> ddflow
reach + out-degree -> Parquet and Kafka sinks (output topics with 2
partitions), dead letters, a state snapshot every 1-3 batches (drawn
anew for every run of the chain).

1. Reference: one uninterrupted run of the job (a subprocess) with its own
   work directory and output topics; the times at which Spark's commits
   appear give the Spark start-up time and the time per batch.
2. The chain: the job is launched again and again over one work directory
   and one set of output topics, each run in its own session, and killed
   with SIGKILL to its whole process group, until ``--kills`` kills have
   happened; then one run to the end.  Kills are either *timer* kills
   after a seeded random delay counted from the launch (0.2-1.1 times
   the start-up: in Spark's start-up, in ddflow's restore, in the replayed
   batch), from the moment the run's first new batch reaches the state
   (0-1.5 times the reference's time per batch: mid-batch, in the state
   commit, before Spark's commit...) or from the moment the run writes its
   first Parquet output file of a new batch (0-400 ms: in the sink writes,
   a Kafka sink's among them), or *hook* kills
   (``--fault POINT:BATCH`` at the driver's test hook points ``restore``,
   ``before_output``, ``mid_output``, ``before_state`` (every sink has the
   batch, the state not: its replay must write nothing twice),
   ``in_snapshot``, ``after_state``; each point at least once, at a batch
   the run reaches).  PySpark's worker daemon makes its own process group
   (``pyspark.daemon`` calls ``setpgid``); each run carries a marker in
   its environment, and the kill (and the wait after every run) covers
   every process with it.  After each kill the record notes the
   manifest's batch, Spark's last commit, the Parquet files and the
   number of Kafka records of the batch in flight, and so where the kill
   landed (``phase``).
3. The chain's outputs must equal the reference's: every Parquet file of
   every output with the same rows in the same order; each Kafka output
   topic read plainly (no de-duplication) holding, partition by
   partition, the same records (key, value, batch id, seq) in the same
   order, none lost, none twice, every one carrying a valid authenticator
   under the chain's state key; the same dead letters; Spark's commits for
   every batch; and the accumulated outputs equal a from-scratch answer.

Prints a line per kill, a table of the configurations, appends one JSON
line per configuration to ``--json``, and exits 1 if anything differs (the
work directory is then kept and named).
"""
from __future__ import annotations

import argparse
import collections
import datetime
import importlib.util
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
JOB = REPO / "tests" / "streaming" / "crash_job.py"
_spec = importlib.util.spec_from_file_location("ddflow_bench_crash_job", JOB)
crash_job = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(crash_job)

SNAPSHOT_CHOICES = (1, 2, 3)  # each chain run's snapshot cadence is drawn from these
REFERENCE_SNAPSHOT_EVERY = 2
HOOK_POINTS = ["restore", "before_output", "mid_output", "before_state", "in_snapshot", "after_state"]
MARKER = "DDFLOW_KILL_MATRIX_RUN"
RUN_TIMEOUT = 420.0


@dataclass(frozen=True)
class Config:
    """One column of the matrix: the job's key kind, its workers, whether the executors route its input."""

    name: str
    keys: str = "string"
    workers: int = 1
    route: bool = False
    master: str = "local[2]"

    def job_args(self) -> list[str]:
        args = ["--keys", self.keys, "--workers", str(self.workers), "--master", self.master]
        return args + (["--route"] if self.route else [])


CONFIGS = {c.name: c for c in [
    Config("w1-string"),
    Config("w2-string", workers=2),
    Config("w1-int", keys="int"),
    Config("routed-string", workers=2, route=True, master="local-cluster[2,1,1024]"),
]}
#: What ``python -m bench.kill_matrix`` runs without ``--configs``.
DEFAULT_CONFIGS = "w1-string,w2-string"


# -- workload ------------------------------------------------------------------------------------
def workload(seed: int, steps: int = 200, nodes: int = 20, width: int = 20, keys: str = "int"):
    """Edge updates with strictly increasing data times (a sliding window of ``width`` edges), plus
    four bad messages: not JSON, a time that is no number, a late time, a time too far ahead.

    Nodes are named as ``crash_job.node`` names them for ``keys``.  Returns the message values and the
    final edge multiset.
    """
    rng = random.Random(seed)
    names = [crash_job.node(i, keys) for i in range(nodes)]
    window = collections.deque((rng.choice(names), rng.choice(names)) for _ in range(width))
    msgs: list[bytes] = []
    t = 0
    for s, d in window:
        t += 1
        msgs.append(json.dumps({"src": s, "dst": d, "t": t, "diff": 1}).encode())
    bad = {steps // 7: b"{not json",
           steps // 3: json.dumps({"src": names[1], "dst": names[2], "t": "T", "diff": 1}).encode(),
           steps // 2: json.dumps({"src": names[1], "dst": names[2], "t": 0, "diff": 1}).encode(),  # late
           (4 * steps) // 5: "far"}
    for i in range(steps):
        old = window.popleft()
        new = (rng.choice(names), rng.choice(names))
        window.append(new)
        msgs.append(json.dumps({"src": old[0], "dst": old[1], "t": t + 1, "diff": -1}).encode())
        msgs.append(json.dumps({"src": new[0], "dst": new[1], "t": t + 2, "diff": 1}).encode())
        t += 2
        if i in bad:
            m = bad[i]
            if m == "far":  # past the frontier by more than maxTimeAhead (2**40)
                m = json.dumps({"src": names[3], "dst": names[4], "t": t + 2**41, "diff": 1}).encode()
            msgs.append(m)
    return msgs, list(window)


def expected(window: list[tuple], keys: str = "int") -> dict[str, dict]:
    """The accumulated outputs, from scratch."""
    from ddflow.streaming.demo import bfs

    reach = {pair: 1 for pair in bfs(window, crash_job.roots(keys))}
    degree = {(s, c): 1 for s, c in collections.Counter(s for s, _ in window).items()}
    return {"reach": reach, "degree": degree}


# -- reading a work directory --------------------------------------------------------------------
def committed(work: Path) -> list[int]:
    d = work / "checkpoint" / "commits"
    return sorted(int(f) for f in os.listdir(d) if f.isdigit()) if d.is_dir() else []


def spark_last(work: Path) -> int:
    c = committed(work)
    return c[-1] if c else -1


def manifest(work: Path) -> dict:
    """The state manifest's batch id and batches since the last snapshot (-1 and 0 when there is none)."""
    p = work / "state" / "manifest.json"
    if not p.exists():
        return {"batch_id": -1, "batches_since_snapshot": 0}
    raw = json.loads(p.read_text())
    return {"batch_id": raw["batch_id"], "batches_since_snapshot": raw["batches_since_snapshot"]}


def parquet_batches(work: Path, name: str) -> dict[str, list[dict]]:
    d = work / name
    if not d.is_dir():
        return {}
    import pyarrow.parquet as pq

    return {f: pq.read_table(d / f).to_pylist() for f in sorted(os.listdir(d)) if f.endswith(".parquet")}


def dead_batches(work: Path) -> dict[str, list[dict]]:
    d = work / "dead"
    if not d.is_dir():
        return {}
    return {f: [json.loads(line) for line in (d / f).read_text().splitlines() if line.strip()]
            for f in sorted(os.listdir(d)) if f.endswith(".jsonl")}


def leftovers(work: Path) -> list[str]:
    """Temporary files a kill left behind (sinks' and the manifest's atomic writes)."""
    out = []
    for sub in ["state", "dead", *crash_job.OUTPUTS]:
        d = work / sub
        if d.is_dir():
            out += [f"{sub}/{f}" for f in os.listdir(d) if f.startswith(".")]
    return sorted(out)


# -- processes -----------------------------------------------------------------------------------
def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, pgid) of a process, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return fields[0], int(fields[2])
    except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
        return None


def marked(tag: str) -> dict[int, tuple[str, int]]:
    """pid -> (state, pgid) of every live process whose environment carries this run's marker."""
    needle = f"{MARKER}={tag}".encode()
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read()
        except OSError:
            continue
        if needle in env.split(b"\0"):
            st = _proc_stat(pid)
            if st is not None:
                out[pid] = st
    return out


def kill_all(pgid: int, tag: str) -> list[int]:
    """SIGKILL the job's process group and every other process group holding a process of this run."""
    groups = {pgid} | {g for _, g in marked(tag).values()}
    for g in sorted(groups, key=lambda g: g != pgid):  # the job's own group first
        try:
            os.killpg(g, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return sorted(groups)


def wait_gone(p: subprocess.Popen, tag: str, timeout: float = 30.0) -> dict:
    """Wait until the job, its whole process group and every process of this run are gone.

    ``live_s``: until no process of the run runs (zombies aside); ``gone_s``: until the process group is
    gone (``killpg(pgid, 0)`` raises ProcessLookupError), i.e. its orphaned zombies are reaped by init.
    """
    p.wait()
    t0 = time.monotonic()
    extra_kills = 0
    live_s = None
    while True:
        try:
            os.killpg(p.pid, 0)
            group_alive = True
        except ProcessLookupError:
            group_alive = False
        left = {pid: st for pid, st in marked(tag).items() if st[0] != "Z"}
        if not left and live_s is None:
            live_s = round(time.monotonic() - t0, 2)
        if not group_alive and not left:
            return {"live_s": live_s, "gone_s": round(time.monotonic() - t0, 2), "stray_kills": extra_kills}
        if time.monotonic() - t0 > timeout:
            if not left:  # unreaped zombies hold the pgid; nothing runs
                return {"live_s": live_s, "gone_s": None, "stray_kills": extra_kills, "zombies": True}
            raise SystemExit(f"processes of run {tag} still alive after {timeout}s: {left}")
        if left and time.monotonic() - t0 > 2.0:
            # Survivors outside the job's group (PySpark's daemon and workers, which exit when the JVM's
            # pipe closes): the run is over, end them.
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                    extra_kills += 1
                except ProcessLookupError:
                    pass
        time.sleep(0.05)


def watch(job: "Job", work: Path, held: int, limit: float, anchor: str = "launch") -> tuple[float | None, int]:
    """Let the job run until it exits or ``limit`` seconds after ``anchor`` pass.

    ``anchor``: "launch"; "first_new_batch", the moment the state first holds a batch past ``held``;
    "first_output", the moment this run first writes a Parquet output file of batch ``held + 1`` (the
    sink writes of that batch are under way: the Kafka sink of that output is next).  An anchor never
    reached leaves the run alone until ``RUN_TIMEOUT``.

    Returns when (seconds after launch) the state first held a batch past ``held``, or None, and the most
    processes of this run seen outside the job's process group (PySpark's daemon and workers).
    """
    deadline = job.t0 + (limit if anchor == "launch" else RUN_TIMEOUT)
    files = [work / n / f"batch-{held + 1:012d}.parquet" for n in crash_job.OUTPUTS]
    anchored = anchor == "launch"
    progress, outside, n = None, 0, 0
    while job.p.poll() is None and time.monotonic() < deadline:
        if progress is None and manifest(work)["batch_id"] > held:
            progress = job.elapsed()
            if anchor == "first_new_batch" and not anchored:
                anchored, deadline = True, min(time.monotonic() + limit, job.t0 + RUN_TIMEOUT)
        if anchor == "first_output" and not anchored:
            for f in files:
                try:
                    if f.stat().st_mtime >= job.wall0:
                        anchored, deadline = True, min(time.monotonic() + limit, job.t0 + RUN_TIMEOUT)
                        break
                except FileNotFoundError:
                    pass
        n += 1
        if n % 100 == 0:
            outside = max(outside, sum(g != job.p.pid for _, g in marked(job.tag).values()))
        time.sleep(min(0.005, max(deadline - time.monotonic(), 0)))
    return progress, outside


class Job:
    """One launch of crash_job.py over a work directory."""

    def __init__(self, args, config: Config, bootstrap: str, topic: str, prefix: str, work: Path, logs: Path,
                 name: str, fault: tuple[str, int] | None = None, snapshot_every: int = REFERENCE_SNAPSHOT_EVERY):
        self.tag = f"{name}-{uuid.uuid4().hex[:8]}"
        cmd = [sys.executable, str(JOB), "--bootstrap", bootstrap, "--topic", topic, "--out-prefix", prefix,
               "--work", str(work), "--max-offsets", str(args.max_offsets), "--snapshot-every",
               str(snapshot_every), *config.job_args()]
        if fault is not None:
            cmd += ["--fault", f"{fault[0]}:{fault[1]}"]
        logs.mkdir(parents=True, exist_ok=True)
        self.out = open(logs / f"{name}.out", "w")
        env = {**os.environ, MARKER: self.tag}
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
        self.t0, self.wall0 = time.monotonic(), time.time()
        # Its own session: the job leads its process group, so a SIGKILL to it reaches driver and JVM.
        self.p = subprocess.Popen(cmd, stdout=self.out, stderr=subprocess.STDOUT, start_new_session=True,
                                  cwd=str(REPO), env=env)

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def finish(self) -> dict:
        self.p.wait()
        run_s = round(self.elapsed(), 2)
        info = wait_gone(self.p, self.tag)
        self.out.close()
        return {"rc": self.p.returncode, "run_s": run_s, **info}


# -- the matrix ----------------------------------------------------------------------------------
def reference_run(args, config: Config, bootstrap, topic, prefix, work: Path, logs: Path) -> dict:
    job = Job(args, config, bootstrap, topic, prefix, work, logs, "reference")
    seen: dict[int, float] = {}
    while job.p.poll() is None:
        for b in committed(work):
            seen.setdefault(b, job.elapsed())
        if job.elapsed() > RUN_TIMEOUT:
            kill_all(job.p.pid, job.tag)
        time.sleep(0.05)
    for b in committed(work):
        seen.setdefault(b, job.elapsed())
    info = job.finish()
    if info["rc"] != 0:
        raise SystemExit(f"the reference run failed (rc {info['rc']}); log: {logs / 'reference.out'}")
    per_batch_records = {n: batch_counts(bootstrap, f"{prefix}-{n}") for n in crash_job.OUTPUTS}
    ids = sorted(seen)
    first, last = seen[ids[0]], seen[ids[-1]]
    per_batch = (last - first) / max(len(ids) - 1, 1)
    return {**info, "batches": len(ids), "commit_times": [round(seen[b], 2) for b in ids],
            "kafka_per_batch": per_batch_records,
            "startup_s": round(max(first - per_batch, 1.0), 2), "per_batch_s": round(per_batch, 3)}


def plan(rng: random.Random, kills: int) -> list[str]:
    """The kinds of kill, in a random order: every hook point once, then timer and hook kills about evenly."""
    kinds = list(HOOK_POINTS)
    while len(kinds) < kills:
        kinds.append("timer" if rng.random() < 0.6 else rng.choice(HOOK_POINTS))
    rng.shuffle(kinds)
    return kinds


def hook_batch(rng: random.Random, point: str, m: dict, n_batches: int, snapshot_every: int) -> int | None:
    """A batch at which ``point`` fires in the next run (snapshots every ``snapshot_every``), or None."""
    held = m["batch_id"]
    if point == "restore":
        return held if held >= 0 else None
    nxt = held + 1  # the first batch the run processes (Spark may replay ``held`` first; it is skipped)
    if nxt >= n_batches:
        return None
    if point == "in_snapshot":
        first = held + max(snapshot_every - m["batches_since_snapshot"], 1)
        options = list(range(first, min(first + 2 * snapshot_every, n_batches), snapshot_every))
        return rng.choice(options) if options else None
    return rng.randrange(nxt, min(nxt + 2, n_batches))


def chain(args, config: Config, rng, ref: dict, bootstrap, topic, prefix, work: Path,
          logs: Path) -> tuple[list[dict], dict]:
    n_batches = ref["batches"]
    startup, per_batch = ref["startup_s"], ref["per_batch_s"]
    startups = [startup]  # updated from every chain run that gets a batch into the state
    kinds = plan(rng, args.kills)
    records: list[dict] = []
    i = 0
    while len(records) < args.kills:
        m, spark = manifest(work), spark_last(work)
        left = n_batches - (m["batch_id"] + 1)  # batches not yet in the state
        kind = kinds[i % len(kinds)] if i < len(kinds) else rng.choice(["timer", *HOOK_POINTS])
        i += 1
        kills_left = args.kills - len(records)
        scarce = left <= kills_left // 2  # few batches left for the kills to come: kill without progress
        fault = None
        snapshot_every = rng.choice(SNAPSHOT_CHOICES)
        if kind != "timer":
            if scarce and kind not in ("restore",):
                kind = "restore" if m["batch_id"] >= 0 else "timer"
        if kind != "timer":
            b = hook_batch(rng, kind, m, n_batches, snapshot_every)
            if b is None:
                kind = "timer"
            else:
                fault = (kind, b)
        anchor = "launch"
        if kind == "timer":
            if scarce or rng.random() < 0.3:  # Spark's start-up, or ddflow's restore, or the replayed batch
                delay = rng.uniform(0.2, 1.1) * startup
            else:  # once the run's first new batch is in the state: the next batches, mid-batch, in a
                # sink's write, in the state commit, before Spark's commit (independent of the start-up)
                if rng.random() < 0.5:
                    anchor = "first_new_batch"
                    delay = rng.uniform(0.0, 1.5) * per_batch
                else:  # in the sink writes of the run's first new batch (a Kafka sink's write is next)
                    anchor = "first_output"
                    delay = rng.uniform(0.0, 0.4)
        before = {"manifest_batch": m["batch_id"], "spark_commit": spark}
        kafka_before = {n: batch_counts(bootstrap, f"{prefix}-{n}") for n in crash_job.OUTPUTS}
        name = f"run-{len(records):02d}"
        job = Job(args, config, bootstrap, topic, prefix, work, logs, name, fault, snapshot_every)
        if fault is None:
            progress, outside = watch(job, work, m["batch_id"], delay, anchor)
        else:
            progress, outside = watch(job, work, m["batch_id"], RUN_TIMEOUT)
        if job.p.poll() is None:
            outside = max(outside, sum(g != job.p.pid for _, g in marked(job.tag).values()))
            kill_all(job.p.pid, job.tag)
        info = job.finish()
        if progress is not None:  # the start-up this run took (to its first new batch in the state, less one batch)
            startups.append(max(progress - per_batch, 1.0))
            startup = statistics.median(startups)
        after_m = manifest(work)
        rec = {"n": len(records), "kind": "timer" if fault is None else "hook", "snapshot_every": snapshot_every,
               **({"delay_s": round(delay, 2), "after": anchor} if fault is None else {"point": fault[0], "batch": fault[1]}),
               "before": before, "manifest_batch": after_m["batch_id"], "spark_commit": spark_last(work),
               "first_new_state_s": None if progress is None else round(progress, 2),
               "procs_outside_group": outside, **info}
        nxt = after_m["batch_id"] + 1
        rec["next_batch_outputs"] = [n for n in crash_job.OUTPUTS if _written_since(
            work / n / f"batch-{nxt:012d}.parquet", job.wall0)]  # by this run
        rec["leftover_tmp"] = leftovers(work)
        # The batch in flight at the kill: of its records, how many each Kafka sink of this run put on its topic,
        # how many the topic holds, and how many the batch has.
        rec["next_batch_kafka"] = {}
        for n in crash_job.OUTPUTS:
            if nxt < n_batches:
                total = batch_counts(bootstrap, f"{prefix}-{n}")[nxt]
                rec["next_batch_kafka"][n] = [total - kafka_before[n][nxt], total, ref["kafka_per_batch"][n][nxt]]
        rec["phase"] = phase(rec, before)
        print(f"{config.name} kill {rec['n']:2d}: snap/{snapshot_every} {rec['kind']:5s} "
              f"{('%.2fs after %s' % (delay, anchor)) if fault is None else '%s:%d' % fault:>28s}  rc={info['rc']:>4}  "
              f"run {info['run_s']:5.1f}s  manifest {before['manifest_batch']:>3} -> {rec['manifest_batch']:>3}  "
              f"spark {before['spark_commit']:>3} -> {rec['spark_commit']:>3}  {rec['phase']}", flush=True)
        if info["rc"] == 0:
            rec["completed"] = True  # the run reached the end before the kill: the job is done
            records.append(rec)
            print(f"run {name} completed before its kill: the chain stops after {len(records) - 1} kills",
                  flush=True)
            return records, {"stopped_early": True}
        if info["rc"] != -signal.SIGKILL:
            records.append(rec)
            raise ChainError(f"run {name} exited with {info['rc']} instead of being killed; log: "
                             f"{logs / (name + '.out')}", records)
        records.append(rec)
    job = Job(args, config, bootstrap, topic, prefix, work, logs, "final", snapshot_every=rng.choice(SNAPSHOT_CHOICES))
    try:
        job.p.wait(RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        kill_all(job.p.pid, job.tag)
    info = job.finish()
    if info["rc"] != 0:
        raise ChainError(f"the final run exited with {info['rc']}; log: {logs / 'final.out'}", records)
    return records, {"final": info}


def batch_counts(bootstrap: str, topic: str) -> collections.Counter:
    """batch id -> records on a KafkaSink topic."""
    from ddflow.streaming.sinks import read_topic

    return collections.Counter(int(dict(h)["batch_id"]) for _, h in read_topic(bootstrap, topic))


def _written_since(path: Path, t: float) -> bool:
    try:
        return path.stat().st_mtime >= t
    except FileNotFoundError:
        return False


def phase(rec: dict, before: dict) -> str:
    """Where the kill landed, as far as the files and topics tell."""
    kafka = rec.get("next_batch_kafka", {})
    parts = [f"{n}: {total}/{want} records on the topic" for n, (mine, total, want) in kafka.items()
             if 0 < mine and total < want]
    if parts:
        return "in a Kafka sink's write (" + ", ".join(parts) + ")"
    if rec["manifest_batch"] == rec["spark_commit"] + 1:
        return "state committed, Spark's commit not"
    if rec["next_batch_outputs"] or any(mine for mine, _, _ in kafka.values()):  # written by this run
        done = rec["next_batch_outputs"] + [f"{n}_kafka" for n, (mine, total, want) in kafka.items()
                                            if mine and total == want]
        return "in the sink writes, after " + ",".join(done)
    if rec.get("point") == "restore":
        return "restore"
    if rec["manifest_batch"] == before["manifest_batch"] and rec["first_new_state_s"] is None:
        return "before the first new batch's output (start-up, restore, replay or ddflow)"
    return "between batches or before the next batch's output"


class ChainError(Exception):
    def __init__(self, msg: str, records: list[dict]):
        super().__init__(msg)
        self.records = records


# -- comparison ----------------------------------------------------------------------------------
def kafka_partitions(bootstrap: str, topic: str) -> dict[int, list[tuple]]:
    """Each partition's records in offset order, read plainly: (key, value, batch_id, seq, offset, headers)."""
    from ddflow.streaming.sinks import _read_all

    out: dict[int, list[tuple]] = collections.defaultdict(list)
    for part, offset, key, value, headers in sorted(_read_all(bootstrap, topic), key=lambda r: r[:2]):
        h = {k: v.decode() for k, v in headers or []}
        out[part].append((key, value, int(h["batch_id"]), int(h["seq"]), offset, headers))
    return dict(out)


def compare(bootstrap, ref_work: Path, ref_prefix, work: Path, prefix, want: dict,
            n_batches: int) -> tuple[list, dict]:
    from ddflow.streaming.sinks import KafkaSink, ParquetSink, SinkError, Tail, accumulate
    from ddflow.streaming.state import StateStore

    problems: list[str] = []
    counts: dict = {"parquet_files": {}, "parquet_rows": {}, "kafka_records": {}, "kafka_records_ref": {},
                    "kafka_lost": {}, "kafka_duplicated": {}, "kafka_unauthenticated": {}}
    key = StateStore(str(work / "state")).key
    for name in crash_job.OUTPUTS:
        got, ref = parquet_batches(work, name), parquet_batches(ref_work, name)
        counts["parquet_files"][name] = len(got)
        counts["parquet_rows"][name] = sum(len(r) for r in got.values())
        if got != ref:
            diff = sorted(f for f in set(got) | set(ref) if got.get(f) != ref.get(f))
            problems.append(f"parquet {name}: {len(diff)} files differ from the reference: {diff[:10]}")
        acc = accumulate(ParquetSink(str(work / name)).table())
        if acc != want[name]:
            problems.append(f"parquet {name}: accumulated output differs from the from-scratch answer "
                            f"({len(acc)} records against {len(want[name])})")
        # Kafka, read plainly: no de-duplication of any kind.
        topic = f"{prefix}-{name}"
        parts, ref_parts = kafka_partitions(bootstrap, topic), kafka_partitions(bootstrap, f"{ref_prefix}-{name}")
        raw = [r for p in sorted(parts) for r in parts[p]]
        ref_raw = [r for p in sorted(ref_parts) for r in ref_parts[p]]
        counts["kafka_records"][name] = len(raw)
        counts["kafka_records_ref"][name] = len(ref_raw)
        got_ms = collections.Counter(r[:4] for r in raw)
        ref_ms = collections.Counter(r[:4] for r in ref_raw)
        missing, extra = ref_ms - got_ms, got_ms - ref_ms
        counts["kafka_lost"][name] = sum(missing.values())
        counts["kafka_duplicated"][name] = sum(c - 1 for c in got_ms.values() if c > 1)
        if missing or extra:
            problems.append(f"kafka {name}: {sum(missing.values())} records missing, {sum(extra.values())} extra; "
                            f"missing {sorted(r[2:4] for r in missing)[:10]}, extra {sorted(r[2:4] for r in extra)[:10]}")
        ids = collections.Counter(r[2:4] for r in raw)
        dups = sorted(k for k, c in ids.items() if c > 1)
        if dups:
            problems.append(f"kafka {name}: {len(dups)} (batch_id, seq) on the topic more than once: {dups[:10]}")
        if {p: [r[:4] for r in rs] for p, rs in parts.items()} != {p: [r[:4] for r in rs] for p, rs in ref_parts.items()}:
            problems.append(f"kafka {name}: the partitions do not hold the reference's records in its order")
        ref_dups = [k for k, c in collections.Counter(r[2:4] for r in ref_raw).items() if c > 1]
        if ref_dups:
            problems.append(f"kafka {name}: the reference topic itself holds duplicates: {ref_dups[:10]}")
        checker, bad = KafkaSink(bootstrap, topic, key=key), 0
        for part, rs in parts.items():
            for k, value, _, _, offset, headers in rs:
                try:
                    checker.check(Tail(part, offset, k, value, headers))
                except SinkError:
                    bad += 1
        counts["kafka_unauthenticated"][name] = bad
        if bad:
            problems.append(f"kafka {name}: {bad} records without a valid authenticator under the chain's state key")
        acc = collections.Counter()
        for _, value, *_ in raw:
            ch = json.loads(value)
            acc[tuple(ch["record"])] += ch["diff"]
        if {k: v for k, v in acc.items() if v} != want[name]:
            problems.append(f"kafka {name}: accumulated output differs from the from-scratch answer")
    got_dead, ref_dead = dead_batches(work), dead_batches(ref_work)
    counts["dead_letters"] = sum(len(r) for r in got_dead.values())
    if got_dead != ref_dead:
        problems.append(f"dead letters differ: {sorted(got_dead)} against the reference's {sorted(ref_dead)}")
    commits = committed(work)
    if commits != list(range(n_batches)):
        problems.append(f"Spark committed {commits[:3]}..{commits[-3:]} ({len(commits)}), expected 0..{n_batches - 1}")
    counts["batches"] = len(commits)
    return problems, counts


# -- main ----------------------------------------------------------------------------------------
def run_config(args, config: Config, bootstrap: str, base: Path) -> dict:
    """The reference and the chain of one configuration; its result line."""
    from ddflow.streaming.broker import create_topics, produce

    t0 = time.monotonic()
    rng = random.Random(f"{args.seed}-{config.name}")
    logs = base / "logs"
    run_id = uuid.uuid4().hex[:8]
    topic, ref_prefix, prefix = f"km-edges-{run_id}", f"km-ref-{run_id}", f"km-chain-{run_id}"
    result: dict = {"bench": "kill_matrix", "config": config.name, "keys": config.keys, "workers": config.workers,
                    "routed": config.route, "master": config.master,
                    "date": datetime.datetime.now().isoformat(timespec="seconds"), "seed": args.seed,
                    "kills_asked": args.kills, "max_offsets": args.max_offsets, "snapshot_every": list(SNAPSHOT_CHOICES),
                    "work": str(base)}
    msgs, window = workload(args.seed, args.steps, keys=config.keys)
    create_topics(bootstrap, [topic], partitions=1)
    produce(bootstrap, topic, [(None, m) for m in msgs])
    create_topics(bootstrap, [f"{p}-{n}" for p in (ref_prefix, prefix) for n in crash_job.OUTPUTS], partitions=2)
    n_batches = -(-len(msgs) // args.max_offsets)
    print(f"{config.name}: workload {len(msgs)} messages, {n_batches} batches of {args.max_offsets}; work {base}",
          flush=True)
    try:
        ref = reference_run(args, config, bootstrap, topic, ref_prefix, base / "reference", logs)
    except SystemExit as e:
        result.update({"equal": False, "problems": [str(e)], "total_s": round(time.monotonic() - t0, 1)})
        return result
    print(f"{config.name} reference: {ref['run_s']:.1f}s, {ref['batches']} batches, start-up ~{ref['startup_s']:.1f}s, "
          f"{ref['per_batch_s']:.2f}s per batch", flush=True)
    result["reference"] = {k: ref[k] for k in ("run_s", "batches", "startup_s", "per_batch_s")}
    if ref["batches"] != n_batches:
        result.update({"equal": False, "problems": [f"the reference ran {ref['batches']} batches, expected {n_batches}"],
                       "total_s": round(time.monotonic() - t0, 1)})
        return result
    try:
        records, end = chain(args, config, rng, ref, bootstrap, topic, prefix, base / "chain", logs)
        chain_error = None
    except ChainError as e:
        records, end, chain_error = e.records, {}, str(e)
    kills = [r for r in records if r["rc"] == -signal.SIGKILL]
    kinds = collections.Counter("timer" if r["kind"] == "timer" else r["point"] for r in kills)
    result.update({"kills": len(kills), "kinds": dict(sorted(kinds.items())), "records": records, **end})
    if chain_error:
        problems, counts = [chain_error], {}
    else:
        problems, counts = compare(bootstrap, base / "reference", ref_prefix, base / "chain", prefix,
                                   expected(window, config.keys), n_batches)
    counts["messages"] = len(msgs)
    if len(kills) < args.kills:
        print(f"{config.name}: only {len(kills)} of {args.kills} kills happened (the job reached its end)", flush=True)
    result.update({"equal": not problems, "problems": problems, "counts": counts,
                   "total_s": round(time.monotonic() - t0, 1)})
    return result


def table(results: list[dict]) -> str:
    """The matrix as a Markdown table (what bench/README shows)."""
    lines = ["| configuration | kills | timer | at hook points | batches | Kafka records (reach, degree) | lost | "
             "duplicated | unauthenticated | Parquet files | dead letters | minutes | outputs |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        c = r.get("counts", {})
        kinds = dict(r.get("kinds", {}))
        timer = kinds.pop("timer", 0)
        hooks = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
        kafka, files = c.get("kafka_records", {}), c.get("parquet_files", {})
        lines.append(
            f"| {r['config']} | {r.get('kills', 0)} | {timer} | {hooks} | {c.get('batches', '-')} | "
            f"{kafka.get('reach', '-')}, {kafka.get('degree', '-')} | {sum(c.get('kafka_lost', {}).values())} | "
            f"{sum(c.get('kafka_duplicated', {}).values())} | {sum(c.get('kafka_unauthenticated', {}).values())} | "
            f"{files.get('reach', '-')}, {files.get('degree', '-')} | {c.get('dead_letters', '-')} | "
            f"{r['total_s'] / 60:.0f} | {'equal' if r.get('equal') else 'DIFFER'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.kill_matrix", description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", default=DEFAULT_CONFIGS,
                    help=f"comma-separated, of {', '.join(CONFIGS)} (default {DEFAULT_CONFIGS})")
    ap.add_argument("--kills", type=int, default=30, help="SIGKILLs of the job per configuration before the run to the end")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=200, help="sliding-window steps of the workload (2 messages each)")
    ap.add_argument("--max-offsets", type=int, default=10, help="maxOffsetsPerTrigger (messages per batch)")
    ap.add_argument("--bootstrap", default=None, help="an external Kafka (default: an embedded broker)")
    ap.add_argument("--work", default=None, help="directory for the runs (default: a new one under /tmp)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory after a passing run")
    ap.add_argument("--json", default=None, help="append each configuration's result line to this file")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.configs.split(",") if n.strip()]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        ap.error(f"unknown configurations {unknown}; known: {', '.join(CONFIGS)}")

    from ddflow.streaming.broker import EmbeddedBroker

    t_start = time.monotonic()
    base = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix=f"kill_matrix-s{args.seed}-"))
    base.mkdir(parents=True, exist_ok=True)
    broker = None
    if args.bootstrap:
        bootstrap = args.bootstrap
    else:
        broker = EmbeddedBroker().start()
        bootstrap = broker.bootstrap
    results = []
    try:
        for name in names:
            result = run_config(args, CONFIGS[name], bootstrap, base / name)
            results.append(result)
            print(f"\n{name}: {result.get('kills', 0)} kills {result.get('kinds', {})} in {result['total_s']:.0f}s; "
                  f"outputs {'EQUAL the uninterrupted run' if result['equal'] else 'DIFFER'}", flush=True)
            for p in result.get("problems", []):
                print("  -", p, flush=True)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps(result) + "\n")
    finally:
        if broker is not None:
            broker.stop()
    equal = all(r["equal"] for r in results)
    print(f"\nkill matrix, seed {args.seed}, {args.kills} kills per configuration, "
          f"{(time.monotonic() - t_start) / 60:.0f} minutes:\n{table(results)}")
    if equal and not args.keep and not args.work:
        shutil.rmtree(base, ignore_errors=True)
    elif not equal:
        print(f"artefacts kept in {base}")
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(main())
