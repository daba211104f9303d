"""Exactly-once state for a streaming dataflow: an input log with a manifest per batch id.

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

This replaces the design sketch of persisting trace batches: persisting
inputs costs one small file per micro-batch and needs no format for
operator-internal state (reduce's pending times, loop variables), at the
price of recomputation on restart.
"""
from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

MANIFEST = "manifest.json"
#: First line of every log file; each Arrow IPC stream after it is prefixed by its length.
LOG_FORMAT = "ddflow-input-log-1"


@dataclass
class Manifest:
    """What is durable: the last committed batch id, its frontier, and the live log files."""

    batch_id: int = -1
    frontier: int = 0
    files: list[str] = field(default_factory=list)  # log files in order, snapshot first
    batches_since_snapshot: int = 0


class StateStore:
    """The input log of one streaming dataflow under ``path``."""

    def __init__(self, path: str, snapshot_every: int = 50):
        self.path = path
        self.snapshot_every = snapshot_every
        os.makedirs(path, exist_ok=True)
        self.manifest = self._load()

    def _load(self) -> Manifest:
        p = os.path.join(self.path, MANIFEST)
        if not os.path.exists(p):
            return Manifest()
        with open(p) as f:
            return Manifest(**json.load(f))

    def _write_manifest(self, m: Manifest) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.path, prefix=".manifest-")
        with os.fdopen(fd, "w") as f:
            json.dump(m.__dict__, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(self.path, MANIFEST))
        self.manifest = m

    @staticmethod
    def _write_table(path: str, tables: dict[str, pa.Table]) -> None:
        """One IPC file per batch: each input's updates, tagged with the input name."""
        parts = []
        for name, t in tables.items():
            if t.num_rows:
                parts.append(t.append_column("__input", pa.array([name] * t.num_rows, pa.string())))
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".log-")
        os.close(fd)
        with open(tmp, "wb") as f:
            f.write(json.dumps({"format": LOG_FORMAT, "inputs": sorted(tables)}).encode() + b"\n")
            for t in parts:
                sink = pa.BufferOutputStream()
                with pa.ipc.new_stream(sink, t.schema) as w:
                    w.write_table(t)
                buf = sink.getvalue()
                f.write(len(buf).to_bytes(8, "little"))
                f.write(buf.to_pybytes())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    @staticmethod
    def read_file(path: str) -> dict[str, pa.Table]:
        """One log or snapshot file's updates, per input."""
        out: dict[str, list[pa.Table]] = {}
        with open(path, "rb") as f:
            header = json.loads(f.readline())
            if header.get("format") != LOG_FORMAT:
                raise ValueError(f"{path}: not a ddflow input log (header {header!r})")
            while True:
                n = f.read(8)
                if not n:
                    break
                buf = f.read(int.from_bytes(n, "little"))
                t = pa.ipc.open_stream(pa.py_buffer(buf)).read_all()
                name = t.column("__input")[0].as_py()
                out.setdefault(name, []).append(t.drop_columns(["__input"]))
        return {k: pa.concat_tables(v) for k, v in out.items()}

    def read_all(self) -> dict[str, pa.Table]:
        """Every logged input update, per input, in log order."""
        out: dict[str, list[pa.Table]] = {}
        for fn in self.manifest.files:
            for name, t in self.read_file(os.path.join(self.path, fn)).items():
                out.setdefault(name, []).append(t)
        return {k: pa.concat_tables(v, promote_options="default") for k, v in out.items()}

    def commit(self, batch_id: int, frontier: int, tables: dict[str, pa.Table]) -> None:
        """Persist one batch's input and move the manifest to ``batch_id`` atomically."""
        m = self.manifest
        fn = f"log-{batch_id:012d}.arrow"
        self._write_table(os.path.join(self.path, fn), tables)
        files = [f for f in m.files if f != fn] + [fn]
        nm = Manifest(batch_id, frontier, files, m.batches_since_snapshot + 1)
        if nm.batches_since_snapshot >= self.snapshot_every:
            nm = self._snapshot(nm)
        self._write_manifest(nm)
        self._collect_garbage()

    def _snapshot(self, m: Manifest) -> Manifest:
        self.manifest = m
        tables = self.read_all()
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
        self._write_table(os.path.join(self.path, fn), snap)
        return Manifest(m.batch_id, m.frontier, [fn], 0)

    def _collect_garbage(self) -> None:
        live = set(self.manifest.files) | {MANIFEST}
        for fn in os.listdir(self.path):
            if fn not in live and not fn.startswith("."):
                os.unlink(os.path.join(self.path, fn))
