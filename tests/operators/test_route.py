"""Routes (``operators/route.py``): outputs written straight into the arrangement they reach.

A routed run must be the unrouted run exactly: the same output at every
step, the same counters and records held on every operator, the same
column kinds fixed on every node.
The kernels that route (``join_table_into``, ``feedback_round_into``),
plain and native, are checked against the kernels they extend followed
by the projection and ``arena_insert``; and the native ones against
their plain references on copies of the arenas an engine run writes into.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ddflow
import ddflow.operators.route as route_module
from ddflow.operators.route import route_of
from kernel_modes import MODES, as_run


def _build(edges):
    """Dataflows whose joins and variables are routed (reach, a projection and a union on the way) or not."""
    roots = edges.filter(lambda e: e[0] < 2).project(0, 0)
    # Bounded: a loop that fails to converge fails the test at once, instead of running for max_seconds.
    reach = roots.iterate(lambda r: r.join(edges).project(2, 1).concat(roots).distinct(), max_iterations=100)
    # Routed through two projections: (key, left value, right value) becomes (right value, left value).
    pairs = edges.join(edges).project(2, 0, 1).project(0, 2).concat(edges).count()
    # Not routed: the variable is read twice.
    twice = roots.iterate(lambda r: r.join(edges).project(2, 1).concat(r.project(0, 0)).distinct(),
                          max_iterations=100)
    return reach, pairs, twice


def _run(schedule, routed: bool):
    with pytest.MonkeyPatch.context() as mp:
        if not routed:
            mp.setattr(route_module, "_find", lambda node: None)
        return _steps(schedule)


def _steps(schedule, build=_build, probe=None):
    """Outputs, counters and records held after each step, and the kinds of every node, of ``build``'s dataflows.

    ``probe(flow)``: more state to compare after each step, kept with the counters.
    """
    outs, stats = [], []
    with ddflow.Dataflow() as flow:
        edges_in, edges = flow.new_collection("edges", schema=("i", "i"))
        caps = [c.capture() for c in build(edges)]
        for rows, times, diffs, frontier in schedule:
            if rows:
                edges_in.update(rows, times=times, diffs=diffs)
            flow.advance_to(frontier)
            flow.run()
            outs.append([c.changes() for c in caps])
            stats.append([(s["operator"], s["records"], s["updates_in"], s["updates_out"]) for s in flow.stats()])
            if probe is not None:
                stats.append(probe(flow))
        kinds = [(n.name, n.kinds) for n in flow.top.all_nodes()]
    return outs, stats, kinds


@st.composite
def schedules(draw):
    """Edge updates, several data times an advance; removals only of edges added in earlier advances.

    So no count goes negative at any time (a removal at a time before the
    edge's addition would: a loop over it need not converge).
    """
    out, t, present = [], 0, []
    for _ in range(draw(st.integers(1, 6))):
        n = draw(st.integers(0, 8))
        rows, times, diffs, added = [], [], [], []
        for _ in range(n):
            if present and draw(st.booleans()):
                rows.append(present.pop(draw(st.integers(0, len(present) - 1))))
                diffs.append(-1)
            else:
                e = (draw(st.integers(0, 7)), draw(st.integers(0, 7)))
                rows.append(e)
                added.append(e)
                diffs.append(1)
            times.append(t + draw(st.integers(0, 2)))
        present += added
        t += draw(st.integers(1, 3))
        out.append((rows, times, diffs, t + 2))
        t += 2
    return out


@settings(max_examples=25, deadline=None)
@given(schedules())
def test_a_routed_run_is_the_unrouted_run(schedule):
    assert _run(schedule, True) == _run(schedule, False)


def _captures(flow_build):
    """How many joins and variables of ``flow_build``'s dataflow are routed, and where to."""
    with ddflow.Dataflow() as flow:
        _, edges = flow.new_collection("edges", schema=("i", "i"))
        flow_build(edges)
        return {n.name: type(r.arrangement).__name__ if (r := route_of(n)) is not None else None
                for n in flow.top.all_nodes() if type(n).__name__ in ("JoinNode", "VariableNode")}


def test_a_route_passes_projections_and_unions_only():
    def build(edges):
        for c in _build(edges):  # routed: reach's variable and join, pairs' join, twice's join; not twice's variable
            c.capture()
        edges.join(edges).map(lambda r: r).distinct().capture()  # not: a map on the way
        edges.join(edges).project(0, 1).distinct().capture()  # routed
        j = edges.join(edges).project(1, 2)  # not: the projection has two readers
        j.distinct().capture()
        j.capture()
    routes = _captures(build)
    assert sorted(v is not None for v in routes.values()) == [False] * 3 + [True] * 5, routes
    assert set(routes.values()) == {None, "ArrangeNode"}


def test_a_route_composes_its_projections():
    with ddflow.Dataflow() as flow:
        _, x = flow.new_collection("x", schema=("i", "i", "i"))
        _, z = flow.new_collection("z", schema=("i",))
        x.project(2, 0).concat(z.project(0, 0)).project(1).arrange()
        r = route_of(x.node)
        assert r.fields(3).tolist() == [0] and r.fields(2) is None
        assert route_of(z.node).fields(1).tolist() == [0]  # (0, 0), then (1,)


@st.composite
def join_steps(draw):
    from ddflow.base.updates import Updates
    from ddflow.traces import Trace

    depth = draw(st.integers(1, 2))
    trace = Trace(("i", "i"), depth=depth)
    big = draw(st.integers(6, 60))  # up to a few hundred pairs: past SMALL_ROWS, some past ARENA_ROWS
    for _ in range(draw(st.integers(0, 3))):
        n = draw(st.integers(0, big))
        cols = tuple(draw(hnp.arrays(np.int64, n, elements=st.integers(0, hi))) for hi in (3, 20))  # key, value
        times = draw(hnp.arrays(np.int64, (n, depth), elements=st.integers(0, 3)))
        diffs = draw(hnp.arrays(np.int64, n, elements=st.sampled_from([-1, 1, 2])))
        trace.insert_updates(Updates(cols, times, diffs, ("i", "i")))
    n = draw(st.integers(0, big // 2))
    C = np.stack([draw(hnp.arrays(np.int64, n, elements=st.integers(0, hi))) for hi in (3, 20)])
    times = draw(hnp.arrays(np.int64, (n, depth), elements=st.integers(0, 3)))
    diffs = draw(hnp.arrays(np.int64, n, elements=st.sampled_from([-1, 1, 3])))
    idx = np.array(draw(st.lists(st.integers(0, 2), min_size=1, max_size=3)), dtype=np.int64)
    return trace, C, times, diffs, idx, draw(st.booleans())


def _arena_for(m: int, depth: int):
    from ddflow.traces.arena import Arena
    from ddflow.traces.layout import BatchTable, empty_table

    return Arena(("i",) * m, depth, 8, BatchTable(empty_table(m), []))


def _arena_batch(arena, used, n):
    arena.written(used, n)
    b = arena.batches()[0]
    arena._check()
    u = b.flatten()
    return [c.tolist() for c in u.cols], u.times.tolist(), u.diffs.tolist()


@settings(max_examples=200, deadline=None)
@given(join_steps(), st.sampled_from(MODES), st.data())
def test_join_table_into_is_join_table_then_the_insert(s, impl, data):
    """The join's output, consolidated (by numpy past SMALL_ROWS) and projected, is the batch written into the arena.

    Past ``SMALL_ROWS`` the kernel writes it where it has at most
    ``ARENA_ROWS`` rows before consolidation and the arena the words for
    them (drawn: the arena is written past a drawn offset, leaving room
    for ``SMALL_ROWS`` as a step's ``target`` does), and leaves ``M`` to
    the caller otherwise.
    """
    from ddflow.base.kernels import SMALL_ROWS, consolidate_rows
    from ddflow.operators.join import join_table, join_table_into
    from ddflow.traces.arena import ARENA_ROWS, arena_insert, words_for

    trace, C, times, diffs, idx, left = s
    C.flags.writeable = times.flags.writeable = diffs.flags.writeable = False
    T = trace.spine.table().matrix
    depth = trace.depth
    M, D, sel, sums, status, total, OC, OT = join_table(T, C, times, diffs, 2, depth, left, 1 << 20)
    arena = _arena_for(len(idx), depth)
    buf, _, At, at = arena.target()
    most = len(buf) - words_for(SMALL_ROWS, len(idx), depth)
    used = data.draw(st.integers(0, most) | st.just(most), label="used")
    kernel = as_run(join_table_into, impl)
    M2, D2, status2, k, cols, ts, ds, now_used = kernel(T, C, times, diffs, 2, depth, left, 1 << 20, idx, buf, used,
                                                        At, at)
    assert M2.tolist() == M.tolist() and D2.tolist() == D.tolist()
    if status == 1:
        sel, sums = consolidate_rows(M, D)
        width = M.shape[1] - depth
        fits = total <= ARENA_ROWS and used + words_for(total, len(idx), depth) <= len(buf)
        assert status2 == (0 if fits else 1), (total, len(sums), used)
        event("past SMALL_ROWS, written" if fits else "past SMALL_ROWS, left to the caller")
        if not fits:
            return
        OC, OT, status = M[sel, :width].T, M[sel, width:], 0
    assert status2 == status
    if status != 0:
        return
    assert k == len(sums)
    # C-contiguous, as the native insert takes its rows (column_stack of F-ordered parts is F-ordered).
    K = np.ascontiguousarray(np.column_stack([OC[idx].T, OT]).reshape(len(sums), len(idx) + depth))
    ref = _arena_for(len(idx), depth)
    rb, _, rT, rat = ref.target()
    rc, rt, rd, rused, overflow = arena_insert(K, sums.copy(), len(idx), rb, used, rT, rat)
    assert not overflow
    assert [c.tolist() for c in cols] == [c.tolist() for c in rc] and ts.tolist() == rt.tolist()
    assert ds.tolist() == rd.tolist() and now_used == rused
    if len(ds):
        assert _arena_batch(arena, now_used, len(ds)) == _arena_batch(ref, rused, len(rd))


@settings(max_examples=200, deadline=None)
@given(st.data(), st.sampled_from(MODES))
def test_feedback_round_into_is_feedback_round_then_the_insert(data, impl):
    from ddflow.operators.iterate import feedback_round, feedback_round_into
    from ddflow.traces.arena import arena_insert

    m = data.draw(st.integers(1, 3))
    n = data.draw(st.integers(0, 8))
    K = np.column_stack([data.draw(hnp.arrays(np.int64, (n, m), elements=st.integers(0, 2))),
                         data.draw(hnp.arrays(np.int64, (n, 2), elements=st.integers(0, 3)))]).reshape(n, m + 2)
    diffs = data.draw(hnp.arrays(np.int64, n, elements=st.sampled_from([-1, 1, 2])))
    diffs.flags.writeable = False
    bound = np.array([data.draw(st.integers(1, 5)), data.draw(st.integers(1, 5))], dtype=np.int64)
    idx = np.array(data.draw(st.lists(st.integers(0, m - 1), min_size=1, max_size=3)), dtype=np.int64)
    C, T, D, due, overflow = feedback_round(K, diffs, m, bound)
    arena = _arena_for(len(idx), 2)
    kernel = as_run(feedback_round_into, impl)
    k, cols, ts, ds, due2, overflow2, used = kernel(K, diffs, m, bound, idx, *arena.target())
    assert (due2, overflow2) == (due, overflow)
    if not due or overflow:
        return
    assert k == len(D)
    ref = _arena_for(len(idx), 2)
    P = np.ascontiguousarray(np.column_stack([C[idx].T, T]).reshape(len(D), len(idx) + 2))
    rc, rt, rd, rused, _ = arena_insert(P, D.copy(), len(idx), *ref.target())
    assert [c.tolist() for c in cols] == [c.tolist() for c in rc] and ts.tolist() == rt.tolist()
    assert ds.tolist() == rd.tolist() and used == rused
    if len(ds):
        assert _arena_batch(arena, used, len(ds)) == _arena_batch(ref, rused, len(rd))


def as_offsets(T, bufs):
    """Table ``T`` with each entry that is an address into one of ``bufs`` made its offset there (a list)."""
    R = T.copy()
    for buf in bufs:
        base = buf.ctypes.data
        inside = (T >= base) & (T < base + buf.nbytes)
        R[inside] = T[inside] - base
    return R.tolist()


def same_writes(args, copies):
    """The writable arguments ``args`` of a kernel as their ``copies`` after its twin ran on them: the 1-d ones
    (arenas' buffers) word for word, the 2-d ones (tables) with their addresses into an arena compared as offsets
    into it (into the real one or its copy alike: old rows, and stale ones past a table's last, point into the
    real arenas, or anywhere, in both)."""
    bufs = [i for i, a in enumerate(args) if isinstance(a, np.ndarray) and a.flags.writeable and a.ndim == 1]
    arenas = [args[j] for j in bufs] + [copies[j] for j in bufs]
    for i, (a, c) in enumerate(zip(args, copies)):
        if not isinstance(a, np.ndarray) or not a.flags.writeable:
            continue
        if a.ndim == 1:
            assert a.tolist() == c.tolist(), f"argument {i}"
        else:
            assert as_offsets(a, arenas) == as_offsets(c, arenas), f"argument {i}"


def same_results_and_writes(kernel, twin, args):
    """``kernel(*args)``, after ``twin`` ran on copies of the writable arguments: the same results, and the same
    writes into the arenas (:func:`same_writes`): how a kernel that writes through the addresses of its arguments
    is checked against its reference."""
    copies = [a.copy() if isinstance(a, np.ndarray) and a.flags.writeable else a for a in args]
    want = twin(*copies)
    got = kernel(*args)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        if isinstance(g, np.ndarray):
            assert g.shape == w.shape and g.tolist() == w.tolist(), f"result {i}"
        else:
            assert g == w, f"result {i}: {g!r} != {w!r}"
    same_writes(args, copies)
    return got


def test_the_routing_kernels_native_are_the_references_on_the_arenas_of_a_run():
    """Every call of ``join_table_into`` and ``feedback_round_into`` in runs of routed bodies (rounds not fused,
    so that both are called from Python): the native kernel returns what the plain reference, on copies of the
    arguments, returns, and writes the same words and table rows into the arenas as it into its copies."""
    import ddflow.operators.iterate as iterate_module
    import ddflow.operators.join as join_module
    import ddflow.operators.round as round_module

    calls = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(round_module, "_find", lambda node: None)
        for module, name in ((join_module, "join_table_into"), (iterate_module, "feedback_round_into")):
            kernel, twin = as_run(getattr(module, name), "native"), as_run(getattr(module, name), "plain")

            def spy(*args, _kernel=kernel, _twin=twin, _name=name):
                got = same_results_and_writes(_kernel, _twin, args)
                calls.setdefault(_name, set()).add(got[2] if _name == "join_table_into" else (got[4], got[5]))
                return got
            mp.setattr(module, name, spy)
        rng = np.random.default_rng(11)
        schedule, t, present = [], 0, []
        for _ in range(16):
            rows, times, diffs = [], [], []
            for _ in range(4):
                if present and rng.random() < 0.4:
                    rows.append(present.pop(int(rng.integers(len(present)))))
                    diffs.append(-1)
                else:
                    rows.append((int(rng.integers(8)), int(rng.integers(8))))
                    diffs.append(1)
                times.append(t + int(rng.integers(2)))
            present += [r for r, d in zip(rows, diffs) if d > 0]
            t += 2
            schedule.append((rows, times, diffs, t))
        _steps(schedule)
    assert 0 in calls["join_table_into"] and (True, False) in calls["feedback_round_into"], calls
