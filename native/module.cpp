// ddflow._native: the native core's Python module.  One submodule per layer (base, traces, graph,
// operators), each bound by that layer's bind.cpp; this file only imports numpy's C API and calls them.
#define DDFLOW_NUMPY_IMPORT
#include "base/convert.hpp"

namespace nb = nanobind;

namespace ddflow {
void bind_base(nb::module_& m);
void bind_traces(nb::module_& m);
void bind_graph(nb::module_& m);
void bind_operators(nb::module_& m);
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
    ddflow::bind_base(m);
    ddflow::bind_traces(m);
    ddflow::bind_graph(m);
    ddflow::bind_operators(m);
}
