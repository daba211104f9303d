"""Exactly-once state for a streaming dataflow: an input log with a checked manifest per batch id.

The dataflow is deterministic, so its state at a frontier is a function
of the input accumulated before that frontier.  After each micro-batch
the batch's input updates are written as one Arrow IPC file (only the new
file: checkpoints are incremental) and then a manifest naming the batch
id, the frontier and the live log files replaces the previous one
atomically.  Every ``snapshot_every`` batches the log is compacted into a
snapshot: all updates consolidated at ``frontier - 1`` (times before the
frontier are final, so nothing after it can tell them apart), which keeps
both the log and restart time bounded for windowed inputs.

Restoring feeds the snapshot and the log back into a fresh dataflow and
runs it to the saved frontier; the outputs of that replay were already
delivered before the crash and are discarded.

The state checks itself, because a damaged state that restores "fine"
gives silently wrong output for good.  The manifest carries a format
version, a checksum of its own fields, and for every live file its size,
SHA-256 and row count per input; :meth:`StateStore.verify` checks all of
them before anything is fed, and a manifest that is missing while state
files are present is refused too.  Every refusal is a :class:`StateError`
naming the file, what was expected and what was found, and what the
operator can do.  (Which batches Spark has committed is checked against
the manifest by the driver, :mod:`ddflow.streaming.driver`.)

This replaces the design sketch of persisting trace batches: persisting
inputs costs one small file per micro-batch and needs no format for
operator-internal state (reduce's pending times, loop variables), at the
price of recomputation on restart.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc

from ddflow.errors import DdflowError

MANIFEST = "manifest.json"
#: The manifest's format; a manifest of any other format is refused.
STATE_FORMAT = "ddflow-state-2"
#: First line of every log file; each Arrow IPC stream after it is prefixed by its length.
LOG_FORMAT = "ddflow-input-log-1"

#: What an operator can do about a damaged state, appended to every refusal.
REMEDY = ("restore this directory from a backup, or delete it together with Spark's checkpoint directory to "
          "reprocess the input from the start")


class StateError(DdflowError, RuntimeError):
    """The saved state is damaged or disagrees with Spark's checkpoint; the query refuses to start."""


@dataclass
class Manifest:
    """What is durable: the last committed batch id, its frontier, and the live log files with their checks.

    ``checks[file] = {"bytes": n, "sha256": hex, "rows": {input: n}}``.
    """

    batch_id: int = -1
    frontier: int = 0
    files: list[str] = field(default_factory=list)  # log files in order, snapshot first
    batches_since_snapshot: int = 0
    checks: dict[str, dict] = field(default_factory=dict)
    #: Whose state this is (:func:`identity`): Spark's query id, the inputs and their schemas, the dataflow's shape.
    identity: dict = field(default_factory=dict)

    def digest(self) -> str:
        """SHA-256 of the fields, in a canonical form (what the manifest's ``checksum`` holds)."""
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()


