"""The null-mask helpers (:mod:`ddflow.base.nullmask`) against a plain list of NULL flags per row.

Widths from 0 to 200 columns (so across the word boundaries at 63 and
126); a row of 63 columns or fewer must keep the one-word layout
``sum(null_j << j)`` the engine always had.
"""
import numpy as np
from hypothesis import given, settings, strategies as st

from ddflow.base import nullmask
from ddflow.base.schema import Schema


def flags(draw, n: int, rows: int) -> list[np.ndarray]:
    cols = []
    for _ in range(n):
        cols.append(np.array(draw(st.lists(st.booleans(), min_size=rows, max_size=rows)), dtype=bool))
    return cols


widths = st.one_of(st.integers(0, 70), st.sampled_from([62, 63, 64, 125, 126, 127, 128, 189, 190, 200]))


@st.composite
def nulls(draw, n=None):
    n = draw(widths) if n is None else n
    rows = draw(st.integers(1, 4))
    return flags(draw, n, rows), rows


@settings(max_examples=60, deadline=None)
@given(nulls())
def test_encode_then_decode_gives_the_flags(case):
    cols, rows = case
    masks = nullmask.encode(cols, rows)
    assert len(masks) == nullmask.words(len(cols)) == max(1, -(-len(cols) // 63))
    assert all(m.dtype == np.int64 and (m >= 0).all() for m in masks)  # the sign bit is never used
    for got, want in zip(nullmask.null_columns(masks, len(cols)), cols):
        assert got.tolist() == want.tolist()
    for j in range(len(cols)):
        assert nullmask.null_column(masks, j).tolist() == cols[j].tolist()
        assert [nullmask.row_null([int(m[r]) for m in masks], j) for r in range(rows)] == cols[j].tolist()
    for r in range(rows):
        row = tuple(int(m[r]) for m in masks)
        assert nullmask.row_encode([bool(c[r]) for c in cols]) == row
        bits = nullmask.packed(row)
        assert nullmask.unpacked(bits, len(cols)) == row
        assert all(nullmask.packed_null(bits, j) == bool(cols[j][r]) for j in range(len(cols)))


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_narrow_rows_keep_one_word_laid_out_as_before(data):
    n = data.draw(st.integers(0, 63))
    cols, rows = data.draw(nulls(n))
    old = np.zeros(rows, dtype=np.int64)
    for j, c in enumerate(cols):
        old |= c.astype(np.int64) << j
    (mask,) = nullmask.encode(cols, rows)
    assert mask.tolist() == old.tolist()
    assert Schema(tuple(f"c{j}" for j in range(n)), ("bigint",) * n).kinds == ("i",) * (n + 1)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_concat_and_sliced_move_the_right_bits(data):
    rows = data.draw(st.integers(1, 3))
    parts = [flags(data.draw, data.draw(widths), rows) for _ in range(data.draw(st.integers(1, 3)))]
    whole = [c for p in parts for c in p]
    got = nullmask.concat([(nullmask.encode(p, rows), len(p)) for p in parts])
    assert [m.tolist() for m in got] == [m.tolist() for m in nullmask.encode(whole, rows)]
    n = len(whole)
    offset = data.draw(st.integers(0, n))
    k = data.draw(st.integers(0, n - offset))
    cut = nullmask.sliced(got, offset, k)
    assert [m.tolist() for m in cut] == [m.tolist() for m in nullmask.encode(whole[offset:offset + k], rows)]
    before, after = data.draw(widths), data.draw(widths)
    pad = nullmask.padded(nullmask.encode(whole, rows), n, before, after)
    nones = [np.ones(rows, dtype=bool)]
    assert [m.tolist() for m in pad] == [m.tolist() for m in nullmask.encode(nones * before + whole + nones * after, rows)]
    assert nullmask.packed_sliced(nullmask.packed([int(m[0]) for m in got]), offset, k) == \
        nullmask.packed([int(m[0]) for m in cut])


@settings(max_examples=30, deadline=None)
@given(widths, st.integers(0, 3))
def test_all_null_zeros_and_widened(n, more):
    assert all(x.tolist() == [True] * 2 for x in nullmask.null_columns(nullmask.all_null(n, 2), n))
    z = nullmask.zeros(n, 2)
    w = nullmask.widened(z, n, more)
    assert len(w) == nullmask.words(n + more)
    assert not any(x.any() for x in nullmask.null_columns(w, n + more))
    assert nullmask.packed_with_null(0, n) == 1 << n


def test_a_wide_schema_encodes_and_decodes_rows():
    s = Schema.of({f"c{j}": "bigint" if j % 2 else "string" for j in range(130)})
    row = tuple(None if j in (0, 62, 63, 64, 125, 126, 127, 129) else (j if j % 2 else str(j)) for j in range(130))
    stored = s.encode_row(row, "t")
    assert len(stored) == s.width == 133 and s.kinds[130:] == ("i", "i", "i")
    assert s.decode_row(stored) == row
    assert nullmask.mask_names(130) == ("__null_mask", "__null_mask_1", "__null_mask_2")
