"""Trie batches, the fueled spine, traces, readers and views."""
from __future__ import annotations

import io
import itertools
import os
from collections import defaultdict
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddflow.traces.spine as spine_mod
from ddflow.base.interner import Interner
from ddflow.base.lattice import Antichain, advance_by
from ddflow.base.updates import Updates, from_rows
from ddflow.errors import SchemaError
from ddflow.traces import Batch, Description, Trace
from ddflow.traces.spine import Merging

# -- helpers --------------------------------------------------------------------------------


def upd(rows, times, diffs, kinds=None, depth=1) -> Updates:
    """Updates from (key, *vals) rows of ints."""
    n = len(rows)
    arity = len(rows[0]) if n else len(kinds)
    cols = tuple(np.array([r[i] for r in rows], dtype=np.int64) for i in range(arity))
    t = np.array(times, dtype=np.int64).reshape(n, depth)
    return Updates(cols, t, np.array(diffs, dtype=np.int64), tuple(kinds) if kinds else ("i",) * arity)


def desc(lower, upper, since=None, depth=1) -> Description:
    def anti(x):
        return x if isinstance(x, Antichain) else Antichain(x, depth=depth)
    return Description(anti(lower), anti(upper), anti(since) if since is not None else Antichain.minimum(depth))


def strictly_increasing(cols) -> bool:
    """Consecutive rows of the columns are in strictly increasing lexicographic order."""
    if not cols or len(cols[0]) < 2:
        return True
    lt = np.zeros(len(cols[0]) - 1, dtype=bool)
    eq = np.ones(len(cols[0]) - 1, dtype=bool)
    for c in cols:
        lt |= eq & (c[1:] > c[:-1])
        eq &= c[1:] == c[:-1]
    return bool(lt.all())


def check_trie(b: Batch) -> None:
    nk, nv, n = len(b.keys), len(b.val_offs) - 1, len(b)
    assert len(b.key_offs) == nk + 1 and b.key_offs[0] == 0 and b.key_offs[-1] == nv
    assert b.val_offs[0] == 0 and b.val_offs[-1] == n
    assert np.all(np.diff(b.key_offs) >= 1), "a key without values"
    assert np.all(np.diff(b.val_offs) >= 1), "a value without updates"
    assert all(len(v) == nv for v in b.vals)
    assert b.times.shape == (n, b.depth) and len(b.diffs) == n
    assert np.all(b.diffs != 0)
    assert strictly_increasing([b.keys])
    krep = np.repeat(b.keys, np.diff(b.key_offs))
    assert strictly_increasing([krep, *b.vals]), "values not sorted and unique within keys"
    f = b.flatten()
    assert strictly_increasing([*f.cols, *(f.times[:, j] for j in range(b.depth))]), "updates not sorted by time"
    # Every time lies in the batch's interval (advanced times stay beyond lower).
    assert b.desc.lower.less_equal_many(b.times).all()


def rows_of(u: Updates) -> list:
    """Sorted (cols, time, diff) tuples."""
    return sorted(zip(zip(*(c.tolist() for c in u.cols)), map(tuple, u.times.tolist()), u.diffs.tolist()))


def ref_consolidate(u: Updates) -> list:
    acc: dict = defaultdict(int)
    for r, t, d in rows_of(u):
        acc[(r, t)] += d
    return sorted((r, t, d) for (r, t), d in acc.items() if d)


def ref_accumulate(raw: list, g) -> dict:
    acc: dict = defaultdict(int)
    for r, t, d in raw:
        if all(x <= y for x, y in zip(t, g)):
            acc[r] += d
    return {r: d for r, d in acc.items() if d}


def check_spine(trace: Trace) -> None:
    """Batches continue one another from the minimum to the trace's upper, and are tries."""
    lower = Antichain.minimum(trace.depth)
    total = 0
    for b in trace.spine.batches():
        assert b.desc.lower == lower, "batch descriptions are not contiguous"
        lower = b.desc.upper
        check_trie(b)
        total += len(b)
    assert lower == trace.upper
    assert total == len(trace)
    trace.spine._check()
    check_table(trace)


def check_table(trace: Trace) -> None:
    """The spine's kept table (which its tail merge reads) has one row per non-empty batch, in order."""
    if trace.ints:
        table = trace.spine.table()
        rows = [b for b in trace.spine.batches() if len(b)]
        assert len(table.matrix) == len(table.batches) == len(rows)
        assert all((table.matrix[i] == b.table_row()).all() for i, b in enumerate(rows))


def relevant_grid(*time_arrays: np.ndarray) -> np.ndarray:
    """Every g whose coordinates are values that occur on that axis (and 0).

    For any g >= 0, flooring each coordinate to the largest such value gives a g' with
    s <= g iff s <= g' for every time s drawn from these arrays (frontiers included), so
    checking the grid checks every g.
    """
    depth = time_arrays[0].shape[1]
    axes = [np.union1d([0], np.concatenate([a[:, j] for a in time_arrays])) for j in range(depth)]
    return np.array(list(itertools.product(*axes)), dtype=np.int64).reshape(-1, depth)


def _accumulate_matrix(rows: list, times: np.ndarray, diffs: np.ndarray, index: dict, G: np.ndarray) -> np.ndarray:
    acc = np.zeros((len(index), len(G)), dtype=np.int64)
    if len(rows):
        ids = np.array([index[r] for r in rows])
        le = np.all(times[:, None, :] <= G[None, :, :], axis=2)
        np.add.at(acc, ids, le * diffs[:, None])
    return acc


