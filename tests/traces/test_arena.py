"""The spine's arena: each small batch written by one native call (or its plain reference) is the batch the reference
builds."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddflow.base.consolidate import consolidate
from ddflow.base.kernels import SMALL_ROWS, key_matrix
from ddflow.base.lattice import Antichain
from ddflow.base.native import native_module
from ddflow.base.updates import Updates
from ddflow.traces import Trace
from ddflow.traces.arena import Arena, arena_insert, words_for
from ddflow.traces.batch import Batch, Description
from ddflow.traces.layout import VAL0, BatchTable, batch_row, empty_table
from kernel_modes import MODES, as_run


def _updates(rng, n, arity, depth, diffs=(-1, 1, 2)):
    cols = tuple(rng.integers(0, 4, size=n) for _ in range(arity))
    return Updates(cols, rng.integers(0, 3, size=(n, depth)), rng.choice(diffs, size=n), ("i",) * arity)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, SMALL_ROWS), st.integers(0, 2**32 - 1),
       st.sampled_from(MODES))
def test_arena_insert_writes_the_batch_the_reference_builds(arity, depth, n, seed, mode):
    """Batch after batch, plain and native: the returned updates are ``consolidate``'s, and each row describes, in
    the buffer, the trie ``Batch.from_updates`` builds of them; rows before the arena's are left alone."""
    rng = np.random.default_rng(seed)
    kinds = ("i",) * arity
    spine_rows = BatchTable.of([Batch.from_updates(consolidate(_updates(rng, 5, arity, depth)))], depth, arity)
    a = Arena(kinds, depth, 4, spine_rows)
    kernel = as_run(arena_insert, mode)

    def insert(K, diffs):
        C, T, D, used, overflow = kernel(K, diffs, a.arity, *a.target())
        if len(D) and not overflow:
            a.written(used, len(D))
        return C, T, D, overflow
    wanted = []
    for _ in range(4):
        u = _updates(rng, int(rng.integers(1, n + 1)), arity, depth)
        want = consolidate(u)
        assert a.fits(len(u))
        C, T, D, overflow = insert(key_matrix(u.cols, u.times), u.diffs)
        assert not overflow
        assert [c.tolist() for c in C] == [c.tolist() for c in want.cols]
        assert T.tolist() == want.times.tolist() and D.tolist() == want.diffs.tolist()
        if len(want):
            wanted.append(Batch.from_updates(want))
    assert a.n == len(wanted) and a.updates == sum(len(b) for b in wanted)
    assert np.array_equal(a.table().matrix[:1], spine_rows.matrix)
    for i, (got, ref) in enumerate(zip(a.batches(), wanted)):
        for x, y in zip((got.keys, *got.vals, got.key_offs, got.val_offs, got.times, got.diffs),
                        (ref.keys, *ref.vals, ref.key_offs, ref.val_offs, ref.times, ref.diffs)):
            assert x.tolist() == y.tolist()
        assert a.table().matrix[1 + i].tolist() == batch_row(got, []).tolist()  # the kernel's row, read back
    a._check()


@pytest.mark.parametrize("mode", MODES)
def test_arena_insert_writes_nothing_when_updates_cancel_or_a_sum_overflows(mode):
    kernel = as_run(arena_insert, mode)
    big = np.iinfo(np.int64).max
    buf, T = np.zeros(words_for(2, 2, 1), dtype=np.int64), np.zeros((1, 11), dtype=np.int64)
    K = np.array([[1, 2, 0], [1, 2, 0]], dtype=np.int64)
    for diffs, overflow in ((np.array([1, -1]), False), (np.array([big, big]), True)):
        C, Tm, D, used, over = kernel(K, diffs, 2, buf, 0, T, 0)
        assert over is overflow and used == 0 and not buf.any() and not T.any()
        assert overflow or len(D) == 0


def test_a_sum_past_int64_inserts_nothing_and_names_the_record():
    from ddflow.errors import SchemaError

    big = np.iinfo(np.int64).max
    t = Trace(("i", "i"), depth=1)
    t.insert_consolidating(Updates((np.array([3]), np.array([4])), np.zeros((1, 1), dtype=np.int64), np.array([1]), ("i", "i")))
    with pytest.raises(SchemaError, match=r"\(1, 2\).*add up past int64"):
        t.insert_consolidating(Updates((np.array([1, 1]), np.array([2, 2])), np.zeros((2, 1), dtype=np.int64),
                                       np.array([big, big]), ("i", "i")))
    assert t.contents(0) == {(3, 4): 1} and len(t) == 1
    t.spine._check()


