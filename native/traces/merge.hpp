// The linear merge of two trie batches, advancing times and consolidating (traces/merge.py, whose module
// docstring states merge_rows' contract), and the per-row helpers other kernels share: sum_overflows,
// sort_segment, consolidate_segment.
#pragma once

#include <tuple>
#include <utility>

#include "traces/layout.hpp"

namespace ddflow {

// sum_overflows: whether s + d leaves int64, decided before adding.  O(1).
inline bool sum_overflows(i64 s, i64 d) {
    i64 r;
    return __builtin_add_overflow(s, d, &r);
}

// _time_less: row a of T lexicographically before row b.  O(T.cols).
template <class M>
inline bool time_less(const M& T, i64 a, i64 b) {
    for (i64 c = 0; c < T.cols; ++c)
        if (T(a, c) != T(b, c)) return T(a, c) < T(b, c);
    return false;
}

//: A row's updates up to this many are sorted by insertion, in place (SORT_IN_PLACE); more by a merge sort
//: through scratch arrays.
constexpr i64 SORT_IN_PLACE = 32;

// sort_segment: sort rows lo:hi of T (and D with them) by T's rows as tuples, stably, if out of order.
// scratch_t / scratch_d: at least hi - lo rows (scratch_t as wide as T).  O(k) if sorted, else O(k log k).
// A kernel helper for any rows (the merges' times, the reduce family's compacted entries).
inline void sort_segment(Mat<i64> T, Vec<i64> D, i64 lo, i64 hi, Mat<i64> scratch_t, Vec<i64> scratch_d) {
    bool ordered = true;
    for (i64 u = lo + 1; u < hi; ++u)
        if (time_less(T, u, u - 1)) {
            ordered = false;
            break;
        }
    if (ordered) return;
    const i64 n = hi - lo, d = T.cols;
    if (n <= SORT_IN_PLACE) {  // a stable insertion sort in place
        for (i64 u = lo + 1; u < hi; ++u) {
            if (!time_less(T, u, u - 1)) continue;
            i64* held = scratch_t.row(0);
            for (i64 c = 0; c < d; ++c) held[c] = T(u, c);
            i64 x = D[u], v = u;
            while (v > lo && row_cmp(held, T.row(v - 1), d) < 0) {
                for (i64 c = 0; c < d; ++c) T(v, c) = T(v - 1, c);
                D[v] = D[v - 1];
                --v;
            }
            for (i64 c = 0; c < d; ++c) T(v, c) = held[c];
            D[v] = x;
        }
        return;
    }
    // Bottom-up merge sort between the segment and the scratch arrays.
    Mat<i64> src_t = T, dst_t = scratch_t;
    Vec<i64> src_d = D, dst_d = scratch_d;
    i64 s_off = lo, d_off = 0;
    bool in_scratch = false;
    for (i64 width = 1; width < n; width *= 2) {
        for (i64 start = 0; start < n; start += 2 * width) {
            const i64 mid = std::min(start + width, n), end = std::min(start + 2 * width, n);
            i64 a = start, b = mid, k = start;
            while (a < mid || b < end) {
                i64 from;
                if (b >= end || (a < mid && !time_less(src_t, s_off + b, s_off + a))) from = s_off + a++;
                else from = s_off + b++;
                for (i64 c = 0; c < d; ++c) dst_t(d_off + k, c) = src_t(from, c);
                dst_d[d_off + k] = src_d[from];
                ++k;
            }
        }
        std::swap(src_t, dst_t);
        std::swap(src_d, dst_d);
        std::swap(s_off, d_off);
        in_scratch = !in_scratch;
    }
    if (in_scratch)  // the sorted run ended in the scratch arrays
        for (i64 k = 0; k < n; ++k) {
            for (i64 c = 0; c < d; ++c) T(lo + k, c) = src_t(s_off + k, c);
            D[lo + k] = src_d[s_off + k];
        }
}

// consolidate_segment: add up equal adjacent rows of sorted lo:hi in place, dropping zero sums:
// (new hi, overflow).  On overflow the segment is left part-written.  O(k T.cols).
inline std::pair<i64, bool> consolidate_segment(Mat<i64> T, Vec<i64> D, i64 lo, i64 hi) {
    const i64 d = T.cols;
    i64 k = lo, u = lo;
    while (u < hi) {
        i64 s = D[u], v = u + 1;
        while (v < hi && !rows_differ(T, v, u, d)) {
            if (add_overflows(s, D[v], s)) return {k, true};
            ++v;
        }
        if (s != 0) {
            for (i64 c = 0; c < d; ++c) T(k, c) = T(u, c);
            D[k] = s;
            ++k;
        }
        u = v;
    }
    return {k, false};
}

// What merge_rows returns: (pick, val_offs, key_starts, times, diffs, overflow).
using MergedRows = std::tuple<Array<i64>, Array<i64>, Array<i64>, Array<i64>, Array<i64>, bool>;

// merge_rows: merge two batches' (key, value) rows and their updates (the module's contract).  KA: (nA, m)
// sort keys (column 0 the key), offA: A's val_offs (nA + 1, int32 or int64), tA/dA its updates; the same
// for B; F the frontier's elements ((0, d): none).  Returns (pick, val_offs, key_starts, times, diffs,
// overflow): for each output row the row it copies (i in A, nA + j in B), the output's val_offs, the
// output rows where a key starts, and the consolidated updates.  Checks its boundary (ValueError): offsets
// of nA + 1 and nB + 1 values, from 0 non-decreasing to at most their updates; times and F of one depth;
// KA and KB of one width.  Rows sorted unique and each row's times sorted are the caller's invariant (the
// result is then the reference's, else merely ill-formed).  O(n + m), O(m log m) at worst.
template <class OA, class OB>
MergedRows merge_rows(Mat<const i64> KA, Vec<const OA> offA, Mat<const i64> tA, Vec<const i64> dA,
                      Mat<const i64> KB, Vec<const OB> offB, Mat<const i64> tB, Vec<const i64> dB,
                      Mat<const i64> F);

// What merge_pair and merge_table return: (keys, key_offs | vals, V | key_offs, val_offs, times, diffs,
// row, overflow); see each.
using MergedPair = std::tuple<Array<i64>, Array<i32>, Array<i64>, Array<i32>, Array<i64>, Array<i64>, Array<i64>, bool>;
using MergedTable = std::tuple<Array<i64>, Array<i64>, Array<i32>, Array<i32>, Array<i64>, Array<i64>, Array<i64>, bool>;

// merge_pair: keys a0:a1 of batch 0 of table T merged with keys b0:b1 of batch 1, built as one trie:
// (keys, key_offs, V, val_offs, times, diffs, row, overflow), offsets int32; with overflow the rest is
// empty.  F: the frontier's elements, (0, depth) for none.  Key ranges are checked (ValueError); the table
// is the caller's invariant.  O(n + m) as merge_rows.
MergedPair merge_pair(Mat<const i64> T, i64 a0, i64 a1, i64 b0, i64 b1, Mat<const i64> F);

// _advance_time: coordinate c of time x advanced by frontier elements F (none: as it is).  O(|F|).
inline i64 advance_time(i64 x, Mat<const i64> F, i64 c) {
    if (!F.rows) return x;
    i64 best = std::max(x, F(0, c));
    for (i64 f = 1; f < F.rows; ++f) best = std::min(best, std::max(x, F(f, c)));
    return best;
}

// merge_table: every batch of table T as one trie, times advanced by F and consolidated: (keys, vals
// (arity - 1 x v), key_offs, val_offs, times, diffs, row, overflow), offsets int32; with overflow the
// rest is empty.  O(n log n) for n updates in all.
MergedTable merge_table(Mat<const i64> T, i64 arity, i64 depth, Mat<const i64> F);

}  // namespace ddflow
