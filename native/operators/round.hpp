// A loop round in one call: the variable's feedback, the join reading it and the loop reduce reading the join
// (count, distinct: the loop tactic's step; min, max, top_k: the walk's), run as one kernel, and the rounds after
// it in the same call (a chain).  The native twin of ddflow/operators/round.py's loop_round, which stays the
// reference (its module docstring says when a round runs fused; tests/operators/test_round.py compares the two
// on the arguments and arenas of engine runs).
#pragma once

#include <tuple>

#include "base/array.hpp"

namespace ddflow {

//: What loop_round finished (round.py's NOTHING, FED, JOINED, ROUND): nothing; the variable's feedback (in its
//: arrangement); the join's output (in the reduce's input arrangement); or the whole round.
constexpr i64 ROUND_NOTHING = 0, ROUND_FED = 1, ROUND_JOINED = 2, ROUND_WHOLE = 3;

// What loop_round returns: (stage, R, B, cols, times, diffs, later, later_t, status, taken).
using Rounds = std::tuple<i64, Array<i64>, Array<i64>, Array<i64>, Array<i64>, Array<i64>, Array<i64>, Array<i64>,
                          i64, Array<i64>>;

// loop_round: round bound[-1] - 1 of a fused loop body, then up to chain - 1 rounds after it, each starting from
// the one before's output where that went whole into the output's arena.  Arguments as the reference's: the
// feedback K (rows then times), diffs, m, bound; the variable's arena (idx1, buf1, used1, T1, at1); the join's
// other side ET (e_arity fields; the variable on the left when delta_left) and limit; the reduce's input arena
// (idx2, buf2, used2, T2, at2); the pending seeds pk, pt; the reduce (out_arity, logic code, walk mode or -1, k,
// sort_above; the walk's complete held keys hk at ht); the output's arena (bufO, usedO, TO, atO); small; chain; the
// walk's held input not complete yet (rk at rt).  Returns (stage, R, B, cols, times, diffs, later, later_t,
// status, taken) as the reference: the first round's stage, the batch B the next stage's usual step takes, a row
// of R per round run (k1, n1, used1, k2, n2, used2, n_out, usedO), the rounds' outputs, the last round's seeds
// for later, its status, and per row of rk whether a round took it.  A stage that does not finish writes nothing
// that the words reported used cover.  ValueError where arrays disagree (the kernels it calls check theirs).
// Cost: as the three kernels, a round.
Rounds loop_round(Mat<const i64> K, Vec<const i64> diffs, i64 m, Vec<const i64> bound, Vec<const i64> idx1,
                  Vec<i64> buf1, i64 used1, Mat<i64> T1, i64 at1, Mat<const i64> ET, i64 e_arity, bool delta_left,
                  i64 limit, Vec<const i64> idx2, Vec<i64> buf2, i64 used2, Mat<i64> T2, i64 at2, Mat<const i64> pk,
                  Mat<const i64> pt, i64 out_arity, i64 code, i64 walk, i64 k, i64 sort_above, Vec<const i64> hk,
                  Mat<const i64> ht, Vec<i64> bufO, i64 usedO, Mat<i64> TO, i64 atO, i64 small, i64 chain,
                  Vec<const i64> rk, Mat<const i64> rt);

}  // namespace ddflow
