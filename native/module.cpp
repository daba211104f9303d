// ddflow._native: the native core's Python module.  One submodule per Python package whose kernels are
// native (base, traces, graph, operators, operators.reduce), each bound by the bind.cpp of its folder;
// this file only imports numpy's C API, makes the submodules and calls the binders.
#define DDFLOW_NUMPY_IMPORT
#include "base/convert.hpp"

namespace nb = nanobind;

namespace ddflow {
void bind_base(nb::module_ m);
void bind_traces(nb::module_ m);
void bind_graph(nb::module_ m);
void bind_operators(nb::module_ m);
void bind_reduce(nb::module_ m);
}  // namespace ddflow

static int import_numpy() {
    import_array1(-1);
    return 0;
}

NB_MODULE(_native, m) {
    if (import_numpy() < 0) throw nb::python_error();
    m.doc() = "ddflow's native core: the kernels, compiled when the package is built (see ddflow.base.native)";
#if DDFLOW_BOUNDS_CHECK
    m.attr("BOUNDS_CHECKED") = true;
#else
    m.attr("BOUNDS_CHECKED") = false;
#endif
    ddflow::bind_base(m.def_submodule("base", "ddflow.base's kernels"));
    ddflow::bind_traces(m.def_submodule("traces", "ddflow.traces' kernels"));
    ddflow::bind_graph(m.def_submodule("graph", "ddflow.graph's kernels"));
    nb::module_ ops = m.def_submodule("operators", "ddflow.operators' kernels");
    ddflow::bind_operators(ops);
    ddflow::bind_reduce(ops.def_submodule("reduce", "ddflow.operators.reduce's kernels"));
}
