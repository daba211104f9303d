// The base layer's kernels and the helpers every other layer's kernels build on: sorting, grouping and
// consolidating rows of int64 keys.  The native twins of ddflow/base/kernels.py, which stays the
// reference (DDFLOW_NATIVE=0 runs it; tests/base/test_kernels.py compares the two on random input).
//
// Contracts are the reference's; each function names its Python twin.  Diff arithmetic is checked: a sum
// past int64 is reported (`overflow`), never wrapped.
#pragma once

#include <algorithm>
#include <tuple>

#include "base/array.hpp"

namespace ddflow {

// Whether a + b leaves int64, with the sum in `out` (the reference's ((s ^ t) & (d ^ t)) < 0 test).
inline bool add_overflows(i64 a, i64 b, i64& out) { return __builtin_add_overflow(a, b, &out); }

// rows_differ: whether rows a and b of M differ in their first `ncols` columns.  O(ncols).
template <class T>
inline bool rows_differ(Mat<T> M, i64 a, i64 b, i64 ncols) {
    const auto* x = M.row(a);
    const auto* y = M.row(b);
    for (i64 c = 0; c < ncols; ++c)
        if (x[c] != y[c]) return true;
    return false;
}

// Row x of A before row y of B, lexicographically over `m` columns: -1, 0 or 1.
inline int row_cmp(const i64* x, const i64* y, i64 m) {
    for (i64 c = 0; c < m; ++c)
        if (x[c] != y[c]) return x[c] < y[c] ? -1 : 1;
    return 0;
}

//: Arrays up to this long are sorted by insertion in the kernels' small sorts (SORT_BY_INSERTION).
constexpr i64 SORT_BY_INSERTION = 24;

// sort_small: sort `a` in place (insertion up to SORT_BY_INSERTION values, else std::sort).
inline void sort_small(Vec<i64> a) {
    if (a.n > SORT_BY_INSERTION) {
        std::sort(a.p, a.p + a.n);
        return;
    }
    for (i64 i = 1; i < a.n; ++i) {
        i64 x = a[i], j = i;
        while (j > 0 && a[j - 1] > x) {
            a[j] = a[j - 1];
            --j;
        }
        a[j] = x;
    }
}

// sorted_unique: the distinct values of `a`, sorted, moved to its front; returns how many (sorts a).
inline i64 sorted_unique(Vec<i64> a) {
    sort_small(a);
    i64 n = 0;
    for (i64 i = 0; i < a.n; ++i)
        if (i == 0 || a[i] != a[n - 1]) a[n++] = a[i];
    return n;
}

// run_of: (start, end) of value g's run in sorted ids, searched from lo on.  O(skipped + run).
inline std::pair<i64, i64> run_of(Vec<const i64> ids, i64 lo, i64 g) {
    while (lo < ids.n && ids[lo] < g) ++lo;
    i64 hi = lo;
    while (hi < ids.n && ids[hi] == g) ++hi;
    return {lo, hi};
}

// grown: A (2-d) with room for at least `need` rows, its first n rows kept (capacity doubles).
template <class T>
inline void grow_rows(Array<T>& A, i64 n, i64 need) {
    if (need <= A.rows) return;
    Array<T> B(std::max(2 * A.rows, need), A.cols);
    if (n) std::memcpy(B.p, A.p, sizeof(T) * (size_t)(n * A.cols));
    A = std::move(B);
}

// As grow_rows, for a 1-d array.
template <class T>
inline void grow(Array<T>& A, i64 n, i64 need) {
    if (need <= A.rows) return;
    Array<T> B(std::max(2 * A.rows, need));
    if (n) std::memcpy(B.p, A.p, sizeof(T) * (size_t)n);
    A = std::move(B);
}

// lex_order: the stable permutation sorting the rows of M lexicographically, by a natural merge sort.
// O(n m log r) for r sorted runs, O(n m) when sorted.
Array<i64> lex_order(Mat<const i64> M);

// group_sums: consolidation of rows K (data then time) with diffs, visited in sorted `order`.
// (sel, sums, overflow): the first row of each group of equal rows with a nonzero sum, and the sums.
std::tuple<Array<i64>, Array<i64>, bool> group_sums(Mat<const i64> K, Vec<const i64> order,
                                                    Vec<const i64> diffs);

// _consolidate_small: group_sums after a stable insertion sort of the rows.  O(n^2 m).
std::tuple<Array<i64>, Array<i64>, bool> consolidate_small(Mat<const i64> K, Vec<const i64> diffs);

// _pack: one order-preserving int64 per row if the columns' ranges fit in 62 bits: (packed, fits).
std::tuple<Array<i64>, bool> pack(Mat<const i64> K);

//: Up to this many rows consolidated_split sorts by insertion (SMALL_ROWS).
constexpr i64 SMALL_ROWS = 32;

// consolidated_split: rows consolidated and split: (C (m x k), T (k x depth), D, overflow).
std::tuple<Array<i64>, Array<i64>, Array<i64>, bool> consolidated_split(Mat<const i64> K, Vec<const i64> diffs,
                                                                        i64 m);

// _trie_starts: group starts of a sorted key matrix: (kstarts, vstarts, key_offs).  O(n m).
// Any 2-d reader with `rows`, `cols` and `operator()(i, j)`: a Mat, or a Transposed one (numba's `_trie_starts(C.T)`).
template <class M>
std::tuple<Array<i64>, Array<i64>, Array<i64>> trie_starts(const M& K) {
    const i64 n = K.rows, m = K.cols;
    Array<i64> kstarts(n), vstarts(n), key_offs(n + 1);
    i64 nk = 0, nv = 0;
    for (i64 i = 0; i < n; ++i) {
        bool newkey = i == 0 || K(i, 0) != K(i - 1, 0);
        bool newval = newkey;
        for (i64 j = 1; j < m && !newval; ++j) newval = K(i, j) != K(i - 1, j);
        if (newkey) {
            kstarts[nk] = i;
            key_offs[nk] = nv;
            ++nk;
        }
        if (newval) vstarts[nv++] = i;
    }
    key_offs[nk] = nv;
    kstarts.truncate(nk);
    vstarts.truncate(nv);
    key_offs.truncate(nk + 1);
    return {std::move(kstarts), std::move(vstarts), std::move(key_offs)};
}

// _seek: every update of one trie batch whose key is among `keys`: (q, vrow, urow) per pair.
// Keys are int64 or float64 (NaN finds NaN, sorted last); offsets int32 or int64.
template <class K, class KO, class VO>
std::tuple<Array<i64>, Array<i64>, Array<i64>> seek(Vec<const K> bkeys, Vec<const KO> key_offs,
                                                    Vec<const VO> val_offs, Vec<const K> keys);

}  // namespace ddflow
