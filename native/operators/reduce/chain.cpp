// Chains of loop times: see chain.hpp, and ddflow/operators/reduce/chain.py for the reference of each.
#include "operators/reduce/chain.hpp"

namespace ddflow {

std::tuple<Array<i64>, Array<i64>, Array<i64>, bool> chain_net(i64 r, Vec<const i64> c_gid, Vec<const i64> c_a,
                                                               Vec<const i64> mult, Mat<const i64> groups,
                                                               Vec<const i64> odiffs, Vec<const i64> out_pos) {
    const i64 n = c_gid.n, ng = groups.rows;
    Array<i64> net(n);
    auto overflowed = [&]() {
        net.truncate(0);
        return std::tuple<Array<i64>, Array<i64>, Array<i64>, bool>{Array<i64>(ng, 0), Array<i64>(0, 2),
                                                                    std::move(net), true};
    };
    for (i64 i = 0; i < n; ++i) {
        i64 s = mult[i];
        if (i > 0 && c_gid[i - 1] == c_gid[i] && mult[i - 1] != 0) {
            i64 t;
            if (__builtin_add_overflow(s, wrap_neg(mult[i - 1]), &t)) return overflowed();
            s = t;
        }
        net[i] = s;
    }
    for (i64 q = 0; q < out_pos.n; ++q) {
        const i64 i = out_pos[q];
        if (i >= 0) {
            i64 t;
            if (__builtin_add_overflow(net[i], wrap_neg(odiffs[q]), &t)) return overflowed();
            net[i] = t;
        }
    }
    i64 k = 0;
    for (i64 i = 0; i < n; ++i) k += net[i] != 0;
    Array<i64> cols(ng, k), times(k, 2), sums(k);
    i64 x = 0;
    for (i64 i = 0; i < n; ++i) {
        if (net[i] == 0) continue;
        const i64 g = c_gid[i];
        for (i64 c = 0; c < ng; ++c) cols(c, x) = groups(c, g);
        times(x, 0) = c_a[i];
        times(x, 1) = r;
        sums[x] = net[i];
        ++x;
    }
    return {std::move(cols), std::move(times), std::move(sums), false};
}

std::tuple<Array<i64>, Array<i64>, Array<i64>, bool> chain_output(i64 r, Vec<const i64> c_gid, Vec<const i64> c_a,
                                                                  Vec<const i64> mult, Vec<const i64> val,
                                                                  bool has_val, Mat<const i64> groups,
                                                                  Mat<const i64> ocols, Vec<const i64> odiffs,
                                                                  Vec<const i64> out_pos) {
    const i64 n = c_gid.n, ng = groups.rows, arity = ng + 1;
    const char* kw = "chain_output";
    if (c_a.n != n || mult.n != n || (has_val && val.n != n)) bad_argument(kw, "c_gid, c_a, mult (and val) differ in length");
    if (!all_within(c_gid, groups.cols)) bad_argument(kw, "c_gid holds a group outside groups' columns");
    if (odiffs.n < out_pos.n) bad_argument(kw, "odiffs needs a diff per out_pos entry");
    for (i64 q = 0; q < out_pos.n; ++q)
        if (out_pos[q] >= n) bad_argument(kw, "out_pos holds a chain row past the chain");
    if (has_val && out_pos.n && (ocols.rows < ng + 1 || ocols.cols < out_pos.n))
        bad_argument(kw, "ocols needs the output history's value row (row ng) for each out_pos entry");
    if (!has_val) return chain_net(r, c_gid, c_a, mult, groups, odiffs, out_pos);
    // The history entries of each chain row (a counting sort by chain row).
    Array<i64> start = filled<i64>(n + 1, 0);
    for (i64 q = 0; q < out_pos.n; ++q)
        if (out_pos[q] >= 0) ++start[out_pos[q] + 1];
    for (i64 i = 0; i < n; ++i) start[i + 1] += start[i];
    Array<i64> fill(n);
    for (i64 i = 0; i < n; ++i) fill[i] = start[i];
    Array<i64> hist(start[n]);
    for (i64 q = 0; q < out_pos.n; ++q) {
        const i64 i = out_pos[q];
        if (i >= 0) hist[fill[i]++] = q;
    }
    // Entries (group, value, chain row) with their diffs, in chain order.
    const i64 cap = 2 * n + start[n];
    Array<i64> M(cap, 3), D(cap);
    i64 m = 0;
    for (i64 i = 0; i < n; ++i) {
        const i64 g = c_gid[i];
        for (int src = 0; src < 2; ++src) {
            const i64 j = src == 0 ? i : i - 1;
            if (j < 0 || c_gid[j] != g || mult[j] == 0) continue;
            M(m, 0) = g;
            M(m, 1) = val[j];
            M(m, 2) = i;
            D[m] = src == 0 ? mult[j] : wrap_neg(mult[j]);
            ++m;
        }
        for (i64 x = start[i]; x < start[i + 1]; ++x) {
            const i64 q = hist[x];
            M(m, 0) = g;
            M(m, 1) = ocols(ng, q);
            M(m, 2) = i;
            D[m] = wrap_neg(odiffs[q]);
            ++m;
        }
    }
    M.truncate(m);
    D.truncate(m);
    Mat<const i64> Mv = M.mat();
    auto [sel, sums, overflow] = group_sums(Mv, lex_order(Mv).vec(), D.vec());
    if (overflow) return {Array<i64>(arity, 0), Array<i64>(0, 2), std::move(sums), true};
    const i64 k = sel.size();
    Array<i64> cols(arity, k), times(k, 2);
    for (i64 x = 0; x < k; ++x) {
        const i64 e = sel[x];
        for (i64 c = 0; c < ng; ++c) cols(c, x) = groups(c, M(e, 0));
        cols(ng, x) = M(e, 1);
        times(x, 0) = c_a[M(e, 2)];
        times(x, 1) = r;
    }
    return {std::move(cols), std::move(times), std::move(sums), false};
}

std::tuple<Array<i64>, Array<i64>, Array<i64>, Array<i64>, Array<i64>, bool> chain_walk(
    i64 r, Vec<const i64> seed_g, Vec<const i64> seed_a, Vec<const i64> in_g, Vec<const i64> in_a,
    Vec<const i64> in_i, Vec<const i64> in_d, Vec<const i64> out_g, Vec<const i64> out_a, Vec<const i64> out_i,
    Vec<const i64> out_d, bool distinct) {
    const i64 ns = seed_g.n, ni = in_g.n, no = out_g.n;
    const char* kw = "chain_walk";
    if (seed_a.n != ns) bad_argument(kw, "seed_g and seed_a differ in length");
    if (in_a.n != ni || in_i.n != ni || in_d.n != ni) bad_argument(kw, "in_g, in_a, in_i and in_d differ in length");
    if (out_a.n != no || out_i.n != no || out_d.n != no)
        bad_argument(kw, "out_g, out_a, out_i and out_d differ in length");
    const i64 cap = ns + ni + no;
    Array<i64> cg(cap), ca(cap), acc(cap);
    Array<i64> out_pos = filled<i64>(no, -1);
    Array<i64> P(16, 3);
    Array<i64> scratch(3 * (cap + ni + no));  // later_rounds': a group's chain plus its history, thrice
    i64 nc = 0, npd = 0, s0 = 0, i0 = 0, o0 = 0;
    bool overflow = false;
    while (s0 < ns) {
        const i64 g = seed_g[s0];
        const i64 s1 = run_of(seed_g, s0, g).second;
        i64 i1, o1;
        std::tie(i0, i1) = run_of(in_g, i0, g);
        std::tie(o0, o1) = run_of(out_g, o0, g);
        const i64 ms = seed_a[s0];
        const i64 c0 = nc;
        i64 total = 0;
        i64 p = i0, q = o0;
        ChainCursor cur{s0, i0, o0};
        i64 c = ms;
        while (c != I64_MAX) {
            while (p < i1 && in_a[p] <= c) {
                if (in_i[p] <= r) {
                    const i64 d = in_d[p];
                    if (sum_overflows(total, d)) overflow = true;  // the count leaves int64: reported, never wrapped
                    else total += d;
                }
                ++p;
            }
            while (q < o1 && out_a[q] <= c) {
                if (out_i[q] <= r) out_pos[q] = nc;
                ++q;
            }
            cg[nc] = g;
            ca[nc] = c;
            acc[nc] = total;
            ++nc;
            c = next_chain_time(c, r, cur, s1, seed_a, i1, in_a, in_i, o1, out_a, out_i);
        }
        const i64 later = n_later(r, in_i, i0, i1, out_i, o0, o1);
        if (later)
            later_rounds(P, npd, g, r, ms, ca.vec(), c0, nc - c0, later, in_a, in_i, i0, i1, out_a, out_i, o0, o1,
                         scratch.vec(), distinct, acc.vec(), in_d, out_d);
        s0 = s1;
        i0 = i1;
        o0 = o1;
    }
    cg.truncate(nc);
    ca.truncate(nc);
    acc.truncate(nc);
    P.truncate(npd);
    return {std::move(cg), std::move(ca), std::move(acc), std::move(out_pos), std::move(P), overflow};
}

}  // namespace ddflow