def check_trace_against(trace: Trace, raw: list, rng: np.random.Generator | None = None) -> int:
    """For every g >= the compaction frontier, the trace's contents equal the raw updates' sums."""
    depth = trace.depth
    cur = trace.view()
    since = trace.compaction_frontier()
    f = cur.batch.flatten()
    t_rows = list(zip(*(c.tolist() for c in f.cols))) if len(f) else []
    r_rows = [r for r, _, _ in raw]
    r_times = np.array([t for _, t, _ in raw], dtype=np.int64).reshape(-1, depth)
    r_diffs = np.array([d for _, _, d in raw], dtype=np.int64)
    G = relevant_grid(f.times, r_times, since.elements)
    G = G[since.less_equal_many(G)]
    index = {r: i for i, r in enumerate(sorted(set(t_rows) | set(r_rows)))}
    got = _accumulate_matrix(t_rows, f.times, f.diffs, index, G)
    want = _accumulate_matrix(r_rows, r_times, r_diffs, index, G)
    if not np.array_equal(got, want):
        bad = np.argwhere(got != want)[0]
        row = sorted(index)[bad[0]]
        raise AssertionError(f"{row} at {tuple(G[bad[1]])}: trace {got[tuple(bad)]}, raw {want[tuple(bad)]} (since {since})")
    # And through the view's own accumulate, against a plain dict, at a few of them.
    rng = rng if rng is not None else np.random.default_rng(0)
    for g in G[rng.choice(len(G), size=min(4, len(G)), replace=False)] if len(G) else []:
        g = tuple(g.tolist())
        assert cur.accumulate(g) == ref_accumulate(raw, g), f"contents differ at {g} (since {since})"
    return len(G)


# -- the roadmap's worked example ------------------------------------------------------------------

ROADMAP = [(("a", "b"), (0, 0), +1), (("b", "c"), (0, 1), +1), (("a", "c"), (1, 0), +1), (("b", "c"), (1, 1), -1)]
ROADMAP_EXPECT = {
    ((0, 3), (1, 2), (2, 0)): {(("a", "b"), (0, 0), 1), (("b", "c"), (0, 1), 1), (("a", "c"), (1, 0), 1), (("b", "c"), (1, 1), -1)},
    ((1, 2), (2, 0)): {(("a", "b"), (1, 0), 1), (("a", "c"), (1, 0), 1)},  # the (b,c) updates cancel
    ((0, 3), (1, 1)): {(("a", "b"), (0, 1), 1), (("b", "c"), (0, 1), 1), (("a", "c"), (1, 1), 1), (("b", "c"), (1, 1), -1)},
    ((1, 1),): {(("a", "b"), (1, 1), 1), (("a", "c"), (1, 1), 1)},  # everything aggregates; (b,c) cancels
}


def _decode(interner: Interner, u: Updates) -> set:
    return {(r, t, d) for r, t, d in u.to_rows(interner)}


@pytest.mark.parametrize("frontier", list(ROADMAP_EXPECT))
def test_roadmap_example_batch_merge(frontier):
    interner = Interner()
    u = from_rows([r for r, _, _ in ROADMAP], [t for _, t, _ in ROADMAP], [d for _, _, d in ROADMAP], interner, depth=2)
    # Two batches, one per input epoch, merged while advancing to the frontier.
    first = Batch.from_updates(u.take(np.array([0, 1])), desc([(0, 0)], [(1, 0)], depth=2))
    second = Batch.from_updates(u.take(np.array([2, 3])), desc([(1, 0)], [(2, 0)], depth=2))
    merged = first.merge(second, Antichain(frontier))
    check_trie(merged)
    assert _decode(interner, merged.flatten()) == ROADMAP_EXPECT[frontier]
    assert merged.desc.since == Antichain(frontier)
    assert merged.desc.lower == Antichain([(0, 0)]) and merged.desc.upper == Antichain([(2, 0)])
    # Without a frontier nothing changes.
    assert _decode(interner, first.merge(second).flatten()) == {(r, t, d) for r, t, d in ROADMAP}


@pytest.mark.parametrize("frontier", list(ROADMAP_EXPECT))
def test_roadmap_example_trace(frontier):
    interner = Interner()
    u = from_rows([r for r, _, _ in ROADMAP], [t for _, t, _ in ROADMAP], [d for _, _, d in ROADMAP], interner, depth=2)
    tr = Trace(u.kinds, 2)
    h = tr.reader()
    tr.insert_updates(u.take(np.array([0, 1])), upper=Antichain([(1, 0)]))
    tr.insert_updates(u.take(np.array([2, 3])), upper=Antichain([(2, 0)]))
    h.set_logical_compaction(Antichain(frontier))
    tr.compact()
    assert len(list(tr.spine.batches())) == 1
    b = next(tr.spine.batches())
    assert _decode(interner, b.flatten()) == ROADMAP_EXPECT[frontier]
    b_code = interner.code("b")
    if frontier in (((1, 2), (2, 0)), ((1, 1),)):
        assert b_code not in tr.view().keys().tolist()  # a key whose updates cancel disappears
    else:
        c_code = interner.code("c")
        assert tr.view().history(b_code, (c_code,)) == [((0, 1), 1), ((1, 1), -1)]


