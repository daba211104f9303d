// A loop variable's usual step: see feedback.hpp, and ddflow/operators/feedback.py for the reference of each.
#include "operators/feedback.hpp"

#include <stdexcept>

#include "base/kernels.hpp"
#include "graph/node.hpp"
#include "traces/arena.hpp"

namespace ddflow {

namespace {
// Columns m.. of a matrix (numpy's A[:, m:]), as complete_row reads times.
struct ColumnsFrom {
    Mat<const i64> A;
    i64 m;
    i64 operator()(i64 i, i64 j) const { return A(i, m + j); }
};
}  // namespace

Fed feedback_round(Mat<const i64> K, Vec<const i64> diffs, i64 m, Vec<const i64> bound) {
    const i64 n = K.rows, w = K.cols;
    if (m < 0 || m >= w) throw std::invalid_argument("feedback_round: m must leave K at least one time column");
    if (diffs.n != n) throw std::invalid_argument("feedback_round: K and diffs differ in length");
    if (bound.n > w - m) throw std::invalid_argument("feedback_round: the bound has more coordinates than K's times");
    Array<i64> A(n, w);
    if (n) std::memcpy(A.p, K.p, sizeof(i64) * (size_t)(n * w));
    for (i64 i = 0; i < n; ++i) A(i, w - 1) = (i64)((uint64_t)A(i, w - 1) + 1);  // wraps, as numba's += 1
    const ColumnsFrom T{A.mat(), m};
    for (i64 i = 0; i < n; ++i)
        if (!complete_row(T, i, bound)) return {Array<i64>(m, 0), Array<i64>(0, w - m), Array<i64>(0), false, false};
    auto [C, TT, D, overflow] = consolidated_split(A.mat(), diffs, m);
    return {std::move(C), std::move(TT), std::move(D), true, overflow};
}

FedInto feedback_round_into(Mat<const i64> K, Vec<const i64> diffs, i64 m, Vec<const i64> bound, Vec<const i64> idx,
                            Vec<i64> buf, i64 used, Mat<i64> At, i64 at) {
    auto [C, T, D, due, overflow] = feedback_round(K, diffs, m, bound);
    const i64 k = D.size();
    if (due && !overflow && k) {
        auto [cols, times, ds, now_used, over] = insert_fields(C.mat(), T.mat(), D.vec(), idx, buf, used, At, at);
        if (!over) return {k, std::move(cols), std::move(times), std::move(ds), due, false, now_used};
        overflow = over;
    }
    return {k, Array<i64>(idx.n, 0), Array<i64>(0, T.cols), Array<i64>(0), due, overflow, used};
}

}  // namespace ddflow
