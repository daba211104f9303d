// The base layer's kernels: see kernels.hpp, and ddflow/base/kernels.py for the reference of each.
#include "base/kernels.hpp"

#include <cmath>

namespace ddflow {

Array<i64> lex_order(Mat<const i64> M) {
    const i64 n = M.rows, m = M.cols;
    Array<i64> a(n), b(n), starts(n + 1);
    for (i64 i = 0; i < n; ++i) a[i] = i;
    i64 nr = 0, i = 0;
    while (i < n) {
        starts[nr++] = i;
        ++i;
        while (i < n && row_cmp(M.row(i), M.row(i - 1), m) >= 0) ++i;
    }
    starts[nr] = n;
    while (nr > 1) {
        i64 nn = 0;
        for (i64 r = 0; r < nr; r += 2) {
            i64 lo = starts[r], mid = starts[r + 1];
            i64 hi = r + 2 <= nr ? starts[r + 2] : mid;
            i64 x = lo, y = mid, k = lo;
            while (x < mid && y < hi) {
                // the right run's row goes first only if strictly before: stable
                if (row_cmp(M.row(a[y]), M.row(a[x]), m) < 0) b[k++] = a[y++];
                else b[k++] = a[x++];
            }
            while (x < mid) b[k++] = a[x++];
            while (y < hi) b[k++] = a[y++];
            starts[nn++] = lo;
        }
        starts[nn] = n;
        nr = nn;
        std::swap(a, b);
    }
    return a;
}

std::tuple<Array<i64>, Array<i64>, bool> group_sums(Mat<const i64> K, Vec<const i64> order, Vec<const i64> diffs) {
    const i64 n = K.rows, m = K.cols;
    Array<i64> sel(n), sums(n);
    i64 out = 0, i = 0;
    while (i < n) {
        i64 r = order[i];
        i64 s = diffs[r];
        i64 j = i + 1;
        while (j < n) {
            i64 q = order[j];
            if (row_cmp(K.row(q), K.row(r), m) != 0) break;
            if (add_overflows(s, diffs[q], s)) {
                sel.truncate(0);
                sums.truncate(0);
                return {std::move(sel), std::move(sums), true};
            }
            ++j;
        }
        if (s != 0) {
            sel[out] = r;
            sums[out] = s;
            ++out;
        }
        i = j;
    }
    sel.truncate(out);
    sums.truncate(out);
    return {std::move(sel), std::move(sums), false};
}

std::tuple<Array<i64>, Array<i64>, bool> consolidate_small(Mat<const i64> K, Vec<const i64> diffs) {
    const i64 n = K.rows, m = K.cols;
    Array<i64> order(n);
    for (i64 i = 0; i < n; ++i) order[i] = i;
    for (i64 i = 1; i < n; ++i) {
        i64 x = order[i], j = i - 1;
        while (j >= 0 && row_cmp(K.row(x), K.row(order[j]), m) < 0) {
            order[j + 1] = order[j];
            --j;
        }
        order[j + 1] = x;
    }
    return group_sums(K, order.vec(), diffs);
}

std::tuple<Array<i64>, bool> pack(Mat<const i64> K) {
    const i64 n = K.rows, m = K.cols;
    if (m == 1) {
        Array<i64> out(n);
        for (i64 i = 0; i < n; ++i) out[i] = K(i, 0);
        return {std::move(out), true};
    }
    Array<i64> lo(m), span(m);
    i64 bits = 0;
    for (i64 j = 0; j < m; ++j) {
        i64 a = n ? K(0, j) : 0, b = a;
        for (i64 i = 1; i < n; ++i) {
            i64 v = K(i, j);
            if (v < a) a = v;
            else if (v > b) b = v;
        }
        lo[j] = a;
        // The span in unsigned arithmetic: b - a + 1 leaves int64 when the column spans most of it (and then it
        // does not fit anyway; the reference's int64 arithmetic wraps to the same verdict).
        uint64_t s = (uint64_t)b - (uint64_t)a + 1;
        if (s == 0 || s > ((uint64_t)1 << 62)) return {Array<i64>(0), false};
        span[j] = (i64)s;
        i64 w = 0;
        for (uint64_t t = s - 1; t > 0; t >>= 1) ++w;
        bits += std::max<i64>(w, 1);
        if (bits > 62) return {Array<i64>(0), false};
    }
    Array<i64> packed(n);
    for (i64 i = 0; i < n; ++i) {
        uint64_t p = (uint64_t)K(i, 0) - (uint64_t)lo[0];
        for (i64 j = 1; j < m; ++j) p = p * (uint64_t)span[j] + ((uint64_t)K(i, j) - (uint64_t)lo[j]);
        packed[i] = (i64)p;
    }
    return {std::move(packed), true};
}

std::tuple<Array<i64>, Array<i64>, Array<i64>, bool> consolidated_split(Mat<const i64> K, Vec<const i64> diffs,
                                                                        i64 m) {
    const i64 w = K.cols;
    auto [sel, D, overflow] = K.rows <= SMALL_ROWS ? consolidate_small(K, diffs)
                                                   : group_sums(K, lex_order(K).vec(), diffs);
    const i64 k = sel.size();
    Array<i64> C(m, k), T(k, w - m);
    for (i64 x = 0; x < k; ++x) {
        const i64* row = K.row(sel[x]);
        for (i64 c = 0; c < m; ++c) C(c, x) = row[c];
        for (i64 c = 0; c < w - m; ++c) T(x, c) = row[m + c];
    }
    return {std::move(C), std::move(T), std::move(D), overflow};
}

namespace {
template <class K> inline bool key_less(K a, K b) { return a < b; }
template <> inline bool key_less<double>(double a, double b) { return (a == a && b != b) || a < b; }
template <class K> inline bool same_key(K a, K b) { return a == b; }
template <> inline bool same_key<double>(double a, double b) { return a == b || (a != a && b != b); }
}  // namespace

template <class K, class KO, class VO>
std::tuple<Array<i64>, Array<i64>, Array<i64>> seek(Vec<const K> bkeys, Vec<const KO> key_offs,
                                                    Vec<const VO> val_offs, Vec<const K> keys) {
    const i64 nk = keys.n, nb = bkeys.n;
    Array<i64> pos(nk);
    i64 total = 0;
    for (i64 i = 0; i < nk; ++i) {
        K x = keys[i];
        if (i > 0 && same_key(keys[i - 1], x)) {
            pos[i] = pos[i - 1];
        } else {
            i64 a = 0, b = nb;
            while (a < b) {
                i64 h = (a + b) >> 1;
                if (key_less(bkeys[h], x)) a = h + 1;
                else b = h;
            }
            pos[i] = a < nb && same_key(bkeys[a], x) ? a : -1;
        }
        if (pos[i] >= 0) total += (i64)val_offs[key_offs[pos[i] + 1]] - (i64)val_offs[key_offs[pos[i]]];
    }
    Array<i64> q(total), vrow(total), urow(total);
    i64 k = 0;
    for (i64 i = 0; i < nk; ++i) {
        i64 p = pos[i];
        if (p < 0) continue;
        for (i64 v = key_offs[p]; v < (i64)key_offs[p + 1]; ++v)
            for (i64 u = val_offs[v]; u < (i64)val_offs[v + 1]; ++u) {
                q[k] = i;
                vrow[k] = v;
                urow[k] = u;
                ++k;
            }
    }
    return {std::move(q), std::move(vrow), std::move(urow)};
}

#define DDFLOW_SEEK(K, KO, VO) \
    template std::tuple<Array<i64>, Array<i64>, Array<i64>> seek<K, KO, VO>(Vec<const K>, Vec<const KO>, Vec<const VO>, Vec<const K>);
DDFLOW_SEEK(i64, i32, i32)
DDFLOW_SEEK(i64, i64, i64)
DDFLOW_SEEK(i64, i32, i64)
DDFLOW_SEEK(i64, i64, i32)
DDFLOW_SEEK(double, i32, i32)
DDFLOW_SEEK(double, i64, i64)
DDFLOW_SEEK(double, i32, i64)
DDFLOW_SEEK(double, i64, i32)
#undef DDFLOW_SEEK

}  // namespace ddflow
