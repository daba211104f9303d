// Exact sums of float64 values under retraction: integer limbs, rounded once (ddflow/base/exactsum.py,
// whose docstring states the representation).
#pragma once

#include <tuple>

#include "base/array.hpp"

namespace ddflow {

//: Bits a limb holds, limbs a value has, and the slots (0..2 the non-finite counts, 3 + i limb i).
constexpr int LIMB_BITS = 24;
constexpr i64 LIMBS = 88;
constexpr i64 FIRST_LIMB = 3;
constexpr i64 SLOTS = FIRST_LIMB + LIMBS;

// float_limbs: the sparse slots of each value of x: (row, slot, value), at most four a value.  O(n).
std::tuple<Array<i64>, Array<i64>, Array<i64>> float_limbs(Vec<const double> x);

// round_limbs: each row's sum rounded once to nearest-even, (R,) float64.  sums: (R, S) int64 slot totals;
// subs: the slot (0..SLOTS-1) of each of the S columns (ValueError otherwise).  O(R LIMBS).
Array<double> round_limbs(Mat<const i64> sums, Vec<const i64> subs);

}  // namespace ddflow
