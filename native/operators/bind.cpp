// The operators layer's kernels as Python sees them: ddflow._native.operators (thin: one line a kernel).
#include <nanobind/stl/pair.h>
#include <nanobind/stl/tuple.h>

#include "base/convert.hpp"
#include "operators/session.hpp"

namespace nb = nanobind;

namespace ddflow {

void bind_operators(nb::module_ m) {
    auto nogil = nb::call_guard<nb::gil_scoped_release>();
    m.def("session_step", &session_step, nogil);
}

}  // namespace ddflow
