// The spine's newest small batches, written by one kernel call each into one buffer, read through the
// table (traces/arena.py, whose docstring states the arena's invariants): arena_insert, and the helpers
// other kernels write into an arena with (has_room, write_trie, insert_fields).
#pragma once

#include <tuple>

#include "traces/layout.hpp"

namespace ddflow {

//: The most updates a batch written into an arena may have (ARENA_ROWS).
constexpr i64 ARENA_ROWS = 255;

// words_for: buffer words a batch of at most n updates may take (keys, offsets, values, times, diffs).  O(1).
inline i64 words_for(i64 n, i64 arity, i64 depth) { return n * (3 + arity + depth) + 2; }

// has_room: whether a batch of n updates fits in buf past used (words_for).  O(1).
inline bool has_room(Vec<const i64> buf, i64 used, i64 n, i64 arity, i64 depth) {
    return n <= ARENA_ROWS && used + words_for(n, arity, depth) <= buf.n;
}

// write_trie: write consolidated updates as a batch at buf[used:] and its row at T[at]; the words now used.
// C: the (m, k) matrix of the updates' columns (its rows), Tm their (k, depth) times, D their diffs, sorted
// by (record, time), distinct, no zero, k > 0.  buf must have words_for(k, m, depth) words free past used
// and T.cols == VAL0 + m - 1 (the caller's invariants, as for the reference; the bounds-checked build
// checks every write).  O(k (m + depth)).
i64 write_trie(Mat<const i64> C, Mat<const i64> Tm, Vec<const i64> D, Vec<i64> buf, i64 used, Mat<i64> T, i64 at);

// What arena_insert and insert_fields return: (C, T, D, used, overflow).
using Inserted = std::tuple<Array<i64>, Array<i64>, Array<i64>, i64, bool>;

// arena_insert: consolidate rows K ((n, m + depth): m record columns then the time) with diffs and write
// them as a batch at buf[used:], its row at T[at].  Returns (C, T, D, used, overflow): the consolidated
// updates (columns as the rows of C) and the words now used; nothing is written when they cancel out or a
// sum leaves int64.  Checks (ValueError) that buf has words_for(n, m, depth) free past used, that T has
// row `at` and VAL0 + m - 1 columns.  O(n^2 (m + depth)) up to SMALL_ROWS rows, O(n log n) beyond.
Inserted arena_insert(Mat<const i64> K, Vec<const i64> diffs, i64 m, Vec<i64> buf, i64 used, Mat<i64> T, i64 at);

// insert_fields: fields idx of updates (columns as the rows of C, times Tm, diffs D), consolidated and
// written as arena_insert writes a batch; arena_insert's result.  idx values index C's rows (checked).
// O(k^2 (m + depth)) for k updates.
Inserted insert_fields(Mat<const i64> C, Mat<const i64> Tm, Vec<const i64> D, Vec<const i64> idx, Vec<i64> buf,
                       i64 used, Mat<i64> T, i64 at);

}  // namespace ddflow
