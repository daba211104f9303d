// The walk tactic's one-call steps: the native twins of ddflow/operators/reduce/walk.py's walk_step and
// walk_step_kept (the reference; the walk's contract is in its module docstring): min, max and top_k of one int
// value field, a whole step in one call.
#pragma once

#include <tuple>

#include "base/array.hpp"

namespace ddflow {

// What walk_step returns: (cols (2, n), times (n, depth), diffs, keys, key_offs, V, val_offs, row, pending keys,
// pending times, status, used): the output, its trie levels and table row (empty when it went to the arena, which
// `used` then says), the pending set after the step, and DONE, BAD_ROUND (nothing else then meaningful) or OVERFLOW.
using WalkStep = std::tuple<Array<i64>, Array<i64>, Array<i64>, Array<i64>, Array<i32>, Array<i64>, Array<i32>,
                            Array<i64>, Array<i64>, Array<i64>, i64, i64>;

// What walk_step_body and walk_step_kept return: WalkStep's first ten, then (groups (1, G), input entries, output
// entries) as compacted.hpp's RoundHistory keeps them (empty at depth 1 or without `keep`), then status and used.
using WalkStepKept = std::tuple<Array<i64>, Array<i64>, Array<i64>, Array<i64>, Array<i32>, Array<i64>, Array<i32>,
                                Array<i64>, Array<i64>, Array<i64>, Array<i64>, Array<i64>, Array<i64>, i64, i64>;

// walk_step_body: a walk tactic's step for min, max or top_k (mode 0-2, k) of one int value field: due_seeds of the
// new seeds (nk, nt) and the pending ones (pk, pt) under bound, the histories of both traces (tables in_T, out_T),
// rank_values (radix-sorted above sort_above rows), key_walk, merge_pending, walk_rows, and the output's batch: up
// to `small` updates written into the arena (buf, used, T, at: write_trie, room checked), a larger one built as a
// trie.  With `keep` (in a loop) the histories are compacted to the round and read from the last step's where it
// holds the key (c_groups .. e_diffs: its keys, input and output entries, what the input trace took since as rows,
// times and diffs, and what it emitted).  Checks as the kernels it calls.  Cost: as those kernels.
WalkStepKept walk_step_body(i64 mode, i64 k, Vec<const i64> nk, Mat<const i64> nt, Vec<const i64> pk, Mat<const i64> pt,
                            Vec<const i64> bound, Mat<const i64> in_T, Mat<const i64> out_T, i64 sort_above,
                            Vec<i64> buf, i64 used, Mat<i64> T, i64 at, i64 small, bool keep, Mat<const i64> c_groups,
                            Mat<const i64> c_in, Mat<const i64> c_out, Mat<const i64> a_rows, Mat<const i64> a_times,
                            Vec<const i64> a_diffs, Mat<const i64> e_rows, Mat<const i64> e_times,
                            Vec<const i64> e_diffs);

// walk_step: walk_step_body reading every key from the traces and keeping nothing.
WalkStep walk_step(i64 mode, i64 k, Vec<const i64> nk, Mat<const i64> nt, Vec<const i64> pk, Mat<const i64> pt,
                   Vec<const i64> bound, Mat<const i64> in_T, Mat<const i64> out_T, i64 sort_above, Vec<i64> buf,
                   i64 used, Mat<i64> T, i64 at, i64 small);

// walk_step_kept: walk_step_body in a loop, its histories compacted to the round and kept for the next step.
WalkStepKept walk_step_kept(i64 mode, i64 k, Vec<const i64> nk, Mat<const i64> nt, Vec<const i64> pk,
                            Mat<const i64> pt, Vec<const i64> bound, Mat<const i64> in_T, Mat<const i64> out_T,
                            i64 sort_above, Vec<i64> buf, i64 used, Mat<i64> T, i64 at, i64 small,
                            Mat<const i64> c_groups, Mat<const i64> c_in, Mat<const i64> c_out, Mat<const i64> a_rows,
                            Mat<const i64> a_times, Vec<const i64> a_diffs, Mat<const i64> e_rows,
                            Mat<const i64> e_times, Vec<const i64> e_diffs);

}  // namespace ddflow
