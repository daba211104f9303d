// A stable radix sort of int64 values, and of int64 rows that pack into one (ddflow/base/radix.py).
#pragma once

#include "base/kernels.hpp"

namespace ddflow {

//: Bits a radix_order pass sorts by (RADIX_BITS); row_order radix-sorts more rows than RADIX_ROWS_ABOVE
//: (the callers pass it) in more than RADIX_RUNS_ABOVE sorted runs.
constexpr int RADIX_BITS = 11;
constexpr i64 RADIX_ROWS_ABOVE = 512;
constexpr i64 RADIX_RUNS_ABOVE = 8;

// radix_order: the stable order sorting the int64 values v: an LSD radix sort skipping the digits in
// which no two values differ.  O(n) a pass.
Array<i64> radix_order(Vec<const i64> v);

// row_order: the stable permutation sorting the rows of M lexicographically (lex_order's), radix-sorted
// when more than radix_above rows in more than RADIX_RUNS_ABOVE runs pack into one int64 each.  O(n m) a
// radix pass, else O(n m log r) for r runs.
Array<i64> row_order(Mat<const i64> M, i64 radix_above);

}  // namespace ddflow
