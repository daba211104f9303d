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

The state key.  The manifest's checksum is an HMAC-SHA256 under a secret
of the query's own, and the same secret (:attr:`StateStore.key`) signs the
records a :class:`~ddflow.streaming.sinks.KafkaSink` writes, so the sink
can tell its own records from anyone else's when it resumes.  The key is
either

* the file ``state.key`` in the state directory (32 random bytes, made
  when the state is first opened, 0600).  It protects against a manifest
  edited or "repaired" by anything that cannot read the key (a tool that
  recomputes a plain SHA-256, a manifest copied in from another query's
  state, a copy of the state edited elsewhere), and against records forged
  on an output topic by anyone who can write the topic but not read the
  state directory.  It does not protect against someone who can read the
  directory: they hold the key; or
* given by the user, in ``DDFLOW_STATE_KEY`` (at least 16 bytes of text,
  e.g. ``secrets.token_hex(32)``) or ``StateStore(..., key=...)``, kept
  away from the state.  Then someone who can read and write the state
  directory (a shared filesystem the executors write, a backup bucket)
  still cannot forge a manifest or a sink record the query would accept.

Neither encrypts anything: the logs are readable by whoever can read the
directory, which is made 0700 (its files 0600) whatever the umask.

A state of the previous format (``ddflow-state-2``, an unkeyed SHA-256) is
refused, not read: accepting it on its own would let anyone who can write
the manifest bypass the key by writing the old format.  The operator
upgrades it once, deliberately, with ``python -m ddflow.streaming.state
upgrade DIR`` (:func:`upgrade`), which checks it as the old version would
and rewrites the manifest under the key.

