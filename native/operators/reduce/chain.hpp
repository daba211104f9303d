// Chains of loop times: the native twins of ddflow/operators/reduce/chain.py (the reference; see its docstring
// for the math).  chain_walk builds every seeded group's chain of times, its accumulated input counts and the
// later rounds to pend; chain_output writes what the chains emit.  The per-group helpers (later_rounds and the
// searches it makes) are inline here: the walk of keywalk.hpp calls them too.
//
// Contracts are the reference's, argument for argument.  Where the reference's int64 arithmetic wraps
// unchecked (numba wrapped; C++ signed overflow is undefined), the wrap_* helpers below wrap the same way.
#pragma once

#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include "base/array.hpp"
#include "base/kernels.hpp"

#include "traces/merge.hpp"

namespace ddflow {

constexpr i64 I64_MAX = std::numeric_limits<i64>::max();

// numba's wrapping int64 arithmetic, without C++'s undefined signed overflow.
inline i64 wrap_add(i64 a, i64 b) { return (i64)((uint64_t)a + (uint64_t)b); }
inline i64 wrap_sub(i64 a, i64 b) { return (i64)((uint64_t)a - (uint64_t)b); }
inline i64 wrap_neg(i64 a) { return (i64)(0 - (uint64_t)a); }
inline i64 wrap_mul(i64 a, i64 b) { return (i64)((uint64_t)a * (uint64_t)b); }

// The reduce family's boundary checks: a ValueError naming the kernel and what is wrong with its arguments.
[[noreturn]] inline void bad_argument(const char* kernel, const std::string& what) {
    throw std::invalid_argument(std::string(kernel) + ": " + what);
}

// Whether every value of v lies in [lo, n).
inline bool all_within(Vec<const i64> v, i64 n, i64 lo = 0) {
    for (i64 i = 0; i < v.n; ++i)
        if (v[i] < lo || v[i] >= n) return false;
    return true;
}

// Column c of a 2-d matrix, contiguous (what numba read as the view M[:, c]).  O(rows).
inline Array<i64> column(Mat<const i64> M, i64 c) {
    Array<i64> out(M.rows);
    for (i64 i = 0; i < M.rows; ++i) out[i] = M(i, c);
    return out;
}

// A copy of a 2-d view (what a kernel returns where the reference returned its argument itself).  O(rows cols).
inline Array<i64> copy_mat(Mat<const i64> M) {
    Array<i64> a(M.rows, M.cols);
    if (M.rows && M.cols) std::memcpy(a.p, M.p, sizeof(i64) * (size_t)(M.rows * M.cols));
    return a;
}

// n_later: how many of a group's history rows (input i0:i1, output o0:o1) lie past iteration r.  O(h).
inline i64 n_later(i64 r, Vec<const i64> in_i, i64 i0, i64 i1, Vec<const i64> out_i, i64 o0, i64 o1) {
    i64 n = 0;
    for (i64 j = i0; j < i1; ++j) n += in_i[j] > r;
    for (i64 j = o0; j < o1; ++j) n += out_i[j] > r;
    return n;
}

//: first_change searches only where h * (h + 2 p) is at most this (FIRST_CHANGE_WORK).
constexpr i64 FIRST_CHANGE_WORK = 1 << 8;

// add_at_iteration: add to S[b] the diffs d[p0:p1] at iteration L and outer times a <= outer[b]; true (S partly
// added) when a sum would leave int64.  O((p1 - p0) * len(outer)).
inline bool add_at_iteration(Vec<i64> S, Vec<const i64> outer, Vec<const i64> a, Vec<const i64> i,
                             Vec<const i64> d, i64 p0, i64 p1, i64 L) {
    for (i64 p = p0; p < p1; ++p) {
        if (i[p] != L) continue;
        const i64 x = d[p];
        for (i64 b = 0; b < outer.n; ++b) {
            if (outer[b] >= a[p]) {
                if (sum_overflows(S[b], x)) return true;
                S[b] += x;
            }
        }
    }
    return false;
}

// next_later: the least iteration past `it` of the group's history rows (I64_MAX if none).  O(h).
inline i64 next_later(i64 it, Vec<const i64> in_i, i64 i0, i64 i1, Vec<const i64> out_i, i64 o0, i64 o1) {
    i64 L = I64_MAX;
    for (i64 p = i0; p < i1; ++p)
        if (it < in_i[p] && in_i[p] < L) L = in_i[p];
    for (i64 q = o0; q < o1; ++q)
        if (it < out_i[q] && out_i[q] < L) L = out_i[q];
    return L;
}

// first_change: for a distinct, the least iteration past r at which its output would change; -1 if none would;
// `least` when a sum would leave int64 or the search would pass FIRST_CHANGE_WORK.  `work`: at least
// 2 * len(outer) int64s.  O(l * (h + p)).
inline i64 first_change(i64 r, i64 least, Vec<const i64> outer, Vec<const i64> chain, Vec<const i64> acc, i64 c0,
                        i64 nc, Vec<const i64> in_a, Vec<const i64> in_i, Vec<const i64> in_d, i64 i0, i64 i1,
                        Vec<const i64> out_a, Vec<const i64> out_i, Vec<const i64> out_d, i64 o0, i64 o1,
                        Vec<i64> work) {
    const i64 h = (i1 - i0) + (o1 - o0);
    const i64 nb = outer.n;
    if (wrap_mul(h, wrap_add(h, wrap_mul(2, nb))) > FIRST_CHANGE_WORK) return least;
    Vec<i64> D = work.slice(0, nb), O = work.slice(nb, 2 * nb);
    i64 j = c0;
    for (i64 b = 0; b < nb; ++b) {
        while (j + 1 < c0 + nc && chain[j + 1] <= outer[b]) ++j;
        D[b] = acc[j];
        O[b] = acc[j] > 0 ? 1 : 0;
    }
    i64 it = r;
    while (true) {
        const i64 L = next_later(it, in_i, i0, i1, out_i, o0, o1);
        if (L == I64_MAX) return -1;
        if (add_at_iteration(D, outer, in_a, in_i, in_d, i0, i1, L) ||
            add_at_iteration(O, outer, out_a, out_i, out_d, o0, o1, L))
            return least;
        for (i64 b = 0; b < nb; ++b)
            if (O[b] != (D[b] > 0 ? 1 : 0)) return L;
        it = L;
    }
}

// later_times: later_rounds' candidate outer times (sorted, distinct: a view of scratch[:nc + n_later]) and the
// least later iteration.  O(h + p log p).
inline std::pair<Vec<i64>, i64> later_times(i64 r, i64 ms, Vec<const i64> chain, i64 c0, i64 nc, i64 n_later_,
                                            Vec<const i64> in_a, Vec<const i64> in_i, i64 i0, i64 i1,
                                            Vec<const i64> out_a, Vec<const i64> out_i, i64 o0, i64 o1,
                                            Vec<i64> scratch) {
    Vec<i64> outer = scratch.slice(0, nc + n_later_);
    for (i64 x = 0; x < nc; ++x) outer[x] = chain[c0 + x];
    i64 nout = nc;
    i64 least = I64_MAX;
    for (i64 j = i0; j < i1; ++j) {
        if (in_i[j] > r) {
            least = std::min(least, in_i[j]);
            if (in_a[j] >= ms) outer[nout++] = in_a[j];
        }
    }
    for (i64 j = o0; j < o1; ++j) {
        if (out_i[j] > r) {
            least = std::min(least, out_i[j]);
            if (out_a[j] >= ms) outer[nout++] = out_a[j];
        }
    }
    const i64 u = sorted_unique(outer.slice(0, nout));
    return {outer.slice(0, u), least};
}

// pend_at: append to P (npd rows used) the rows (g, a, L) for each a of outer.  O(p).
inline void pend_at(Array<i64>& P, i64& npd, i64 g, Vec<const i64> outer, i64 L) {
    grow_rows(P, npd, npd + outer.n);
    for (i64 x = 0; x < outer.n; ++x) {
        P(npd, 0) = g;
        P(npd, 1) = outer[x];
        P(npd, 2) = L;
        ++npd;
    }
}

// later_rounds: append to P (rows (group, outer time, iteration), npd used) group g's next later round.
// scratch: at least nc + n_later int64s (three times that for a distinct).  O(h + p log p), plus
// first_change's for a distinct.
inline void later_rounds(Array<i64>& P, i64& npd, i64 g, i64 r, i64 ms, Vec<const i64> chain, i64 c0, i64 nc,
                         i64 n_later_, Vec<const i64> in_a, Vec<const i64> in_i, i64 i0, i64 i1,
                         Vec<const i64> out_a, Vec<const i64> out_i, i64 o0, i64 o1, Vec<i64> scratch,
                         bool distinct, Vec<const i64> acc, Vec<const i64> in_d, Vec<const i64> out_d) {
    auto [outer, least] = later_times(r, ms, chain, c0, nc, n_later_, in_a, in_i, i0, i1, out_a, out_i, o0, o1,
                                      scratch);
    if (distinct) {
        least = first_change(r, least, outer, chain, acc, c0, nc, in_a, in_i, in_d, i0, i1, out_a, out_i, out_d,
                             o0, o1, scratch.slice(nc + n_later_, scratch.n));
        if (least < 0) return;
    }
    pend_at(P, npd, g, outer, least);
}

// The chain time after c, and the cursors next_chain_time moves (see the reference's docstring).
struct ChainCursor {
    i64 sp, pn, qn;
};

// next_chain_time: the least later seed, or later history time at an iteration <= r (I64_MAX if none); moves the
// seed cursor and the look-ahead cursors into the group's input [pn, i1) and output [qn, o1).  O(rows passed).
inline i64 next_chain_time(i64 c, i64 r, ChainCursor& cur, i64 s1, Vec<const i64> seed_a, i64 i1,
                           Vec<const i64> in_a, Vec<const i64> in_i, i64 o1, Vec<const i64> out_a,
                           Vec<const i64> out_i) {
    while (cur.sp < s1 && seed_a[cur.sp] <= c) ++cur.sp;
    i64 nxt = cur.sp < s1 ? seed_a[cur.sp] : I64_MAX;
    while (cur.pn < i1 && (in_a[cur.pn] <= c || in_i[cur.pn] > r)) ++cur.pn;
    if (cur.pn < i1 && in_a[cur.pn] < nxt) nxt = in_a[cur.pn];
    while (cur.qn < o1 && (out_a[cur.qn] <= c || out_i[cur.qn] > r)) ++cur.qn;
    if (cur.qn < o1 && out_a[cur.qn] < nxt) nxt = out_a[cur.qn];
    return nxt;
}

// chain_net: chain_output for a logic without a value column, in chain order: (cols (ng, k), times (k, 2), sums,
// overflow).  A helper of chain_output, which checks its arguments.  O(chain + history).
std::tuple<Array<i64>, Array<i64>, Array<i64>, bool> chain_net(i64 r, Vec<const i64> c_gid, Vec<const i64> c_a,
                                                               Vec<const i64> mult, Mat<const i64> groups,
                                                               Vec<const i64> odiffs, Vec<const i64> out_pos);

// chain_output: the output of round r along the chains, consolidated and sorted: (cols (arity, k), times (k, 2),
// diffs, overflow).  Checked (ValueError): the chain's arrays of one length (val too, with has_val), its groups
// columns of `groups`, out_pos's rows chain rows (or negative) with an odiff each, and ocols' value row
// (has_val).  O(chain + history), O(m log m) for m entries with values.
std::tuple<Array<i64>, Array<i64>, Array<i64>, bool> chain_output(i64 r, Vec<const i64> c_gid, Vec<const i64> c_a,
                                                                  Vec<const i64> mult, Vec<const i64> val,
                                                                  bool has_val, Mat<const i64> groups,
                                                                  Mat<const i64> ocols, Vec<const i64> odiffs,
                                                                  Vec<const i64> out_pos);

// chain_walk: the chain of each seeded group at iteration r, its input counts, and the pending times:
// (cg, ca, acc, out_pos, P (n, 3), overflow).  Every array sorted by (group, outer time) (else the result is
// meaningless, but memory safe); checked (ValueError): the arrays of seeds, of the input and of the output history
// each of one length.  O(h + |chain|), plus sorting the pending candidates of groups with later history.
std::tuple<Array<i64>, Array<i64>, Array<i64>, Array<i64>, Array<i64>, bool> chain_walk(
    i64 r, Vec<const i64> seed_g, Vec<const i64> seed_a, Vec<const i64> in_g, Vec<const i64> in_a,
    Vec<const i64> in_i, Vec<const i64> in_d, Vec<const i64> out_g, Vec<const i64> out_a, Vec<const i64> out_i,
    Vec<const i64> out_d, bool distinct);

}  // namespace ddflow
