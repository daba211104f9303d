// Keyed seeds and pending times: see pending.hpp, and ddflow/operators/reduce/pending.py for the reference.
#include "operators/reduce/pending.hpp"

#include "base/kernels.hpp"
#include "base/radix.hpp"
#include "graph/node.hpp"
#include "operators/reduce/chain.hpp"

namespace ddflow {

std::tuple<Array<i64>, Array<i64>, Array<i64>, Array<bool>, bool> due_seeds(Vec<const i64> nk, Mat<const i64> nt,
                                                                            Vec<const i64> pk, Mat<const i64> pt,
                                                                            Vec<const i64> bound) {
    const i64 n = nk.n, p = pk.n, d = bound.n;
    const char* kw = "due_seeds";
    if (d < 1) bad_argument(kw, "bound needs a coordinate");
    if (nt.rows != n || pt.rows != p) bad_argument(kw, "nk and nt (pk and pt) differ in length");
    if ((n && nt.cols < d) || (p && pt.cols < d)) bad_argument(kw, "times have fewer coordinates than the bound");
    Array<bool> waiting = filled<bool>(p, false);
    Array<i64> M(n + p, 1 + d);
    i64 ns = 0;
    for (i64 i = 0; i < n; ++i) {
        M(ns, 0) = nk[i];
        for (i64 j = 0; j < d; ++j) M(ns, 1 + j) = nt(i, j);
        ++ns;
    }
    for (i64 i = 0; i < p; ++i) {
        if (complete_row(pt, i, bound)) {
            M(ns, 0) = pk[i];
            for (i64 j = 0; j < d; ++j) M(ns, 1 + j) = pt(i, j);
            ++ns;
        } else {
            waiting[i] = true;
        }
    }
    M.truncate(ns);
    Mat<const i64> S = M.mat();
    Array<i64> order = row_order(S, RADIX_ROWS_ABOVE);
    Array<i64> keys(ns), g(ns), a(ns);
    i64 G = 0;
    bool bad = false;
    for (i64 x = 0; x < ns; ++x) {
        const i64 i = order[x];
        if (G == 0 || S(i, 0) != keys[G - 1]) keys[G++] = S(i, 0);
        g[x] = G - 1;
        a[x] = S(i, 1);
        if (d == 2 && S(i, 2) != bound[1] - 1) bad = true;
    }
    keys.truncate(G);
    return {std::move(keys), std::move(g), std::move(a), std::move(waiting), bad};
}

std::tuple<Array<i64>, Array<i64>> merge_pending(Vec<const i64> pk, Mat<const i64> pt, Vec<const bool> waiting,
                                                 Vec<const i64> keys, Mat<const i64> P) {
    const i64 d = pt.cols;
    const char* kw = "merge_pending";
    if (waiting.n != pk.n || pt.rows != pk.n) bad_argument(kw, "pk, pt and waiting differ in length");
    if (P.rows && P.cols < 1 + d) bad_argument(kw, "P's rows need a group and a time as deep as pt's");
    i64 nw = 0;
    for (i64 i = 0; i < waiting.n; ++i) nw += waiting[i];
    const i64 n = nw + P.rows;
    Array<i64> M(n, 1 + d);
    i64 x = 0;
    for (i64 i = 0; i < waiting.n; ++i) {
        if (!waiting[i]) continue;
        M(x, 0) = pk[i];
        for (i64 j = 0; j < d; ++j) M(x, 1 + j) = pt(i, j);
        ++x;
    }
    for (i64 i = 0; i < P.rows; ++i) {
        if (P(i, 0) < 0 || P(i, 0) >= keys.n) bad_argument(kw, "P holds a group outside keys");
        M(x, 0) = keys[P(i, 0)];
        for (i64 j = 0; j < d; ++j) M(x, 1 + j) = P(i, 1 + j);
        ++x;
    }
    Mat<const i64> Mv = M.mat();
    Array<i64> order = row_order(Mv, RADIX_ROWS_ABOVE);
    Array<i64> out_k(n), out_t(n, d);
    i64 m = 0;
    for (i64 y = 0; y < n; ++y) {
        const i64 i = order[y];
        if (y > 0 && !rows_differ(Mv, i, order[y - 1], 1 + d)) continue;
        out_k[m] = Mv(i, 0);
        for (i64 j = 0; j < d; ++j) out_t(m, j) = Mv(i, 1 + j);
        ++m;
    }
    out_k.truncate(m);
    out_t.truncate(m);
    return {std::move(out_k), std::move(out_t)};
}

}  // namespace ddflow
