// The reduce family's kernels as Python sees them: ddflow._native.operators.reduce (one line a kernel).
#include <nanobind/stl/pair.h>
#include <nanobind/stl/tuple.h>

#include "base/convert.hpp"
#include "operators/reduce/accumulate.hpp"
#include "operators/reduce/chain.hpp"
#include "operators/reduce/keywalk.hpp"

namespace nb = nanobind;

namespace ddflow {

void bind_reduce(nb::module_ m) {
    auto nogil = nb::call_guard<nb::gil_scoped_release>();
    // chain.py
    m.def("chain_walk", &chain_walk, nogil);
    m.def("chain_output", &chain_output, nogil);
    // keywalk.py
    m.def("rank_values", &rank_values, nogil);
    m.def("walk_rows", &walk_rows, nogil);
    m.def("key_walk", &key_walk, nogil);
    // accumulate.py
    m.def("running_sums", &running_sums, nogil);
}

}  // namespace ddflow
