// Scopes' kernels: see scope.hpp, and ddflow/graph/scope.py for the reference of each.
#include "graph/scope.hpp"

#include <stdexcept>

namespace ddflow {

i64 least_round(Mat<const i64> times, Vec<const i64> outer_bound) {
    const i64 k = outer_bound.n;
    if (times.rows && times.cols < k)
        throw std::invalid_argument("least_round: times have fewer coordinates than the outer bound");
    i64 best = -1;
    for (i64 i = 0; i < times.rows; ++i)
        if (complete_row(times, i, outer_bound)) {
            const i64 r = times.cols > k ? times(i, k) : 0;
            if (best < 0 || r < best) best = r;
        }
    return best;
}

}  // namespace ddflow
