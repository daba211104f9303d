"""Idle effort: a spine nobody writes any more still merges down to what is live, a bounded amount per step."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddflow.base.lattice import Antichain
from ddflow.base.updates import Updates
from ddflow.traces import Batch, Trace
from ddflow.traces.spine import IDLE_FLOOR, IDLE_FUEL, Merging


def ints(keys, time: int, diff: int, vals=None, kinds=("i", "i")) -> Updates:
    """Updates of records ``(key, val)`` (val = key by default) at one time with one diff."""
    keys = np.asarray(keys, dtype=np.int64)
    vals = keys if vals is None else np.asarray(vals)
    return Updates((keys, vals), np.full((len(keys), 1), time, dtype=np.int64),
                   np.full(len(keys), diff, dtype=np.int64), kinds)


def idle_steps(tr: Trace, most: int) -> int:
    """Exert ``tr`` as the scheduler does an unwritten trace, one step's fuel a step, until it is in its idle shape.

    Returns the steps taken; fails past ``most``.  Each step's work stays within the step's fuel (a merge
    slice may take up to twice its share).
    """
    sp = tr.spine
    for step in range(most + 1):
        if not sp.wants_effort(("idle", step)) and step:
            return step
        spent = sp.exert_idle(IDLE_FUEL) if step else 0
        assert spent <= 2 * IDLE_FUEL + 1
    raise AssertionError(f"not in its idle shape after {most} idle steps: {sp.entries}")


def live_records(tr: Trace, time: int) -> dict:
    return tr.contents(time)


def test_a_merge_of_insertions_and_their_deletions_finishes_idle():
    """N insertions, then their N deletions: the geometric rule starts merging them, and only insertions fuelled it."""
    n = 50_000
    tr = Trace(("i", "i"), 1)
    h = tr.reader()
    tr.insert_updates(ints(range(n), 0, 1), consolidated=True)
    tr.insert_updates(ints(range(n), 1, -1), consolidated=True)
    h.set_logical_compaction(Antichain.from_time(2))
    assert any(isinstance(e, Merging) for e in tr.spine.entries) and len(tr) == 2 * n
    peak = tr.nbytes
    steps = idle_steps(tr, most=2 * n // IDLE_FUEL + 4)
    assert steps <= 2 * n // IDLE_FUEL + 4
    assert len(tr) == 0 and tr.nbytes < peak // 100
    assert live_records(tr, 1) == {}


def test_deletions_in_shrinking_batches_are_merged_idle():
    """Deletions in batches each under half the one before: no rule merges them, yet all but a few cancel."""
    n = 40_000
    tr = Trace(("i", "i"), 1)
    h = tr.reader()
    tr.insert_updates(ints(range(n), 0, 1), consolidated=True)
    lo, size, t = 0, n // 2 - 1, 1
    while size > 8:
        tr.insert_updates(ints(range(lo, lo + size), t, -1), consolidated=True)
        lo, size, t = lo + size, size // 2 - 1, t + 1
    h.set_logical_compaction(Antichain.from_time(t))
    tr.spine.exert(1 << 40)  # every merge the rule started, finished: none pairs these batches
    tr.spine._check()
    live = n - lo
    assert len(tr) > n and live < 64
    assert tr.spine.reclaimable()
    idle_steps(tr, most=3 * n // IDLE_FUEL + 20)
    assert len(tr) <= 2 * live + 2 * IDLE_FLOOR
    assert live_records(tr, t) == {(k, k): 1 for k in range(lo, n)}
    tr.spine._check()


def test_an_idle_spine_in_its_idle_shape_is_skipped_until_written():
    tr = Trace(("i", "i"), 1)
    tr.reader(Antichain.from_time(2))
    tr.insert_updates(ints(range(10_000), 0, 1), consolidated=True)
    tr.insert_updates(ints(range(10_000), 1, -1), consolidated=True)
    sp = tr.spine
    assert not sp.wants_effort(1)  # written since the step before: its insertions fuelled it
    assert sp.wants_effort(2) and not sp.wants_effort(2)  # asked once per step
    while sp.wants_effort(object()):
        sp.exert_idle(IDLE_FUEL)
    assert len(tr) == 0
    assert not any(sp.wants_effort(s) for s in range(3, 50))  # nothing more to do: no step pays for it
    tr.insert_updates(ints([1], 2, 1), consolidated=True)
    assert not sp.wants_effort(50)  # written
    assert sp.wants_effort(51) and sp.exert_idle(IDLE_FUEL) == 0  # one small batch: nothing to reclaim
    assert not any(sp.wants_effort(s) for s in range(52, 60)) and len(tr) == 1


def test_legitimate_negatives_are_left_alone():
    """A trace whose negative updates live (a collection below zero) reaches its idle shape and stays there."""
    tr = Trace(("i", "i"), 1)
    h = tr.reader()
    tr.insert_updates(ints(range(10_000), 0, -1), consolidated=True)
    h.set_logical_compaction(Antichain.from_time(1))
    assert not tr.spine.reclaimable()  # negatives, but no positive to meet
    tr.insert_updates(ints(range(4_000), 1, 1), consolidated=True)
    h.set_logical_compaction(Antichain.from_time(2))
    assert len(tr.spine.entries) == 2 and tr.spine.reclaimable()  # no rule pairs them: 10,000 > 2 * 4,000
    idle_steps(tr, most=20)
    assert len(tr) == 6_000 and live_records(tr, 2) == {(k, k): -1 for k in range(4_000, 10_000)}
    assert not any(tr.spine.wants_effort(("later", s)) for s in range(10))


def test_merges_that_cancel_keep_no_peak_sized_arrays():
    """A merge's result copies what is left out of buffers sized for its inputs, whichever path merged it."""
    n = 20_000
    keep = 10

    def check(b: Batch) -> None:
        assert len(b) == keep
        for a in (b.times, b.diffs, b.keys, b.key_offs, b.val_offs, *b.vals):
            assert a.nbytes <= 8 * (keep + 1)
        # Kernels return the updates as the first rows of buffers sized for the inputs: these own theirs.
        assert b.times.flags.owndata and b.diffs.flags.owndata

    ins = Batch.from_updates(ints(range(n), 0, 1))
    dels = Batch.from_updates(ints(range(keep, n), 1, -1))
    check(ins.merge(dels, Antichain.from_time(2)))  # the native pair merge (merge_pair)
    fins = Batch.from_updates(ints(range(n), 0, 1, vals=np.arange(n) / 2, kinds=("i", "f")))
    fdels = Batch.from_updates(ints(range(keep, n), 1, -1, vals=np.arange(keep, n) / 2, kinds=("i", "f")))
    check(fins.merge(fdels, Antichain.from_time(2)))  # any kinds: merge_by_rows
    tr = Trace(("i", "i"), 1)
    both = Updates.concat([ints(range(n), 0, 1), ints(range(keep, n), 0, -1)])
    tr.insert_consolidating(both)  # one step's insertions and deletions, consolidated on the way in
    check(next(iter(tr.spine.batches())))


