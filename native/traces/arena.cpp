// The arena kernels: see arena.hpp, and traces/arena.py for the reference of each.
#include "traces/arena.hpp"

#include <stdexcept>
#include <string>

namespace ddflow {

i64 write_trie(Mat<const i64> C, Mat<const i64> Tm, Vec<const i64> D, Vec<i64> buf, i64 used, Mat<i64> T, i64 at) {
    const i64 m = C.rows, k = C.cols, depth = Tm.cols;
    auto [kstarts, vstarts, koffs] = trie_starts(Transposed<const i64>(C));
    const i64 nk = kstarts.size(), nv = vstarts.size();
    const i64 base = (i64)(intptr_t)buf.p;
    i64 o = used;
    const i64 keys_at = o;
    for (i64 g = 0; g < nk; ++g) buf[o + g] = C(0, kstarts[g]);
    o += nk;
    const i64 koffs_at = o;
    for (i64 g = 0; g < nk + 1; ++g) buf[o + g] = koffs[g];
    o += nk + 1;
    const i64 vals_at = o;
    for (i64 j = 1; j < m; ++j)
        for (i64 v = 0; v < nv; ++v) buf[o + (j - 1) * nv + v] = C(j, vstarts[v]);
    o += (m - 1) * nv;
    const i64 voffs_at = o;
    for (i64 v = 0; v < nv; ++v) buf[o + v] = vstarts[v];
    buf[o + nv] = k;
    o += nv + 1;
    const i64 times_at = o;
    for (i64 i = 0; i < k; ++i)
        for (i64 c = 0; c < depth; ++c) buf[o + i * depth + c] = Tm(i, c);
    o += k * depth;
    const i64 diffs_at = o;
    for (i64 i = 0; i < k; ++i) buf[o + i] = D[i];
    o += k;
    for (i64 f = 0; f < T.cols; ++f) T(at, f) = 0;
    T(at, NKEYS) = nk;
    T(at, NVALS) = nv;
    T(at, NUPD) = k;
    T(at, KEYS) = base + 8 * keys_at;
    T(at, KOFFS64) = base + 8 * koffs_at;
    T(at, VOFFS64) = base + 8 * voffs_at;
    T(at, TIMES) = base + 8 * times_at;
    T(at, DIFFS) = base + 8 * diffs_at;
    for (i64 j = 1; j < m; ++j) T(at, VAL0 + j - 1) = base + 8 * (vals_at + (j - 1) * nv);
    return o;
}

Inserted arena_insert(Mat<const i64> K, Vec<const i64> diffs, i64 m, Vec<i64> buf, i64 used, Mat<i64> T, i64 at) {
    const i64 depth = K.cols - m;
    if (m < 1 || depth < 0) throw std::invalid_argument("arena_insert: m must be between 1 and K's columns");
    if (diffs.n != K.rows) throw std::invalid_argument("arena_insert: K and diffs differ in length");
    if (used < 0 || used + words_for(K.rows, m, depth) > buf.n)
        throw std::invalid_argument("arena_insert: buf has fewer than words_for(n, m, depth) words free past used");
    if (at < 0 || at >= T.rows || T.cols != VAL0 + m - 1)
        throw std::invalid_argument("arena_insert: T has no row " + std::to_string(at) + " of VAL0 + m - 1 fields");
    auto [C, Tm, D, overflow] = consolidated_split(K, diffs, m);
    if (overflow || D.size() == 0) return {std::move(C), std::move(Tm), std::move(D), used, overflow};
    const i64 now = write_trie(C.mat(), Tm.mat(), D.vec(), buf, used, T, at);
    return {std::move(C), std::move(Tm), std::move(D), now, overflow};
}

Inserted insert_fields(Mat<const i64> C, Mat<const i64> Tm, Vec<const i64> D, Vec<const i64> idx, Vec<i64> buf,
                       i64 used, Mat<i64> T, i64 at) {
    const i64 k = D.n, m = idx.n, depth = Tm.cols;
    if (Tm.rows != k || C.cols != k) throw std::invalid_argument("insert_fields: C, Tm and D differ in length");
    for (i64 j = 0; j < m; ++j)
        if (idx[j] < 0 || idx[j] >= C.rows) throw std::invalid_argument("insert_fields: idx names a field C lacks");
    Array<i64> K(k, m + depth);
    for (i64 x = 0; x < k; ++x) {
        for (i64 j = 0; j < m; ++j) K(x, j) = C(idx[j], x);
        for (i64 c = 0; c < depth; ++c) K(x, m + c) = Tm(x, c);
    }
    return arena_insert(K.mat(), D, m, buf, used, T, at);
}

}  // namespace ddflow
