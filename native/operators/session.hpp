// The session window operator's step: the native twin of ddflow/operators/session.py's session_step, which
// stays the reference (tests/operators/test_session.py compares the two on random states and updates).
#pragma once

#include <tuple>

#include "base/array.hpp"

namespace ddflow {

//: session_step's fault codes (session.py's COUNT_OVERFLOW, TS_OVERFLOW).
constexpr i64 SESSION_COUNT_OVERFLOW = 1, SESSION_TS_OVERFLOW = 2;

// session_step: one step of the session operator over its state (rows R (key, ts, other fields) sorted, counts
// C, shown sessions [S, E]) and the step's updates U at times ut with diffs ud (sorted by key then time, all
// under `limit`).  Returns (R, C, S, E, O, wake, fault, at) as the reference does: the new state, the output O
// column-major ((w + 4) x outputs: state columns, start, end, time, diff), the least end + 1 held with `expire`
// (int64 max: none), and a fault code with the time or ts it names (then the arrays are empty).  Counts that
// cancel to a shown difference wrap as the reference's int64 arithmetic does; a count or ts + gap past int64 is
// a fault, never wrapped.  Unsorted input gives the reference's (meaningless) answer, never an out-of-bounds
// access.  ValueError when the arrays' shapes disagree.  O(r) per touched key and time for its r records, plus
// O(log r + r) per update, plus an O(state) copy of the untouched keys.
std::tuple<Array<i64>, Array<i64>, Array<i64>, Array<i64>, Array<i64>, i64, i64, i64> session_step(
    Mat<const i64> R, Vec<const i64> C, Vec<const i64> S, Vec<const i64> E, Mat<const i64> U, Vec<const i64> ut,
    Vec<const i64> ud, i64 limit, i64 gap, bool expire);

}  // namespace ddflow