def test_views_of_an_arena_stay_valid_after_it_is_merged_away():
    """A batch handed out as a view of the arena keeps reading what it read after the arena is merged and more
    inserted (a merged arena is dropped, never reused)."""
    rng = np.random.default_rng(1)
    t = Trace(("i", "i"), depth=1)
    t.insert_consolidating(_updates(rng, 3, 2, 1))
    first = next(iter(t.spine.batches()))
    seen = [first.keys.tolist(), first.times.tolist(), first.diffs.tolist()]
    for _ in range(40):
        t.insert_consolidating(_updates(rng, 3, 2, 1))
        t.spine._check()
    assert [first.keys.tolist(), first.times.tolist(), first.diffs.tolist()] == seen


def test_a_tiled_batch_after_arena_batches_merges_them_first():
    """A tiled insert continues every batch before it, the arena's too: the arena is merged into the spine first."""
    rng = np.random.default_rng(2)
    t = Trace(("i", "i"), depth=1)
    raw = []
    for _ in range(3):
        u = _updates(rng, 4, 2, 1)
        t.insert_consolidating(u)
        raw.append(u)
    assert t.spine._arena is not None and t.spine._arena.n == 3
    u = _updates(rng, 4, 2, 1)
    t.insert_updates(u, upper=Antichain(np.array([[5]])))
    raw.append(u)
    assert t.spine._arena is None and t.upper == Antichain(np.array([[5]]))
    t.spine._check()
    want = consolidate(Updates.concat(raw))
    for time in range(4):
        acc = {}
        for row, tm, d in zip(zip(*(c.tolist() for c in want.cols)), want.times[:, 0].tolist(), want.diffs.tolist()):
            if tm <= time:
                acc[row] = acc.get(row, 0) + d
        assert t.contents(time) == {r: d for r, d in acc.items() if d}


def test_readers_see_the_arena_through_the_table_and_compaction_merges_it():
    """``table()`` has a row per batch, the arena's after the spine's; ``compact`` leaves one batch."""
    rng = np.random.default_rng(3)
    t = Trace(("i", "i"), depth=2)
    for n in (40, 3, 2, 5):
        t.insert_consolidating(_updates(rng, n, 2, 2))
    rows = [b for b in t.spine.batches() if len(b)]
    assert len(t.spine.table().matrix) == len(rows) == 4 and t.spine._arena.n == 3
    assert all(np.array_equal(r, b.table_row()) for r, b in zip(t.spine.table().matrix, rows))
    before = {tm: t.contents(tm) for tm in [(0, 0), (1, 2), (2, 2)]}
    t.compact()
    assert t.spine._arena is None and len(list(t.spine.batches())) == 1
    assert {tm: t.contents(tm) for tm in before} == before
    assert Description.covering(2).since == Antichain.minimum(2)
    assert len(empty_table(2)) == 0


def test_a_large_batch_after_arena_batches_merges_them_first():
    """A batch of ``TAIL_ROWS`` or more ends the tail: the arena's batches are merged before it, so that the merge
    rules pair it with them (left in the arena, a step of many updates read up to ``TAIL`` more batches)."""
    from ddflow.traces import spine

    rng = np.random.default_rng(4)
    t = Trace(("i", "i"), depth=1)
    for _ in range(3):
        t.insert_consolidating(_updates(rng, 4, 2, 1))
    n = spine.TAIL_ROWS + 10
    t.insert_consolidating(Updates((np.arange(n), np.arange(n)), np.zeros((n, 1), dtype=np.int64), np.ones(n, dtype=np.int64),
                                   ("i", "i")))
    assert t.spine._arena is None
    t.insert_consolidating(_updates(rng, 40, 2, 1))  # a small batch, but past SMALL_ROWS: the arena stays out of it
    t.insert_consolidating(_updates(rng, 4, 2, 1))
    assert t.spine._arena is not None and t.spine._arena.n == 1
    t.spine._check()


def test_a_kernel_writes_where_readers_read_after_the_spine_changed_under_the_arena():
    """The spine's own rows change under a non-empty arena (a batch appended): ``arena_room`` brings the arena's
    copy up to date, so a kernel told where to write writes where readers read, and the table read after it moves
    nothing; a rebase between ``target`` and ``written`` is refused."""
    rng = np.random.default_rng(5)
    t = Trace(("i", "i"), depth=1)
    t.insert_consolidating(_updates(rng, 3, 2, 1))
    n = 40  # untiled and under TAIL_ROWS: appended to the spine, the arena stays
    t.insert_updates(Updates((np.arange(n), np.arange(n)), np.zeros((n, 1), dtype=np.int64), np.ones(n, dtype=np.int64),
                             ("i", "i")))
    assert t.spine._arena.n == 1 and t.spine._arena.src is not t.spine._entries_table()
    a = t.spine.arena_room(SMALL_ROWS)
    assert a.n == 1 and a.src is t.spine._entries_table()
    target = a.target()
    t.spine.table()  # what a step reads after asking where to write
    u = _updates(rng, 3, 2, 1)
    C, T, D, used, overflow = arena_insert(key_matrix(u.cols, u.times), u.diffs, 2, *target)
    t.spine.arena_written(used, len(D))
    t.spine._check()
    assert sum(len(b) for b in t.spine.batches()) == len(t) and len(t.spine.table().matrix) == 3
    a.target()
    a.rebase(t.spine._entries_table())
    with pytest.raises(RuntimeError, match="rebased between"):
        a.written(used, 1)


