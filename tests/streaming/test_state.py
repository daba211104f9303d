"""The state store checks itself: every damage to a saved state is refused by name, none restores wrong.

Each test saves a real state (the driver's reachability and out-degree
dataflow over Kafka-shaped micro-batches, a snapshot every second batch,
so the directory holds a snapshot, a log and the manifest), damages it the
way a disk, an operator or a bad copy would, and reopens it: the reopen
must raise :class:`StateError` naming the damaged file, and leave the
directory as it was.  A state that restores must go on exactly like the
process that never stopped.
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap

import pytest

from ddflow.streaming.state import (KEY_ENV, KEY_FILE, MANIFEST, PREVIOUS_FORMAT, Manifest, StateError, StateStore,
                                     check_spark_commits)
from tests.streaming.test_driver import fast_batches, fast_stream

pytestmark = pytest.mark.timeout(60)  # a damaged restore must refuse, never hang


@pytest.fixture
def saved(tmp_path):
    """A state after batches 0..2 (snapshot of 0..1, log of 2) and the batches of the whole stream."""
    batches, _ = fast_batches(seed=5)
    state = str(tmp_path / "state")
    s = fast_stream(state, snapshot_every=2)
    for b in range(3):
        s.process_arrow(batches[b], b)
    m = StateStore(state, 2).manifest
    assert m.files[0].startswith("snapshot-") and m.files[1].startswith("log-")
    return state, batches, m


def listing(state: str) -> dict[str, bytes]:
    return {f: open(os.path.join(state, f), "rb").read() for f in sorted(os.listdir(state))}


def refused(state: str, names: str) -> str:
    """Reopen ``state``: it must refuse naming ``names`` and leave every file as it was."""
    before = listing(state)
    with pytest.raises(StateError) as e:
        fast_stream(state, snapshot_every=2).open()
    assert os.path.join(state, names) in str(e.value), str(e.value)
    assert "delete it together with Spark's checkpoint" in str(e.value)  # what the operator can do
    assert listing(state) == before
    return str(e.value)


def edit_manifest(state: str, fix_checksum: bool | bytes = False, **changes) -> None:
    """Change the manifest's fields; ``fix_checksum``: recompute the checksum with the state's key (True), with
    another key (bytes), or as the unkeyed SHA-256 of the previous format ("plain")."""
    p = os.path.join(state, MANIFEST)
    raw = json.load(open(p))
    raw.update(changes)
    if fix_checksum:
        fields = {k: v for k, v in raw.items() if k not in ("format", "checksum")}
        if fix_checksum == "plain":
            raw["checksum"] = Manifest(**fields).plain_digest()
        else:
            key = open(os.path.join(state, KEY_FILE), "rb").read() if fix_checksum is True else fix_checksum
            raw["checksum"] = Manifest(**fields).digest(key)
    json.dump(raw, open(p, "w"))


def test_an_undamaged_state_restores_and_goes_on_like_the_process_that_never_stopped(saved):
    state, batches, m = saved
    ref = fast_stream()
    for b, t in enumerate(batches):
        ref.process_arrow(t, b)
    s = fast_stream(state, snapshot_every=2)
    s.open()
    for b in range(3, len(batches)):
        s.process_arrow(batches[b], b)
        for name in ("reach", "degree"):
            assert s.outputs[name].sink.batches[b].to_pylist() == ref.outputs[name].sink.batches[b].to_pylist()


@pytest.mark.parametrize("damage", ["deleted", "empty", "garbage", "truncated", "format"])
def test_a_damaged_manifest_is_refused(saved, damage):
    state, _, _ = saved
    p = os.path.join(state, MANIFEST)
    text = open(p).read()
    if damage == "deleted":
        os.unlink(p)
    elif damage == "format":
        edit_manifest(state, format="ddflow-state-1")
    else:
        open(p, "w").write({"empty": "", "garbage": "\x00garbage{", "truncated": text[: len(text) // 2]}[damage])
    msg = refused(state, MANIFEST)
    if damage == "deleted":
        assert "missing" in msg and "snapshot-" in msg


@pytest.mark.parametrize("change", [{"frontier": +5}, {"frontier": -3}, {"batch_id": +2}, {"drop": 0}, {"drop": 1}])
def test_an_edited_manifest_is_refused(saved, change):
    """A shifted frontier or batch id, or a file dropped from the list: the manifest's checksum disagrees."""
    state, _, m = saved
    (key, delta), = change.items()
    if key == "drop":
        edit_manifest(state, files=[f for i, f in enumerate(m.files) if i != delta])
    else:
        edit_manifest(state, **{key: getattr(m, key) + delta})
    assert "checksum" in refused(state, MANIFEST)


