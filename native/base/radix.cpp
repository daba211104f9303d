// The radix sorts: see radix.hpp, and ddflow/base/radix.py for the reference of each.
#include "base/radix.hpp"

namespace ddflow {

Array<i64> radix_order(Vec<const i64> v) {
    const i64 n = v.n;
    const uint64_t sign = (uint64_t)1 << 63;
    Array<uint64_t> u(n);
    uint64_t ones = 0, zeros = ~(uint64_t)0;
    for (i64 i = 0; i < n; ++i) {
        u[i] = (uint64_t)v[i] ^ sign;  // signed order as unsigned
        ones |= u[i];
        zeros &= u[i];
    }
    const uint64_t varying = n ? ones ^ zeros : 0;
    Array<i64> order(n), other(n);
    for (i64 i = 0; i < n; ++i) order[i] = i;
    constexpr i64 size = (i64)1 << RADIX_BITS;
    constexpr uint64_t mask = (uint64_t)size - 1;
    Array<i64> count(size + 1);
    for (int shift = 0; shift < 64; shift += RADIX_BITS) {
        if (!((varying >> shift) & mask)) continue;
        for (i64 b = 0; b <= size; ++b) count[b] = 0;
        for (i64 i = 0; i < n; ++i) ++count[(i64)((u[i] >> shift) & mask) + 1];
        for (i64 b = 0; b < size; ++b) count[b + 1] += count[b];
        for (i64 x = 0; x < n; ++x) {
            const i64 i = order[x];
            other[count[(i64)((u[i] >> shift) & mask)]++] = i;
        }
        std::swap(order, other);
    }
    return order;
}

Array<i64> row_order(Mat<const i64> M, i64 radix_above) {
    const i64 n = M.rows, m = M.cols;
    if (n > radix_above) {
        i64 runs = 1;
        for (i64 i = 1; i < n; ++i) {
            if (row_cmp(M.row(i), M.row(i - 1), m) < 0) ++runs;
            if (runs > RADIX_RUNS_ABOVE) {
                auto [packed, fits] = pack(M);
                if (fits) return radix_order(packed.vec());
                break;
            }
        }
    }
    return lex_order(M);
}

}  // namespace ddflow
