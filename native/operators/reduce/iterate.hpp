// The loop tactic's kernels: the native twins of ddflow/operators/reduce/iterate.py (the reference): count,
// distinct and threshold at loop times (t, i), each step's seeds, chains and pending seeds.
#pragma once

#include <tuple>

#include "base/array.hpp"

namespace ddflow {

// loop_seeds: this round's seeds, the new ones (rows nk at times nt) and the pending ones (pk, pt) complete under
// bound: (groups (m, G), gid, t, waiting, bad): the distinct seeded groups in row order; each seed's group and
// outer time, sorted by (group, outer time); which pending seeds wait; bad if a seed is not at round
// bound[-1] - 1.  Checked (ValueError): a time per row, of two coordinates at least as many as bound's, rows of
// one width.  O(s log s).
std::tuple<Array<i64>, Array<i64>, Array<i64>, Array<bool>, bool> loop_seeds(Mat<const i64> nk, Mat<const i64> nt,
                                                                             Mat<const i64> pk, Mat<const i64> pt,
                                                                             Vec<const i64> bound);

// loop_pending: the seeds for later rounds, the pending ones still waiting and the new ones P (rows (group, outer
// time, iteration), groups columns of `groups`), distinct and sorted: (cols (m, n), times (n, 2)).  Checked
// (ValueError): waiting a flag per pending seed, P's groups columns of groups, rows wide enough.  O(p) for
// sorted parts, O(p log p) otherwise.
std::tuple<Array<i64>, Array<i64>> loop_pending(Mat<const i64> pk, Mat<const i64> pt, Vec<const bool> waiting,
                                                Mat<const i64> groups, Mat<const i64> P);

// What loop_step returns: (cols (out_arity, n), times (n, 2), diffs, keys, key_offs, V, val_offs, row, later
// (ng, p), later_t (p, 2), status, used): the output, its trie levels and table row (empty when it went to the
// arena, which `used` then says), the seeds for later rounds, DONE, BAD_ROUND or OVERFLOW (the rest then empty).
using LoopStep = std::tuple<Array<i64>, Array<i64>, Array<i64>, Array<i64>, Array<i32>, Array<i64>, Array<i32>,
                            Array<i64>, Array<i64>, Array<i64>, i64, i64>;

// loop_step: a loop tactic's step for count (code SCALAR_COUNT) or distinct (SCALAR_DISTINCT) in one call.  nk/nt:
// the new input's rows and times, complete under bound or not; pk/pt: the pending seeds; in_T/out_T: the input and
// output traces' tables.  An output of up to `small` updates is written into the arena (buf, used, T, at: write_trie),
// a larger one built as a trie.  Checked (ValueError): rows and times as loop_seeds; an arena write with the room
// write_trie needs (words_for) and the row `at` in T.  Cost: O(s log s + chain + history).
LoopStep loop_step(Mat<const i64> nk, Mat<const i64> nt, Mat<const i64> pk, Mat<const i64> pt, Vec<const i64> bound,
                   Mat<const i64> in_T, Mat<const i64> out_T, i64 out_arity, i64 code, Vec<i64> buf, i64 used,
                   Mat<i64> T, i64 at, i64 small);

//: A reduce step's status (ddflow/operators/reduce/tactic.py's DONE, BAD_ROUND, OVERFLOW).
constexpr i64 STEP_DONE = 0, STEP_BAD_ROUND = 1, STEP_OVERFLOW = 2;
//: Logic codes (ddflow/operators/reduce/logic.py's SCALAR_COUNT, SCALAR_DISTINCT).
constexpr i64 SCALAR_COUNT = 0, SCALAR_DISTINCT = 1;

// The arena write both one-call steps end with: write_trie of (C, Tm, D) at buf[used:] and T[at] once the room it
// needs is checked (ValueError naming `kernel` otherwise); the words now used.  O(k (m + depth)).
i64 write_output(const char* kernel, Mat<const i64> C, Mat<const i64> Tm, Vec<const i64> D, Vec<i64> buf, i64 used,
                 Mat<i64> T, i64 at);

}  // namespace ddflow