# -- batches ----------------------------------------------------------------------------------


@st.composite
def raw_updates(draw, depth, n_max=40, keys=6, vals=3, arity=2, t_lo=0, t_hi=4, big=False):
    n = draw(st.integers(0, n_max))
    key = st.sampled_from([-(1 << 62), -5, 0, 7, 1 << 62]) if big else st.integers(0, keys - 1)
    rows = [tuple([draw(key)] + [draw(st.integers(0, vals - 1)) for _ in range(arity - 1)]) for _ in range(n)]
    times = [tuple(draw(st.integers(t_lo, t_hi - 1)) for _ in range(depth)) for _ in range(n)]
    diffs = [draw(st.sampled_from([-2, -1, 1, 1, 2])) for _ in range(n)]
    return rows, times, diffs


@settings(max_examples=150)
@given(st.sampled_from([1, 2, 3]), st.sampled_from([1, 2, 3]), st.data())
def test_from_updates_trie_invariants(depth, arity, data):
    rows, times, diffs = data.draw(raw_updates(depth, arity=arity))
    u = upd(rows, times, diffs, kinds=("i",) * arity, depth=depth)
    b = Batch.from_updates(u)
    check_trie(b)
    assert rows_of(b.flatten()) == ref_consolidate(u)
    assert b.kinds == ("i",) * arity and b.depth == depth
    assert len(b.keys) == len({r[0] for r, _, _ in ref_consolidate(u)})
    assert b.nbytes >= 8 * len(b)


def test_from_updates_example_layout():
    u = upd([(2, 9), (1, 5), (1, 4), (1, 5), (2, 9), (3, 0)], [1, 0, 0, 2, 1, 0], [1, 1, 1, 1, -1, 2])
    b = Batch.from_updates(u)
    assert b.keys.tolist() == [1, 3]  # key 2 cancels completely
    assert b.key_offs.tolist() == [0, 2, 3]
    assert b.vals[0].tolist() == [4, 5, 0]
    assert b.val_offs.tolist() == [0, 1, 3, 4]
    assert b.times.ravel().tolist() == [0, 0, 2, 0]
    assert b.diffs.tolist() == [1, 1, 1, 2]
    assert "2 keys" in repr(b)
    with pytest.raises(ValueError):
        b.keys[0] = 5  # batches are immutable
    key_only = Batch.from_updates(upd([(3,), (1,), (3,)], [0, 0, 1], [1, 1, 1]))
    assert key_only.keys.tolist() == [1, 3] and key_only.key_offs.tolist() == [0, 1, 2]
    assert key_only.val_offs.tolist() == [0, 1, 3] and key_only.vals == ()


@st.composite
def two_batches(draw, big=False):
    depth = draw(st.sampled_from([1, 2, 3]))
    arity = draw(st.sampled_from([1, 2]))
    mid = draw(st.integers(1, 3))
    r1, t1, d1 = draw(raw_updates(depth, arity=arity, t_lo=0, t_hi=mid, big=big))
    r2, t2, d2 = draw(raw_updates(depth, arity=arity, t_lo=mid, t_hi=mid + 3, big=big))
    # The batches split on the first coordinate; the others are free in [0, 3).
    t2 = [(t[0], *(x - mid for x in t[1:])) for t in t2]
    rest = (0,) * (depth - 1)
    lo, up, up2 = [(0, *rest)], [(mid, *rest)], [(mid + 3, *rest)]
    a = upd(r1, t1, d1, kinds=("i",) * arity, depth=depth)
    b = upd(r2, t2, d2, kinds=("i",) * arity, depth=depth)
    ba = Batch.from_updates(a, desc(lo, up, depth=depth))
    bb = Batch.from_updates(b, desc(up, up2, depth=depth))
    frontier = draw(st.one_of(st.none(), st.lists(st.tuples(*[st.integers(0, mid + 4)] * depth), min_size=1, max_size=3)))
    return depth, a, b, ba, bb, (Antichain(frontier) if frontier is not None else None)


@settings(max_examples=150)
@given(two_batches())
def test_merge_equals_consolidated_concatenation(args):
    depth, a, b, ba, bb, frontier = args
    m = ba.merge(bb, frontier)
    check_trie(m)
    u = Updates.concat([a, b])
    if frontier is not None:
        u = u.with_times(advance_by(u.times, frontier))
    assert rows_of(m.flatten()) == ref_consolidate(u)
    assert m.desc.lower == ba.desc.lower and m.desc.upper == bb.desc.upper
    assert m.desc.since == (frontier if frontier is not None else Antichain.minimum(depth))


def test_merge_reports_a_sum_of_diffs_past_int64():
    big = np.iinfo(np.int64).max
    a = Batch.from_updates(upd([(1,)], [0], [big], kinds=("i",)), desc([0], [1]))
    b = Batch.from_updates(upd([(1,)], [1], [1], kinds=("i",)), desc([1], [2]))
    assert rows_of(a.merge(b).flatten()) == [((1,), (0,), big), ((1,), (1,), 1)]
    with pytest.raises(SchemaError, match=r"the diffs of record \(1,\) at time 2 add up past int64"):
        a.merge(b, Antichain([2]))


