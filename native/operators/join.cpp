// The join's one-call step: see join.hpp, and ddflow/operators/join.py for the reference of each.
#include "operators/join.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "traces/arena.hpp"
#include "traces/layout.hpp"

namespace ddflow {

namespace {
void require(bool ok, const char* where, const char* what) {
    if (!ok) throw std::invalid_argument(std::string(where) + ": " + what);
}

void check_join(const char* where, Mat<const i64> T, Mat<const i64> C, Mat<const i64> dtimes, Vec<const i64> ddiffs,
                i64 arity, i64 depth) {
    require(C.rows >= 1, where, "the delta's columns C need a key row");
    require(dtimes.rows == C.cols && ddiffs.n == C.cols, where, "the delta's times and diffs need one row per column of C");
    require(depth >= 0 && dtimes.cols >= depth, where, "the delta's times need the trace's depth");
    require(T.cols >= VAL0, where, "T is not a batch table (fewer than VAL0 columns)");
    require(arity >= 1 && (T.rows == 0 || arity <= T.cols - VAL0 + 1), where, "the table's rows cannot hold arity fields");
}
}  // namespace

Joined join_table(Mat<const i64> T, Mat<const i64> C, Mat<const i64> dtimes, Vec<const i64> ddiffs, i64 arity,
                  i64 depth, bool delta_left, i64 limit) {
    check_join("join_table", T, C, dtimes, ddiffs, arity, depth);
    const i64 m = C.rows;
    const i64 width = m + arity - 1;
    auto [pos, total] = key_positions(T, C.row_vec(0));
    if (total > limit)
        return {Array<i64>(0, width + depth), Array<i64>(0), Array<i64>(0), Array<i64>(0), JOIN_OVER_LIMIT, total,
                Array<i64>(width, 0), Array<i64>(0, depth)};
    Array<i64> M(total, width + depth), D(total);
    auto [q, cols, times, diffs] = gather_found(T, pos.mat(), total, arity, depth);
    const i64 mine = delta_left ? 1 : arity;  // where the delta's values start in a row
    const i64 theirs = delta_left ? m : 1;
    for (i64 k = 0; k < total; ++k) {
        const i64 i = q[k];
        M(k, 0) = cols(0, k);
        for (i64 j = 1; j < m; ++j) M(k, mine + j - 1) = C(j, i);
        for (i64 j = 1; j < arity; ++j) M(k, theirs + j - 1) = cols(j, k);
        for (i64 c = 0; c < depth; ++c) M(k, width + c) = std::max(dtimes(i, c), times(k, c));
        auto [d, ok] = checked_product(ddiffs[i], diffs[k]);
        if (!ok) {  // the rows before this one (the reference's, which stops here too)
            M.truncate(k);
            D.truncate(k);
            return {std::move(M), std::move(D), Array<i64>(0), Array<i64>(0), JOIN_OVERFLOW, total,
                    Array<i64>(width, 0), Array<i64>(0, depth)};
        }
        D[k] = d;
    }
    if (total > SMALL_ROWS)  // the caller sorts
        return {std::move(M), std::move(D), Array<i64>(0), Array<i64>(0), JOIN_LARGE, total, Array<i64>(width, 0),
                Array<i64>(0, depth)};
    auto [sel, sums, overflow] = consolidate_small(M.mat(), D.vec());
    if (overflow)
        return {std::move(M), std::move(D), std::move(sel), std::move(sums), JOIN_OVERFLOW, total,
                Array<i64>(width, 0), Array<i64>(0, depth)};
    const i64 ns = sel.size();
    Array<i64> OC(width, ns), OT(ns, depth);
    for (i64 x = 0; x < ns; ++x) {
        for (i64 j = 0; j < width; ++j) OC(j, x) = M(sel[x], j);
        for (i64 c = 0; c < depth; ++c) OT(x, c) = M(sel[x], width + c);
    }
    return {std::move(M), std::move(D), std::move(sel), std::move(sums), JOIN_CONSOLIDATED, total, std::move(OC),
            std::move(OT)};
}

JoinedInto join_table_into(Mat<const i64> T, Mat<const i64> C, Mat<const i64> dtimes, Vec<const i64> ddiffs,
                           i64 arity, i64 depth, bool delta_left, i64 limit, Vec<const i64> idx, Vec<i64> buf,
                           i64 used, Mat<i64> At, i64 at) {
    auto [M, D, sel, sums, status, total, OC, OT] = join_table(T, C, dtimes, ddiffs, arity, depth, delta_left, limit);
    (void)sel;
    if (status == JOIN_LARGE && has_room(buf, used, total, idx.n, depth)) {  // room for the rows before consolidation
        auto [C2, T2, D2, overflow] = consolidated_split(M.mat(), D.vec(), M.cols - depth);
        OC = std::move(C2);
        OT = std::move(T2);
        sums = std::move(D2);
        status = overflow ? JOIN_OVERFLOW : JOIN_CONSOLIDATED;
    }
    const i64 k = sums.size();
    if (status == JOIN_CONSOLIDATED && k) {
        auto [cols, times, diffs, now_used, overflow] = insert_fields(OC.mat(), OT.mat(), sums.vec(), idx, buf, used, At, at);
        if (!overflow)
            return {std::move(M), std::move(D), JOIN_CONSOLIDATED, k, std::move(cols), std::move(times), std::move(diffs),
                    now_used};
        status = JOIN_OVERFLOW;
    }
    return {std::move(M), std::move(D), status, k, Array<i64>(idx.n, 0), Array<i64>(0, depth), Array<i64>(0), used};
}

}  // namespace ddflow
