// A trace's batches as one int64 table of addresses (traces/layout.py): the table's columns, views of a
// batch's arrays through it, and the table kernels (seek_table_within, histories, trie_with_row).
//
// A table `T` has one row per batch (FIELDS below): counts, then the addresses of the batch's arrays.  The
// caller keeps the owning arrays alive for the call (traces/layout.py's BatchTable, traces/arena.py's
// Arena).  Addresses cannot be checked cheaply: a table is the caller's invariant (every address points
// at an array of the length its counts say, offsets in exactly one of the two widths), as it is for the
// numba kernels; the bounds-checked build (`make asan`) checks every access within those lengths.
#pragma once

#include <tuple>

#include "base/kernels.hpp"

namespace ddflow {

//: The columns of a table row (traces/layout.py's NKEYS ... VAL0): counts, then addresses.  Offsets are
//: in 32 or 64 bits: the address of the other width is 0.  VAL0 + j - 1 is value column j (1 <= j < arity).
constexpr i64 NKEYS = 0, NVALS = 1, NUPD = 2, KEYS = 3, KOFFS64 = 4, KOFFS32 = 5, VOFFS64 = 6, VOFFS32 = 7,
              TIMES = 8, DIFFS = 9, VAL0 = 10;

// A batch's offsets, whichever width they have: the pair (64-bit view, 32-bit view) of the Python twins
// key_offsets/val_offsets, read by `o[i]` (Python's offset(o64, o32, i)).  Exactly one pointer is set.
struct Offsets {
    const i64* o64 = nullptr;
    const i32* o32 = nullptr;
    i64 n = 0;
    Offsets() = default;
    Offsets(const i64* p64, const i32* p32, i64 n_) : o64(p64), o32(p32), n(n_) {}
    Offsets(Vec<const i64> v) : o64(v.p), n(v.n) {}  // NOLINT: a view of either width reads as offsets
    Offsets(Vec<const i32> v) : o32(v.p), n(v.n) {}  // NOLINT
    // offset(o64, o32, i): offset i, as int64.  O(1).
    i64 operator[](i64 i) const {
        DDFLOW_CHECK_INDEX("offsets", i, n);
        return o64 ? o64[i] : (i64)o32[i];
    }
    i64 size() const { return n; }
};

// offset(o64, o32, i): offset `i` of a batch, whichever width (the Python helper's name).  O(1).
inline i64 offset(const Offsets& o, i64 i) { return o[i]; }

// key_offsets(T, b): batch b's key offsets (NKEYS + 1 of them), 64- or 32-bit.  O(1).
inline Offsets key_offsets(Mat<const i64> T, i64 b) {
    const i64 n = T(b, NKEYS) + 1;
    const i64 a64 = T(b, KOFFS64), a32 = T(b, KOFFS32);
    if (a64) return Offsets(reinterpret_cast<const i64*>((intptr_t)a64), nullptr, n);
    return Offsets(nullptr, reinterpret_cast<const i32*>((intptr_t)a32), a32 ? n : 0);
}

// val_offsets(T, b): batch b's value offsets (NVALS + 1 of them), 64- or 32-bit.  O(1).
inline Offsets val_offsets(Mat<const i64> T, i64 b) {
    const i64 n = T(b, NVALS) + 1;
    const i64 a64 = T(b, VOFFS64), a32 = T(b, VOFFS32);
    if (a64) return Offsets(reinterpret_cast<const i64*>((intptr_t)a64), nullptr, n);
    return Offsets(nullptr, reinterpret_cast<const i32*>((intptr_t)a32), a32 ? n : 0);
}

// Batch b's keys (view_i64(T[b, KEYS], T[b, NKEYS])).  O(1).
inline Vec<const i64> batch_keys(Mat<const i64> T, i64 b) { return view_at<const i64>(T(b, KEYS), T(b, NKEYS)); }
// Batch b's value column j, 1 <= j < arity (view_i64(T[b, VAL0 + j - 1], T[b, NVALS])).  O(1).
inline Vec<const i64> batch_vals(Mat<const i64> T, i64 b, i64 j) {
    return view_at<const i64>(T(b, VAL0 + j - 1), T(b, NVALS));
}
// Batch b's (NUPD, depth) times (view_2d(T[b, TIMES], T[b, NUPD], depth)).  O(1).
inline Mat<const i64> batch_times(Mat<const i64> T, i64 b, i64 depth) {
    return view2d_at<const i64>(T(b, TIMES), T(b, NUPD), depth);
}
// Batch b's diffs (view_i64(T[b, DIFFS], T[b, NUPD])).  O(1).
inline Vec<const i64> batch_diffs(Mat<const i64> T, i64 b) { return view_at<const i64>(T(b, DIFFS), T(b, NUPD)); }

// find_key: position of x in the sorted keys, or -1.  O(log n).
inline i64 find_key(Vec<const i64> keys, i64 x) {
    i64 a = 0, b = keys.n;
    while (a < b) {
        i64 h = (a + b) >> 1;
        if (keys[h] < x) a = h + 1;
        else b = h;
    }
    return a < keys.n && keys[a] == x ? a : -1;
}

// lower_bound_from: the first position at or after lo whose key is not below x (keys sorted; x at least
// keys[lo - 1]): a galloping search, O(log d) for a distance d.
inline i64 lower_bound_from(Vec<const i64> keys, i64 x, i64 lo) {
    const i64 n = keys.n;
    i64 step = 1, hi = lo;
    while (hi < n && keys[hi] < x) {
        lo = hi + 1;
        hi += step;
        step *= 2;
    }
    if (hi > n) hi = n;
    while (lo < hi) {
        i64 h = (lo + hi) >> 1;
        if (keys[h] < x) lo = h + 1;
        else hi = h;
    }
    return lo;
}

// trie_row: batch_row's row (VAL0 + V.rows fields) for trie arrays a kernel just made: offsets int32, the
// value columns the rows of V ((arity - 1) x values).  The row holds these views' addresses: the arrays
// must be the very buffers the kernel returns (an Array's buffer keeps its address when it becomes a numpy
// array).  O(arity).
Array<i64> trie_row(Vec<const i64> keys, Vec<const i32> key_offs, Mat<const i64> V, Vec<const i32> val_offs,
                    Mat<const i64> times, Vec<const i64> diffs);

// What build_trie / trie_with_row return: (keys, key_offs, V, val_offs, row).
using Trie = std::tuple<Array<i64>, Array<i32>, Array<i64>, Array<i32>, Array<i64>>;

// build_trie: the trie levels and table row of consolidated updates (a kernel helper; trie_with_row's
// body).  `K` is any (n, m) reader of the sorted, consolidated rows (key first): a Mat, or Transposed(C)
// for an (m, n) matrix of columns (Python's build_trie(C.T, ...)).  `times` (n x depth) and `diffs` are
// the arrays the batch keeps as they are: the row points at them.  Returns (keys, key_offs, V, val_offs,
// row), offsets int32 (the caller sends fewer than 2**31 updates).  O(n m).
template <class KM>
Trie build_trie(const KM& K, Mat<const i64> times, Vec<const i64> diffs) {
    const i64 n = K.rows, m = K.cols;
    auto [kstarts, vstarts, koffs] = trie_starts(K);
    const i64 nk = kstarts.size(), nv = vstarts.size();
    Array<i64> keys(nk);
    Array<i32> key_offs(nk + 1);
    Array<i64> V(m - 1, nv);
    Array<i32> val_offs(nv + 1);
    for (i64 g = 0; g < nk; ++g) keys[g] = K(kstarts[g], 0);
    for (i64 g = 0; g < nk + 1; ++g) key_offs[g] = (i32)koffs[g];
    for (i64 v = 0; v < nv; ++v) {
        val_offs[v] = (i32)vstarts[v];
        for (i64 j = 1; j < m; ++j) V(j - 1, v) = K(vstarts[v], j);
    }
    val_offs[nv] = (i32)n;
    Array<i64> row = trie_row(keys.vec(), key_offs.vec(), V.mat(), val_offs.vec(), times, diffs);
    return {std::move(keys), std::move(key_offs), std::move(V), std::move(val_offs), std::move(row)};
}

// trie_with_row: build_trie of an (n, m) int64 matrix K of sorted consolidated updates (key first), with
// their C-contiguous times and diffs.  O(n m).
Trie trie_with_row(Mat<const i64> K, Mat<const i64> times, Vec<const i64> diffs);

// key_positions: (pos, total): pos (batches x keys) the position of keys[i] among batch b's keys, -1 if
// absent; total every update of every found key, once per query.  A kernel helper.  O(k log n) per batch.
std::pair<Array<i64>, i64> key_positions(Mat<const i64> T, Vec<const i64> keys);

// gather_found: every update key_positions found, grouped by batch, then by query: (q, cols (arity x
// total), times (total x depth), diffs).  A kernel helper.  O(total).
std::tuple<Array<i64>, Array<i64>, Array<i64>, Array<i64>> gather_found(Mat<const i64> T, Mat<const i64> pos,
                                                                        i64 total, i64 arity, i64 depth);

// seek_table_within: seek_table's kernel: (q, cols, times, diffs, total); when total exceeds limit the
// arrays are empty (only counted).  O(k log n) per batch, plus O(output).
std::tuple<Array<i64>, Array<i64>, Array<i64>, Array<i64>, i64> seek_table_within(Mat<const i64> T,
                                                                                  Vec<const i64> keys, i64 arity,
                                                                                  i64 depth, i64 limit);

// value_range: value rows [lo, hi) of one key in batch b narrowed to those whose first ng - 1 values equal
// group g's (groups: ng x G): a binary search per value column.  O(ng log n).
std::pair<i64, i64> value_range(Mat<const i64> T, i64 b, i64 lo, i64 hi, Mat<const i64> groups, i64 g, i64 ng);

//: A group's updates up to this many are put in time order by insertion (INSERTION_RUN); more by counting
//: sort when they hold at most COUNT_DISTINCT distinct first coordinates, else a stable sort.
constexpr i64 INSERTION_RUN = 64;
constexpr i64 COUNT_DISTINCT = 16;

// order_by_time: rows [start, k) of cols (arity x n) / times (n x depth) / diffs stably sorted by first time
// coordinate, in place; their first ng columns are equal and stay put.  O(n * runs) up to INSERTION_RUN,
// else O(n * distinct) or O(n log n).
void order_by_time(Mat<i64> cols, Mat<i64> times, Vec<i64> diffs, i64 start, i64 k, i64 ng);

// histories: every update in table T of the records starting with one of groups' rows (ng x G, sorted
// unique): (gid, cols (arity x n), times (n x depth), diffs), sorted by (group, first time), stably.
// O(G log(n / G)) a batch to find the keys, O(ng log v) a group, plus the sorts.
std::tuple<Array<i64>, Array<i64>, Array<i64>, Array<i64>> histories(Mat<const i64> T, Mat<const i64> groups,
                                                                     i64 arity, i64 depth);

}  // namespace ddflow