def test_merge_matches_float_values_as_consolidation_does():
    """NaN equals NaN and -0.0 equals 0.0 in a merge, as in a sort-based consolidation."""
    def fb(vals, t, d):
        u = Updates((np.ones(len(vals), dtype=np.int64), np.array(vals)), np.full((len(vals), 1), t, dtype=np.int64),
                    np.array(d, dtype=np.int64), ("i", "f"))
        return Batch.from_updates(u, desc([t], [t + 1]))
    m = fb([np.nan, -0.0, 2.5], 0, [1, 1, 1]).merge(fb([np.nan, 0.0], 1, [-1, -1]), Antichain([2]))
    assert m.flatten().cols[1].tolist() == [2.5] and m.diffs.tolist() == [1]


@settings(max_examples=100)
@given(two_batches(big=True))
def test_merge_of_unpackable_keys_uses_runs_fallback(args):
    depth, a, b, ba, bb, frontier = args
    m = ba.merge(bb, frontier)
    check_trie(m)
    u = Updates.concat([a, b])
    if frontier is not None:
        u = u.with_times(advance_by(u.times, frontier))
    assert rows_of(m.flatten()) == ref_consolidate(u)
    # And directly: a consolidation told its input is sorted runs gives the same answer.
    cat = Updates.concat([ba.flatten(), bb.flatten()])
    assert rows_of(Batch.from_updates(cat, runs=True).flatten()) == ref_consolidate(cat)


def test_merge_float_values_and_kind_mismatch():
    fa = Updates((np.array([1, 1, 2]), np.array([0.5, -1.0, 0.5])), np.array([[0], [0], [1]]), np.array([1, 1, 1]), ("i", "f"))
    fb = Updates((np.array([1, 2]), np.array([0.5, 0.5])), np.array([[2], [3]]), np.array([-1, -1]), ("i", "f"))
    a = Batch.from_updates(fa, desc([0], [2]))
    b = Batch.from_updates(fb, desc([2], [4]))
    m = a.merge(b, Antichain([4]))
    assert rows_of(m.flatten()) == [((1, -1.0), (4,), 1)]
    with pytest.raises(TypeError, match="cannot merge batches with column kinds"):
        a.merge(Batch.from_updates(upd([(1, 1)], [2], [1]), desc([2], [4])))


