// The graph layer's kernels as Python sees them: ddflow._native.graph (thin: one line a kernel).
#include <nanobind/stl/pair.h>
#include <nanobind/stl/tuple.h>

#include "base/convert.hpp"
#include "graph/node.hpp"
#include "graph/scope.hpp"

namespace nb = nanobind;

namespace ddflow {

void bind_graph(nb::module_ m) {
    auto nogil = nb::call_guard<nb::gil_scoped_release>();
    // node.py: short kernels, called once a step: no GIL release (it would cost more than they do)
    m.def("ready_split", &ready_split);
    m.def("any_complete", &any_complete);
    m.def("complete_row", [](Mat<const i64> times, i64 i, Vec<const i64> bound) {
        if (i < 0 || i >= times.rows || times.cols < bound.n)
            throw std::invalid_argument("complete_row: no such row, or fewer coordinates than the bound");
        return complete_row(times, i, bound);
    });
    // scope.py
    m.def("least_round", &least_round);
    (void)nogil;
}

}  // namespace ddflow
