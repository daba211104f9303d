// The walk's kernels: the native twins of ddflow/operators/reduce/keywalk.py (the reference; the walk's
// contract is ddflow/operators/reduce/walk.py's).  rank_values ranks the history's values, key_walk walks every
// seeded key (min, max, top_k and its numbered forms), walk_rows lays out and consolidates what it emits.
#pragma once

#include <tuple>

#include "base/array.hpp"

namespace ddflow {

// rank_values: each history row's value rank, the values being rows 1..m of Ci (input) then Co (output):
// (rank, first, n_values, lo, narrow).  One integer value whose range is under twice the rows is ranked by its
// offset from the least, lo (narrow, no sort); otherwise the dense rank in tuple order, with first one row of each
// rank (the first in `order`: given, or when empty sorted here: more than sort_above rows of one value by
// radix_order, others by lex_order).  Checked (ValueError): Ci and Co have at least m + 1 rows; a given order is a
// permutation of the rows.  O(n), or O(n m log n) sorted.
std::tuple<Array<i64>, Array<i64>, i64, i64, bool> rank_values(Mat<const i64> Ci, Mat<const i64> Co, i64 m,
                                                               Vec<const i64> order, i64 sort_above);

// walk_rows: key_walk's output rows E ((n, 5): group, value rank, number, outer time, diff) laid out and
// consolidated: (C (1 + m (+ 1 numbered), k), T (k, depth), D, overflow).  Checked (ValueError): E's groups
// index keys, its ranks index `first` (unless narrow) and first's rows the histories; depth 1 or 2.
// O(n log n + n m).
std::tuple<Array<i64>, Array<i64>, Array<i64>, bool> walk_rows(Mat<const i64> E, Vec<const i64> keys,
                                                               Vec<const i64> first, i64 lo, bool narrow,
                                                               Mat<const i64> Ci, Mat<const i64> Co, i64 m,
                                                               bool numbered, i64 depth, i64 r);

// key_walk: output updates and pending times of min (mode 0), max (1), top_k (2), numbered top_k (3), rank (4)
// or dense rank (5) per seeded group: (E (n, 5), P (p, 3)).  Every array sorted by (group, outer time); value
// ranks in [0, n_values).  Checked (ValueError): the arrays of one history of one length, value ranks in range,
// tie (modes 4 and 5) and part (when given) of n_values entries, part nondecreasing from 0, k >= 0 for the
// numbered modes; and an output row number outside 1..k (the reference's error).  O(h + |chain| x values) a
// group, plus sorting each group's values.
std::tuple<Array<i64>, Array<i64>> key_walk(i64 mode, i64 k, i64 r, i64 bound_a, i64 n_values, Vec<const i64> seed_g,
                                            Vec<const i64> seed_a, Vec<const i64> in_g, Vec<const i64> in_a,
                                            Vec<const i64> in_i, Vec<const i64> in_v, Vec<const i64> in_d,
                                            Vec<const i64> out_g, Vec<const i64> out_a, Vec<const i64> out_i,
                                            Vec<const i64> out_v, Vec<const i64> out_d, Vec<const i64> out_n,
                                            Vec<const i64> tie, Vec<const i64> part);

}  // namespace ddflow
