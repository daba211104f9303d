// Accumulate's kernel: see accumulate.hpp, and ddflow/operators/reduce/accumulate.py for the reference.
#include "operators/reduce/accumulate.hpp"

#include <stdexcept>

namespace ddflow {

std::tuple<Array<i64>, Array<i64>, i64> running_sums(Mat<const i64> after, Vec<const i64> ev_g,
                                                     Mat<const i64> delta) {
    const i64 E = delta.rows, m1 = delta.cols;
    if (ev_g.n != E) throw std::invalid_argument("running_sums: ev_g needs one group a row of delta");
    if (E && after.cols < m1) throw std::invalid_argument("running_sums: after has fewer columns than delta");
    for (i64 e = 0; e < E; ++e)
        if (ev_g[e] < 0 || ev_g[e] >= after.rows)
            throw std::invalid_argument("running_sums: ev_g holds a group outside after's rows");
    Array<i64> prev(E, m1), cur(E, m1), state(m1);
    i64 e0 = 0;
    while (e0 < E) {
        const i64 g = ev_g[e0];
        i64 e1 = e0;
        while (e1 < E && ev_g[e1] == g) ++e1;
        for (i64 i = 0; i < m1; ++i) {
            i64 s = after(g, i);
            for (i64 e = e0; e < e1; ++e)
                if (__builtin_sub_overflow(s, delta(e, i), &s)) return {std::move(prev), std::move(cur), g};
            state[i] = s;
        }
        for (i64 e = e0; e < e1; ++e) {
            for (i64 i = 0; i < m1; ++i) {
                i64 s = state[i];
                prev(e, i) = s;
                if (__builtin_add_overflow(s, delta(e, i), &s)) return {std::move(prev), std::move(cur), g};
                cur(e, i) = s;
                state[i] = s;
            }
        }
        e0 = e1;
    }
    return {std::move(prev), std::move(cur), -1};
}

}  // namespace ddflow