This replaces the design sketch of persisting trace batches: persisting
inputs costs one small file per micro-batch and needs no format for
operator-internal state (reduce's pending times, loop variables), at the
price of recomputation on restart.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc

from ddflow.errors import DdflowError

MANIFEST = "manifest.json"
#: The log files of batch 0, the only ones a crash before the first manifest leaves (driver's, or routed partitions').
_FIRST_LOG = re.compile(r"log-000000000000(-p\d+)?\.arrow")
#: The manifest's format; a manifest of any other format is refused.
STATE_FORMAT = "ddflow-state-3"
#: The format before the keyed checksum: refused, or upgraded once by :func:`upgrade`.
PREVIOUS_FORMAT = "ddflow-state-2"
#: The state key's file in the state directory (when no key is given).
KEY_FILE = "state.key"
#: The environment variable that gives the state key instead of the file.
KEY_ENV = "DDFLOW_STATE_KEY"
KEY_BYTES = 32
MIN_GIVEN_KEY = 16
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

    def digest(self, key: bytes) -> str:
        """HMAC-SHA256 under the state key of the fields, in a canonical form (the manifest's ``checksum``)."""
        return hmac.new(key, self._canonical(), hashlib.sha256).hexdigest()

    def plain_digest(self) -> str:
        """The unkeyed SHA-256 of the previous format (read only by :func:`upgrade`)."""
        return hashlib.sha256(self._canonical()).hexdigest()

    def _canonical(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()


class StateStore:
    """The input log of one streaming dataflow under ``path``; opening it reads and checks the manifest.

    ``key``: the state key (bytes or text, at least 16 bytes), else
    ``DDFLOW_STATE_KEY``, else the directory's ``state.key`` (made on first
    open).  ``upgrade=True`` accepts a manifest of the previous format once
    (see :func:`upgrade`).
    """

    def __init__(self, path: str, snapshot_every: int = 50, identity: dict | None = None,
                 key: bytes | str | None = None, upgrade: bool = False):
        self.path = path
        self.snapshot_every = snapshot_every
        #: Test hook (crash tests only): called as ``fault("in_snapshot", batch_id)`` once the manifest names
        #: a new snapshot and before the files it replaces are deleted.
        self.fault: Callable[[str, int], None] | None = None
        self.identity = identity or {}
        try:
            _private_dir(path)
            fd, probe = tempfile.mkstemp(dir=path, prefix=".writable-")
            os.close(fd)
            os.unlink(probe)
        except OSError as e:
            raise StateError(f"ddflow state {path}: cannot write there ({type(e).__name__}: {e.strerror or e}); "
                             "give the query a writable stateLocation (or fix the directory's permissions)") from None
        #: The state key: signs the manifest, and (through ``bind``) the records of the query's Kafka sinks.
        self.key, self.key_source = self._load_key(key, create=upgrade)
        self.manifest = self._load(upgrade)
        self._check_identity()

    def _load_key(self, given: bytes | str | None, create: bool = False) -> tuple[bytes, str]:
        """The state key and where it came from (for messages): the argument, the environment, or the key file."""
        source = "the key given to StateStore"
        if given is None and os.environ.get(KEY_ENV):
            given, source = os.environ[KEY_ENV], f"${KEY_ENV}"
        if given is not None:
            key = given.encode() if isinstance(given, str) else bytes(given)
            if len(key) < MIN_GIVEN_KEY:
                raise StateError(f"ddflow state {self.path}: {source} has {len(key)} bytes; a state key needs at "
                                 f"least {MIN_GIVEN_KEY} (e.g. python -c 'import secrets; "
                                 "print(secrets.token_hex(32))')")
            return key, source
        p = os.path.join(self.path, KEY_FILE)
        try:
            with open(p, "rb") as f:
                key = f.read()
        except FileNotFoundError:
            if os.path.exists(os.path.join(self.path, MANIFEST)) and not create:
                if self._manifest_format() == PREVIOUS_FORMAT:  # it never had a key: say how to upgrade it
                    raise self._upgrade_refusal()
                raise self._refuse(KEY_FILE, f"missing, but {MANIFEST} is there: the key that signs it was "
                                             f"deleted, or the state was written with a key given in ${KEY_ENV} "
                                             "(set it again)") from None
            key = secrets.token_bytes(KEY_BYTES)
            _write_private(p, key)
            return key, p
        if len(key) != KEY_BYTES:
            raise self._refuse(KEY_FILE, f"{len(key)} bytes, expected {KEY_BYTES} (damaged or not a ddflow key)")
        _tighten(p, 0o600)
        return key, p

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

    def _manifest_format(self) -> object:
        try:
            with open(os.path.join(self.path, MANIFEST), "rb") as f:
                return json.loads(f.read()).get("format")
        except (OSError, ValueError, AttributeError):
            return None

    def _upgrade_refusal(self) -> StateError:
        return self._refuse(MANIFEST, f"format {PREVIOUS_FORMAT!r}, written by an earlier ddflow with an unkeyed "
                                      f"checksum; upgrade it once with `python -m ddflow.streaming.state upgrade "
                                      f"{self.path}` (it checks the state and signs the manifest with the state key)")

    def _load(self, upgrade: bool = False) -> Manifest:
        p = os.path.join(self.path, MANIFEST)
        if not os.path.exists(p):
            state = sorted(f for f in os.listdir(self.path) if not f.startswith(".") and f != KEY_FILE)
            # The only state a crash can leave without a manifest: the first batch's log, written just before it
            # (by the driver, or one file per partition by the executors that routed it).
            if any(not _FIRST_LOG.fullmatch(f) for f in state):
                raise self._refuse(MANIFEST, f"missing, but the directory holds {len(state)} state files "
                                             f"({', '.join(state[:3])}{', ...' if len(state) > 3 else ''})")
            return Manifest()
        old = False
        try:
            with open(p, "rb") as f:
                raw = json.loads(f.read())
            fmt, checksum = raw.pop("format", None), raw.pop("checksum", None)
            if fmt == PREVIOUS_FORMAT and upgrade:
                old = True
            elif fmt == PREVIOUS_FORMAT:
                raise self._upgrade_refusal()
            elif fmt != STATE_FORMAT:
                raise self._refuse(MANIFEST, f"format {fmt!r}, expected {STATE_FORMAT!r} (written by another "
                                             "version of ddflow, or not a ddflow manifest)")
            m = Manifest(**raw)
        except StateError:
            raise
        except (ValueError, TypeError, AttributeError) as e:
            raise self._refuse(MANIFEST, f"unreadable ({type(e).__name__}: {e})") from None
        if old:
            if m.plain_digest() != checksum:
                raise self._refuse(MANIFEST, f"checksum {checksum!r} does not match its contents "
                                             f"({m.plain_digest()!r}): it was edited or damaged")
            self.manifest = m
            self.verify()  # every file as the earlier version would have checked it, before the key vouches for it
            self._write_manifest(m)
            return m
        if not hmac.compare_digest(m.digest(self.key), str(checksum)):
            raise self._refuse(MANIFEST, f"checksum {checksum!r} does not match its contents under the state key "
                                         f"({self.key_source}): it was edited or damaged, or it is signed with "
                                         "another key")
        return m

    def _write_manifest(self, m: Manifest) -> None:
        text = json.dumps({"format": STATE_FORMAT, **asdict(m), "checksum": m.digest(self.key)}).encode()
        _atomic_private(os.path.join(self.path, MANIFEST), ".manifest-", lambda f: f.write(text))
        self.manifest = m

    @staticmethod
    def write_table(path: str, tables: dict[str, pa.Table]) -> dict:
        """One IPC file per batch (or per partition of a batch, written by an executor): each input's updates,
        tagged with the input name.  Written to a temporary name (0600) and renamed; on any error (a full
        disk) the temporary file is removed.  Returns its checks."""
        parts = []
        for name, t in tables.items():
            if t.num_rows:
                parts.append(t.append_column("__input", pa.array([name] * t.num_rows, pa.string())))
        h = hashlib.sha256()
        size = 0

        def write(f) -> None:
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

        _atomic_private(path, ".log-", write)
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
        held, self.manifest = self.manifest, m
        try:
            tables = self.verify()
        finally:
            self.manifest = held  # the manifest moves on only when the new one is written
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
        live = set(self.manifest.files) | {MANIFEST, KEY_FILE}
        for fn in os.listdir(self.path):
            if fn not in live and not fn.startswith("."):
                os.unlink(os.path.join(self.path, fn))


def upgrade(path: str, key: bytes | str | None = None) -> Manifest:
    """Upgrade a state of the previous format (unkeyed checksum) in place, once; a current state is left as it is.

    Checks the old manifest's checksum and every live file as the earlier
    version did, makes the state key (``state.key``, unless ``key`` or
    ``DDFLOW_STATE_KEY`` gives one) and rewrites the manifest signed with it.
    Cost: one read of the whole state.  From a shell::

        python -m ddflow.streaming.state upgrade /data/reach-state
    """
    return StateStore(path, key=key, upgrade=True).manifest


def _private_dir(path: str) -> None:
    """Make ``path`` (and its parents) and leave it 0700, whatever the umask; an existing laxer one is tightened."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    _tighten(path, 0o700)


def _tighten(path: str, mode: int) -> None:
    """Drop every permission bit of ``path`` beyond ``mode`` (if this user owns it)."""
    st = os.stat(path)
    if st.st_mode & 0o777 & ~mode and st.st_uid == os.geteuid():
        os.chmod(path, st.st_mode & 0o777 & mode)


def _atomic_private(path: str, prefix: str, write: Callable[[Any], None]) -> None:
    """Write a file 0600 under a temporary name beside ``path``, fsync, rename it into place.

    On any error (a full disk, a file-size limit) the temporary file is
    removed: a partial file never stays behind.
    """
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=prefix)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _write_private(path: str, data: bytes) -> None:
    _atomic_private(path, ".key-", lambda f: f.write(data))


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


def main(argv: list[str] | None = None) -> int:
    """``python -m ddflow.streaming.state upgrade DIR``: see :func:`upgrade`."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m ddflow.streaming.state",
                                 description="Maintain a ddflow streaming state directory.")
    sub = ap.add_subparsers(dest="command", required=True)
    up = sub.add_parser("upgrade", help="sign a state of the previous format with the state key, once")
    up.add_argument("path", help="the state directory (stateLocation)")
    args = ap.parse_args(argv)
    try:
        m = upgrade(args.path)
    except StateError as e:
        print(e, file=sys.stderr)
        return 1
    print(f"{args.path}: format {STATE_FORMAT}, batch {m.batch_id}, {len(m.files)} live files, signed with the "
          "state key")
    return 0


if __name__ == "__main__":
    sys.exit(main())