@settings(max_examples=60)
@given(two_batches(), st.sampled_from(["path", "bytesio"]))
def test_ipc_round_trip(tmp_path_factory, args, how):
    depth, a, b, ba, bb, frontier = args
    m = ba.merge(bb, frontier)
    if how == "path":
        path = str(tmp_path_factory.mktemp("ipc") / "batch.arrow")
        m.write_ipc(path)
        r = Batch.read_ipc(path)
        os.remove(path)  # the arrays must not depend on the file staying around
    else:
        buf = io.BytesIO()
        m.write_ipc(buf)
        buf.seek(0)
        r = Batch.read_ipc(buf)
    for name in ("keys", "key_offs", "val_offs", "times", "diffs"):
        x, y = getattr(m, name), getattr(r, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name
    assert len(r.vals) == len(m.vals) and all(np.array_equal(x, y) for x, y in zip(m.vals, r.vals))
    assert r.desc == m.desc and r.kinds == m.kinds and r.depth == m.depth
    check_trie(r)
    assert rows_of(r.flatten()) == rows_of(m.flatten())


def test_ipc_round_trip_kinds_and_empty_frontiers(tmp_path):
    u = Updates((np.array([3, 1, 1]), np.array([0.5, 2.0, -1.0]), np.array([7, 8, 9])), np.array([[0, 1], [1, 1], [0, 0]]),
                np.array([1, -1, 2]), ("o", "f", "b"))
    b = Batch.from_updates(u, Description(Antichain.minimum(2), Antichain.empty(2), Antichain([(0, 1), (1, 0)])))
    p = str(tmp_path / "b.arrow")
    b.write_ipc(p)
    r = Batch.read_ipc(p)
    assert r.kinds == ("o", "f", "b") and r.vals[0].dtype == np.float64
    assert r.desc.upper == Antichain.empty(2) and r.desc.since == Antichain([(0, 1), (1, 0)])
    assert rows_of(r.flatten()) == rows_of(b.flatten())
    e = Batch.empty(("i", "i"), 3, desc([(0, 0, 0)], [(1, 0, 0)], depth=3))
    buf = io.BytesIO()
    e.write_ipc(buf)
    buf.seek(0)
    re = Batch.read_ipc(buf)
    assert len(re) == 0 and re.depth == 3 and re.desc == e.desc and len(re.vals) == 1


# -- the spine's fueled merges -------------------------------------------------------------------


@settings(max_examples=100)
@given(two_batches(), st.lists(st.integers(1, 12), min_size=1, max_size=30))
def test_fueled_merge_matches_one_shot_merge(args, fuels):
    depth, a, b, ba, bb, frontier = args
    m = Merging(ba, bb)
    assert len(m) == len(ba) + len(bb) and m.batches() == (ba, bb)
    f = frontier if frontier is not None else Antichain.minimum(depth)
    done = None
    for fuel in itertools.cycle(fuels):
        _, done = m.work(fuel, f)
        if done is not None:
            break
    check_trie(done)
    assert rows_of(done.flatten()) == rows_of(ba.merge(bb, f).flatten())
    assert done.desc == Description(ba.desc.lower, bb.desc.upper, f)


# -- traces: equivalence with a plain accumulation ------------------------------------------------


@st.composite
def trace_script(draw):
    depth = draw(st.sampled_from([1, 2]))
    ops = draw(st.lists(st.sampled_from(["insert"] * 5 + ["advance", "exert", "compact", "drop", "reader", "empty"]),
                        min_size=6, max_size=30))
    eager = draw(st.sampled_from([0, 3, 16, 4096]))
    fuel = draw(st.sampled_from([1, 2, 8]))
    return depth, ops, eager, fuel


@settings(max_examples=120)
@given(trace_script(), st.data())
def test_trace_equals_dict_accumulation(script, data):
    depth, ops, eager, fuel = script
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    settle = data.draw(st.sampled_from([0, 4, 1 << 30]))  # large batches settle when the frontier passes
    tail = data.draw(st.sampled_from([1, 3, 8]))  # small batches wait for `tail` of them, then merge at once
    with mock.patch.object(spine_mod, "EAGER_BELOW", eager), mock.patch.object(spine_mod, "FUEL", fuel), \
            mock.patch.object(spine_mod, "MIN_FUEL", data.draw(st.sampled_from([1, 16]))), \
            mock.patch.object(spine_mod, "SETTLE_MIN", settle), mock.patch.object(spine_mod, "TAIL", tail), \
            mock.patch.object(spine_mod, "SETTLE_SPAN", data.draw(st.sampled_from([1, 64]))), \
            mock.patch.object(spine_mod, "TAIL_ROWS", data.draw(st.sampled_from([4, 256]))):
        tr = Trace(("i", "i"), depth)
        readers = [tr.reader(), tr.reader()]
        raw: list = []
        upper = Antichain.minimum(depth)
        hi = 0
        for op in ops:
            if op in ("insert", "empty"):
                # The next upper: each element beyond some element of the current one.
                k = len(upper)
                steps = rng.integers(0, 3, size=(rng.integers(1, 3), depth))
                new = Antichain(upper.elements[rng.integers(0, k, size=len(steps))] + steps + (np.arange(depth) == 0))
                n = 0 if op == "empty" else int(rng.integers(0, 30))
                cand = rng.integers(0, new.elements.max() + 1, size=(max(n * 4, 1), depth))
                ok = upper.less_equal_many(cand) & ~new.less_equal_many(cand)
                times = cand[ok][:n]
                rows = rng.integers(0, 6, size=(len(times), 2))
                diffs = rng.choice([-1, 1, 2], size=len(times))
                u = Updates((rows[:, 0], rows[:, 1]), times, diffs, ("i", "i"))
                tr.insert_updates(u, upper=new)
                raw.extend(zip(map(tuple, rows.tolist()), map(tuple, times.tolist()), diffs.tolist()))
                upper = new
                hi = max(hi, int(new.elements.max()))
            elif op == "advance" and readers:
                h = readers[int(rng.integers(0, len(readers)))]
                old = h.frontier.elements
                pts = rng.integers(0, hi + 2, size=(int(rng.integers(1, 3)), depth))
                new = Antichain(np.maximum(pts, old[rng.integers(0, len(old), size=len(pts))]))
                h.set_logical_compaction(new)
                hi = max(hi, int(new.elements.max()))
            elif op == "exert":
                tr.exert(int(rng.integers(1, 50)))
            elif op == "compact":
                tr.compact()
                assert len(list(tr.spine.batches())) <= 1
            elif op == "drop" and readers:
                readers.pop(int(rng.integers(0, len(readers)))).drop()
            elif op == "reader":
                readers.append(tr.reader())
            check_spine(tr)
            check_trace_against(tr, raw, rng)
        assert check_trace_against(tr, raw, rng) > 0
        tr.compact()
        check_spine(tr)
        assert check_trace_against(tr, raw, rng) > 0


@settings(max_examples=40)
@given(st.sampled_from([1, 2]), st.sampled_from([0, 8, 4096]), st.data())
def test_untiled_inserts_equal_dict_accumulation(depth, eager, data):
    """Batches inserted without an upper (as a dataflow's arrangements do) may hold any times.

    Many small batches, as batches and into the spine's arena: the tail
    merges, reading the table the spine keeps (built here by every check,
    as a reader's seek builds it).
    """
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    with mock.patch.object(spine_mod, "EAGER_BELOW", eager), mock.patch.object(spine_mod, "FUEL", 1), \
            mock.patch.object(spine_mod, "MIN_FUEL", 1), mock.patch.object(spine_mod, "TAIL", data.draw(st.sampled_from([3, 8]))), \
            mock.patch.object(spine_mod, "TAIL_ROWS", data.draw(st.sampled_from([16, 256]))):
        tr = Trace(("i", "i"), depth)
        h = tr.reader()
        raw: list = []
        for step in range(data.draw(st.integers(1, 30))):
            n = int(rng.integers(0, 25))
            times = rng.integers(0, 6, size=(n, depth))
            rows = rng.integers(0, 8, size=(n, 2))
            diffs = rng.choice([-1, 1], size=n)
            u = Updates((rows[:, 0], rows[:, 1]), times, diffs, ("i", "i"))
            if rng.random() < 0.5:  # an arrangement's insert: a few updates go to the spine's arena
                assert rows_of(tr.insert_consolidating(u)) == ref_consolidate(u)
            else:
                tr.insert_updates(u)
            raw.extend(zip(map(tuple, rows.tolist()), map(tuple, times.tolist()), diffs.tolist()))
            if rng.random() < 0.4:
                old = h.frontier.elements
                pts = rng.integers(0, 6, size=(2, depth))
                h.set_logical_compaction(Antichain(np.maximum(pts, old[rng.integers(0, len(old), size=2)])))
            for b in tr.spine.batches():
                check_trie(b)
            tr.spine._check()
            check_table(tr)
            if rng.random() < 0.3:
                check_trace_against(tr, raw, rng)
        check_trace_against(tr, raw, rng)
        tr.compact()
        check_trace_against(tr, raw, rng)


def _window_batch(keys_in, keys_out, t0, t1, rng):
    n_in, n_out = len(keys_in), len(keys_out)
    key = np.concatenate([keys_in, keys_out])
    val = key % 7
    times = np.concatenate([rng.integers(t0, t1, n_in), rng.integers(t0, t1, n_out)]).reshape(-1, 1)
    diffs = np.concatenate([np.ones(n_in, dtype=np.int64), -np.ones(n_out, dtype=np.int64)])
    return Updates((key, val), times, diffs, ("i", "i"))


def test_trace_equivalence_through_default_fueled_merges():
    """Enough updates that merges above EAGER_BELOW run in slices across insertions."""
    rng = np.random.default_rng(7)
    tr = Trace(("i", "i"), 1)
    h = tr.reader()
    raw: list = []
    saw_merging = 0
    for step in range(40):
        n = 1500
        u = Updates((rng.integers(0, 400, n), rng.integers(0, 3, n)), rng.integers(step * 10, step * 10 + 10, (n, 1)),
                    rng.choice([-1, 1], n), ("i", "i"))
        tr.insert_updates(u, upper=Antichain([step * 10 + 10]))
        raw.extend(zip(zip(u.cols[0].tolist(), u.cols[1].tolist()), map(tuple, u.times.tolist()), u.diffs.tolist()))
        if step % 3 == 0:
            h.set_logical_compaction(Antichain([step * 10 - 15 if step > 2 else 0]))
        saw_merging += any(isinstance(e, Merging) for e in tr.spine.entries)
        if step in (13, 27):
            check_spine(tr)
            since = tr.compaction_frontier().elements[0, 0]
            cur = tr.view()
            for g in range(since, step * 10 + 12, 7):
                assert cur.accumulate(g) == ref_accumulate(raw, (g,))
    assert saw_merging >= 5, "the fueled Merging path was not exercised"
    check_spine(tr)
    since = int(tr.compaction_frontier().elements[0, 0])
    cur = tr.view()
    for g in [since, since + 1, since + 7, 400, 401]:
        assert cur.accumulate(g) == ref_accumulate(raw, (g,))
    # Seeking a set of keys sees the same updates as the full view.
    keys = np.array([0, 5, 17, 399, 1000])
    q, found = tr.seek(keys)
    assert sorted(set(keys[q].tolist())) == sorted(k for k in keys.tolist() if k in set(cur.keys().tolist()))
    assert np.array_equal(keys[q], found.cols[0])
    sub = tr.view(keys)
    assert sub.accumulate(401) == {r: d for r, d in ref_accumulate(raw, (401,)).items() if r[0] in set(keys.tolist())}
    assert sub.accumulate(401, key=5) == {r: d for r, d in ref_accumulate(raw, (401,)).items() if r[0] == 5}


def test_sliding_window_state_stays_bounded():
    """1e5 updates, each key inserted and later removed: state tracks the window, not the history."""
    rng = np.random.default_rng(1)
    window, per_batch, total_keys = 5000, 100, 50_000
    tr = Trace(("i", "i"), 1)
    h = tr.reader()
    sizes = []
    saw_merging = 0
    n_updates = 0
    t = 0
    for start in range(0, total_keys + window, per_batch):
        keys_in = np.arange(start, min(start + per_batch, total_keys))
        keys_out = np.arange(max(start - window, 0), max(start - window + per_batch, 0))
        keys_out = keys_out[keys_out < total_keys]
        u = _window_batch(keys_in, keys_out, t, t + 10, rng)
        tr.insert_updates(u, upper=Antichain([t + 10]))
        n_updates += len(u)
        t += 10
        h.set_logical_compaction(Antichain([t]))
        sizes.append(len(tr))
        saw_merging += any(isinstance(e, Merging) for e in tr.spine.entries)
    assert n_updates == 100_000
    assert saw_merging > 20, "the window never exercised fueled merges"
    # At most `window` keys are live; the spine holds them plus recent insertions and
    # removals not yet merged with what they cancel. It must not grow with the stream.
    assert max(sizes) <= 2 * window, f"trace grew to {max(sizes)} updates"
    q = len(sizes) // 5
    assert max(sizes[3 * q: 4 * q]) <= max(sizes[q: 2 * q]) + per_batch
    tr.compact()
    assert len(tr) == 0  # every key was removed again
    assert tr.contents(t) == {}


def test_sliding_window_compacts_to_live_set():
    tr = Trace(("i", "i"), 1)
    h = tr.reader()
    rng = np.random.default_rng(2)
    for i in range(20):
        keys_in = np.arange(i * 100, i * 100 + 100)
        keys_out = np.arange((i - 3) * 100, (i - 2) * 100) if i >= 3 else np.zeros(0, dtype=np.int64)
        tr.insert_updates(_window_batch(keys_in, keys_out, i * 5, i * 5 + 5, rng), upper=Antichain([i * 5 + 5]))
        h.set_logical_compaction(Antichain([i * 5 + 5]))
    tr.compact()
    assert len(tr) == 300  # keys 1700..1999, one update each, at the frontier
    b = next(tr.spine.batches())
    assert b.keys.tolist() == list(range(1700, 2000)) and set(b.times.ravel().tolist()) == {100}


# -- readers --------------------------------------------------------------------------------------------


def _two_updates_trace():
    tr = Trace(("i",), 1)
    lag, fast = tr.reader(), tr.reader()
    tr.insert_updates(upd([(7,), (7,), (8,)], [1, 2, 0], [1, -1, 1]), upper=Antichain([3]))
    fast.set_logical_compaction(Antichain([3]))
    return tr, lag, fast


def test_lagging_reader_holds_compaction_back():
    tr, lag, fast = _two_updates_trace()
    tr.compact()
    assert tr.compaction_frontier() == Antichain([0])
    assert len(tr) == 3
    assert tr.contents(1) == {(7,): 1, (8,): 1}
    assert tr.contents(2) == {(8,): 1}
    lag.set_logical_compaction(Antichain([2]))
    assert tr.compaction_frontier() == Antichain([2])
    tr.compact()
    assert len(tr) == 1  # 7's updates now share time 2 and cancel
    assert tr.contents(2) == {(8,): 1}


def test_dropping_a_reader_releases_its_hold():
    tr, lag, fast = _two_updates_trace()
    tr.compact()
    assert len(tr) == 3
    with lag:
        pass  # leaving the context drops it
    assert tr.compaction_frontier() == Antichain([3])
    tr.compact()
    assert len(tr) == 1
    fast.drop()
    fast.drop()  # idempotent
    # With no readers left, compaction does not regress to the minimum.
    assert tr.compaction_frontier() == Antichain([3])
    late = tr.reader()
    assert late.frontier == Antichain([3])


def test_reader_errors():
    tr, lag, fast = _two_updates_trace()
    with pytest.raises(ValueError, match="may not go backwards"):
        fast.set_logical_compaction(Antichain([1]))
    with pytest.raises(ValueError, match="mixed time depths"):
        fast.set_logical_compaction(Antichain([(4, 4)]))
    fast.set_logical_compaction(Antichain([3]))  # standing still is fine
    lag.drop()
    for use in (lambda: lag.view(), lambda: lag.seek(np.array([7])), lambda: lag.set_logical_compaction(Antichain([5]))):
        with pytest.raises(ValueError, match="reader handle was dropped"):
            use()
    assert fast.view().accumulate(3) == {(8,): 1}
    tr.compact()
    with pytest.raises(ValueError, match="behind the trace's compaction frontier"):
        tr.reader(Antichain([1]))


# -- errors ---------------------------------------------------------------------------------------------


def test_batch_times_outside_description():
    with pytest.raises(ValueError, match=r"batch time \(3,\) is not beyond its lower frontier Antichain\(\{5\}\)"):
        Batch.from_updates(upd([(1,)], [3], [1]), desc([5], [10]))
    with pytest.raises(ValueError, match=r"batch time \(10,\) is not before its upper frontier Antichain\(\{10\}\)"):
        Batch.from_updates(upd([(1,), (2,)], [5, 10], [1, 1]), desc([5], [10]))
    with pytest.raises(ValueError, match=r"batch time \(1, 2\) is not before its upper"):
        Batch.from_updates(upd([(1,)], [(1, 2)], [1], depth=2), desc([(0, 0)], [(1, 0), (0, 5)], depth=2))
    with pytest.raises(ValueError, match="at least a key column"):
        Batch.from_updates(Updates((), np.zeros((1, 1), dtype=np.int64), np.ones(1, dtype=np.int64), ()))


def test_trace_insert_errors():
    tr = Trace(("i",), 1)
    tr.insert_updates(upd([(1,)], [0], [1]), upper=Antichain([5]))
    with pytest.raises(ValueError, match=r"batch lower Antichain\(\{4\}\) does not continue the trace, whose upper is Antichain\(\{5\}\)"):
        tr.insert(Batch.from_updates(upd([(1,)], [6], [1]), desc([4], [8])))
    with pytest.raises(ValueError, match="not beyond its lower frontier"):
        tr.insert_updates(upd([(1,)], [4], [1]), upper=Antichain([8]))
    with pytest.raises(ValueError, match="mixed time depths"):
        tr.insert(Batch.from_updates(upd([(1,)], [(5, 0)], [1], depth=2), desc([(5, 0)], [(8, 0)], depth=2)))
    with pytest.raises(ValueError, match="mixed time depths"):
        tr.insert_updates(upd([(1,)], [(6, 0)], [1], depth=2), upper=Antichain([8]))
    with pytest.raises(TypeError, match="column kinds"):
        tr.insert(Batch.from_updates(upd([(1, 2)], [6], [1]), desc([5], [8])))
    assert len(tr) == 1 and tr.upper == Antichain([5])  # nothing half-inserted
    tr.insert_updates(upd([(2,)], [6], [1]), upper=Antichain([8]))
    assert tr.contents(7) == {(1,): 1, (2,): 1}


def test_mixed_depth_errors_elsewhere():
    with pytest.raises(ValueError, match="mixed time depths"):
        Batch.from_updates(upd([(1,)], [(0, 0)], [1], depth=2), desc([0], [5]))
    with pytest.raises(ValueError, match="mixed time depths"):
        advance_by(np.zeros((2, 2), dtype=np.int64), Antichain([1]))
    with pytest.raises(ValueError, match="mixed time depths"):
        Antichain([(0, 1), (2,)])
    with pytest.raises(TypeError, match="field 1: unsupported field value"):
        from_rows([(1, [2])], 0, 1, Interner())
    with pytest.raises(TypeError, match="diffs must be integers"):
        from_rows([(1,)], 0, [0.5], Interner())


# -- views ------------------------------------------------------------------------------------------


def test_view_values_history_accumulate():
    tr = Trace(("i", "i"), 1)
    tr.insert_updates(upd([(1, 10), (1, 11), (2, 10), (1, 10)], [0, 1, 1, 2], [1, 1, 1, -1]), upper=Antichain([3]))
    tr.insert_updates(upd([(1, 12), (3, 10)], [3, 4], [2, 1]), upper=Antichain([5]))
    c = tr.view()
    assert c.keys().tolist() == [1, 2, 3]
    assert c.values(1) == [(10,), (11,), (12,)]
    assert c.values(9) == []
    assert c.history(1, (10,)) == [((0,), 1), ((2,), -1)]
    assert c.history(1, (99,)) == [] and c.history(9, (10,)) == []
    assert c.accumulate(1) == {(1, 10): 1, (1, 11): 1, (2, 10): 1}
    assert c.accumulate(4) == {(1, 11): 1, (2, 10): 1, (1, 12): 2, (3, 10): 1}
    assert c.accumulate(4, key=1) == {(1, 11): 1, (1, 12): 2}
    sub = tr.view(np.array([3, 1, 3]))
    assert sub.keys().tolist() == [1, 3]
    q, u = tr.seek(np.array([2, 4]))
    assert q.tolist() == [0] and u.cols[0].tolist() == [2] and u.cols[1].tolist() == [10]
    q, u = tr.seek(np.array([], dtype=np.int64))
    assert len(q) == 0 and len(u) == 0 and u.kinds == ("i", "i")


def test_a_large_batch_collapses_once_the_frontier_passes_its_times():
    """K data times in one step take no more room than one, once the frontier passes them."""
    rng = np.random.default_rng(3)
    for depth in (1, 2):
        tr = Trace(("i", "i"), depth)
        h = tr.reader()
        n = 4 * spine_mod.SETTLE_MIN
        rows = rng.integers(0, 8, size=(n, 2))
        times = np.column_stack([rng.integers(0, 1000, size=n)] + [rng.integers(0, 3, size=n)] * (depth - 1))
        tr.insert_updates(Updates((rows[:, 0], rows[:, 1]), times, np.ones(n, dtype=np.int64), ("i", "i")),
                          upper=Antichain([(1000,) + (0,) * (depth - 1)]))
        probe = (1000,) + (5,) * (depth - 1)
        before = tr.contents(probe)
        h.set_logical_compaction(Antichain([(1000,) + (0,) * (depth - 1)]))
        assert tr.contents(probe) == before
        assert len(tr) <= 64 * 3 ** (depth - 1)  # one update per (key, value, iteration)


def _two_large_batches(key_range: int, times_of, seed: int) -> Trace:
    """A trace holding two batches large enough to merge with fuel; ``times_of(step, n)`` gives each one's times."""
    rng = np.random.default_rng(seed)
    tr = Trace(("i", "i"), 1)
    n = 4 * spine_mod.EAGER_BELOW
    for step, upper in ((0, 1000), (1, 2000)):
        rows = rng.integers(0, key_range, size=(n, 2))
        tr.insert_updates(Updates((rows[:, 0], rows[:, 1]), times_of(step, n, rng), np.ones(n, dtype=np.int64),
                                  ("i", "i")), upper=Antichain([upper]))
    assert any(isinstance(e, Merging) for e in tr.spine.entries)
    return tr


def test_a_merge_in_progress_over_many_passed_times_finishes_advanced():
    """Two large batches of a thousand data times each, merging with fuel, collapse once the frontier passes."""
    tr = _two_large_batches(8, lambda step, n, rng: rng.integers(step * 1000, step * 1000 + 1000, size=(n, 1)), 4)
    h = tr.reader()
    before = tr.contents(2000)
    h.set_logical_compaction(Antichain([2000]))
    assert not any(isinstance(e, Merging) for e in tr.spine.entries)
    tr.spine._check()
    assert tr.contents(2000) == before
    assert len(tr) <= 64  # one update per (key, value)


def test_a_merge_in_progress_over_few_times_is_left_to_fuel():
    """A step of a few data times never pays for finishing a large merge at once."""
    tr = _two_large_batches(10_000, lambda step, n, rng: np.full((n, 1), 999 + step), 5)
    h = tr.reader()
    h.set_logical_compaction(Antichain([2000]))
    assert any(isinstance(e, Merging) for e in tr.spine.entries)
