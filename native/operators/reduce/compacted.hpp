// Histories compacted to the round: the native twins of ddflow/operators/reduce/compacted.py (the reference; its
// docstring says why a loop's min/max walk may read a key's history with times (t, i) as (t, max(i, r))).
#pragma once

#include <tuple>
#include <utility>

#include "base/array.hpp"

namespace ddflow {

// compacted_histories: every update of the records starting with one of groups' rows (ng x G, sorted unique),
// compacted to round r: (entries, overflow), entries an (n, arity - ng + 4) matrix of rows (group index, outer
// time, value fields..., iteration, diff) sorted by group and outer time.  T: the trace's table (times of depth 2);
// c_groups/c_entries: this function's earlier result for the groups c_groups (a cache, compacted to a round <= r);
// a_rows/a_times/a_diffs: the updates the trace took since.  A cached group's entries come sorted and summed, zeros
// dropped; a group read from T as read.  Checked (ValueError): entries of that width whose groups index c_groups,
// rows of `arity` fields with a time of two coordinates and a diff each, c_groups as wide as groups.  O(h) for
// the h updates of groups read from T, plus their read; O(h log h) for cached ones, O(h) in the common case.
std::tuple<Array<i64>, bool> compacted_histories(Mat<const i64> T, Mat<const i64> groups, i64 arity, i64 r,
                                                 Mat<const i64> c_groups, Mat<const i64> c_entries,
                                                 Mat<const i64> a_rows, Mat<const i64> a_times,
                                                 Vec<const i64> a_diffs);

// entry_columns: compacted_histories' entries as histories returns updates: (gid, cols ((ng + values) x n), times
// (n x 2), diffs).  The entries' groups index groups' columns (the caller's: they came from compacted_histories
// for these groups).  O(n arity).
std::tuple<Array<i64>, Array<i64>, Array<i64>, Array<i64>> entry_columns(Mat<const i64> E, Mat<const i64> groups);

}  // namespace ddflow