class StateStore:
    """The input log of one streaming dataflow under ``path``; opening it reads and checks the manifest."""

    def __init__(self, path: str, snapshot_every: int = 50, identity: dict | None = None):
        self.path = path
        self.snapshot_every = snapshot_every
        #: Test hook (crash tests only): called as ``fault("in_snapshot", batch_id)`` once the manifest names
        #: a new snapshot and before the files it replaces are deleted.
        self.fault: Callable[[str, int], None] | None = None
        self.identity = identity or {}
        try:
            os.makedirs(path, exist_ok=True)
            fd, probe = tempfile.mkstemp(dir=path, prefix=".writable-")
            os.close(fd)
            os.unlink(probe)
        except OSError as e:
            raise StateError(f"ddflow state {path}: cannot write there ({type(e).__name__}: {e.strerror or e}); "
                             "give the query a writable stateLocation (or fix the directory's permissions)") from None
        self.manifest = self._load()
        self._check_identity()

    def _check_identity(self) -> None:
        """Refuse the state of another query: a different Spark query id, inputs, schemas or dataflow."""
        held, mine = self.manifest.identity, self.identity
        if self.manifest.batch_id < 0 or not held or not mine:
            return
        for key, what in (("query_id", "Spark query id (the checkpoint's metadata)"),
                          ("inputs", "inputs and their schemas"), ("dataflow", "dataflow (its operators)")):
            if key in held and key in mine and held[key] != mine[key]:
                def show(v):
                    text = json.dumps(v, sort_keys=True, default=str)
                    return text if len(text) <= 200 else text[:197] + "..."
                raise self._refuse(MANIFEST, f"belongs to another query: its {what} is {show(held[key])}, this "
                                             f"query's is {show(mine[key])}")

    def _refuse(self, name: str, problem: str) -> StateError:
        return StateError(f"ddflow state {os.path.join(self.path, name)}: {problem}; {REMEDY}")

    def _load(self) -> Manifest:
        p = os.path.join(self.path, MANIFEST)
        if not os.path.exists(p):
            state = sorted(f for f in os.listdir(self.path) if not f.startswith("."))
            # The only state a crash can leave without a manifest: the first batch's log, written just before it.
            if state and state != ["log-000000000000.arrow"]:
                raise self._refuse(MANIFEST, f"missing, but the directory holds {len(state)} state files "
                                             f"({', '.join(state[:3])}{', ...' if len(state) > 3 else ''})")
            return Manifest()
        try:
            with open(p, "rb") as f:
                raw = json.loads(f.read())
            fmt, checksum = raw.pop("format", None), raw.pop("checksum", None)
            if fmt != STATE_FORMAT:
                raise self._refuse(MANIFEST, f"format {fmt!r}, expected {STATE_FORMAT!r} (written by another "
                                             "version of ddflow, or not a ddflow manifest)")
            m = Manifest(**raw)
        except StateError:
            raise
        except (ValueError, TypeError, AttributeError) as e:
            raise self._refuse(MANIFEST, f"unreadable ({type(e).__name__}: {e})") from None
        if m.digest() != checksum:
            raise self._refuse(MANIFEST, f"checksum {checksum!r} does not match its contents ({m.digest()!r}): "
                                         "it was edited or damaged")
        return m

    def _write_manifest(self, m: Manifest) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.path, prefix=".manifest-")
        with os.fdopen(fd, "w") as f:
            json.dump({"format": STATE_FORMAT, **asdict(m), "checksum": m.digest()}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(self.path, MANIFEST))
        self.manifest = m

    @staticmethod
    def write_table(path: str, tables: dict[str, pa.Table]) -> dict:
        """One IPC file per batch (or per partition of a batch, written by an executor): each input's updates,
        tagged with the input name.  Written to a temporary name and renamed.  Returns its checks."""
        parts = []
        for name, t in tables.items():
            if t.num_rows:
                parts.append(t.append_column("__input", pa.array([name] * t.num_rows, pa.string())))
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".log-")
        os.close(fd)
        h = hashlib.sha256()
        size = 0
        with open(tmp, "wb") as f:
            def put(data: bytes) -> None:
                nonlocal size
                f.write(data)
                h.update(data)
                size += len(data)

            put(json.dumps({"format": LOG_FORMAT, "inputs": sorted(tables)}).encode() + b"\n")
            for t in parts:
                sink = pa.BufferOutputStream()
                with pa.ipc.new_stream(sink, t.schema) as w:
                    w.write_table(t)
                buf = sink.getvalue().to_pybytes()
                put(len(buf).to_bytes(8, "little"))
                put(buf)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        return {"bytes": size, "sha256": h.hexdigest(),
                "rows": {n: t.num_rows for n, t in tables.items() if t.num_rows}}

    @staticmethod
    def read_file(path: str) -> dict[str, pa.Table]:
        """One log or snapshot file's updates, per input (no checks: :meth:`verify` makes them)."""
        out: dict[str, list[pa.Table]] = {}
        with open(path, "rb") as f:
            header = json.loads(f.readline())
            if not isinstance(header, dict) or header.get("format") != LOG_FORMAT:
                raise ValueError(f"{path}: not a ddflow input log (header {header!r})")
            while True:
                n = f.read(8)
                if not n:
                    break
                if len(n) < 8:
                    raise ValueError(f"{path}: cut inside a length prefix")
                size = int.from_bytes(n, "little")
                buf = f.read(size)
                if len(buf) != size:
                    raise ValueError(f"{path}: cut inside a record batch ({len(buf)} of {size} bytes)")
                t = pa.ipc.open_stream(pa.py_buffer(buf)).read_all()
                name = t.column("__input")[0].as_py()
                out.setdefault(name, []).append(t.drop_columns(["__input"]))
        return {k: pa.concat_tables(v) for k, v in out.items()}

    def _read_checked(self, fn: str) -> dict[str, pa.Table]:
        """One live file, refused unless its size, checksum and row counts are those the manifest recorded."""
        want = self.manifest.checks.get(fn)
        if want is None:
            raise self._refuse(MANIFEST, f"lists {fn} without its checks")
        p = os.path.join(self.path, fn)
        try:
            with open(p, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise self._refuse(fn, f"missing (the manifest of batch {self.manifest.batch_id} lists it)") from None
        if len(data) != want["bytes"]:
            raise self._refuse(fn, f"{len(data)} bytes, expected {want['bytes']} (truncated or overwritten)")
        digest = hashlib.sha256(data).hexdigest()
        if digest != want["sha256"]:
            raise self._refuse(fn, f"SHA-256 {digest}, expected {want['sha256']} (damaged)")
        try:
            tables = self.read_file(p)
        except (ValueError, OSError, pa.ArrowException) as e:
            raise self._refuse(fn, f"unreadable ({type(e).__name__}: {e})") from None
        rows = {n: t.num_rows for n, t in tables.items()}
        if rows != want["rows"]:
            raise self._refuse(fn, f"rows per input {rows}, expected {want['rows']}")
        return tables

    def verify(self) -> dict[str, pa.Table]:
        """Check every live file against the manifest and return all logged updates, per input, in log order.

        O(bytes of state).  Raises :class:`StateError` naming the first file that fails.
        """
        out: dict[str, list[pa.Table]] = {}
        for fn in self.manifest.files:
            for name, t in self._read_checked(fn).items():
                out.setdefault(name, []).append(t)
        return {k: pa.concat_tables(v, promote_options="default") for k, v in out.items()}


    def commit(self, batch_id: int, frontier: int, tables: dict[str, pa.Table],
               written: dict[str, dict] | None = None) -> None:
        """Persist one batch's input and move the manifest to ``batch_id`` atomically.

        ``written``: log files of this batch that executors already wrote
        into the directory (name -> checks, :meth:`write_table`'s), named in
        the manifest beside (or instead of) ``tables``.
        """
        m = self.manifest
        new = dict(written or {})
        if tables or not new:
            fn = f"log-{batch_id:012d}.arrow"
            new[fn] = self.write_table(os.path.join(self.path, fn), tables)
        files = [f for f in m.files if f not in new] + sorted(new)
        nm = Manifest(batch_id, frontier, files, m.batches_since_snapshot + 1,
                      {**{f: m.checks[f] for f in files if f in m.checks}, **new}, self.identity or m.identity)
        snapshot = nm.batches_since_snapshot >= self.snapshot_every
        if snapshot:
            nm = self._snapshot(nm)
        self._write_manifest(nm)
        if snapshot and self.fault is not None:
            self.fault("in_snapshot", batch_id)
        self._collect_garbage()

    def _snapshot(self, m: Manifest) -> Manifest:
        self.manifest = m
        tables = self.verify()
        snap = {}
        for name, t in tables.items():
            keys = [c for c in t.column_names if c not in ("time", "diff")]
            # Only times before the frontier are final; later ones (a batch's largest time under the
            # before-max policy) have not produced output yet and are kept as they are.
            final = pc.less(t.column("time"), m.frontier)
            done, pending = t.filter(final), t.filter(pc.invert(final))
            g = done.group_by(keys, use_threads=False).aggregate([("diff", "sum")]).rename_columns(keys + ["diff"])
            g = g.filter(pc.not_equal(g.column("diff"), 0))
            g = g.append_column("time", pa.array([max(m.frontier - 1, 0)] * g.num_rows, pa.int64()))
            snap[name] = pa.concat_tables([g.select(keys + ["time", "diff"]), pending.select(keys + ["time", "diff"])],
                                          promote_options="default")
        fn = f"snapshot-{m.batch_id:012d}.arrow"
        check = self.write_table(os.path.join(self.path, fn), snap)
        return Manifest(m.batch_id, m.frontier, [fn], 0, {fn: check}, m.identity)

    def _collect_garbage(self) -> None:
        live = set(self.manifest.files) | {MANIFEST}
        for fn in os.listdir(self.path):
            if fn not in live and not fn.startswith("."):
                os.unlink(os.path.join(self.path, fn))


def spark_last_commit(checkpoint: str) -> int:
    """The largest batch id in Spark's commit log under ``checkpoint`` (``commits/<id>``), or -1 for none."""
    d = os.path.join(checkpoint, "commits")
    if not os.path.isdir(d):
        return -1
    return max((int(f) for f in os.listdir(d) if f.isdigit()), default=-1)


def check_spark_commits(checkpoint: str, state: str, batch_id: int) -> None:
    """Refuse a state that disagrees with Spark's commit log by more than the one batch in flight.

    With Spark's last commit ``S`` and the manifest's batch ``D``, only
    ``D == S`` (Spark's next batch is new) and ``D == S + 1`` (the state
    holds the batch Spark had not committed; Spark replays it and it is
    skipped) are consistent.
    """
    spark = spark_last_commit(checkpoint)
    if spark <= batch_id <= spark + 1:
        return
    if batch_id < spark:
        held = "no batch" if batch_id < 0 else f"batches up to {batch_id}"
        raise StateError(f"ddflow state {os.path.join(state, MANIFEST)}: holds {held}, but Spark's checkpoint "
                         f"{checkpoint} has committed batches up to {spark}; its output for batches "
                         f"{batch_id + 1}..{spark} would be lost; {REMEDY}")
    raise StateError(f"ddflow state {os.path.join(state, MANIFEST)}: holds batches up to {batch_id}, but Spark's "
                     f"checkpoint {checkpoint} has committed only up to {spark} (the state belongs to another "
                     f"query, or the checkpoint was reset); {REMEDY}")


def check_first_batch(batch_id: int, held: int, state: str) -> None:
    """Refuse the first micro-batch after a (re)start unless it is the one after the state, or its replay.

    Spark sends its last commit plus one; by :func:`check_spark_commits`
    that is ``held`` or ``held + 1``.  Anything else means the two
    checkpoints disagree (for example Spark's was kept and ddflow's manifest
    deleted), and going on would give silently wrong output.
    """
    if held <= batch_id <= held + 1:
        return
    raise StateError(f"ddflow state {os.path.join(state, MANIFEST)}: holds batches up to {held}, but Spark's first "
                     f"micro-batch after the restart is {batch_id} (expected {held} or {held + 1}): the state and "
                     f"Spark's checkpoint disagree; {REMEDY}")


def refuse_negative(tables: dict[str, pa.Table], state: str) -> None:
    """Refuse logged input whose accumulation has a negative multiplicity (fed to a loop, it may never converge).

    Only a damaged or foreign log gives one: :meth:`StateStore.verify`
    catches damage of the files, this catches what passed it.  O(rows).
    """
    for name, t in tables.items():
        keys = [c for c in t.column_names if c not in ("time", "diff")]
        g = t.group_by(keys, use_threads=False).aggregate([("diff", "sum")])
        neg = g.filter(pc.less(g.column("diff_sum"), 0))
        if neg.num_rows:
            row = neg.slice(0, 1).to_pylist()[0]
            raise StateError(f"ddflow state {state}: the logged updates of input {name!r} accumulate "
                             f"{neg.num_rows} records to a negative multiplicity (first: "
                             f"{ {k: row[k] for k in keys} } at {row['diff_sum']}), which a loop cannot take; "
                             f"{REMEDY}")


def spark_query_id(checkpoint: str | None) -> str | None:
    """The id Spark gave the streaming query, from its checkpoint's ``metadata`` file (None if there is none yet)."""
    if checkpoint is None:
        return None
    try:
        with open(os.path.join(checkpoint, "metadata")) as f:
            return json.loads(f.readline()).get("id")
    except (OSError, ValueError, AttributeError):
        return None
