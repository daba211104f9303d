// The walk tactic's one-call steps: see walk.hpp, and ddflow/operators/reduce/walk.py for the reference.
#include "operators/reduce/walk.hpp"

#include "operators/reduce/chain.hpp"
#include "operators/reduce/compacted.hpp"
#include "operators/reduce/iterate.hpp"
#include "operators/reduce/keywalk.hpp"
#include "operators/reduce/pending.hpp"
#include "traces/layout.hpp"

namespace ddflow {

WalkStepKept walk_step_body(i64 mode, i64 k, Vec<const i64> nk, Mat<const i64> nt, Vec<const i64> pk, Mat<const i64> pt,
                            Vec<const i64> bound, Mat<const i64> in_T, Mat<const i64> out_T, i64 sort_above,
                            Vec<i64> buf, i64 used, Mat<i64> T, i64 at, i64 small, bool keep, Mat<const i64> c_groups,
                            Mat<const i64> c_in, Mat<const i64> c_out, Mat<const i64> a_rows, Mat<const i64> a_times,
                            Vec<const i64> a_diffs, Mat<const i64> e_rows, Mat<const i64> e_times,
                            Vec<const i64> e_diffs) {
    const char* kw = keep ? "walk_step_kept" : "walk_step";
    if (mode < 0 || mode > 2) bad_argument(kw, "mode is a min (0), max (1) or top_k (2)");
    const i64 depth = bound.n;
    if (depth != 1 && depth != 2) bad_argument(kw, "bound has one or two coordinates");
    const i64 r = depth == 2 ? bound[depth - 1] - 1 : 0;
    const i64 arity = 2;
    // The results of a step that emits nothing, with its pending set, groups and entries.
    auto result = [&](Array<i64> pend_k, Array<i64> pend_t, Array<i64> groups, Array<i64> E_in, Array<i64> E_out,
                      i64 status) {
        return WalkStepKept{Array<i64>(arity, 0), Array<i64>(0, depth), Array<i64>(0), Array<i64>(0), Array<i32>(0),
                            Array<i64>(arity - 1, 0), Array<i32>(0), Array<i64>(0), std::move(pend_k),
                            std::move(pend_t), std::move(groups), std::move(E_in), std::move(E_out), status, used};
    };
    auto failed = [&](i64 status) {
        return result(copy_of(pk), copy_mat(pt), Array<i64>(1, 0), Array<i64>(0, 5), Array<i64>(0, 5), status);
    };
    auto [keys, sg, sa, waiting, bad] = due_seeds(nk, nt, pk, pt, bound);
    if (bad) return failed(STEP_BAD_ROUND);
    const i64 G = keys.size();
    Array<i64> groups(1, G);
    for (i64 g = 0; g < G; ++g) groups(0, g) = keys[g];
    Array<i64> E_in(0, 5), E_out(0, 5);
    Array<i64> in_g, Ci, it, idf, out_g, Co, ot, odf;
    if (keep) {  // compacted to the round, from the last step's where it holds the key
        bool overflow_in, overflow_out;
        std::tie(E_in, overflow_in) =
            compacted_histories(in_T, groups.mat(), arity, r, c_groups, c_in, a_rows, a_times, a_diffs);
        std::tie(E_out, overflow_out) =
            compacted_histories(out_T, groups.mat(), arity, r, c_groups, c_out, e_rows, e_times, e_diffs);
        if (overflow_in || overflow_out) return failed(STEP_OVERFLOW);
        std::tie(in_g, Ci, it, idf) = entry_columns(E_in.mat(), groups.mat());
        std::tie(out_g, Co, ot, odf) = entry_columns(E_out.mat(), groups.mat());
    } else {
        std::tie(in_g, Ci, it, idf) = histories(in_T, groups.mat(), arity, depth);
        std::tie(out_g, Co, ot, odf) = histories(out_T, groups.mat(), arity, depth);
    }
    const i64 ni = idf.size(), no = odf.size();
    auto [vrank, vfirst, n_values, lo, narrow] = rank_values(Ci.mat(), Co.mat(), 1, Vec<const i64>(), sort_above);
    Array<i64> in_i = filled<i64>(ni, 0), out_i = filled<i64>(no, 0);
    if (depth == 2) {
        for (i64 i = 0; i < ni; ++i) in_i[i] = it(i, 1);
        for (i64 i = 0; i < no; ++i) out_i[i] = ot(i, 1);
    }
    Array<i64> in_a = column(it.mat(), 0), out_a = column(ot.mat(), 0), out_n = filled<i64>(no, 0);
    Vec<const i64> ranks = vrank.vec();
    auto [emitted, later] = key_walk(mode, k, r, bound[0], n_values, sg.vec(), sa.vec(), in_g.vec(), in_a.vec(),
                                     in_i.vec(), ranks.slice(0, ni), idf.vec(), out_g.vec(), out_a.vec(), out_i.vec(),
                                     ranks.slice(ni, ni + no), odf.vec(), out_n.vec(), Vec<const i64>(),
                                     Vec<const i64>());
    auto [pend_k, pend_t] = merge_pending(pk, pt, waiting.vec(), keys.vec(), later.mat());
    if (emitted.size() == 0)
        return result(std::move(pend_k), std::move(pend_t), std::move(groups), std::move(E_in), std::move(E_out),
                      STEP_DONE);
    auto [cols, times, diffs, overflow] = walk_rows(emitted.mat(), keys.vec(), vfirst.vec(), lo, narrow, Ci.mat(),
                                                    Co.mat(), 1, false, depth, r);
    if (overflow) return failed(STEP_OVERFLOW);
    if (diffs.size() == 0 || diffs.size() <= small) {
        const i64 now = diffs.size() ? write_output(kw, cols.mat(), times.mat(), diffs.vec(), buf, used, T, at) : used;
        return {std::move(cols), std::move(times), std::move(diffs), Array<i64>(0), Array<i32>(0),
                Array<i64>(arity - 1, 0), Array<i32>(0), Array<i64>(0), std::move(pend_k), std::move(pend_t),
                std::move(groups), std::move(E_in), std::move(E_out), STEP_DONE, now};
    }
    auto [tkeys, key_offs, V, val_offs, row] = build_trie(Transposed<const i64>(cols.mat()), times.mat(), diffs.vec());
    return {std::move(cols), std::move(times), std::move(diffs), std::move(tkeys), std::move(key_offs), std::move(V),
            std::move(val_offs), std::move(row), std::move(pend_k), std::move(pend_t), std::move(groups),
            std::move(E_in), std::move(E_out), STEP_DONE, used};
}

WalkStep walk_step(i64 mode, i64 k, Vec<const i64> nk, Mat<const i64> nt, Vec<const i64> pk, Mat<const i64> pt,
                   Vec<const i64> bound, Mat<const i64> in_T, Mat<const i64> out_T, i64 sort_above, Vec<i64> buf,
                   i64 used, Mat<i64> T, i64 at, i64 small) {
    auto res = walk_step_body(mode, k, nk, nt, pk, pt, bound, in_T, out_T, sort_above, buf, used, T, at, small, false,
                              Mat<const i64>(nullptr, 1, 0), Mat<const i64>(nullptr, 0, 5),
                              Mat<const i64>(nullptr, 0, 5), Mat<const i64>(nullptr, 0, 2),
                              Mat<const i64>(nullptr, 0, 2), Vec<const i64>(), Mat<const i64>(nullptr, 0, 2),
                              Mat<const i64>(nullptr, 0, 2), Vec<const i64>());
    return {std::move(std::get<0>(res)), std::move(std::get<1>(res)), std::move(std::get<2>(res)),
            std::move(std::get<3>(res)), std::move(std::get<4>(res)), std::move(std::get<5>(res)),
            std::move(std::get<6>(res)), std::move(std::get<7>(res)), std::move(std::get<8>(res)),
            std::move(std::get<9>(res)), std::get<13>(res), std::get<14>(res)};
}

WalkStepKept walk_step_kept(i64 mode, i64 k, Vec<const i64> nk, Mat<const i64> nt, Vec<const i64> pk,
                            Mat<const i64> pt, Vec<const i64> bound, Mat<const i64> in_T, Mat<const i64> out_T,
                            i64 sort_above, Vec<i64> buf, i64 used, Mat<i64> T, i64 at, i64 small,
                            Mat<const i64> c_groups, Mat<const i64> c_in, Mat<const i64> c_out, Mat<const i64> a_rows,
                            Mat<const i64> a_times, Vec<const i64> a_diffs, Mat<const i64> e_rows,
                            Mat<const i64> e_times, Vec<const i64> e_diffs) {
    return walk_step_body(mode, k, nk, nt, pk, pt, bound, in_T, out_T, sort_above, buf, used, T, at, small, true,
                          c_groups, c_in, c_out, a_rows, a_times, a_diffs, e_rows, e_times, e_diffs);
}

}  // namespace ddflow
