// The join's one-call step: the native twins of ddflow/operators/join.py's checked_product, join_table and
// join_table_into, which stay the reference (tests/operators/test_join.py compares them on random traces).
#pragma once

#include <tuple>
#include <utility>

#include "base/kernels.hpp"

namespace ddflow {

// checked_product: (a * b, true), or (0, false) when the product leaves int64 (decided exactly, without a
// signed overflow).  O(1).
inline std::pair<i64, bool> checked_product(i64 a, i64 b) {
    i64 p;
    if (__builtin_mul_overflow(a, b, &p)) return {0, false};
    return {p, true};
}

//: join_table's statuses: consolidated (small), not consolidated (more rows), a product or sum past int64,
//: more than `limit` updates (only counted).
constexpr i64 JOIN_CONSOLIDATED = 0, JOIN_LARGE = 1, JOIN_OVERFLOW = 2, JOIN_OVER_LIMIT = 3;

// What join_table returns: (M, diffs, sel, sums, status, total, cols, times).
using Joined = std::tuple<Array<i64>, Array<i64>, Array<i64>, Array<i64>, i64, i64, Array<i64>, Array<i64>>;

// join_table: a delta (columns C, (m, n), row 0 the key; times dtimes (n x depth), diffs ddiffs) against every
// batch of table T (`arity` fields, `depth`).  Every pair of the same key is a row of M (the key, the delta's
// values then the trace's if delta_left, else the other way round, then the join of the times), its diff the
// product.  Returns (M, diffs, sel, sums, status, total, cols, times) as the reference: at status 0 (at most
// SMALL_ROWS rows) sel/sums consolidate M and cols ((width, k)) / times are those rows split; 1: M is not
// consolidated; 2: a product or a sum left int64 (M and diffs then hold only the rows before the product
// that did not fit); 3: more than `limit` updates would be read, only `total` counted.  ValueError when the
// delta's arrays disagree in length or the table's row cannot hold `arity` fields.  O(k log n) per batch for
// k delta updates, plus O(output), O(output^2) to consolidate a small one.
Joined join_table(Mat<const i64> T, Mat<const i64> C, Mat<const i64> dtimes, Vec<const i64> ddiffs, i64 arity,
                  i64 depth, bool delta_left, i64 limit);

// What join_table_into returns: (M, diffs, status, k, cols, times, diffs_in, used).
using JoinedInto = std::tuple<Array<i64>, Array<i64>, i64, i64, Array<i64>, Array<i64>, Array<i64>, i64>;

// join_table_into: join_table, its output's fields idx then written into an arrangement's arena (buf, used,
// table At, row at: traces/arena.hpp's insert_fields), in one call.  An output of more than SMALL_ROWS updates
// is consolidated here too where the arena has the room for it (has_room, asked before consolidating).
// Returns (M, diffs, status, k, cols, times, diffs_in, used) as the reference: M and diffs meaningful only at
// status 1 (nothing written); k the updates of the join's consolidated output; what the arrangement took and
// the words now used.  A sum past int64 while inserting is status 2, nothing written.  Cost: join_table's,
// plus O(k^2) for the insert of k up to SMALL_ROWS, O(n log n) beyond.
JoinedInto join_table_into(Mat<const i64> T, Mat<const i64> C, Mat<const i64> dtimes, Vec<const i64> ddiffs,
                           i64 arity, i64 depth, bool delta_left, i64 limit, Vec<const i64> idx, Vec<i64> buf,
                           i64 used, Mat<i64> At, i64 at);

}  // namespace ddflow
