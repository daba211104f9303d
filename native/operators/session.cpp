// The session window operator's step: see session.hpp, and ddflow/operators/session.py for the reference.
#include "operators/session.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace ddflow {

namespace {

// int64 arithmetic that wraps, as the reference's does where it can (a shown count's change, a state's end + 1):
// signed overflow is undefined in C++.
inline i64 wrap_add(i64 a, i64 b) { return (i64)((uint64_t)a + (uint64_t)b); }
inline i64 wrap_sub(i64 a, i64 b) { return (i64)((uint64_t)a - (uint64_t)b); }

// _longer: the column-major output A (one row per column) with room for at least `need` entries, its first n kept.
void longer(Array<i64>& A, i64 n, i64 need) {
    if (need <= A.cols) return;
    Array<i64> B(A.rows, std::max(2 * A.cols, need));
    if (n)
        for (i64 c = 0; c < A.rows; ++c) std::memcpy(B.p + c * B.cols, A.p + c * A.cols, sizeof(i64) * (size_t)n);
    A = std::move(B);
}

// _copy_rows: rows lo:hi of a state (rows, counts, starts, ends) into another from row `at`; the row after.
i64 copy_rows(Mat<const i64> R, Vec<const i64> C, Vec<const i64> S, Vec<const i64> E, i64 lo, i64 hi, Mat<i64> R2,
              Vec<i64> C2, Vec<i64> S2, Vec<i64> E2, i64 at) {
    for (i64 x = lo; x < hi; ++x) {
        for (i64 c = 0; c < R.cols; ++c) R2(at, c) = R(x, c);
        C2[at] = C[x];
        S2[at] = S[x];
        E2[at] = E[x];
        ++at;
    }
    return at;
}

void require(bool ok, const char* what) {
    if (!ok) throw std::invalid_argument(std::string("session_step: ") + what);
}

}  // namespace

