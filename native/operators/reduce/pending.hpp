// Keyed seeds and pending times of the walk: the native twins of ddflow/operators/reduce/pending.py (the
// reference, whose docstring states the pending set's invariant: rows (key, *time) strictly increasing).
#pragma once

#include <tuple>

#include "base/array.hpp"

namespace ddflow {

// due_seeds: this step's seeds, every new (nk[i], nt[i]) and the pending (pk[i], pt[i]) complete under bound:
// (keys, g, a, waiting, bad): the distinct seeded keys, sorted; each seed's index into them and its outer time,
// sorted by (key, time); which pending pairs wait; bad if, at depth 2, a seed is not at round bound[1] - 1.
// Checked (ValueError): a time per key, of at least len(bound) >= 1 coordinates.  O(s log s), O(s) sorted.
std::tuple<Array<i64>, Array<i64>, Array<i64>, Array<bool>, bool> due_seeds(Vec<const i64> nk, Mat<const i64> nt,
                                                                            Vec<const i64> pk, Mat<const i64> pt,
                                                                            Vec<const i64> bound);

// merge_pending: the pending pairs after a step, those still waiting and the walk's new ones P (rows (group,
// outer time, iteration), keys[group] the key), sorted and distinct: (keys, times (n, depth)), depth pt's.
// Checked (ValueError): waiting a flag per pending pair, P's groups index keys, P rows wide enough.
// O(p log p), O(p) when P comes sorted.
std::tuple<Array<i64>, Array<i64>> merge_pending(Vec<const i64> pk, Mat<const i64> pt, Vec<const bool> waiting,
                                                 Vec<const i64> keys, Mat<const i64> P);

}  // namespace ddflow
