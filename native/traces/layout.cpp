// The table kernels: see layout.hpp, and traces/layout.py for the reference of each.
#include "traces/layout.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace ddflow {

namespace {
inline i64 addr_of(const void* p) { return (i64)(intptr_t)p; }

// The table's value columns give at most this arity; reading more would read past a row.
void check_arity(const char* where, Mat<const i64> T, i64 arity, i64 depth) {
    if (T.cols < VAL0)
        throw std::invalid_argument(std::string(where) + ": T is not a batch table (fewer than VAL0 columns)");
    if (arity < 1 || (T.rows && arity > T.cols - VAL0 + 1))
        throw std::invalid_argument(std::string(where) + ": arity " + std::to_string(arity) +
                                    " does not fit the table's " + std::to_string(T.cols - VAL0 + 1) + " fields");
    if (depth < 0) throw std::invalid_argument(std::string(where) + ": depth must not be negative");
}
}  // namespace

Array<i64> trie_row(Vec<const i64> keys, Vec<const i32> key_offs, Mat<const i64> V, Vec<const i32> val_offs,
                    Mat<const i64> times, Vec<const i64> diffs) {
    const i64 nv = V.cols;
    Array<i64> row = filled<i64>(VAL0 + V.rows, 0);
    row[NKEYS] = keys.n;
    row[NVALS] = nv;
    row[NUPD] = diffs.n;
    row[KEYS] = addr_of(keys.p);
    row[KOFFS32] = addr_of(key_offs.p);
    row[VOFFS32] = addr_of(val_offs.p);
    row[TIMES] = addr_of(times.p);
    row[DIFFS] = addr_of(diffs.p);
    for (i64 j = 0; j < V.rows; ++j) row[VAL0 + j] = addr_of(V.p + j * nv);
    return row;
}

Trie trie_with_row(Mat<const i64> K, Mat<const i64> times, Vec<const i64> diffs) {
    if (K.cols < 1) throw std::invalid_argument("trie_with_row: K needs at least one column (the key)");
    if (times.rows != K.rows || diffs.n != K.rows)
        throw std::invalid_argument("trie_with_row: K, times and diffs must have one row per update");
    return build_trie(K, times, diffs);
}

std::pair<Array<i64>, i64> key_positions(Mat<const i64> T, Vec<const i64> keys) {
    const i64 nb = T.rows, nk = keys.n;
    Array<i64> pos(nb, nk);
    i64 total = 0;
    for (i64 b = 0; b < nb; ++b) {
        Vec<const i64> bk = batch_keys(T, b);
        Offsets ko = key_offsets(T, b), vo = val_offsets(T, b);
        for (i64 i = 0; i < nk; ++i) {
            i64 p = find_key(bk, keys[i]);
            pos(b, i) = p;
            if (p >= 0) total += vo[ko[p + 1]] - vo[ko[p]];
        }
    }
    return {std::move(pos), total};
}

std::tuple<Array<i64>, Array<i64>, Array<i64>, Array<i64>> gather_found(Mat<const i64> T, Mat<const i64> pos,
                                                                        i64 total, i64 arity, i64 depth) {
    Array<i64> q(total), cols(arity, total), times(total, depth), diffs(total);
    i64 k = 0;
    for (i64 b = 0; b < T.rows; ++b) {
        Vec<const i64> bk = batch_keys(T, b);
        Offsets ko = key_offsets(T, b), vo = val_offsets(T, b);
        Mat<const i64> bt = batch_times(T, b, depth);
        Vec<const i64> bd = batch_diffs(T, b);
        for (i64 i = 0; i < pos.cols; ++i) {
            const i64 p = pos(b, i);
            if (p < 0) continue;
            for (i64 v = ko[p]; v < ko[p + 1]; ++v)
                for (i64 u = vo[v]; u < vo[v + 1]; ++u) {
                    q[k] = i;
                    cols(0, k) = bk[p];
                    for (i64 j = 1; j < arity; ++j) cols(j, k) = batch_vals(T, b, j)[v];
                    for (i64 c = 0; c < depth; ++c) times(k, c) = bt(u, c);
                    diffs[k] = bd[u];
                    ++k;
                }
        }
    }
    return {std::move(q), std::move(cols), std::move(times), std::move(diffs)};
}

