// A loop variable's usual step: a few rows of feedback moved on one iteration, consolidated (and written into
// the arena of the arrangement that reads them).  The native twins of ddflow/operators/feedback.py's
// feedback_round and feedback_round_into, which stay the reference (tests/operators/test_feedback.py).
#pragma once

#include <tuple>

#include "base/array.hpp"

namespace ddflow {

// What feedback_round returns: (C, T, D, due, overflow).
using Fed = std::tuple<Array<i64>, Array<i64>, Array<i64>, bool, bool>;

// feedback_round: rows K ((n, m + depth): m columns then the times) with diffs, their last time coordinate
// moved on by one, consolidated, if all are complete under `bound`.  Returns (C, T, D, due, overflow): the
// consolidated rows (columns as the rows of C), times, diffs; due false (nothing else computed) when some row
// is not complete; overflow when a sum leaves int64.  An iteration at int64 max wraps, as the reference's.
// ValueError unless 0 <= m < K's columns, diffs has K's rows and bound at most depth coordinates.
// O(n^2 (m + depth)) up to SMALL_ROWS rows, O(n log n) beyond.
Fed feedback_round(Mat<const i64> K, Vec<const i64> diffs, i64 m, Vec<const i64> bound);

// What feedback_round_into returns: (k, cols, times, diffs, due, overflow, used).
using FedInto = std::tuple<i64, Array<i64>, Array<i64>, Array<i64>, bool, bool, i64>;

// feedback_round_into: feedback_round, its output's fields idx then written into an arrangement's arena (buf,
// used, table At, row at: traces/arena.hpp's insert_fields).  Returns (k, cols, times, diffs, due, overflow,
// used): the updates the variable emits, what the arrangement took, feedback_round's flags (a sum past int64
// while inserting is an overflow too; nothing is written unless due and no overflow), the words now used.
// O(n^2 (m + depth)).
FedInto feedback_round_into(Mat<const i64> K, Vec<const i64> diffs, i64 m, Vec<const i64> bound, Vec<const i64> idx,
                            Vec<i64> buf, i64 used, Mat<i64> At, i64 at);

}  // namespace ddflow