def _rebased(T, buf, at):
    """Table ``T`` with the addresses of its row ``at`` as word offsets into ``buf`` (two runs write two buffers)."""
    R = T.copy()
    row = R[at, 3:]
    row[row != 0] = (row[row != 0] - buf.ctypes.data) // 8
    return R.tolist()


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, SMALL_ROWS), st.integers(0, 2**32 - 1), st.booleans())
def test_native_write_trie_and_insert_fields_write_what_the_references_write(arity, depth, n, seed, extreme):
    """The helpers the operators' kernels write into an arena with, native against the plain functions: the same
    words in the buffer, the same row (addresses as offsets into it), the same results."""
    from ddflow.traces.arena import insert_fields, write_trie

    rng = np.random.default_rng(seed)
    u = consolidate(_updates(rng, n, arity, depth))
    if extreme:
        I64 = np.iinfo(np.int64)
        edges = np.array([I64.min, -1, 0, I64.max], dtype=np.int64)
        u = consolidate(Updates(tuple(rng.choice(edges, size=n) for _ in range(arity)),
                                rng.choice(edges[edges >= 0], size=(n, depth)), rng.choice([-1, 1, 2], size=n),
                                ("i",) * arity))
    if not len(u):
        return
    C = np.stack(u.cols).astype(np.int64)
    N = native_module().traces
    words = 7 + words_for(len(u), arity, depth)
    runs = [(np.full(words, -5, dtype=np.int64), np.full((2, VAL0 + arity - 1), -5, dtype=np.int64)) for _ in range(4)]
    used = [write_trie(C, u.times, u.diffs, runs[0][0], 7, runs[0][1], 1),
            N.write_trie(C, u.times, u.diffs, runs[1][0], 7, runs[1][1], 1)]
    assert used[0] == used[1] <= words
    assert runs[0][0].tolist() == runs[1][0].tolist() and _rebased(*runs[0][::-1], 1) == _rebased(*runs[1][::-1], 1)
    # Fields in another order (a projection), consolidated again: what a join routed to an arrangement writes.
    idx = rng.permutation(arity).astype(np.int64)
    ref = insert_fields(C, u.times, u.diffs, idx, runs[2][0], 7, runs[2][1], 0)
    got = N.insert_fields(C, u.times, u.diffs, idx, runs[3][0], 7, runs[3][1], 0)
    for a, b in zip(ref[:3], got[:3]):
        assert a.dtype == b.dtype and a.shape == b.shape and a.tolist() == b.tolist()
    assert tuple(ref[3:]) == tuple(got[3:])
    assert runs[2][0].tolist() == runs[3][0].tolist() and _rebased(*runs[2][::-1], 0) == _rebased(*runs[3][::-1], 0)


def test_native_arena_insert_refuses_a_buffer_without_room_and_a_row_it_lacks():
    """What the reference takes on trust (room past ``used``, a row ``at``) the native kernel checks: a ValueError,
    with nothing written, never a write past the buffer."""
    N = native_module().traces
    K = np.array([[1, 2, 0], [3, 4, 0]], dtype=np.int64)
    diffs = np.ones(2, dtype=np.int64)
    buf, T = np.zeros(words_for(2, 2, 1), dtype=np.int64), np.zeros((1, VAL0 + 1), dtype=np.int64)
    assert N.arena_insert(K, diffs, 2, buf, 0, T, 0)[3] <= len(buf)
    buf[:], T[:] = 0, 0
    for args, match in (((K, diffs, 2, buf, 1, T, 0), "words_for"), ((K, diffs, 2, buf[:-1].copy(), 0, T, 0), "words_for"),
                        ((K, diffs, 2, buf, 0, T, 1), "no row 1"), ((K, diffs, 2, buf, 0, T[:, :-1].copy(), 0), "no row"),
                        ((K, diffs[:1].copy(), 2, buf, 0, T, 0), "differ in length"), ((K, diffs, 4, buf, 0, T, 0), "m must")):
        with pytest.raises(ValueError, match=match):
            N.arena_insert(*args)
    assert not buf.any() and not T.any()
    with pytest.raises(ValueError, match="idx names a field"):
        N.insert_fields(K[:, :2].T.copy(), K[:, 2:].copy(), diffs, np.array([0, 2], dtype=np.int64), buf, 0, T, 0)
    with pytest.raises(TypeError):  # a read-only buffer is no place to write: refused, not copied
        ro = buf.copy()
        ro.flags.writeable = False
        N.arena_insert(K, diffs, 2, ro, 0, T, 0)