std::tuple<Array<i64>, Array<i64>, Array<i64>, Array<i64>, i64> seek_table_within(Mat<const i64> T,
                                                                                  Vec<const i64> keys, i64 arity,
                                                                                  i64 depth, i64 limit) {
    check_arity("seek_table_within", T, arity, depth);
    auto [pos, total] = key_positions(T, keys);
    if (total > limit)
        return {Array<i64>(0), Array<i64>(arity, 0), Array<i64>(0, depth), Array<i64>(0), total};
    auto [q, cols, times, diffs] = gather_found(T, pos.mat(), total, arity, depth);
    return {std::move(q), std::move(cols), std::move(times), std::move(diffs), total};
}

std::pair<i64, i64> value_range(Mat<const i64> T, i64 b, i64 lo, i64 hi, Mat<const i64> groups, i64 g, i64 ng) {
    for (i64 j = 1; j < ng; ++j) {
        Vec<const i64> col = batch_vals(T, b, j);
        const i64 x = groups(j, g);
        i64 a = lo, c = hi;
        while (a < c) {
            i64 h = (a + c) >> 1;
            if (col[h] < x) a = h + 1;
            else c = h;
        }
        const i64 first = a;
        c = hi;
        while (a < c) {
            i64 h = (a + c) >> 1;
            if (col[h] <= x) a = h + 1;
            else c = h;
        }
        lo = first;
        hi = a;
    }
    return {lo, hi};
}

void order_by_time(Mat<i64> cols, Mat<i64> times, Vec<i64> diffs, i64 start, i64 k, i64 ng) {
    i64 first = start + 1;  // the first row out of order
    while (first < k && times(first, 0) >= times(first - 1, 0)) ++first;
    if (first >= k) return;
    const i64 arity = cols.rows, depth = times.cols;
    if (k - start <= INSERTION_RUN) {
        for (i64 x = first; x < k; ++x) {
            const i64 t0 = times(x, 0);
            if (t0 >= times(x - 1, 0)) continue;
            i64 y = x - 1;
            while (y > start && times(y - 1, 0) > t0) --y;
            for (i64 j = ng; j < arity; ++j) {  // row x moves to y, rows [y, x) one down
                const i64 c = cols(j, x);
                for (i64 z = x; z > y; --z) cols(j, z) = cols(j, z - 1);
                cols(j, y) = c;
            }
            for (i64 j = 0; j < depth; ++j) {
                const i64 c = times(x, j);
                for (i64 z = x; z > y; --z) times(z, j) = times(z - 1, j);
                times(y, j) = c;
            }
            const i64 d = diffs[x];
            for (i64 z = x; z > y; --z) diffs[z] = diffs[z - 1];
            diffs[y] = d;
        }
        return;
    }
    const i64 n = k - start, nc = arity - ng;
    Array<i64> tc(nc, n), tt(n, depth), td(n);
    for (i64 j = 0; j < nc; ++j)
        for (i64 x = 0; x < n; ++x) tc(j, x) = cols(ng + j, start + x);
    for (i64 x = 0; x < n; ++x) {
        for (i64 c = 0; c < depth; ++c) tt(x, c) = times(start + x, c);
        td[x] = diffs[start + x];
    }
    i64 seen[COUNT_DISTINCT];  // the distinct first coordinates, while few
    i64 nd = 0;
    for (i64 x = 0; x < n && nd >= 0; ++x) {
        const i64 t0 = tt(x, 0);
        i64 d = 0;
        while (d < nd && seen[d] != t0) ++d;
        if (d == nd) {
            if (nd == COUNT_DISTINCT) nd = -1;
            else seen[nd++] = t0;
        }
    }
    Array<i64> order(n);
    if (nd < 0) {  // a stable sort by first coordinate (numpy's mergesort)
        for (i64 x = 0; x < n; ++x) order[x] = x;
        std::stable_sort(order.p, order.p + n, [&](i64 a, i64 b) { return tt(a, 0) < tt(b, 0); });
    } else {  // a stable counting sort by the few distinct coordinates
        sort_small(Vec<i64>(seen, nd));
        i64 pos[COUNT_DISTINCT + 1] = {0};
        Array<i64> bucket(n);
        for (i64 x = 0; x < n; ++x) {
            i64 d = 0;
            while (seen[d] != tt(x, 0)) ++d;
            bucket[x] = d;
            ++pos[d + 1];
        }
        for (i64 d = 0; d < nd; ++d) pos[d + 1] += pos[d];
        for (i64 x = 0; x < n; ++x) order[pos[bucket[x]]++] = x;
    }
    for (i64 x = 0; x < n; ++x) {
        const i64 o = order[x];
        for (i64 j = 0; j < nc; ++j) cols(ng + j, start + x) = tc(j, o);
        for (i64 c = 0; c < depth; ++c) times(start + x, c) = tt(o, c);
        diffs[start + x] = td[o];
    }
}

