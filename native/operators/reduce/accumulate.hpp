// Accumulate's kernel: the native twin of ddflow/operators/reduce/accumulate.py's running_sums (the reference).
#pragma once

#include <tuple>

#include "base/array.hpp"

namespace ddflow {

// running_sums: each event's group vector before and after it: (prev (E, m1), cur (E, m1), bad).  `after`:
// (G, m1) totals once every event is applied; `ev_g`: each event's group, sorted; `delta`: (E, m1) each event's
// change.  `bad` is a group whose sum passed int64 (-1 if none; prev and cur are then partly written).
// Events of a group come together (ev_g sorted).  Checked (ValueError): ev_g within [0, G), one a row of delta.  O(E m1), one pass.
std::tuple<Array<i64>, Array<i64>, i64> running_sums(Mat<const i64> after, Vec<const i64> ev_g, Mat<const i64> delta);

}  // namespace ddflow
