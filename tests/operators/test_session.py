"""Session windows against a from-scratch sessionization at every complete time, and their kernel (native) against
its plain reference.

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
from hypothesis import given, settings
from hypothesis import strategies as st

import ddflow
from ddflow.base.native import native_module
from ddflow.errors import SchemaError
from ddflow.operators.session import session_step
from kernel_modes import as_run

I64 = np.iinfo(np.int64)


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


def _same_results(got, ref):
    assert len(got) == len(ref) == 8
    for i, (g, r) in enumerate(zip(got, ref)):
        assert np.shape(g) == np.shape(r) and np.array_equal(g, r), f"result {i}: {g!r} != {r!r}"


@pytest.mark.parametrize("seed", range(60))
def test_session_step_native_equals_plain(seed):
    rng = np.random.default_rng(seed)
    gap = int(rng.integers(1, 5))
    expire = bool(seed % 2)
    args = (*_random_state(rng, gap), int(rng.integers(21, 40)), gap, expire)
    _same_results(as_run(session_step, "native")(*args), as_run(session_step, "plain")(*args))


@st.composite
def _edge_inputs(draw):
    """A state that keeps the operator's invariant (every record shown in its session, ``ts + gap`` in int64), with
    counts and diffs at int64's ends, event times at the edge of overflowing with the gap, and sometimes unsorted
    updates or state (a precondition broken: the native kernel must give the reference's answer, not crash)."""
    gap = draw(st.sampled_from([1, 3, 1 << 62]))
    w = draw(st.integers(2, 4))
    edge_ts = I64.max - gap - 1  # the largest ts a record may have
    small = st.integers(0, 12)
    ts = small | small | st.sampled_from([edge_ts, edge_ts - 1, I64.min])
    field = st.integers(-1, 1) | st.sampled_from([I64.min, I64.max])
    recs = draw(st.sets(st.tuples(st.integers(0, 2), ts, *[field] * (w - 2)), max_size=8))
    R = np.array(sorted(recs), dtype=np.int64).reshape(-1, w)
    count = st.sampled_from([-1, 1, 2, I64.max, I64.min, I64.max - 1, I64.min + 1])
    C = np.array([draw(count) for _ in range(len(R))], dtype=np.int64)
    shown = sessions_from_scratch(Counter({tuple(r): int(c) for r, c in zip(R.tolist(), C)}), gap, None)
    span = {r[:w]: r[w:] for r in shown}
    S = np.array([span[tuple(r)][0] for r in R.tolist()], dtype=np.int64)
    E = np.array([span[tuple(r)][1] for r in R.tolist()], dtype=np.int64)
    ups = draw(st.lists(st.tuples(st.tuples(st.integers(0, 3), small | ts, *[field] * (w - 2)),
                                  st.integers(0, 30), count), max_size=10))
    if ups and draw(st.integers(0, 3)) == 0:  # a new record whose ts + gap passes int64
        x = draw(st.integers(0, len(ups) - 1))
        ups[x] = ((ups[x][0][0], edge_ts + 1, *ups[x][0][2:]), *ups[x][1:])
    ups.sort(key=lambda u: (u[0][0], u[1], u[0][1:]))
    if draw(st.booleans()) and len(ups) > 1:
        ups = draw(st.permutations(ups))
    if draw(st.booleans()) and len(R) > 1:
        perm = np.array(draw(st.permutations(range(len(R)))))
        R, C, S, E = R[perm], C[perm], S[perm], E[perm]
    U = np.array([u[0] for u in ups], dtype=np.int64).reshape(-1, w)
    ut = np.array([u[1] for u in ups], dtype=np.int64)
    ud = np.array([u[2] for u in ups], dtype=np.int64)
    limit = draw(st.sampled_from([int(ut.max()) + 1 if len(ut) else 0, 31, 1 << 40, I64.max]))
    return R, C, S, E, U, ut, ud, limit, gap, draw(st.booleans())


@settings(max_examples=400)
@given(_edge_inputs())
def test_the_native_session_step_equals_the_reference_at_the_edges(args):
    with np.errstate(over="ignore"):  # the reference wraps a shown count's change as int64 does
        ref = as_run(session_step, "plain")(*args)
    _same_results(as_run(session_step, "native")(*args), ref)


def test_the_native_session_step_refuses_arrays_that_do_not_fit_together():
    step = native_module().operators.session_step
    R, C = np.zeros((2, 3), dtype=np.int64), np.zeros(2, dtype=np.int64)
    U, ut = np.zeros((1, 3), dtype=np.int64), np.zeros(1, dtype=np.int64)
    with pytest.raises(ValueError, match="one entry per row of R"):
        step(R, C[:1], C, C, U, ut, ut, 5, 1, True)
    with pytest.raises(ValueError, match="one entry per row of U"):
        step(R, C, C, C, U, ut[:0], ut, 5, 1, True)
    with pytest.raises(ValueError, match="the state R's columns"):
        step(R, C, C, C, U[:, :2].copy(), ut, ut, 5, 1, True)
    with pytest.raises(ValueError, match="a key and a ts"):
        step(R[:, :1].copy(), C, C, C, U[:, :1].copy(), ut, ut, 5, 1, True)
    with pytest.raises(TypeError):  # int32 rows: no silent conversion
        step(R.astype(np.int32), C, C, C, U, ut, ut, 5, 1, True)


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
