// Scopes' kernels (ddflow/graph/scope.py): the next round a loop has work at.
#pragma once

#include "graph/node.hpp"

namespace ddflow {

// least_round: the least iteration times[i, k] (k = len(outer_bound)) of a row with times[i, :k] below
// outer_bound; -1 if none.  A row of only k coordinates is at iteration 0.  ValueError when times has
// fewer than k columns.  O(n k).
i64 least_round(Mat<const i64> times, Vec<const i64> outer_bound);

}  // namespace ddflow
