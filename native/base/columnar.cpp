// Column helpers' kernels: see columnar.hpp, and ddflow/base/columnar.py for the reference of each.
#include "base/columnar.hpp"

#include <stdexcept>

namespace ddflow {

std::tuple<Array<i64>, Array<i64>> counting_order(Vec<const i64> idx, i64 n) {
    if (n < 0) throw std::invalid_argument("counting_order: n must not be negative");
    auto bucket = [n](i64 x) { return x < 0 ? 0 : (x >= n ? n + 1 : x + 1); };
    Array<i64> starts = filled<i64>(n + 2, 0);
    for (i64 i = 0; i < idx.n; ++i) ++starts[bucket(idx[i])];
    i64 total = 0;
    for (i64 b = 0; b < n + 2; ++b) {
        const i64 c = starts[b];
        starts[b] = total;
        total += c;
    }
    Array<i64> bounds(n + 1);
    for (i64 b = 0; b <= n; ++b) bounds[b] = starts[b + 1];
    Array<i64> order(idx.n);
    for (i64 i = 0; i < idx.n; ++i) order[starts[bucket(idx[i])]++] = i;
    return {std::move(order), std::move(bounds)};
}

}  // namespace ddflow