@pytest.mark.parametrize("which", [0, 1], ids=["snapshot", "log"])
@pytest.mark.parametrize("damage", ["deleted", "header-only", "cut", "bit-flip", "garbage", "swapped"])
def test_a_damaged_log_or_snapshot_is_refused(saved, which, damage):
    state, _, m = saved
    fn = m.files[which]
    p = os.path.join(state, fn)
    data = open(p, "rb").read()
    if damage == "deleted":
        os.unlink(p)
    elif damage == "header-only":
        open(p, "wb").write(data[: data.index(b"\n") + 1])
    elif damage == "cut":
        open(p, "wb").write(data[:-7])
    elif damage == "bit-flip":
        i = len(data) * 2 // 3
        open(p, "wb").write(data[:i] + bytes([data[i] ^ 0x10]) + data[i + 1:])
    elif damage == "garbage":
        open(p, "wb").write(os.urandom(len(data)))
    else:  # the other live file's bytes under this name
        shutil.copyfile(os.path.join(state, m.files[1 - which]), p)
    refused(state, fn)


def test_a_forged_manifest_that_drops_the_snapshot_is_refused_before_the_loop_runs(saved):
    """Checksums recomputed with the state key (by someone who holds it), so every file check passes: the log
    alone retracts edges it never inserted.

    Fed to reachability's loop those negative multiplicities never settle;
    the restore must refuse before it runs.
    """
    state, _, m = saved
    edit_manifest(state, fix_checksum=True, files=m.files[1:], checks={m.files[1]: m.checks[m.files[1]]})
    before = listing(state)
    with pytest.raises(StateError, match="negative multiplicity") as e:
        fast_stream(state, snapshot_every=2).open()
    assert "'edges'" in str(e.value) and listing(state) == before


def test_a_manifest_deleted_while_spark_kept_its_checkpoint_is_refused_at_the_first_batch(saved):
    """The state directory is gone, Spark goes on at batch 3: the outputs of 0..2 would be lost."""
    state, batches, _ = saved
    shutil.rmtree(state)
    s = fast_stream(state, snapshot_every=2)
    with pytest.raises(StateError, match=r"holds batches up to -1, but Spark's first micro-batch .* is 3"):
        s.process_arrow(batches[3], 3)
    assert s.outputs["reach"].sink.batches == {}


def test_a_state_ahead_of_a_reset_spark_checkpoint_is_refused(saved):
    """Spark's checkpoint was reset (batch 0 again) while ddflow's state holds 0..2: nothing may be skipped."""
    state, batches, _ = saved
    s = fast_stream(state, snapshot_every=2)
    with pytest.raises(StateError, match="holds batches up to 2, but Spark's first micro-batch after the restart is 0"):
        s.process_arrow(batches[0], 0)


def test_the_batch_spark_had_not_committed_is_skipped_and_the_next_goes_on(saved):
    state, batches, _ = saved
    s = fast_stream(state, snapshot_every=2)
    s.process_arrow(batches[2], 2)  # Spark's replay of the batch in flight
    s.process_arrow(batches[3], 3)
    assert s.metrics.skipped_batches == 1 and s.metrics.batches == 1


@pytest.mark.parametrize("spark, held, ok", [(-1, -1, True), (-1, 0, True), (4, 4, True), (4, 5, True),
                                             (4, 3, False), (4, -1, False), (4, 6, False), (-1, 1, False)])