std::tuple<Array<i64>, Array<i64>, Array<i64>, Array<i64>, Array<i64>, i64, i64, i64> session_step(
    Mat<const i64> R, Vec<const i64> C, Vec<const i64> S, Vec<const i64> E, Mat<const i64> U, Vec<const i64> ut,
    Vec<const i64> ud, i64 limit, i64 gap, bool expire) {
    constexpr i64 BIG = INT64_MAX;
    const i64 n = R.rows, w = R.cols, m = U.rows;
    require(C.n == n && S.n == n && E.n == n, "the counts C, starts S and ends E need one entry per row of R");
    require(ut.n == m && ud.n == m, "the times ut and diffs ud need one entry per row of U");
    require(U.cols == w, "the updates U need the state R's columns");
    require(w >= 2 || n + m == 0, "rows need a key and a ts column");
    const i64 cap = n + m;
    Array<i64> R2(cap, w), C2(cap), S2(cap), E2(cap);
    i64 n2 = 0;
    Array<i64> O(w + 4, 16);  // column-major: each output column contiguous
    i64 no = 0;
    // One key's records while it replays: rows, counts now, count and session shown (shown count 0: not shown).
    Array<i64> B(cap, w), bc(cap), bsc(cap), bs(cap), be(cap);
    i64 wake = BIG;

    auto fault = [&](i64 code, i64 at) {
        R2.truncate(0);
        C2.truncate(0);
        S2.truncate(0);
        E2.truncate(0);
        O.truncate_cols(0);
        return std::make_tuple(std::move(R2), std::move(C2), std::move(S2), std::move(E2), std::move(O), BIG, code, at);
    };
    auto emit = [&](i64 z, i64 s, i64 e, i64 t, i64 d) {
        for (i64 c = 0; c < w; ++c) O(c, no) = B(z, c);
        O(w, no) = s;
        O(w + 1, no) = e;
        O(w + 2, no) = t;
        O(w + 3, no) = d;
        ++no;
    };

    i64 i = 0, j = 0;
    while (i < n || j < m) {
        const i64 key = j >= m || (i < n && R(i, 0) < U(j, 0)) ? R(i, 0) : U(j, 0);
        i64 i1 = i;
        while (i1 < n && R(i1, 0) == key) ++i1;
        i64 j1 = j;
        while (j1 < m && U(j1, 0) == key) ++j1;
        if (j1 == j && !(expire && i1 > i && wrap_add(E[i], 1) < limit)) {  // untouched: kept as it is
            n2 = copy_rows(R, C, S, E, i, i1, R2.mat(), C2.vec(), S2.vec(), E2.vec(), n2);
            if (expire && i1 > i) wake = std::min(wake, wrap_add(E[i], 1));
            i = i1;
            j = j1;
            continue;
        }
        i64 nb = copy_rows(R, C, S, E, i, i1, B.mat(), bc.vec(), bs.vec(), be.vec(), 0);
        for (i64 x = 0; x < nb; ++x) bsc[x] = C[i + x];
        i64 p = j;
        while (true) {  // this key's input times and closes, in time order
            const bool due = expire && nb > 0 && wrap_add(be[0], 1) < limit;
            if (p >= j1 && !due) break;
            i64 t = p < j1 ? ut[p] : BIG;
            if (due && wrap_add(be[0], 1) < t) t = wrap_add(be[0], 1);
            while (p < j1 && ut[p] == t) {  // apply the updates at t: find the row (sorted by ts, then fields)
                i64 lo = 0, hi = nb;
                while (lo < hi) {
                    const i64 mid = (lo + hi) / 2;
                    bool less = false;
                    for (i64 c = 1; c < w; ++c)
                        if (B(mid, c) != U(p, c)) {
                            less = B(mid, c) < U(p, c);
                            break;
                        }
                    if (less) lo = mid + 1;
                    else hi = mid;
                }
                bool same = lo < nb;
                if (same)
                    for (i64 c = 1; c < w; ++c)
                        if (B(lo, c) != U(p, c)) {
                            same = false;
                            break;
                        }
                const i64 d = ud[p];
                if (same) {
                    const i64 v = bc[lo];
                    if ((d > 0 && v > BIG - d) || (d < 0 && v < -BIG - 1 - d)) return fault(SESSION_COUNT_OVERFLOW, t);
                    bc[lo] = v + d;
                } else {
                    if (U(p, 1) > wrap_sub(wrap_sub(BIG, gap), 1)) return fault(SESSION_TS_OVERFLOW, U(p, 1));
                    for (i64 x = nb; x > lo; --x) {
                        for (i64 c = 0; c < w; ++c) B(x, c) = B(x - 1, c);
                        bc[x] = bc[x - 1];
                        bsc[x] = bsc[x - 1];
                        bs[x] = bs[x - 1];
                        be[x] = be[x - 1];
                    }
                    for (i64 c = 0; c < w; ++c) B(lo, c) = U(p, c);
                    bc[lo] = d;
                    bsc[lo] = 0;
                    bs[lo] = 0;
                    be[lo] = 0;
                    ++nb;
                }
                ++p;
            }
            // Recompute the sessions at t over the live records (nonzero count), emit what changed, keep the open.
            i64 k = 0, x = 0;
            while (x < nb) {
                i64 y = x;
                while (y < nb && bc[y] == 0) ++y;
                const i64 s = y < nb ? B(y, 1) : 0;  // all dead from x on: nothing is kept, s and e are not used
                i64 last = s;
                if (y < nb) ++y;
                while (y < nb && (bc[y] == 0 || B(y, 1) <= wrap_add(last, gap))) {
                    if (bc[y] != 0) last = B(y, 1);
                    ++y;
                }
                const i64 e = wrap_add(last, gap);
                const bool closed = expire && e < t;
                longer(O, no, no + 2 * (y - x));
                for (i64 z = x; z < y; ++z) {
                    const bool keep = bc[z] != 0 && !closed;
                    if (keep && bsc[z] != 0 && bs[z] == s && be[z] == e) {
                        if (bc[z] != bsc[z]) emit(z, s, e, t, wrap_sub(bc[z], bsc[z]));
                    } else {
                        if (bsc[z] != 0) emit(z, bs[z], be[z], t, wrap_sub(0, bsc[z]));
                        if (keep) emit(z, s, e, t, bc[z]);
                    }
                    if (keep) {
                        for (i64 c = 0; c < w; ++c) B(k, c) = B(z, c);
                        bc[k] = bc[z];
                        bsc[k] = bc[z];
                        bs[k] = s;
                        be[k] = e;
                        ++k;
                    }
                }
                x = y;
            }
            nb = k;
        }
        n2 = copy_rows(B.mat(), bc.vec(), bs.vec(), be.vec(), 0, nb, R2.mat(), C2.vec(), S2.vec(), E2.vec(), n2);
        if (expire && nb > 0) wake = std::min(wake, wrap_add(be[0], 1));
        i = i1;
        j = j1;
    }
    R2.truncate(n2);
    C2.truncate(n2);
    S2.truncate(n2);
    E2.truncate(n2);
    O.truncate_cols(no);
    return {std::move(R2), std::move(C2), std::move(S2), std::move(E2), std::move(O), wake, 0, 0};
}

}  // namespace ddflow
