"""Session windows against a from-scratch sessionization at every complete time, and their kernel compiled and plain.

Streams are random signed updates over a few keys with colliding ``ts``
and fields (duplicates, removals that split sessions, and without
``expire`` retractions of absent records), many data times per frontier
advance.  With ``expire`` the input is event time: each record is
inserted at its own ``ts`` and removed later, as the contract asks.
"""
from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

import ddflow
from ddflow.errors import SchemaError
from ddflow.operators.session import session_step


def sessions_from_scratch(acc: Counter, gap: int, now: int | None) -> Counter:
    """The contract's output for the accumulated records ``acc``; ``now``: drop sessions with ``end < now``."""
    by_key: dict = {}
    for rec, c in acc.items():
        if c:
            by_key.setdefault(rec[0], []).append((rec, c))
    out: Counter = Counter()
    for recs in by_key.values():
        ts = sorted({r[1] for r, _ in recs})
        span, first = {}, 0
        for i in range(1, len(ts) + 1):
            if i == len(ts) or ts[i] - ts[i - 1] > gap:
                for x in ts[first:i]:
                    span[x] = (ts[first], ts[i - 1] + gap)
                first = i
        for r, c in recs:
            s, e = span[r[1]]
            if now is None or e >= now:
                out[r + (s, e)] += c
    return out


def _stream(rng: random.Random, expire: bool, floats: bool):
    """Batches of (record, time, diff) and the frontier after each; records (key, ts, field)."""
    frontier, live, steps = 0, Counter(), []
    for _ in range(rng.randint(3, 7)):
        ups = []
        for _ in range(rng.randint(1, 12)):
            t = frontier + rng.randint(0, 6)
            if expire:  # event time: inserted at its ts, removed at a time after it
                old = [r for r, c in live.items() if c > 0 and r[1] <= t]
                if old and rng.random() < 0.3:
                    rec, d = rng.choice(old), -1
                else:
                    rec, d = (rng.randint(0, 2), t, rng.choice([0.5, -1.0, 2.0]) if floats else rng.randint(0, 2)), 1
            else:
                rec = (rng.randint(0, 2), rng.randint(0, 25), rng.choice([0.5, -1.0, 2.0]) if floats else rng.randint(0, 2))
                d = rng.choice([1, 1, 1, 2, -1])  # -1 of an absent record: a negative count the state keeps
            live[rec] += d
            ups.append((rec, t, d))
        frontier += rng.randint(1, 5)
        steps.append((ups, frontier))
    # close everything: the last sessions expire once the frontier passes their ends
    steps.append(([], frontier + 40))
    return steps


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("expire", [False, True])
def test_sessions_match_a_from_scratch_sessionization_at_every_time(seed, expire):
    rng = random.Random(seed * 2 + expire)
    gap = rng.choice([1, 2, 3, 5])
    floats = seed % 3 == 0
    flow = ddflow.Dataflow()
    h, ev = flow.new_collection("ev", schema=("i", "i", "f" if floats else "i"))
    cap = ev.sessionize(1, gap, expire=expire).capture()
    acc: list = []
    prev = 0
    for ups, frontier in _stream(rng, expire, floats):
        for rec, t, d in ups:
            h.update([rec], times=t, diffs=d)
            acc.append((rec, t, d))
        flow.advance_to(frontier)
        flow.run()
        for T in range(prev, frontier):
            upto = Counter()
            for rec, t, d in acc:
                if t <= T:
                    upto[rec] += d
            want = Counter({r: c for r, c in sessions_from_scratch(upto, gap, T if expire else None).items() if c})
            assert cap.contents(T) == want, f"time {T}"
        prev = frontier
    held = {s["kind"]: s["records"] for s in flow.stats()}["SessionNode"]
    if expire:
        assert held == 0  # every session closed and left the state
    else:
        total = Counter()
        for rec, _, d in acc:
            total[rec] += d
        assert held == sum(1 for c in total.values() if c)  # the records with a nonzero count, negative ones too


def _random_state(rng: np.random.Generator, gap: int):
    """A consistent state (as session_step leaves it: every record shown in its session) and a batch of updates."""
    n = int(rng.integers(0, 12))
    recs = {(int(rng.integers(0, 3)), int(rng.integers(0, 20)), int(rng.integers(0, 2))) for _ in range(n)}
    R = np.array(sorted(recs), dtype=np.int64).reshape(-1, 3)
    C = rng.choice([-1, 1, 2], size=len(R)).astype(np.int64)
    shown = sessions_from_scratch(Counter({tuple(r): int(c) for r, c in zip(R.tolist(), C)}), gap, None)
    span = {r[:3]: r[3:] for r in shown}
    S = np.array([span[tuple(r)][0] for r in R.tolist()], dtype=np.int64)
    E = np.array([span[tuple(r)][1] for r in R.tolist()], dtype=np.int64)
    m = int(rng.integers(0, 10))
    U = np.column_stack([rng.integers(0, 3, m), rng.integers(0, 20, m), rng.integers(0, 2, m)]).astype(np.int64)
    ut = rng.integers(20, 30, m).astype(np.int64)
    order = np.lexsort((U[:, 2], U[:, 1], ut, U[:, 0]))
    ud = rng.choice([-1, 1], size=m).astype(np.int64)
    return R, C, S, E, U[order], ut[order], ud[order]


@pytest.mark.parametrize("seed", range(60))
def test_session_step_compiled_equals_plain(seed):
    rng = np.random.default_rng(seed)
    gap = int(rng.integers(1, 5))
    expire = bool(seed % 2)
    args = (*_random_state(rng, gap), int(rng.integers(21, 40)), gap, expire)
    got, ref = session_step(*args), session_step.plain(*args)
    assert len(got) == len(ref) == 8
    for g, r in zip(got, ref):
        assert np.array_equal(g, r)


def test_a_count_past_int64_names_the_operator_and_keeps_the_state():
    flow = ddflow.Dataflow()
    h, ev = flow.new_collection("ev", schema=("i", "i"))
    cap = ev.sessionize(1, 5, name="sess").capture()
    big = np.iinfo(np.int64).max
    h.update([(1, 10)], times=0, diffs=big)
    flow.advance_to(1)
    flow.run()
    h.update([(1, 10)], times=1, diffs=1)
    flow.advance_to(2)
    with pytest.raises(SchemaError, match=r"session window 'sess'.*count passes int64 at time 1"):
        flow.run()
    assert cap.contents(0) == {(1, 10, 10, 15): big}


def test_an_event_time_past_int64_with_the_gap_is_refused():
    flow = ddflow.Dataflow()
    h, ev = flow.new_collection("ev", schema=("i", "i"))
    ev.sessionize(1, 10, name="sess").capture()
    h.update([(1, np.iinfo(np.int64).max - 5)], times=0)
    flow.advance_to(1)
    with pytest.raises(SchemaError, match=r"session window 'sess': event time 9223372036854775802 plus the gap"):
        flow.run()


def test_the_time_field_must_be_an_int():
    flow = ddflow.Dataflow()
    h, ev = flow.new_collection("ev", schema=("i", "f"))
    ev.sessionize(1, 10, name="sess").capture()
    h.update([(1, 2.5)], times=0)
    flow.advance_to(1)
    with pytest.raises(SchemaError, match=r"time field 1 must be an int"):
        flow.run()