def test_spark_commit_log_cross_check(tmp_path, spark, held, ok):
    """Spark's commit log (``commits/<id>`` files, as Spark writes them) against the manifest's batch id."""
    ckpt = tmp_path / "checkpoint"
    (ckpt / "commits").mkdir(parents=True)
    for b in range(spark + 1):
        (ckpt / "commits" / str(b)).write_text("v1\n{}")
        (ckpt / "commits" / f".{b}.crc").write_text("")
    if ok:
        check_spark_commits(str(ckpt), str(tmp_path / "state"), held)
    else:
        with pytest.raises(StateError, match=str(ckpt)):
            check_spark_commits(str(ckpt), str(tmp_path / "state"), held)


@pytest.mark.parametrize("how", ["plain", "another key"])
def test_a_manifest_resigned_without_the_state_key_is_refused(saved, how):
    """Anyone can recompute an unkeyed SHA-256 (the previous format's checksum); without the key it is refused."""
    state, _, m = saved
    edit_manifest(state, fix_checksum="plain" if how == "plain" else b"x" * 32, frontier=m.frontier + 5)
    assert "does not match its contents under the state key" in refused(state, MANIFEST)


def test_a_missing_or_damaged_key_file_is_refused(saved):
    state, _, _ = saved
    key = os.path.join(state, KEY_FILE)
    data = open(key, "rb").read()
    open(key, "wb").write(data[:10])
    assert "10 bytes, expected 32" in refused(state, KEY_FILE)
    os.unlink(key)
    assert "the key that signs it was deleted" in refused(state, KEY_FILE)
    open(key, "wb").write(bytes(b ^ 1 for b in data))  # another key of the right size
    assert "signed with another key" in refused(state, MANIFEST)


def test_a_key_given_in_the_environment_signs_the_state_and_is_never_written_there(tmp_path, monkeypatch):
    batches, _ = fast_batches(seed=5)
    state = str(tmp_path / "state")
    monkeypatch.setenv(KEY_ENV, "a key the operator keeps elsewhere, 42")
    s = fast_stream(state, snapshot_every=2)
    for b in range(3):
        s.process_arrow(batches[b], b)
    assert KEY_FILE not in os.listdir(state)
    assert StateStore(state).manifest.batch_id == 2  # the same key: accepted
    monkeypatch.setenv(KEY_ENV, "another key, not the one that signed it")
    assert "signed with another key" in refused(state, MANIFEST)
    monkeypatch.setenv(KEY_ENV, "short")
    with pytest.raises(StateError, match="has 5 bytes; a state key needs at least 16"):
        StateStore(state)
    monkeypatch.delenv(KEY_ENV)
    assert "DDFLOW_STATE_KEY" in refused(state, KEY_FILE)


def test_the_state_is_private_whatever_the_umask(tmp_path):
    batches, _ = fast_batches(seed=5)
    state = tmp_path / "state"
    old = os.umask(0)
    try:
        s = fast_stream(str(state), snapshot_every=2)
        for b in range(3):
            s.process_arrow(batches[b], b)
        lax = tmp_path / "lax"  # made by someone else, or an earlier ddflow, 0777
        lax.mkdir(mode=0o777)
        StateStore(str(lax))
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(state).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(lax).st_mode) == 0o700
    files = sorted(os.listdir(state))
    assert KEY_FILE in files and MANIFEST in files and len(files) >= 4
    assert {f: stat.S_IMODE(os.stat(state / f).st_mode) for f in files} == dict.fromkeys(files, 0o600)


