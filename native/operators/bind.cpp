// The operators layer's kernels as Python sees them: ddflow._native.operators (thin: one line a kernel).
#include <nanobind/stl/pair.h>
#include <nanobind/stl/tuple.h>

#include "base/convert.hpp"
#include "operators/feedback.hpp"
#include "operators/join.hpp"
#include "operators/round.hpp"
#include "operators/session.hpp"

namespace nb = nanobind;

namespace ddflow {

void bind_operators(nb::module_ m) {
    auto nogil = nb::call_guard<nb::gil_scoped_release>();
    // session.py
    m.def("session_step", &session_step, nogil);
    // join.py
    m.def("checked_product", &checked_product);
    m.def("join_table", &join_table, nogil);
    m.def("join_table_into", &join_table_into, nogil);
    // feedback.py
    m.def("feedback_round", &feedback_round, nogil);
    m.def("feedback_round_into", &feedback_round_into, nogil);
    // round.py
    m.def("loop_round", &loop_round, nogil);
}

}  // namespace ddflow