@st.composite
def insert_delete_streams(draw):
    """Steps of insertions of new keys and deletions of live ones, in batches of 1 to thousands."""
    steps = []
    live: list[int] = []
    fresh = 0
    for _ in range(draw(st.integers(1, 12))):
        n_ins = draw(st.sampled_from([0, 1, 7, 300, 3_000, 12_000]))
        n_del = min(len(live), draw(st.sampled_from([0, 1, 7, 300, 3_000, 12_000, 10**9])))
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        dels = rng.choice(np.array(live, dtype=np.int64), n_del, replace=False) if n_del else np.zeros(0, np.int64)
        ins = np.arange(fresh, fresh + n_ins, dtype=np.int64)
        fresh += n_ins
        gone = set(dels.tolist())
        live = [k for k in live if k not in gone] + ins.tolist()
        steps.append((ins, dels))
    return steps


@settings(max_examples=40)
@given(insert_delete_streams())
def test_after_idle_steps_a_trace_holds_a_constant_times_what_is_live(steps):
    """Random insertions and deletions, then idle steps: the trace comes back to about its live records."""
    tr = Trace(("i", "i"), 1)
    h = tr.reader()
    want: Counter = Counter()
    for t, (ins, dels) in enumerate(steps):
        u = Updates.concat([ints(ins, t, 1), ints(dels, t, -1)])
        if len(u):
            tr.insert_consolidating(u)
        want.update({(k, k): 1 for k in ins.tolist()})
        want.subtract({(k, k): 1 for k in dels.tolist()})
        h.set_logical_compaction(Antichain.from_time(t + 1))
        tr.spine.wants_effort(("busy", t))  # the step that wrote it
    t = len(steps)
    peak = len(tr)
    idle_steps(tr, most=4 * peak // IDLE_FUEL + 2 * len(steps) + 8)
    live = {r: c for r, c in want.items() if c}
    assert live_records(tr, t) == live
    assert len(tr) <= 2 * len(live) + 2 * IDLE_FLOOR
    tr.spine._check()


@pytest.mark.parametrize("kinds", [("i", "i"), ("i", "f")])
def test_idle_effort_flushes_the_arena_and_tail(kinds):
    """Small batches (the arena's, the tail's) are part of what idle merging reclaims."""
    tr = Trace(kinds, 1)
    h = tr.reader()
    val = (lambda k: np.asarray(k) / 4) if kinds[1] == "f" else (lambda k: np.asarray(k))
    for t in range(6):
        keys = np.arange(30 * t, 30 * t + 30)
        tr.insert_consolidating(ints(keys, t, 1, vals=val(keys), kinds=kinds))
    for t in range(6, 12):
        keys = np.arange(30 * (t - 6), 30 * (t - 6) + 30)
        tr.insert_consolidating(ints(keys, t, -1, vals=val(keys), kinds=kinds))
    h.set_logical_compaction(Antichain.from_time(12))
    assert len(tr) == 360
    idle_steps(tr, most=10)
    assert len(tr) == 0