std::tuple<Array<i64>, Array<i64>, Array<i64>, Array<i64>> histories(Mat<const i64> T, Mat<const i64> groups,
                                                                     i64 arity, i64 depth) {
    check_arity("histories", T, arity, depth);
    const i64 nb = T.rows, ng = groups.rows, G = groups.cols;
    if (ng < 1 || ng > arity)
        throw std::invalid_argument("histories: groups must have between 1 and arity rows (key, then values)");
    if (depth < 1) throw std::invalid_argument("histories: depth must be at least 1 (updates are ordered by time)");
    Array<i64> vlo = filled<i64>(nb * G, 0), vhi = filled<i64>(nb * G, 0);
    i64 total = 0;
    for (i64 b = 0; b < nb; ++b) {
        Vec<const i64> bk = batch_keys(T, b);
        Offsets ko = key_offsets(T, b), vo = val_offsets(T, b);
        i64 cursor = 0;
        for (i64 g = 0; g < G; ++g) {  // groups are sorted: each batch's keys are walked once, galloping
            cursor = lower_bound_from(bk, groups(0, g), cursor);
            if (cursor >= bk.n || bk[cursor] != groups(0, g)) continue;
            const i64 p = cursor;
            auto [lo, hi] = value_range(T, b, ko[p], ko[p + 1], groups, g, ng);
            vlo[b * G + g] = lo;
            vhi[b * G + g] = hi;
            total += vo[hi] - vo[lo];
        }
    }
    Array<i64> gid(total), cols(arity, total), times(total, depth), diffs(total);
    i64 k = 0;
    for (i64 g = 0; g < G; ++g) {
        const i64 start = k;
        for (i64 b = 0; b < nb; ++b) {
            const i64 lo = vlo[b * G + g], hi = vhi[b * G + g];
            if (hi == lo) continue;
            Offsets vo = val_offsets(T, b);
            Mat<const i64> bt = batch_times(T, b, depth);
            Vec<const i64> bd = batch_diffs(T, b);
            for (i64 v = lo; v < hi; ++v)
                for (i64 u = vo[v]; u < vo[v + 1]; ++u) {
                    gid[k] = g;
                    for (i64 j = 0; j < ng; ++j) cols(j, k) = groups(j, g);  // value_range matched them
                    for (i64 j = ng; j < arity; ++j) cols(j, k) = batch_vals(T, b, j)[v];
                    for (i64 c = 0; c < depth; ++c) times(k, c) = bt(u, c);
                    diffs[k] = bd[u];
                    ++k;
                }
        }
        order_by_time(cols.mat(), times.mat(), diffs.vec(), start, k, ng);
    }
    return {std::move(gid), std::move(cols), std::move(times), std::move(diffs)};
}

}  // namespace ddflow
