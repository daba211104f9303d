// Operator nodes' kernels: see node.hpp, and ddflow/graph/node.py for the reference of each.
#include "graph/node.hpp"

#include <stdexcept>
#include <string>

namespace ddflow {

namespace {
void check_depth(const char* where, Mat<const i64> times, Vec<const i64> bound) {
    if (times.rows && times.cols < bound.n)
        throw std::invalid_argument(std::string(where) + ": times have fewer coordinates than the bound");
}
}  // namespace

std::tuple<Array<bool>, i64> ready_split(Mat<const i64> times, Vec<const i64> bound) {
    check_depth("ready_split", times, bound);
    const i64 n = times.rows;
    Array<bool> mask(n);
    i64 count = 0;
    for (i64 i = 0; i < n; ++i) {
        mask[i] = complete_row(times, i, bound);
        count += mask[i];
    }
    return {std::move(mask), count};
}

bool any_complete(Mat<const i64> times, Vec<const i64> bound) {
    check_depth("any_complete", times, bound);
    for (i64 i = 0; i < times.rows; ++i)
        if (complete_row(times, i, bound)) return true;
    return false;
}

}  // namespace ddflow
