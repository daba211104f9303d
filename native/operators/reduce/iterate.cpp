// The loop tactic's kernels: see iterate.hpp, and ddflow/operators/reduce/iterate.py for the reference of each.
#include "operators/reduce/iterate.hpp"

#include "base/kernels.hpp"
#include "graph/node.hpp"
#include "operators/reduce/chain.hpp"
#include "traces/arena.hpp"
#include "traces/layout.hpp"

namespace ddflow {

namespace {

// What loop_seeds and loop_step read of their seeds: a time of two coordinates per row, as deep as the bound.
void check_seeds(const char* kw, Mat<const i64> nk, Mat<const i64> nt, Mat<const i64> pk, Mat<const i64> pt,
                 Vec<const i64> bound) {
    const i64 d = bound.n, w = std::max<i64>(2, d);
    if (d < 1) bad_argument(kw, "bound needs a coordinate");
    if (nt.rows != nk.rows || pt.rows != pk.rows) bad_argument(kw, "nk and nt (pk and pt) differ in length");
    if ((nt.rows && nt.cols < w) || (pt.rows && pt.cols < w))
        bad_argument(kw, "seed times need two coordinates, and as many as the bound");
    if (pk.rows && pk.cols < nk.cols) bad_argument(kw, "pending rows (pk) are narrower than the new ones (nk)");
}

}  // namespace

i64 write_output(const char* kernel, Mat<const i64> C, Mat<const i64> Tm, Vec<const i64> D, Vec<i64> buf, i64 used,
                 Mat<i64> T, i64 at) {
    const i64 m = C.rows, k = C.cols, depth = Tm.cols;
    if (used < 0 || used + words_for(k, m, depth) > buf.n)
        bad_argument(kernel, "the arena (buf) has fewer than words_for(n, arity, depth) words free past used");
    if (at < 0 || at >= T.rows || T.cols < VAL0 + m - 1)
        bad_argument(kernel, "the arena's table T lacks row `at` or a column per field");
    return write_trie(C, Tm, D, buf, used, T, at);
}

std::tuple<Array<i64>, Array<i64>, Array<i64>, Array<bool>, bool> loop_seeds(Mat<const i64> nk, Mat<const i64> nt,
                                                                             Mat<const i64> pk, Mat<const i64> pt,
                                                                             Vec<const i64> bound) {
    check_seeds("loop_seeds", nk, nt, pk, pt, bound);
    const i64 nn = nk.rows, m = nk.cols, npend = pk.rows, d = bound.n;
    Array<bool> waiting = filled<bool>(npend, false);
    Array<i64> src(nn + npend);  // seed i: row src[i] of nk, or row src[i] - nn of pk
    i64 ns = 0;
    for (i64 i = 0; i < nn; ++i) src[ns++] = i;
    for (i64 i = 0; i < npend; ++i) {
        if (complete_row(pt, i, bound)) src[ns++] = nn + i;
        else waiting[i] = true;
    }
    Array<i64> M(ns, m + 1);
    bool bad = false;
    for (i64 s = 0; s < ns; ++s) {
        const i64 q = src[s];
        for (i64 c = 0; c < m; ++c) M(s, c) = q < nn ? nk(q, c) : pk(q - nn, c);
        M(s, m) = q < nn ? nt(q, 0) : pt(q - nn, 0);
        if ((q < nn ? nt(q, 1) : pt(q - nn, 1)) != bound[d - 1] - 1) bad = true;
    }
    Mat<const i64> Mv = M.mat();
    Array<i64> order = lex_order(Mv);
    Array<i64> gid(ns), t(ns), firsts(ns);
    i64 G = 0;
    for (i64 i = 0; i < ns; ++i) {
        const i64 x = order[i];
        if (i == 0 || rows_differ(Mv, x, firsts[G - 1], m)) firsts[G++] = x;
        gid[i] = G - 1;
        t[i] = Mv(x, m);
    }
    Array<i64> groups(m, G);
    for (i64 g = 0; g < G; ++g)
        for (i64 c = 0; c < m; ++c) groups(c, g) = Mv(firsts[g], c);
    return {std::move(groups), std::move(gid), std::move(t), std::move(waiting), bad};
}

std::tuple<Array<i64>, Array<i64>> loop_pending(Mat<const i64> pk, Mat<const i64> pt, Vec<const bool> waiting,
                                                Mat<const i64> groups, Mat<const i64> P) {
    const i64 m = groups.rows;
    const char* kw = "loop_pending";
    if (waiting.n != pk.rows || pt.rows != pk.rows) bad_argument(kw, "pk, pt and waiting differ in length");
    if (pk.rows && (pk.cols < m || pt.cols < 2)) bad_argument(kw, "pending rows need the groups' width and two times");
    if (P.rows && P.cols < 3) bad_argument(kw, "P needs rows (group, outer time, iteration)");
    i64 nw = 0;
    for (i64 i = 0; i < waiting.n; ++i) nw += waiting[i];
    const i64 n = nw + P.rows;
    Array<i64> M(n, m + 2);
    i64 x = 0;
    for (i64 i = 0; i < waiting.n; ++i) {
        if (!waiting[i]) continue;
        for (i64 c = 0; c < m; ++c) M(x, c) = pk(i, c);
        M(x, m) = pt(i, 0);
        M(x, m + 1) = pt(i, 1);
        ++x;
    }
    for (i64 j = 0; j < P.rows; ++j) {
        if (P(j, 0) < 0 || P(j, 0) >= groups.cols) bad_argument(kw, "P holds a group outside groups' columns");
        for (i64 c = 0; c < m; ++c) M(nw + j, c) = groups(c, P(j, 0));
        M(nw + j, m) = P(j, 1);
        M(nw + j, m + 1) = P(j, 2);
    }
    Mat<const i64> Mv = M.mat();
    Array<i64> order = lex_order(Mv);
    Array<i64> cols(m, n), times(n, 2);
    i64 out = 0;
    for (i64 y = 0; y < n; ++y) {
        const i64 r = order[y];
        if (out > 0 && !rows_differ(Mv, r, order[y - 1], m + 2)) continue;
        for (i64 c = 0; c < m; ++c) cols(c, out) = Mv(r, c);
        times(out, 0) = Mv(r, m);
        times(out, 1) = Mv(r, m + 1);
        ++out;
    }
    cols.truncate_cols(out);
    times.truncate(out);
    return {std::move(cols), std::move(times)};
}

LoopStep loop_step(Mat<const i64> nk, Mat<const i64> nt, Mat<const i64> pk, Mat<const i64> pt, Vec<const i64> bound,
                   Mat<const i64> in_T, Mat<const i64> out_T, i64 out_arity, i64 code, Vec<i64> buf, i64 used,
                   Mat<i64> T, i64 at, i64 small) {
    check_seeds("loop_step", nk, nt, pk, pt, bound);
    if (out_arity < 1) bad_argument("loop_step", "out_arity must be at least 1");
    const i64 ng = nk.cols;
    const i64 r = bound[bound.n - 1] - 1;
    const i64 nn = nk.rows, npd = pk.rows;
    Array<bool> ready(nn);
    i64 nr = 0;
    for (i64 i = 0; i < nn; ++i) {
        ready[i] = complete_row(nt, i, bound);
        nr += ready[i];
    }
    // New seeds of later rounds wait with the pending ones (after them, so a sorted pending set stays one run).
    Array<i64> rk(nr, ng), rt(nr, 2), wk(npd + nn - nr, ng), wt(npd + nn - nr, 2);
    for (i64 i = 0; i < npd; ++i) {
        for (i64 c = 0; c < ng; ++c) wk(i, c) = pk(i, c);
        wt(i, 0) = pt(i, 0);
        wt(i, 1) = pt(i, 1);
    }
    i64 x = 0, y = npd;
    for (i64 i = 0; i < nn; ++i) {
        if (ready[i]) {
            for (i64 c = 0; c < ng; ++c) rk(x, c) = nk(i, c);
            rt(x, 0) = nt(i, 0);
            rt(x, 1) = nt(i, 1);
            ++x;
        } else {
            for (i64 c = 0; c < ng; ++c) wk(y, c) = nk(i, c);
            wt(y, 0) = nt(i, 0);
            wt(y, 1) = nt(i, 1);
            ++y;
        }
    }
    auto nothing = [&](i64 status) {
        return LoopStep{Array<i64>(out_arity, 0), Array<i64>(0, 2), Array<i64>(0), Array<i64>(0), Array<i32>(0),
                        Array<i64>(out_arity - 1, 0), Array<i32>(0), Array<i64>(0), Array<i64>(ng, 0),
                        Array<i64>(0, 2), status, used};
    };
    auto [gmat, seed_gid, seed_t, waiting, bad] = loop_seeds(rk.mat(), rt.mat(), wk.mat(), wt.mat(), bound);
    if (bad) return nothing(STEP_BAD_ROUND);
    auto [in_gid, in_cols, in_times, in_diffs] = histories(in_T, gmat.mat(), ng, 2);
    auto [out_gid, o_cols, o_times, o_diffs] = histories(out_T, gmat.mat(), out_arity, 2);
    (void)in_cols;
    Array<i64> in_a = column(in_times.mat(), 0), in_i = column(in_times.mat(), 1);
    Array<i64> out_a = column(o_times.mat(), 0), out_i = column(o_times.mat(), 1);
    auto [c_gid, c_a, acc, out_pos, P, overflow] =
        chain_walk(r, seed_gid.vec(), seed_t.vec(), in_gid.vec(), in_a.vec(), in_i.vec(), in_diffs.vec(),
                   out_gid.vec(), out_a.vec(), out_i.vec(), o_diffs.vec(), code == SCALAR_DISTINCT);
    if (overflow) return nothing(STEP_OVERFLOW);
    const bool count = code == SCALAR_COUNT;
    Array<i64> mult(acc.size());
    for (i64 i = 0; i < acc.size(); ++i) mult[i] = count ? acc[i] != 0 : acc[i] > 0;  // the logics' scalar_rows
    auto [cols, times, diffs, out_overflow] =
        chain_output(r, c_gid.vec(), c_a.vec(), mult.vec(), count ? acc.vec() : Vec<i64>(), count, gmat.mat(),
                     o_cols.mat(), o_diffs.vec(), out_pos.vec());
    if (out_overflow) return nothing(STEP_OVERFLOW);
    auto [later, later_t] = loop_pending(wk.mat(), wt.mat(), waiting.vec(), gmat.mat(), P.mat());
    if (diffs.size() == 0 || diffs.size() <= small) {
        const i64 now = diffs.size() ? write_output("loop_step", cols.mat(), times.mat(), diffs.vec(), buf, used, T,
                                                    at) : used;
        return {std::move(cols), std::move(times), std::move(diffs), Array<i64>(0), Array<i32>(0),
                Array<i64>(out_arity - 1, 0), Array<i32>(0), Array<i64>(0), std::move(later), std::move(later_t),
                STEP_DONE, now};
    }
    auto [keys, key_offs, V, val_offs, row] = build_trie(Transposed<const i64>(cols.mat()), times.mat(), diffs.vec());
    return {std::move(cols), std::move(times), std::move(diffs), std::move(keys), std::move(key_offs), std::move(V),
            std::move(val_offs), std::move(row), std::move(later), std::move(later_t), STEP_DONE, used};
}

}  // namespace ddflow
