// The traces layer's kernels as Python sees them: ddflow._native.traces (thin: one line a kernel).
#include <nanobind/stl/pair.h>
#include <nanobind/stl/tuple.h>

#include "base/convert.hpp"

namespace nb = nanobind;

namespace ddflow {

void bind_traces(nb::module_ m) {
    (void)m;
}

}  // namespace ddflow
