// The reduce family's kernels as Python sees them: ddflow._native.operators.reduce (one line a kernel).
#include <nanobind/stl/pair.h>
#include <nanobind/stl/tuple.h>

#include "base/convert.hpp"
#include "operators/reduce/accumulate.hpp"
#include "operators/reduce/chain.hpp"
#include "operators/reduce/compacted.hpp"
#include "operators/reduce/iterate.hpp"
#include "operators/reduce/keywalk.hpp"
#include "operators/reduce/pending.hpp"
#include "operators/reduce/walk.hpp"

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
    // pending.py
    m.def("due_seeds", &due_seeds, nogil);
    m.def("merge_pending", &merge_pending, nogil);
    // compacted.py
    m.def("compacted_histories", &compacted_histories, nogil);
    // walk.py
    m.def("walk_step", &walk_step, nogil);
    m.def("walk_step_kept", &walk_step_kept, nogil);
    // iterate.py
    m.def("loop_seeds", &loop_seeds, nogil);
    m.def("loop_pending", &loop_pending, nogil);
    m.def("loop_step", &loop_step, nogil);
    // accumulate.py
    m.def("running_sums", &running_sums, nogil);
}

}  // namespace ddflow
