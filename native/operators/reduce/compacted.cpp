// Histories compacted to the round: see compacted.hpp, and ddflow/operators/reduce/compacted.py for the reference.
#include "operators/reduce/compacted.hpp"

#include <algorithm>

#include "operators/reduce/chain.hpp"
#include "traces/layout.hpp"
#include "traces/merge.hpp"

namespace ddflow {

namespace {

// compare_rows: -1, 0 or 1 as column a of A is before, equal to or after column b of B (first ng rows).  O(ng).
inline int compare_rows(Mat<const i64> A, i64 a, Mat<const i64> B, i64 b, i64 ng) {
    for (i64 c = 0; c < ng; ++c)
        if (A(c, a) != B(c, b)) return A(c, a) < B(c, b) ? -1 : 1;
    return 0;
}

// find_group: the column of the sorted (ng, G) matrix groups equal to the first ng fields of row, or -1.
// O(ng log G).
inline i64 find_group(Mat<const i64> groups, const i64* row, i64 ng) {
    i64 lo = 0, hi = groups.cols;
    while (lo < hi) {
        const i64 mid = (lo + hi) / 2;
        int c = 0;
        for (i64 j = 0; j < ng; ++j)
            if (groups(j, mid) != row[j]) {
                c = groups(j, mid) < row[j] ? -1 : 1;
                break;
            }
        if (c == 0) return mid;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

// compacted_entry: column c of entry e of C with its iteration (the last column but one) compacted to round r.
inline i64 compacted_entry(Mat<const i64> C, i64 e, i64 c, i64 r) {
    return c == C.cols - 2 ? std::max(C(e, c), r) : C(e, c);
}

// run_in_order: whether entries lo:hi of C are in order by (outer time, values, iteration) compacted to r.
// O(hi - lo).
inline bool run_in_order(Mat<const i64> C, i64 lo, i64 hi, i64 r) {
    const i64 w = C.cols;
    for (i64 e = lo + 1; e < hi; ++e)
        for (i64 c = 1; c < w - 1; ++c) {
            const i64 x = compacted_entry(C, e - 1, c, r), y = compacted_entry(C, e, c, r);
            if (x != y) {
                if (x > y) return false;
                break;
            }
        }
    return true;
}

// merge_summed: merge entries lo:hi of C (in order) with sorted M[s:k], D[s:k] into out from row no as group g's,
// iterations compacted to r, equal ones added up and zeros dropped: (new no, overflow).  O((hi - lo + k - s) w).
inline std::pair<i64, bool> merge_summed(Mat<i64> out, i64 no, i64 g, Mat<const i64> C, i64 lo, i64 hi, i64 r,
                                         Mat<const i64> M, Vec<const i64> D, i64 s, i64 k) {
    const i64 w = out.cols;
    i64 i = lo, j = s;
    bool held = false;  // out[no] is a row still being added to
    while (i < hi || j < k) {
        bool from_cache = j >= k;
        if (!from_cache && i < hi) {
            from_cache = true;  // on a tie the cached entry goes first; either order sums the same
            for (i64 c = 1; c < w - 1; ++c) {
                const i64 x = compacted_entry(C, i, c, r);
                if (x != M(j, c)) {
                    from_cache = x < M(j, c);
                    break;
                }
            }
        }
        const i64 d = from_cache ? C(i, w - 1) : D[j];
        bool same = held;
        for (i64 c = 1; c < w - 1 && same; ++c)
            same = out(no, c) == (from_cache ? compacted_entry(C, i, c, r) : M(j, c));
        if (same) {
            const i64 x = out(no, w - 1);
            if (sum_overflows(x, d)) return {no, true};
            out(no, w - 1) = x + d;
        } else {
            if (held && out(no, w - 1) != 0) ++no;
            out(no, 0) = g;
            for (i64 c = 1; c < w - 1; ++c) out(no, c) = from_cache ? compacted_entry(C, i, c, r) : M(j, c);
            out(no, w - 1) = d;
            held = true;
        }
        if (from_cache) ++i;
        else ++j;
    }
    if (held && out(no, w - 1) != 0) ++no;
    return {no, false};
}

}  // namespace

std::tuple<Array<i64>, bool> compacted_histories(Mat<const i64> T, Mat<const i64> groups, i64 arity, i64 r,
                                                 Mat<const i64> c_groups, Mat<const i64> c_entries,
                                                 Mat<const i64> a_rows, Mat<const i64> a_times,
                                                 Vec<const i64> a_diffs) {
    const i64 ng = groups.rows, G = groups.cols;
    const i64 nv = arity - ng, w = nv + 4;
    const i64 Gc = c_groups.cols, nc = c_entries.rows, na = a_rows.rows;
    const char* kw = "compacted_histories";
    if (nv < 0) bad_argument(kw, "groups have more rows than the records' arity");
    if (Gc && c_groups.rows < ng) bad_argument(kw, "c_groups are narrower than groups");
    if (nc && c_entries.cols != w) bad_argument(kw, "c_entries' rows are not (group, time, values..., iteration, diff)");
    for (i64 e = 0; e < nc; ++e)
        if (c_entries(e, 0) < 0 || c_entries(e, 0) >= Gc) bad_argument(kw, "c_entries holds a group outside c_groups");
    if (na && (a_rows.cols < arity || a_times.cols < 2)) bad_argument(kw, "a_rows need arity fields, a_times two");
    if (a_times.rows != na || a_diffs.n != na) bad_argument(kw, "a_rows, a_times and a_diffs differ in length");
    Array<i64> hit = filled<i64>(G, -1);
    i64 h = 0, nmiss = G;
    for (i64 g = 0; g < G; ++g) {  // both sorted: one merge walk
        while (h < Gc && compare_rows(c_groups, h, groups, g, ng) < 0) ++h;
        if (h < Gc && compare_rows(c_groups, h, groups, g, ng) == 0) {
            hit[g] = h;
            --nmiss;
        }
    }
    Array<i64> miss(ng, nmiss), miss_g(nmiss);
    i64 x = 0;
    for (i64 g = 0; g < G; ++g) {
        if (hit[g] >= 0) continue;
        for (i64 c = 0; c < ng; ++c) miss(c, x) = groups(c, g);
        miss_g[x++] = g;
    }
    auto [m_gid, m_cols, m_times, m_diffs] = histories(T, miss.mat(), arity, 2);
    const i64 nm = m_diffs.size();
    // Each cached group's run of entries.
    Array<i64> c_lo = filled<i64>(Gc, 0), c_hi = filled<i64>(Gc, 0);
    for (i64 e = 0; e < nc; ++e) {
        const i64 k = c_entries(e, 0);
        if (e == 0 || c_entries(e - 1, 0) != k) c_lo[k] = e;
        c_hi[k] = e + 1;
    }
    // The added updates of cached groups, grouped by group (a counting sort).
    Array<i64> a_g = filled<i64>(na, -1), a_start = filled<i64>(G + 1, 0);
    for (i64 j = 0; j < na; ++j) {
        const i64 g = find_group(groups, a_rows.row(j), ng);
        if (g >= 0 && hit[g] >= 0) {
            a_g[j] = g;
            ++a_start[g + 1];
        }
    }
    for (i64 g = 0; g < G; ++g) a_start[g + 1] += a_start[g];
    Array<i64> a_fill(G);
    for (i64 g = 0; g < G; ++g) a_fill[g] = a_start[g];
    Array<i64> a_order(a_start[G]);
    for (i64 j = 0; j < na; ++j)
        if (a_g[j] >= 0) a_order[a_fill[a_g[j]]++] = j;
    i64 n = nm + a_start[G];
    for (i64 g = 0; g < G; ++g)
        if (hit[g] >= 0) n += c_hi[hit[g]] - c_lo[hit[g]];
    // Each group's entries in turn, times compacted (see the reference for the three ways a group goes).
    const i64 nh = n - nm;
    Array<i64> M(nh, w - 1), D(nh), scratch_M(nh, w - 1), scratch_D(nh), out(n, w);
    i64 k = 0, m = 0, no = 0;
    bool overflow = false;
    for (i64 g = 0; g < G; ++g) {
        if (hit[g] < 0) {
            while (m < nm && miss_g[m_gid[m]] == g) {
                out(no, 0) = g;
                out(no, 1) = m_times(m, 0);
                for (i64 c = 0; c < nv; ++c) out(no, 2 + c) = m_cols(ng + c, m);
                out(no, w - 2) = std::max(m_times(m, 1), r);
                out(no, w - 1) = m_diffs[m];
                ++no;
                ++m;
            }
            continue;
        }
        const i64 s = k;
        const i64 lo = c_lo[hit[g]], hi = c_hi[hit[g]];
        const bool summed_run = run_in_order(c_entries, lo, hi, r);
        for (i64 e = lo; e < (summed_run ? lo : hi); ++e) {
            M(k, 0) = g;
            for (i64 c = 1; c < w - 2; ++c) M(k, c) = c_entries(e, c);
            M(k, w - 2) = std::max(c_entries(e, w - 2), r);
            D[k] = c_entries(e, w - 1);
            ++k;
        }
        for (i64 y = a_start[g]; y < a_start[g + 1]; ++y) {
            const i64 j = a_order[y];
            M(k, 0) = g;
            M(k, 1) = a_times(j, 0);
            for (i64 c = 0; c < nv; ++c) M(k, 2 + c) = a_rows(j, ng + c);
            M(k, w - 2) = std::max(a_times(j, 1), r);
            D[k] = a_diffs[j];
            ++k;
        }
        sort_segment(M.mat(), D.vec(), s, k, scratch_M.mat(), scratch_D.vec());
        if (summed_run) {  // the cached run is in order (it was summed): merge the few additions into it
            bool bad;
            std::tie(no, bad) = merge_summed(out.mat(), no, g, c_entries, lo, hi, r, M.mat(), D.vec(), s, k);
            overflow = overflow || bad;
            continue;
        }
        auto [end, bad] = consolidate_segment(M.mat(), D.vec(), s, k);
        overflow = overflow || bad;
        for (i64 y = s; y < end; ++y) {
            for (i64 c = 0; c < w - 1; ++c) out(no, c) = M(y, c);
            out(no, w - 1) = D[y];
            ++no;
        }
    }
    out.truncate(no);
    return {std::move(out), overflow};
}

std::tuple<Array<i64>, Array<i64>, Array<i64>, Array<i64>> entry_columns(Mat<const i64> E, Mat<const i64> groups) {
    const i64 n = E.rows, w = E.cols, ng = groups.rows, nv = w - 4;
    Array<i64> gid(n), cols(ng + nv, n), times(n, 2), diffs(n);
    for (i64 x = 0; x < n; ++x) {
        const i64 g = E(x, 0);
        gid[x] = g;
        for (i64 c = 0; c < ng; ++c) cols(c, x) = groups(c, g);
        for (i64 c = 0; c < nv; ++c) cols(ng + c, x) = E(x, 2 + c);
        times(x, 0) = E(x, 1);
        times(x, 1) = E(x, w - 2);
        diffs[x] = E(x, w - 1);
    }
    return {std::move(gid), std::move(cols), std::move(times), std::move(diffs)};
}

}  // namespace ddflow
