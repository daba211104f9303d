// Column helpers' kernels (ddflow/base/columnar.py).
#pragma once

#include <tuple>

#include "base/array.hpp"

namespace ddflow {

// _counting_order: stable counting sort of positions by idx into buckets below 0, 0..n-1 and n or more:
// (order, bounds), bounds of n + 1 values.  ValueError for n < 0.  O(len(idx) + n).
std::tuple<Array<i64>, Array<i64>> counting_order(Vec<const i64> idx, i64 n);

}  // namespace ddflow
