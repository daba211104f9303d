// The reduce family's kernels as Python sees them: ddflow._native.operators.reduce (one line a kernel).
#include <nanobind/stl/pair.h>
#include <nanobind/stl/tuple.h>

#include "base/convert.hpp"

namespace nb = nanobind;

namespace ddflow {

void bind_reduce(nb::module_ m) {
    (void)m;
}

}  // namespace ddflow
