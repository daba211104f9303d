// Operator nodes' kernels (ddflow/graph/node.py): which times a bound has made complete.
#pragma once

#include <tuple>

#include "base/array.hpp"

namespace ddflow {

// complete_row: whether row i of times is complete under bound: its first len(bound) coordinates below
// it.  times has at least len(bound) columns (the caller's invariant).  O(len(bound)).
template <class M>
inline bool complete_row(const M& times, i64 i, Vec<const i64> bound) {
    for (i64 j = 0; j < bound.n; ++j)
        if (times(i, j) >= bound[j]) return false;
    return true;
}

// ready_split: (ready_mask(times, bound), how many are complete) in one pass.  ValueError when times has
// fewer columns than bound.  O(n depth).
std::tuple<Array<bool>, i64> ready_split(Mat<const i64> times, Vec<const i64> bound);

// any_complete: whether some row of times is complete under bound; stops at the first.  ValueError as
// ready_split.  O(n depth).
bool any_complete(Mat<const i64> times, Vec<const i64> bound);

}  // namespace ddflow
