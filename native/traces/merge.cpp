// The merge kernels: see merge.hpp, and traces/merge.py for the reference of each (and the contract).
#include "traces/merge.hpp"

#include <stdexcept>
#include <string>

namespace ddflow {

namespace {

// _copy_advanced: append updates lo:hi of a source to T, D at nu, times advanced by F; the new nu.
inline i64 copy_advanced(Mat<i64> T, Vec<i64> D, i64 nu, Mat<const i64> src_t, Vec<const i64> src_d, i64 lo,
                         i64 hi, Mat<const i64> F) {
    const i64 d = T.cols, nf = F.rows;
    for (i64 u = lo; u < hi; ++u) {
        const i64* s = src_t.row(u);
        i64* t = T.row(nu);
        if (nf == 0) {
            for (i64 c = 0; c < d; ++c) t[c] = s[c];
        } else if (nf == 1) {
            const i64* f = F.row(0);
            for (i64 c = 0; c < d; ++c) t[c] = s[c] > f[c] ? s[c] : f[c];
        } else {
            for (i64 c = 0; c < d; ++c) {
                const i64 x = s[c];
                i64 best = std::max(x, F(0, c));
                for (i64 e = 1; e < nf; ++e) best = std::min(best, std::max(x, F(e, c)));
                t[c] = best;
            }
        }
        D[nu] = src_d[u];
        ++nu;
    }
    return nu;
}

// _longest_row: the most updates one row holds, from a batch's val_offs.  O(rows).
template <class O>
inline i64 longest_row(Vec<const O> offs) {
    i64 most = 0;
    for (i64 r = 0; r + 1 < offs.n; ++r) most = std::max(most, (i64)offs[r + 1] - (i64)offs[r]);
    return most;
}

// _sort_inner: sort_segment for updates lo:hi whose first coordinates are all equal (two coordinates).
inline void sort_inner(Mat<i64> T, Vec<i64> D, i64 lo, i64 hi, Mat<i64> scratch_t, Vec<i64> scratch_d) {
    if (hi - lo > SORT_IN_PLACE) {
        sort_segment(T, D, lo, hi, scratch_t, scratch_d);
        return;
    }
    for (i64 u = lo + 1; u < hi; ++u) {
        const i64 x = T(u, 1);
        if (x >= T(u - 1, 1)) continue;
        const i64 y = D[u];
        i64 v = u;
        while (v > lo && T(v - 1, 1) > x) {
            T(v, 1) = T(v - 1, 1);
            D[v] = D[v - 1];
            --v;
        }
        T(v, 1) = x;
        D[v] = y;
    }
}

// _copy_prefix: append updates a:a1 of a source up to outer time f0 at nu, moved to (f0, max(inner, f1)):
// (new nu, first update past f0).
template <class O>
inline std::pair<i64, i64> copy_prefix(Mat<i64> T, Vec<i64> D, i64 nu, Mat<const i64> src_t, Vec<const i64> src_d,
                                       i64 a, i64 a1, i64 f0, i64 f1) {
    while (a < a1 && src_t(a, 0) <= f0) {
        T(nu, 0) = f0;
        T(nu, 1) = std::max(src_t(a, 1), f1);
        D[nu] = src_d[a];
        ++nu;
        ++a;
    }
    return {nu, a};
}

// _copy_row_split: a row's updates from A (a:a1) and B (b:b1) advanced by the one frontier element (f0, f1),
// for times of two coordinates: both prefixes (those advancing moves to f0), then the suffixes merged (A's
// first on ties); (new nu, end of the prefix).
inline std::pair<i64, i64> copy_row_split(Mat<i64> T, Vec<i64> D, i64 nu, Mat<const i64> tA, Vec<const i64> dA,
                                          i64 a, i64 a1, Mat<const i64> tB, Vec<const i64> dB, i64 b, i64 b1, i64 f0,
                                          i64 f1) {
    std::tie(nu, a) = copy_prefix<i64>(T, D, nu, tA, dA, a, a1, f0, f1);
    std::tie(nu, b) = copy_prefix<i64>(T, D, nu, tB, dB, b, b1, f0, f1);
    const i64 pre = nu;
    while (a < a1 || b < b1) {
        if (b < b1 && (a >= a1 || tB(b, 0) < tA(a, 0) ||
                       (tB(b, 0) == tA(a, 0) && std::max(tB(b, 1), f1) < std::max(tA(a, 1), f1)))) {
            T(nu, 0) = tB(b, 0);
            T(nu, 1) = std::max(tB(b, 1), f1);
            D[nu] = dB[b];
            ++b;
        } else {
            T(nu, 0) = tA(a, 0);
            T(nu, 1) = std::max(tA(a, 1), f1);
            D[nu] = dA[a];
            ++a;
        }
        ++nu;
    }
    return {nu, pre};
}

[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument("merge_rows: " + what); }

// What the merge relies on to stay within its arrays: offsets from 0 up, of one per row plus one, ending
// within the updates.  O(rows).
template <class O>
void check_side(const char* side, Mat<const i64> K, Vec<const O> off, Mat<const i64> t, Vec<const i64> d, i64 depth) {
    const std::string s(side);
    if (t.rows != d.n) bad("times" + s + " and diffs" + s + " differ in length");
    if (t.cols != depth) bad("times" + s + " and the frontier F differ in depth");
    if (off.n != K.rows + 1 && !(K.rows == 0 && off.n == 0)) bad("off" + s + " must hold one offset per row, plus one");
    i64 prev = 0;
    for (i64 i = 0; i < off.n; ++i) {
        if ((i64)off[i] < prev) bad("off" + s + " must rise from 0 or more");
        prev = off[i];
    }
    if (prev > d.n) bad("off" + s + " points past the updates");
}

// Copies of the first n elements of a, exactly n long (what numba's `a[:n].copy()` kept).
template <class T>
Array<T> exact(const Array<T>& a, i64 n) {
    Array<T> out(n);
    if (n) std::memcpy(out.p, a.p, sizeof(T) * (size_t)n);
    return out;
}

}  // namespace

template <class OA, class OB>
MergedRows merge_rows(Mat<const i64> KA, Vec<const OA> offA, Mat<const i64> tA, Vec<const i64> dA,
                      Mat<const i64> KB, Vec<const OB> offB, Mat<const i64> tB, Vec<const i64> dB,
                      Mat<const i64> F) {
    const i64 nA = KA.rows, nB = KB.rows, d = tA.cols;
    if (KA.cols != KB.cols || (KA.cols < 1 && nA + nB > 0)) bad("KA and KB must have the same columns, at least one");
    check_side("A", KA, offA, tA, dA, F.cols);
    check_side("B", KB, offB, tB, dB, F.cols);
    const i64 cap = dA.n + dB.n;
    Array<i64> pick(nA + nB), voffs(nA + nB + 1), kstarts(nA + nB), T(cap, d), D(cap);
    const i64 most = longest_row(offA) + longest_row(offB);
    Array<i64> scratch_t(most, d), scratch_d(most);
    Mat<i64> Tm = T.mat(), st = scratch_t.mat();
    Vec<i64> Dv = D.vec(), sd = scratch_d.vec();
    voffs[0] = 0;
    i64 i = 0, j = 0, nv = 0, nk = 0, nu = 0, last_key = 0;
    const bool split = d == 2 && F.rows == 1;
    const i64 f0 = split ? F(0, 0) : 0, f1 = split ? F(0, 1) : 0;
    while (i < nA || j < nB) {
        int c;
        if (i >= nA) c = 1;
        else if (j >= nB) c = -1;
        else c = row_cmp(KA.row(i), KB.row(j), KA.cols);
        const i64 lo = nu;
        const i64 src = c <= 0 ? i : nA + j;
        const i64 key = c <= 0 ? KA(i, 0) : KB(j, 0);
        i64 sort_end;
        if (split) {
            i64 a = 0, a1 = 0, b = 0, b1 = 0;
            if (c <= 0) a = offA[i], a1 = offA[i + 1];
            if (c >= 0) b = offB[j], b1 = offB[j + 1];
            std::tie(nu, sort_end) = copy_row_split(Tm, Dv, nu, tA, dA, a, a1, tB, dB, b, b1, f0, f1);
        } else {
            if (c <= 0) nu = copy_advanced(Tm, Dv, nu, tA, dA, offA[i], offA[i + 1], F);
            if (c >= 0) nu = copy_advanced(Tm, Dv, nu, tB, dB, offB[j], offB[j + 1], F);
            sort_end = nu;
        }
        if (nu - lo > 1) {
            if (split) sort_inner(Tm, Dv, lo, sort_end, st, sd);
            else sort_segment(Tm, Dv, lo, sort_end, st, sd);
            bool overflow;
            std::tie(nu, overflow) = consolidate_segment(Tm, Dv, lo, nu);
            if (overflow) {
                pick.truncate(0);
                voffs.truncate(1);
                kstarts.truncate(0);
                T.truncate(0);
                D.truncate(0);
                return {std::move(pick), std::move(voffs), std::move(kstarts), std::move(T), std::move(D), true};
            }
        } else if (nu - lo == 1 && D[lo] == 0) {
            nu = lo;
        }
        if (nu > lo) {
            if (nv == 0 || key != last_key) {
                kstarts[nk++] = nv;
                last_key = key;
            }
            pick[nv++] = src;
            voffs[nv] = nu;
        }
        if (c <= 0) ++i;
        if (c >= 0) ++j;
    }
    pick.truncate(nv);
    voffs.truncate(nv + 1);
    kstarts.truncate(nk);
    T.truncate(nu);
    D.truncate(nu);
    return {std::move(pick), std::move(voffs), std::move(kstarts), std::move(T), std::move(D), false};
}

#define DDFLOW_MERGE_ROWS(OA, OB)                                                                                 \
    template MergedRows merge_rows<OA, OB>(Mat<const i64>, Vec<const OA>, Mat<const i64>, Vec<const i64>,          \
                                           Mat<const i64>, Vec<const OB>, Mat<const i64>, Vec<const i64>,          \
                                           Mat<const i64>);
DDFLOW_MERGE_ROWS(i32, i32)
DDFLOW_MERGE_ROWS(i64, i64)
DDFLOW_MERGE_ROWS(i32, i64)
DDFLOW_MERGE_ROWS(i64, i32)
#undef DDFLOW_MERGE_ROWS

namespace {

// _key_rows: the (key, value) rows of keys k0:k1 of table T's batch b, as merge_rows takes them:
// (K (n, arity), offs (n + 1, into the batch's own updates)); the batch's times and diffs are read in place.
std::pair<Array<i64>, Array<i64>> key_rows(Mat<const i64> T, i64 b, i64 k0, i64 k1, i64 arity) {
    Vec<const i64> keys = batch_keys(T, b);
    Offsets ko = key_offsets(T, b), vo = val_offsets(T, b);
    const i64 v0 = ko[k0], v1 = ko[k1];
    Array<i64> K(v1 - v0, arity), offs(v1 - v0 + 1);
    for (i64 p = k0; p < k1; ++p)
        for (i64 v = ko[p]; v < ko[p + 1]; ++v) K(v - v0, 0) = keys[p];
    for (i64 j = 1; j < arity; ++j) {
        Vec<const i64> col = batch_vals(T, b, j);
        for (i64 v = v0; v < v1; ++v) K(v - v0, j) = col[v];
    }
    for (i64 v = v0; v <= v1; ++v) offs[v - v0] = vo[v];
    return {std::move(K), std::move(offs)};
}

}  // namespace

MergedPair merge_pair(Mat<const i64> T, i64 a0, i64 a1, i64 b0, i64 b1, Mat<const i64> F) {
    if (T.rows < 2 || T.cols < VAL0) throw std::invalid_argument("merge_pair: T must be a table of two batches");
    if (!(0 <= a0 && a0 <= a1 && a1 <= T(0, NKEYS)) || !(0 <= b0 && b0 <= b1 && b1 <= T(1, NKEYS)))
        throw std::invalid_argument("merge_pair: key ranges a0:a1 and b0:b1 must lie within the batches' keys");
    const i64 arity = T.cols - VAL0 + 1, depth = F.cols;
    auto [KA, offA] = key_rows(T, 0, a0, a1, arity);
    auto [KB, offB] = key_rows(T, 1, b0, b1, arity);
    auto [pick, voffs, kstarts, times, diffs, overflow] =
        merge_rows<i64, i64>(KA.mat(), offA.vec(), batch_times(T, 0, depth), batch_diffs(T, 0), KB.mat(), offB.vec(),
                             batch_times(T, 1, depth), batch_diffs(T, 1), F);
    const i64 nA = KA.rows;
    const i64 nv = overflow ? 0 : pick.size(), nk = overflow ? 0 : kstarts.size();
    Array<i64> keys(nk), V(arity - 1, nv);
    Array<i32> key_offs(nk + 1), val_offs(nv + 1);
    auto from = [&](i64 r, i64 j) { return r < nA ? KA(r, j) : KB(r - nA, j); };
    for (i64 g = 0; g < nk; ++g) {
        keys[g] = from(pick[kstarts[g]], 0);
        key_offs[g] = (i32)kstarts[g];
    }
    key_offs[nk] = (i32)nv;
    for (i64 v = 0; v < nv; ++v) {
        const i64 r = pick[v];
        for (i64 j = 1; j < arity; ++j) V(j - 1, v) = from(r, j);
        val_offs[v] = (i32)voffs[v];
    }
    val_offs[nv] = overflow ? 0 : (i32)voffs[nv];
    Array<i64> row = trie_row(keys.vec(), key_offs.vec(), V.mat(), val_offs.vec(), times.mat(), diffs.vec());
    return {std::move(keys), std::move(key_offs), std::move(V), std::move(val_offs), std::move(times),
            std::move(diffs), std::move(row), overflow};
}

MergedTable merge_table(Mat<const i64> T, i64 arity, i64 depth, Mat<const i64> F) {
    if (T.cols < VAL0 || arity < 1 || (T.rows && arity > T.cols - VAL0 + 1))
        throw std::invalid_argument("merge_table: arity " + std::to_string(arity) + " does not fit the table");
    if (F.cols != depth) throw std::invalid_argument("merge_table: the frontier F must have depth columns");
    i64 n = 0;
    for (i64 b = 0; b < T.rows; ++b) n += T(b, NUPD);
    const i64 w = arity + depth;
    Array<i64> M(n, w), D(n);
    i64 k = 0;
    for (i64 b = 0; b < T.rows; ++b) {
        Vec<const i64> bk = batch_keys(T, b);
        Offsets ko = key_offsets(T, b), vo = val_offsets(T, b);
        Mat<const i64> bt = batch_times(T, b, depth);
        Vec<const i64> bd = batch_diffs(T, b);
        for (i64 p = 0; p < T(b, NKEYS); ++p)
            for (i64 v = ko[p]; v < ko[p + 1]; ++v)
                for (i64 u = vo[v]; u < vo[v + 1]; ++u) {
                    M(k, 0) = bk[p];
                    for (i64 j = 1; j < arity; ++j) M(k, j) = batch_vals(T, b, j)[v];
                    for (i64 c = 0; c < depth; ++c) M(k, arity + c) = advance_time(bt(u, c), F, c);
                    D[k] = bd[u];
                    ++k;
                }
    }
    auto [sel, sums, overflow] = group_sums(M.mat(), lex_order(M.mat()).vec(), D.vec());
    const i64 nu = overflow ? 0 : sel.size();
    Array<i64> keys(nu), vals(arity - 1, nu), times(nu, depth);
    Array<i32> key_offs(nu + 1), val_offs(nu + 1);
    if (overflow) {
        key_offs[0] = 0;
        val_offs[0] = 0;
        return {std::move(keys), std::move(vals), std::move(key_offs), std::move(val_offs), std::move(times),
                std::move(sums), Array<i64>(0), true};
    }
    i64 nk = 0, nv = 0;
    for (i64 u = 0; u < nu; ++u) {
        const i64 x = sel[u];
        const bool newkey = u == 0 || M(x, 0) != M(sel[u - 1], 0);
        const bool newval = newkey || rows_differ(M.mat(), x, sel[u - 1], arity);
        if (newkey) {
            keys[nk] = M(x, 0);
            key_offs[nk++] = (i32)nv;
        }
        if (newval) {
            for (i64 c = 1; c < arity; ++c) vals(c - 1, nv) = M(x, c);
            val_offs[nv++] = (i32)u;
        }
        for (i64 c = 0; c < depth; ++c) times(u, c) = M(x, arity + c);
    }
    key_offs[nk] = (i32)nv;
    val_offs[nv] = (i32)nu;
    // Exactly as long as they are (the batch keeps them): numba's `keys[:nk].copy()`, `ascontiguousarray(vals[:, :nv])`.
    Array<i64> ekeys = exact(keys, nk);
    Array<i32> ekey_offs = exact(key_offs, nk + 1), eval_offs = exact(val_offs, nv + 1);
    Array<i64> evals(arity - 1, nv);
    for (i64 j = 0; j + 1 < arity; ++j)
        if (nv) std::memcpy(evals.p + j * nv, vals.p + j * nu, sizeof(i64) * (size_t)nv);
    Array<i64> row = trie_row(ekeys.vec(), ekey_offs.vec(), evals.mat(), eval_offs.vec(), times.mat(), sums.vec());
    return {std::move(ekeys), std::move(evals), std::move(ekey_offs), std::move(eval_offs), std::move(times),
            std::move(sums), std::move(row), false};
}

}  // namespace ddflow
