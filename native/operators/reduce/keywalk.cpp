// The walk's kernels: see keywalk.hpp, and ddflow/operators/reduce/keywalk.py for the reference of each.
#include "operators/reduce/keywalk.hpp"

#include "base/kernels.hpp"
#include "base/radix.hpp"
#include "operators/reduce/chain.hpp"
#include "traces/merge.hpp"

namespace ddflow {

std::tuple<Array<i64>, Array<i64>, i64, i64, bool> rank_values(Mat<const i64> Ci, Mat<const i64> Co, i64 m,
                                                               Vec<const i64> order, i64 sort_above) {
    const i64 ni = Ci.cols, n = ni + Co.cols;
    if (m < 1 || (ni && Ci.rows < m + 1) || (Co.cols && Co.rows < m + 1))
        bad_argument("rank_values", "Ci and Co need a row per value field after the key (m + 1 rows)");
    auto value = [&](i64 i, i64 c) { return i < ni ? Ci(1 + c, i) : Co(1 + c, i - ni); };
    if (m == 1 && n > 0 && order.n == 0) {
        i64 lo = value(0, 0), hi = lo;
        for (i64 i = 0; i < n; ++i) {
            const i64 v = value(i, 0);
            lo = std::min(lo, v);
            hi = std::max(hi, v);
        }
        if (!(lo < 0 && hi > lo + I64_MAX) && hi - lo < 2 * n) {  // the span fits in int64
            Array<i64> rank(n);
            for (i64 i = 0; i < n; ++i) rank[i] = value(i, 0) - lo;
            return {std::move(rank), Array<i64>(0), hi - lo + 1, lo, true};
        }
    }
    Array<i64> V(n, m);
    for (i64 i = 0; i < n; ++i)
        for (i64 c = 0; c < m; ++c) V(i, c) = value(i, c);
    Array<i64> sorted;
    if (order.n != n) {
        sorted = m == 1 && n > sort_above ? radix_order(Vec<const i64>(V.p, n)) : lex_order(V.mat());
        order = sorted.vec();
    } else if (!all_within(order, n)) {
        bad_argument("rank_values", "order holds an index outside the history's rows");
    }
    Array<i64> rank(n), first(n);
    i64 nv = 0;
    Mat<const i64> Vm = V.mat();
    for (i64 x = 0; x < n; ++x) {
        const i64 i = order[x];
        if (x == 0 || rows_differ(Vm, i, order[x - 1], m)) first[nv++] = i;
        rank[i] = nv - 1;
    }
    first.truncate(nv);
    return {std::move(rank), std::move(first), nv, 0, false};
}

std::tuple<Array<i64>, Array<i64>, Array<i64>, bool> walk_rows(Mat<const i64> E, Vec<const i64> keys,
                                                               Vec<const i64> first, i64 lo, bool narrow,
                                                               Mat<const i64> Ci, Mat<const i64> Co, i64 m,
                                                               bool numbered, i64 depth, i64 r) {
    const i64 ne = E.rows, ni = Ci.cols;
    if (ne && E.cols < 5) bad_argument("walk_rows", "E needs rows (group, value rank, number, outer time, diff)");
    if (depth != 1 && depth != 2) bad_argument("walk_rows", "depth is 1 or 2");
    if (!narrow && ((ni && Ci.rows < m + 1) || (Co.cols && Co.rows < m + 1)))
        bad_argument("walk_rows", "Ci and Co need a row per value field after the key (m + 1 rows)");
    if (!all_within(first, ni + Co.cols)) bad_argument("walk_rows", "first holds an index outside the histories");
    for (i64 e = 0; e < ne; ++e) {
        if (E(e, 0) < 0 || E(e, 0) >= keys.n) bad_argument("walk_rows", "E holds a group outside keys");
        if (!narrow && (E(e, 1) < 0 || E(e, 1) >= first.n)) bad_argument("walk_rows", "E holds a rank outside first");
    }
    // E[:, :4] and E[:, 4], contiguous.
    Array<i64> K(ne, 4), diffs(ne);
    for (i64 e = 0; e < ne; ++e) {
        for (i64 c = 0; c < 4; ++c) K(e, c) = E(e, c);
        diffs[e] = E(e, 4);
    }
    Mat<const i64> Km = K.mat();
    auto [sel, D, overflow] = group_sums(Km, lex_order(Km).vec(), diffs.vec());
    const i64 n = sel.size();
    Array<i64> C(1 + m + (numbered ? 1 : 0), n), T(n, depth);
    for (i64 x = 0; x < n; ++x) {
        const i64 e = sel[x];
        C(0, x) = keys[E(e, 0)];
        if (narrow) {
            C(1, x) = wrap_add(E(e, 1), lo);
        } else {
            const i64 i = first[E(e, 1)];
            for (i64 c = 0; c < m; ++c) C(1 + c, x) = i < ni ? Ci(1 + c, i) : Co(1 + c, i - ni);
        }
        if (numbered) C(1 + m, x) = E(e, 2);
        T(x, 0) = E(e, 3);
        if (depth == 2) T(x, 1) = r;
    }
    return {std::move(C), std::move(T), std::move(D), overflow};
}

namespace {

// add_changed: delta[x] += d, listing x in st[:n] the first time it changes; the list's new length.
inline i64 add_changed(Vec<i64> delta, Vec<bool> mark, Vec<i64> st, i64 n, i64 x, i64 d) {
    delta[x] = wrap_add(delta[x], d);
    if (!mark[x]) {
        mark[x] = true;
        st[n++] = x;
    }
    return n;
}

//: The most work a min's or max's search for its first later change may take (EXTREME_CHANGE_WORK).
constexpr i64 EXTREME_CHANGE_WORK = 1 << 14;

// add_values: append to out[:n] the values v[lo:hi] at iterations it <= upto not yet in mark, marking them; the
// new count.  O(hi - lo).
inline i64 add_values(Vec<const i64> v, Vec<const i64> it, i64 lo, i64 hi, i64 upto, Vec<bool> mark, Vec<i64> out,
                      i64 n) {
    for (i64 j = lo; j < hi; ++j) {
        if (it[j] <= upto && !mark[v[j]]) {
            mark[v[j]] = true;
            out[n++] = v[j];
        }
    }
    return n;
}

// add_counted: cnt[v] += d with nnz the count of nonzero entries kept; (nnz, overflowed).
inline std::pair<i64, bool> add_counted(Vec<i64> cnt, i64 v, i64 d, i64 nnz) {
    if (sum_overflows(cnt[v], d)) return {nnz, true};
    const bool before = cnt[v] != 0;
    cnt[v] += d;
    return {nnz + (cnt[v] != 0) - before, false};
}

// first_extreme_change: for a min (mode 0) or max (1), the least iteration past r where its output would change;
// -1 if none; `least` when a sum would leave int64 or the work would pass EXTREME_CHANGE_WORK.  cnt, ocnt (zeros)
// and mark (false) have a slot per value rank and are left so; gv: room for the group's values.
// O(l * (h + p * v)).
i64 first_extreme_change(i64 mode, i64 r, i64 least, Vec<const i64> outer, Vec<const i64> in_a, Vec<const i64> in_i,
                         Vec<const i64> in_v, Vec<const i64> in_d, i64 i0, i64 i1, Vec<const i64> out_a,
                         Vec<const i64> out_i, Vec<const i64> out_v, Vec<const i64> out_d, i64 o0, i64 o1,
                         Mat<const i64> E, i64 e0, i64 e1, Vec<i64> cnt, Vec<i64> ocnt, Vec<bool> mark,
                         Vec<i64> gv) {
    i64 nv = add_values(in_v, in_i, i0, i1, I64_MAX, mark, gv, 0);
    nv = add_values(out_v, out_i, o0, o1, I64_MAX, mark, gv, nv);
    for (i64 x = e0; x < e1; ++x) {
        if (!mark[E(x, 1)]) {
            mark[E(x, 1)] = true;
            gv[nv++] = E(x, 1);
        }
    }
    Vec<i64> vals = gv.slice(0, nv);
    for (i64 x = 0; x < nv; ++x) mark[vals[x]] = false;
    const i64 h = (i1 - i0) + (o1 - o0);
    const i64 nb = outer.n;
    if (wrap_mul(h, wrap_add(h, wrap_mul(nb, nv))) > EXTREME_CHANGE_WORK) return least;
    sort_small(vals);
    i64 found = -1;
    i64 it = r;
    while (found < 0) {
        const i64 L = next_later(it, in_i, i0, i1, out_i, o0, o1);
        if (L == I64_MAX) break;
        i64 p = i0, q = o0, e = e0, nnz = 0;
        for (i64 b = 0; b < nb; ++b) {
            const i64 c = outer[b];
            bool over = false;
            while (p < i1 && in_a[p] <= c && !over) {
                if (in_i[p] <= L) {
                    over = sum_overflows(cnt[in_v[p]], in_d[p]);
                    if (!over) cnt[in_v[p]] += in_d[p];
                }
                ++p;
            }
            while (q < o1 && out_a[q] <= c && !over) {
                if (out_i[q] <= L) std::tie(nnz, over) = add_counted(ocnt, out_v[q], out_d[q], nnz);
                ++q;
            }
            while (e < e1 && E(e, 3) <= c && !over) {
                std::tie(nnz, over) = add_counted(ocnt, E(e, 1), E(e, 4), nnz);
                ++e;
            }
            if (over) {
                found = least;
                break;
            }
            i64 m = -1;
            for (i64 x = 0; x < nv; ++x) {
                const i64 v = mode == 0 ? vals[x] : vals[nv - 1 - x];
                if (cnt[v] > 0) {
                    m = v;
                    break;
                }
            }
            if (!(m < 0 ? nnz == 0 : (nnz == 1 && ocnt[m] == 1))) {
                found = L;
                break;
            }
        }
        for (i64 x = 0; x < nv; ++x) {
            cnt[vals[x]] = 0;
            ocnt[vals[x]] = 0;
        }
        it = L;
    }
    return found;
}

// The checks of key_walk's boundary: what its arrays indexed by value rank rely on.
void check_key_walk(i64 mode, i64 k, i64 n_values, Vec<const i64> seed_g, Vec<const i64> seed_a,
                    Vec<const i64> in_g, Vec<const i64> in_a, Vec<const i64> in_i, Vec<const i64> in_v,
                    Vec<const i64> in_d, Vec<const i64> out_g, Vec<const i64> out_a, Vec<const i64> out_i,
                    Vec<const i64> out_v, Vec<const i64> out_d, Vec<const i64> out_n, Vec<const i64> tie,
                    Vec<const i64> part) {
    const char* kw = "key_walk";
    if (n_values < 0) bad_argument(kw, "n_values is negative");
    if (seed_a.n != seed_g.n) bad_argument(kw, "seed_g and seed_a differ in length");
    if (in_a.n != in_g.n || in_i.n != in_g.n || in_v.n != in_g.n || in_d.n != in_g.n)
        bad_argument(kw, "the input history's arrays (in_g .. in_d) differ in length");
    if (out_a.n != out_g.n || out_i.n != out_g.n || out_v.n != out_g.n || out_d.n != out_g.n)
        bad_argument(kw, "the output history's arrays (out_g .. out_d) differ in length");
    if (mode >= 3 && out_n.n != out_g.n) bad_argument(kw, "out_n needs a number per output history row");
    if (!all_within(in_v, n_values)) bad_argument(kw, "in_v holds a value rank outside range(n_values)");
    if (!all_within(out_v, n_values)) bad_argument(kw, "out_v holds a value rank outside range(n_values)");
    if (mode >= 3 && k < 0) bad_argument(kw, "k is negative");
    if (mode >= 3 && (uint64_t)n_values * (uint64_t)(k + 1) > ((uint64_t)1 << 40))
        bad_argument(kw, "n_values x (k + 1) pairs do not fit in memory");
    if (mode >= 4 && tie.n != n_values) bad_argument(kw, "tie needs a tie group per value rank");
    if (part.n) {
        if (part.n != n_values) bad_argument(kw, "part needs a part per value rank");
        for (i64 v = 0; v < part.n; ++v)
            if (part[v] < 0 || (v && part[v] < part[v - 1])) bad_argument(kw, "part is not nondecreasing from 0");
    }
}

}  // namespace

std::tuple<Array<i64>, Array<i64>> key_walk(i64 mode, i64 k, i64 r, i64 bound_a, i64 n_values, Vec<const i64> seed_g,
                                            Vec<const i64> seed_a, Vec<const i64> in_g, Vec<const i64> in_a,
                                            Vec<const i64> in_i, Vec<const i64> in_v, Vec<const i64> in_d,
                                            Vec<const i64> out_g, Vec<const i64> out_a, Vec<const i64> out_i,
                                            Vec<const i64> out_v, Vec<const i64> out_d, Vec<const i64> out_n,
                                            Vec<const i64> tie, Vec<const i64> part) {
    check_key_walk(mode, k, n_values, seed_g, seed_a, in_g, in_a, in_i, in_v, in_d, out_g, out_a, out_i, out_v, out_d,
                   out_n, tie, part);
    Array<i64> E(16, 5), P(16, 3);
    i64 ne = 0, npd = 0;
    Array<i64> cnt = filled<i64>(n_values, 0), prev = filled<i64>(n_values, 0), des = filled<i64>(n_values, 0),
               delta = filled<i64>(n_values, 0);
    Array<bool> seen = filled<bool>(n_values, false), mark = filled<bool>(n_values, false);
    Array<i64> touched(n_values), st(n_values);  // mark: min/max's values in st, the ones this chain step changes
    Array<i64> chain(seed_a.n + in_a.n + out_a.n);
    Array<i64> scratch(chain.size() + in_a.n + out_a.n);  // later_rounds'
    const i64 W = mode >= 3 ? k + 1 : 0;  // modes 3-5: pairs (value, number) as value * W + number
    Array<i64> pdelta = filled<i64>(n_values * W, 0);
    Array<bool> pmark = filled<bool>(n_values * W, false);
    Array<i64> pst(n_values * W);
    const bool parted = part.n > 0;
    const i64 n_parts = parted && n_values > 0 ? part[n_values - 1] + 1 : 1;
    const i64 kept = mode == 3 ? k * n_parts : (mode >= 4 ? n_values : 0);  // rank: any number of values may tie
    Array<i64> prevl(kept), desl(kept);  // the pairs kept at the previous chain time, and their copies
    Array<i64> prevm = filled<i64>(kept, 1), desm = filled<i64>(kept, 1);
    i64 nprev = 0;
    const i64 ns = seed_g.n;
    i64 s0 = 0, i0 = 0, o0 = 0;
    while (s0 < ns) {
        const i64 g = seed_g[s0];
        const i64 s1 = run_of(seed_g, s0, g).second;
        i64 i1, o1;
        std::tie(i0, i1) = run_of(in_g, i0, g);
        std::tie(o0, o1) = run_of(out_g, o0, g);
        const i64 ms = seed_a[s0];  // seeds are sorted: the earliest
        const i64 e0 = ne;          // the group's output rows start here
        i64 pm = -1;                // min/max: the group's output value rank at the previous chain time (-1: none)
        nprev = 0;
        // The group's values visible at iteration r.
        i64 nt = add_values(in_v, in_i, i0, i1, r, seen.vec(), touched.vec(), 0);
        nt = add_values(out_v, out_i, o0, o1, r, seen.vec(), touched.vec(), nt);
        Vec<i64> vals = touched.vec().slice(0, nt);
        sort_small(vals);  // ranks in value order
        // Walk the chain of outer times: seeds, and history at iterations <= r from the earliest seed on.
        i64 p = i0, q = o0;
        ChainCursor cur{s0, i0, o0};
        i64 nc = 0;
        i64 c = ms;
        while (c != I64_MAX) {
            if (c >= bound_a) {  // not complete yet: retire it when the frontier passes
                grow_rows(P, npd, npd + 1);
                P(npd, 0) = g;
                P(npd, 1) = c;
                P(npd, 2) = r;
                ++npd;
            } else {
                while (p < i1 && in_a[p] <= c) {
                    if (in_i[p] <= r) cnt[in_v[p]] = wrap_add(cnt[in_v[p]], in_d[p]);
                    ++p;
                }
                Vec<i64> changed;
                i64 nch = 0;
                if (mode < 2) {
                    // min or max: the output is one value (or none); only it, the previous one and the output
                    // history read here change.
                    i64 m = -1;
                    if (mode == 0) {
                        for (i64 x = 0; x < nt; ++x)
                            if (cnt[vals[x]] > 0) {
                                m = vals[x];
                                break;
                            }
                    } else {
                        for (i64 x = nt - 1; x >= 0; --x)
                            if (cnt[vals[x]] > 0) {
                                m = vals[x];
                                break;
                            }
                    }
                    i64 nst = 0;
                    if (m != pm) {
                        if (pm >= 0) nst = add_changed(delta.vec(), mark.vec(), st.vec(), nst, pm, -1);
                        if (m >= 0) nst = add_changed(delta.vec(), mark.vec(), st.vec(), nst, m, 1);
                    }
                    while (q < o1 && out_a[q] <= c) {
                        if (out_i[q] <= r)
                            nst = add_changed(delta.vec(), mark.vec(), st.vec(), nst, out_v[q], wrap_neg(out_d[q]));
                        ++q;
                    }
                    pm = m;
                    changed = st.vec();
                    nch = nst;
                } else if (mode >= 3) {
                    // numbered: the kept copies are (value, number) pairs; the previous ones leave, the new ones
                    // come, the output history read here is subtracted, and what is left is emitted.
                    i64 nps = 0;
                    for (i64 x = 0; x < nprev; ++x)
                        nps = add_changed(pdelta.vec(), pmark.vec(), pst.vec(), nps, prevl[x], wrap_neg(prevm[x]));
                    i64 ndes = 0;
                    if (mode == 3) {
                        i64 taken = 0;  // copies kept in this part
                        i64 lastp = -1;
                        for (i64 x = 0; x < nt; ++x) {
                            const i64 v = vals[x];
                            if (parted && part[v] != lastp) {
                                lastp = part[v];
                                taken = 0;
                            }
                            if (taken >= k) {
                                if (parted) continue;
                                break;
                            }
                            const i64 take = cnt[v] > 0 ? std::min(cnt[v], k - taken) : 0;
                            for (i64 t = 0; t < take; ++t) {
                                ++taken;
                                desl[ndes] = v * W + taken;
                                nps = add_changed(pdelta.vec(), pmark.vec(), pst.vec(), nps, desl[ndes], 1);
                                ++ndes;
                            }
                        }
                    } else {
                        i64 copies = 0;  // copies of the values so far (in this part)
                        i64 groups = 0;  // tie groups so far
                        i64 before = 0;  // copies before the current tie group
                        i64 last = -1, lastp = -1;
                        for (i64 x = 0; x < nt; ++x) {
                            const i64 v = vals[x];
                            if (cnt[v] <= 0) continue;
                            if (parted && part[v] != lastp) {
                                lastp = part[v];
                                copies = 0;
                                groups = 0;
                                last = -1;
                            }
                            if (tie[v] != last) {
                                last = tie[v];
                                before = copies;
                                ++groups;
                            }
                            const i64 number = mode == 4 ? wrap_add(before, 1) : groups;
                            if (number > k) {
                                if (parted) continue;
                                break;
                            }
                            desl[ndes] = v * W + number;
                            desm[ndes] = cnt[v];
                            nps = add_changed(pdelta.vec(), pmark.vec(), pst.vec(), nps, desl[ndes], cnt[v]);
                            ++ndes;
                            copies = wrap_add(copies, cnt[v]);
                        }
                    }
                    while (q < o1 && out_a[q] <= c) {
                        if (out_i[q] <= r) {
                            if (out_n[q] < 1 || out_n[q] > k)
                                throw std::invalid_argument("key_walk: an output row number outside 1..k");
                            nps = add_changed(pdelta.vec(), pmark.vec(), pst.vec(), nps, out_v[q] * W + out_n[q],
                                              wrap_neg(out_d[q]));
                        }
                        ++q;
                    }
                    grow_rows(E, ne, ne + nps);
                    for (i64 x = 0; x < nps; ++x) {
                        const i64 pp = pst[x];
                        if (pdelta[pp] != 0) {
                            E(ne, 0) = g;
                            E(ne, 1) = pp / W;
                            E(ne, 2) = pp % W;
                            E(ne, 3) = c;
                            E(ne, 4) = pdelta[pp];
                            ++ne;
                        }
                        pdelta[pp] = 0;
                        pmark[pp] = false;
                    }
                    for (i64 x = 0; x < ndes; ++x) {
                        prevl[x] = desl[x];
                        prevm[x] = desm[x];
                    }
                    nprev = ndes;
                    changed = st.vec();
                    nch = 0;
                } else {
                    for (i64 x = 0; x < nt; ++x) des[vals[x]] = 0;
                    i64 left = k, lastp = -1;
                    for (i64 x = 0; x < nt; ++x) {
                        const i64 v = vals[x];
                        if (parted && part[v] != lastp) {
                            lastp = part[v];
                            left = k;
                        }
                        if (left <= 0) {
                            if (parted) continue;
                            break;
                        }
                        if (cnt[v] > 0) {
                            const i64 take = std::min(cnt[v], left);
                            des[v] = take;
                            left -= take;
                        }
                    }
                    for (i64 x = 0; x < nt; ++x) {
                        const i64 v = vals[x];
                        delta[v] = wrap_sub(des[v], prev[v]);
                        prev[v] = des[v];
                    }
                    while (q < o1 && out_a[q] <= c) {
                        if (out_i[q] <= r) delta[out_v[q]] = wrap_sub(delta[out_v[q]], out_d[q]);
                        ++q;
                    }
                    changed = vals;
                    nch = nt;
                }
                grow_rows(E, ne, ne + nch);  // the values whose output changes here: emitted, then reset
                for (i64 x = 0; x < nch; ++x) {
                    const i64 v = changed[x];
                    if (delta[v] != 0) {
                        E(ne, 0) = g;
                        E(ne, 1) = v;
                        E(ne, 2) = 0;
                        E(ne, 3) = c;
                        E(ne, 4) = delta[v];
                        ++ne;
                    }
                    delta[v] = 0;
                    mark[v] = false;
                }
            }
            chain[nc++] = c;
            c = next_chain_time(c, r, cur, s1, seed_a, i1, in_a, in_i, o1, out_a, out_i);
        }
        for (i64 x = 0; x < nt; ++x) {
            const i64 v = vals[x];
            cnt[v] = 0;
            prev[v] = 0;
            seen[v] = false;
        }
        const i64 later = n_later(r, in_i, i0, i1, out_i, o0, o1);
        if (later && mode < 2) {  // min, max: only the first later round whose visit would emit (if any)
            auto [outer, least] = later_times(r, ms, chain.vec(), 0, nc, later, in_a, in_i, i0, i1, out_a, out_i, o0,
                                              o1, scratch.vec());
            // Between groups cnt and prev (unused by min and max) are zeros, seen false, touched free.
            const i64 L = first_extreme_change(mode, r, least, outer, in_a, in_i, in_v, in_d, i0, i1, out_a, out_i,
                                               out_v, out_d, o0, o1, E.mat(), e0, ne, cnt.vec(), prev.vec(),
                                               seen.vec(), touched.vec());
            if (L >= 0) pend_at(P, npd, g, outer, L);
        } else if (later) {
            later_rounds(P, npd, g, r, ms, chain.vec(), 0, nc, later, in_a, in_i, i0, i1, out_a, out_i, o0, o1,
                         scratch.vec(), false, chain.vec(), in_d, out_d);
        }
        s0 = s1;
        i0 = i1;
        o0 = o1;
    }
    E.truncate(ne);
    P.truncate(npd);
    return {std::move(E), std::move(P)};
}

}  // namespace ddflow