def test_a_state_of_the_previous_format_is_refused_until_upgraded_once(saved, tmp_path):
    """The unkeyed format is never read on its own (a forged old-format manifest would bypass the key); the
    operator's one upgrade checks it as the earlier version would and signs it."""
    state, batches, m = saved
    os.unlink(os.path.join(state, KEY_FILE))
    edit_manifest(state, fix_checksum="plain", format=PREVIOUS_FORMAT)
    msg = refused(state, MANIFEST)
    assert f"python -m ddflow.streaming.state upgrade {state}" in msg
    shutil.copytree(state, tmp_path / "damaged")
    log = tmp_path / "damaged" / m.files[1]
    log.write_bytes(log.read_bytes()[:-3])
    bad = subprocess.run([sys.executable, "-m", "ddflow.streaming.state", "upgrade", str(tmp_path / "damaged")],
                         capture_output=True, text=True)
    assert bad.returncode == 1 and "truncated or overwritten" in bad.stderr  # checked before it is signed
    p = subprocess.run([sys.executable, "-m", "ddflow.streaming.state", "upgrade", state], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr
    assert "batch 2" in p.stdout and KEY_FILE in os.listdir(state)
    ref = fast_stream()
    for b, t in enumerate(batches):
        ref.process_arrow(t, b)
    s = fast_stream(state, snapshot_every=2)
    for b in range(3, len(batches)):
        s.process_arrow(batches[b], b)
        assert s.outputs["reach"].sink.batches[b].to_pylist() == ref.outputs["reach"].sink.batches[b].to_pylist()
    edit_manifest(state, fix_checksum="plain", format=PREVIOUS_FORMAT)  # a downgrade, forged: refused again
    assert "upgrade it once" in refused(state, MANIFEST)


FULL_DISK = textwrap.dedent("""
    import json, os, resource, signal, sys
    import pyarrow as pa
    from ddflow.streaming.state import StateStore
    path, snapshot_every, factor = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    store = StateStore(path, snapshot_every=snapshot_every)
    n = 2000
    store.commit(0, 1, {"edges": pa.table({"a": list(range(n)), "time": [0] * n, "diff": [1] * n})})
    size = os.path.getsize(os.path.join(path, store.manifest.files[0]))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, as on a full disk
    resource.setrlimit(resource.RLIMIT_FSIZE, (size * 3 // 2, size * 3 // 2))
    m = n * factor
    try:
        store.commit(1, 2, {"edges": pa.table({"a": list(range(n, n + m)), "time": [1] * m, "diff": [1] * m})})
    except OSError as e:
        print(json.dumps({"errno": e.errno, "files": sorted(os.listdir(path))}))
""")


@pytest.mark.parametrize("snapshot_every, factor", [(50, 4), (2, 1)], ids=["log", "snapshot"])
def test_a_full_disk_leaves_no_partial_file_and_the_state_as_it_was(tmp_path, snapshot_every, factor):
    """The write of a batch's log (4x the first batch's size), or of the snapshot that compacts the two batches
    (its log fits), fails past a file-size limit (EFBIG, what ENOSPC is to the writer): the temporary file is
    removed and the manifest is still the last one committed."""
    import errno

    state = str(tmp_path / "state")
    p = subprocess.run([sys.executable, "-c", FULL_DISK, state, str(snapshot_every), str(factor)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip(), p.stderr
    out = json.loads(p.stdout)
    assert out["errno"] == errno.EFBIG
    assert not [f for f in out["files"] if f.startswith(".")], out["files"]  # no partial .log-* left
    if snapshot_every == 2:
        assert "log-000000000001.arrow" in out["files"]  # the log fitted: the snapshot failed
    store = StateStore(state)
    assert store.manifest.batch_id == 0 and store.verify()["edges"].num_rows == 2000


@pytest.mark.parametrize("files", [["log-000000000000.arrow"], ["log-000000000000-p00000.arrow",
                                                                 "log-000000000000-p00001.arrow"]])
def test_a_crash_before_the_first_manifest_leaves_a_state_that_opens(tmp_path, files):
    """The first batch's log, by the driver or by the executors that routed its partitions, may be written before
    the first manifest: a restart opens the directory empty (the batch is replayed); any other file is refused."""
    path = tmp_path / "state"
    StateStore(str(path))  # makes the directory and its key
    for f in files:
        (path / f).write_bytes(b"partial")
    assert StateStore(str(path)).manifest.batch_id == -1
    (path / "log-000000000001-p00000.arrow").write_bytes(b"later")
    with pytest.raises(StateError, match="missing, but the directory holds"):
        StateStore(str(path))
