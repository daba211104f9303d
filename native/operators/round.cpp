// A loop round in one call: see round.hpp, and ddflow/operators/round.py for the reference (loop_round, _round).
#include "operators/round.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "graph/node.hpp"
#include "operators/feedback.hpp"
#include "operators/join.hpp"
#include "operators/reduce/iterate.hpp"
#include "operators/reduce/walk.hpp"
#include "traces/arena.hpp"

namespace ddflow {

namespace {

void require(bool ok, const char* what) {
    if (!ok) throw std::invalid_argument(std::string("loop_round: ") + what);
}

// The first `rows` rows of a table (numpy's T[:rows]).
inline Mat<const i64> first_rows(Mat<i64> T, i64 rows) {
    DDFLOW_CHECK_INDEX("table rows", rows, T.rows + 1);
    return Mat<const i64>(T.p, rows, T.cols);
}

// _packed: the first n updates of columns C (as rows), times T and diffs D as one matrix of rows.  O(n (m + depth)).
Array<i64> packed(Mat<const i64> C, Mat<const i64> T, Vec<const i64> D, i64 n) {
    const i64 m = C.rows, depth = T.cols;
    Array<i64> B(n, m + depth + 1);
    for (i64 i = 0; i < n; ++i) {
        for (i64 j = 0; j < m; ++j) B(i, j) = C(j, i);
        for (i64 c = 0; c < depth; ++c) B(i, m + c) = T(i, c);
        B(i, m + depth) = D[i];
    }
    return B;
}

// What one_round returns: (stage, k1, n1, used1, k2, n2, used2, B, cols, times, diffs, later, later_t, status,
// used), _round's tuple.
struct Round {
    i64 stage = ROUND_NOTHING, k1 = 0, n1 = 0, used1 = 0, k2 = 0, n2 = 0, used2 = 0;
    Array<i64> B, cols, times, diffs, later, later_t;
    i64 status = STEP_DONE, used = 0;
};

// _round: one loop round (round.py's docstring): the variable's feedback into its arena, the join reading it
// into the reduce's input arena, the reduce's step into the output's arena; the last stage finished and what
// each wrote.  Cost: as the three kernels.
Round one_round(Mat<const i64> K, Vec<const i64> diffs, i64 m, Vec<const i64> bound, Vec<const i64> idx1,
                Vec<i64> buf1, i64 used1, Mat<i64> T1, i64 at1, Mat<const i64> ET, i64 e_arity, bool delta_left,
                i64 limit, Vec<const i64> idx2, Vec<i64> buf2, i64 used2, Mat<i64> T2, i64 at2, Mat<const i64> pk,
                Mat<const i64> pt, i64 out_arity, i64 code, i64 walk, i64 k, i64 sort_above, Vec<const i64> hk,
                Mat<const i64> ht, Vec<i64> bufO, i64 usedO, Mat<i64> TO, i64 atO, i64 small) {
    const i64 depth = K.cols - m;
    const i64 ng = idx2.n;
    Round r;
    auto unfinished = [&](i64 stage) {  // the stages after `stage` left to their usual steps
        r.stage = stage;
        r.cols = Array<i64>(out_arity, 0);
        r.times = Array<i64>(0, depth);
        r.diffs = Array<i64>(0);
        r.later = Array<i64>(ng, 0);
        r.later_t = Array<i64>(0, depth);
        r.used = usedO;
        return std::move(r);
    };
    auto [k1, C1, T1s, D1, due, overflow, now1] = feedback_round_into(K, diffs, m, bound, idx1, buf1, used1, T1, at1);
    r.k1 = k1;
    r.used1 = used1;
    r.used2 = used2;
    if (!due || overflow) {
        r.B = packed(C1.mat(), T1s.mat(), D1.vec(), 0);
        return unfinished(ROUND_NOTHING);
    }
    const i64 n1 = D1.size();
    r.used1 = now1;
    if (n1 == 0) {  // nothing reaches the join: the reduce's step (pending seeds) runs as usual
        r.B = packed(C1.mat(), T1s.mat(), D1.vec(), 0);
        return unfinished(ROUND_FED);
    }
    r.n1 = n1;
    auto [M, MD, status, k2, C2, T2s, D2, now2] = join_table_into(ET, C1.mat(), T1s.mat(), D1.vec(), e_arity, depth,
                                                                  delta_left, limit, idx2, buf2, used2, T2, at2);
    (void)M;
    (void)MD;
    if (status != JOIN_CONSOLIDATED) {
        r.B = packed(C1.mat(), T1s.mat(), D1.vec(), n1);
        return unfinished(ROUND_FED);
    }
    const i64 n2 = D2.size();
    Mat<const i64> in_T = first_rows(T2, at2 + (n2 ? 1 : 0));
    Mat<const i64> out_T = first_rows(TO, atO);
    r.k2 = k2;
    r.n2 = n2;
    r.used2 = now2;
    LoopStep step;
    if (walk >= 0) {
        if (std::get<1>(ready_split(T2s.mat(), bound)) != n2) {  // the walk holds what is not complete: its usual step
            r.B = packed(C2.mat(), T2s.mat(), D2.vec(), n2);
            return unfinished(ROUND_JOINED);
        }
        const i64 nh = hk.n;  // the seeds: what the step would dequeue, the held input first
        Array<i64> sk(nh + n2), sT(nh + n2, depth);
        for (i64 x = 0; x < nh; ++x) {
            sk[x] = hk[x];
            for (i64 c = 0; c < depth; ++c) sT(x, c) = ht(x, c);
        }
        for (i64 x = 0; x < n2; ++x) {
            sk[nh + x] = C2(0, x);
            for (i64 c = 0; c < depth; ++c) sT(nh + x, c) = T2s(x, c);
        }
        Array<i64> pk0(pk.rows);
        for (i64 x = 0; x < pk.rows; ++x) pk0[x] = pk(x, 0);
        auto w = walk_step(walk, k, sk.vec(), sT.mat(), pk0.vec(), pt, bound, in_T, out_T, sort_above, bufO, usedO,
                           TO, atO, small);
        Array<i64>& pend_k = std::get<8>(w);
        Array<i64> later(1, pend_k.size());
        for (i64 x = 0; x < pend_k.size(); ++x) later(0, x) = pend_k[x];
        std::get<8>(w) = std::move(later);
        step = std::move(w);  // the same tuple type: the walk's pending keys now as later's one row
    } else {
        Array<i64> nk(n2, C2.rows);  // the rows, as loop_step takes its new seeds
        for (i64 x = 0; x < n2; ++x)
            for (i64 j = 0; j < C2.rows; ++j) nk(x, j) = C2(j, x);
        step = loop_step(nk.mat(), T2s.mat(), pk, pt, bound, in_T, out_T, out_arity, code, bufO, usedO, TO, atO, small);
    }
    const i64 st = std::get<10>(step);
    if (st != STEP_DONE) {
        r.B = packed(C2.mat(), T2s.mat(), D2.vec(), n2);
        Round out = unfinished(ROUND_JOINED);
        out.status = st;
        return out;
    }
    r.stage = ROUND_WHOLE;
    r.B = packed(C2.mat(), T2s.mat(), D2.vec(), 0);
    r.cols = std::move(std::get<0>(step));
    r.times = std::move(std::get<1>(step));
    r.diffs = std::move(std::get<2>(step));
    r.later = std::move(std::get<8>(step));
    r.later_t = std::move(std::get<9>(step));
    r.status = st;
    r.used = std::get<11>(step);
    return r;
}

// R's row for a round: (k1, n1, used1, k2, n2, used2, n_out, usedO).
void record(Array<i64>& R, i64 c, const Round& r) {
    const i64 row[8] = {r.k1, r.n1, r.used1, r.k2, r.n2, r.used2, r.diffs.size(), r.used};
    for (i64 j = 0; j < 8; ++j) R(c, j) = row[j];
}

}  // namespace

Rounds loop_round(Mat<const i64> K, Vec<const i64> diffs, i64 m, Vec<const i64> bound, Vec<const i64> idx1,
                  Vec<i64> buf1, i64 used1, Mat<i64> T1, i64 at1, Mat<const i64> ET, i64 e_arity, bool delta_left,
                  i64 limit, Vec<const i64> idx2, Vec<i64> buf2, i64 used2, Mat<i64> T2, i64 at2, Mat<const i64> pk,
                  Mat<const i64> pt, i64 out_arity, i64 code, i64 walk, i64 k, i64 sort_above, Vec<const i64> hk,
                  Mat<const i64> ht, Vec<i64> bufO, i64 usedO, Mat<i64> TO, i64 atO, i64 small, i64 chain,
                  Vec<const i64> rk, Mat<const i64> rt) {
    const i64 depth = K.cols - m;
    require(m >= 1 && depth >= 1 && bound.n >= 1, "the feedback K needs m >= 1 columns and then its times");
    require(idx1.n >= 1 && idx2.n >= 1, "the arenas' fields idx1 and idx2 must not be empty");
    require(0 <= at1 && at1 <= T1.rows && 0 <= at2 && at2 <= T2.rows && 0 <= atO && atO <= TO.rows,
            "the arenas' rows at1, at2, atO must lie in their tables T1, T2, TO");
    require(hk.n == ht.rows && (hk.n == 0 || ht.cols == depth), "the held keys hk need one time of K's depth each in ht");
    require(rk.n == rt.rows && (rk.n == 0 || rt.cols == depth), "the held keys rk need one time of K's depth each in rt");
    require(walk < 0 || pk.rows == 0 || pk.cols >= 1, "a walk's pending keys pk need a column");
    require(small >= 0 && small <= ARENA_ROWS, "small must lie between 0 and ARENA_ROWS");
    Array<i64> R(std::max<i64>(chain, 1), 8);
    for (i64 x = 0; x < R.size(); ++x) R[x] = 0;
    Round r = one_round(K, diffs, m, bound, idx1, buf1, used1, T1, at1, ET, e_arity, delta_left, limit, idx2, buf2,
                        used2, T2, at2, pk, pt, out_arity, code, walk, k, sort_above, hk, ht, bufO, usedO, TO, atO,
                        small);
    record(R, 0, r);
    Array<i64> taken = filled<i64>(rk.n, 0);
    if (r.stage != ROUND_WHOLE || chain <= 1) {
        R.truncate(1);
        return {r.stage, std::move(R), std::move(r.B), std::move(r.cols), std::move(r.times), std::move(r.diffs),
                std::move(r.later), std::move(r.later_t), r.status, std::move(taken)};
    }
    const i64 stage = r.stage;
    Array<i64> B = std::move(r.B);
    // The rounds' outputs, one after the other (grown by doubling); the last round's state besides.
    i64 total = r.diffs.size();
    i64 cap = 2 * total + small;
    Array<i64> oc(out_arity, cap), ot(cap, depth), od(cap);
    auto append = [&](const Round& x) {
        const i64 n = x.diffs.size();
        if (total + n > cap) {
            const i64 grown = 2 * (total + n);
            Array<i64> oc2(out_arity, grown), ot2(grown, depth), od2(grown);
            for (i64 j = 0; j < out_arity; ++j)
                for (i64 i = 0; i < total; ++i) oc2(j, i) = oc(j, i);
            for (i64 i = 0; i < total; ++i) {
                for (i64 c = 0; c < depth; ++c) ot2(i, c) = ot(i, c);
                od2[i] = od[i];
            }
            oc = std::move(oc2);
            ot = std::move(ot2);
            od = std::move(od2);
            cap = grown;
        }
        for (i64 i = 0; i < n; ++i) {
            for (i64 j = 0; j < out_arity; ++j) oc(j, total + i) = x.cols(j, i);
            for (i64 c = 0; c < depth; ++c) ot(total + i, c) = x.times(i, c);
            od[total + i] = x.diffs[i];
        }
        total += n;
    };
    total = 0;
    append(r);
    i64 c = 1;
    Array<i64> b = copy_of(bound);
    i64 a1 = at1 + (r.n1 ? 1 : 0), a2 = at2 + (r.n2 ? 1 : 0), aO = atO + (r.used != usedO ? 1 : 0);
    i64 u1 = r.used1, u2 = r.used2, uO = r.used;
    i64 last_out = r.diffs.size(), last_used = usedO;
    Array<i64> later = std::move(r.later), later_t = std::move(r.later_t);
    i64 st = r.status;
    while (c < chain) {
        if (last_out == 0 || last_out > small || uO == last_used)
            break;  // no feedback, or one the variable's usual step would not take in one call, or not in the arena
        if (!(has_room(buf1, u1, small, idx1.n, depth) && has_room(buf2, u2, small, idx2.n, depth) &&
              has_room(bufO, uO, small, out_arity, depth) && a1 < T1.rows && a2 < T2.rows && aO < TO.rows))
            break;  // no words or no row left for a batch (unchecked writes: asked here whatever the caller said)
        b[b.size() - 1] = (i64)((uint64_t)b[b.size() - 1] + 1);
        const i64 n = last_out;
        Array<i64> Kc(n, out_arity + depth), Dc(n);
        for (i64 i = 0; i < n; ++i) {
            for (i64 j = 0; j < out_arity; ++j) Kc(i, j) = oc(j, total - n + i);
            for (i64 j = 0; j < depth; ++j) Kc(i, out_arity + j) = ot(total - n + i, j);
            Dc[i] = od[total - n + i];
        }
        Array<i64> pkc(later.cols, later.rows);  // later.T
        for (i64 i = 0; i < later.cols; ++i)
            for (i64 j = 0; j < later.rows; ++j) pkc(i, j) = later(j, i);
        Array<i64> due(rk.n);  // the held rows complete now, in their order
        i64 nd = 0;
        for (i64 i = 0; i < rk.n; ++i)
            if (!taken[i] && complete_row(rt, i, b.vec())) due[nd++] = i;
        Array<i64> hkc(nd), htc(nd, depth);
        for (i64 x = 0; x < nd; ++x) {
            hkc[x] = rk[due[x]];
            for (i64 j = 0; j < depth; ++j) htc(x, j) = rt(due[x], j);
        }
        Round rc = one_round(Kc.mat(), Dc.vec(), out_arity, b.vec(), idx1, buf1, u1, T1, a1, ET, e_arity, delta_left,
                             limit, idx2, buf2, u2, T2, a2, pkc.mat(), later_t.mat(), out_arity, code, walk, k,
                             sort_above, hkc.vec(), htc.mat(), bufO, uO, TO, aO, small);
        if (rc.stage != ROUND_WHOLE) break;  // dropped: the caller's next round runs it as usual
        for (i64 x = 0; x < nd; ++x) taken[due[x]] = 1;
        record(R, c, rc);
        append(rc);
        a1 += rc.n1 ? 1 : 0;
        a2 += rc.n2 ? 1 : 0;
        aO += rc.used != uO ? 1 : 0;
        last_out = rc.diffs.size();
        last_used = uO;
        u1 = rc.used1;
        u2 = rc.used2;
        uO = rc.used;
        later = std::move(rc.later);
        later_t = std::move(rc.later_t);
        st = rc.status;
        ++c;
    }
    R.truncate(c);
    oc.truncate_cols(total);
    ot.truncate(total);
    od.truncate(total);
    return {stage, std::move(R), std::move(B), std::move(oc), std::move(ot), std::move(od), std::move(later),
            std::move(later_t), st, std::move(taken)};
}

}  // namespace ddflow
