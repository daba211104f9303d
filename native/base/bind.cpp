// The base layer's kernels as Python sees them: ddflow._native.base (thin: one line a kernel).
#include <nanobind/stl/pair.h>
#include <nanobind/stl/tuple.h>

#include "base/convert.hpp"
#include "base/columnar.hpp"
#include "base/exactsum.hpp"
#include "base/kernels.hpp"
#include "base/radix.hpp"

namespace nb = nanobind;

namespace ddflow {

void bind_base(nb::module_ m) {
    auto nogil = nb::call_guard<nb::gil_scoped_release>();
    m.def("address", [](nb::handle a) -> i64 {
        if (!PyArray_Check(a.ptr()) || !PyArray_IS_C_CONTIGUOUS(reinterpret_cast<PyArrayObject*>(a.ptr())))
            throw nb::type_error("address() needs a C-contiguous numpy array");
        return (i64)(intptr_t)PyArray_DATA(reinterpret_cast<PyArrayObject*>(a.ptr()));
    }, "The address of a C-contiguous array's first element (the caller keeps the array alive).");
    m.def("lex_order", &lex_order, nogil);
    m.def("group_sums", &group_sums, nogil);
    m.def("consolidate_small", &consolidate_small, nogil);
    m.def("pack", &pack, nogil);
    m.def("consolidated_split", &consolidated_split, nogil);
    m.def("trie_starts", &trie_starts<Mat<const i64>>, nogil);
    m.def("sorted_unique", [](Vec<i64> a) { return sorted_unique(a); }, nogil);
    m.def("sort_small", [](Vec<i64> a) { sort_small(a); }, nogil);
    m.def("seek", &seek<i64, i32, i32>, nogil);
    m.def("seek", &seek<i64, i64, i64>, nogil);
    m.def("seek", &seek<i64, i32, i64>, nogil);
    m.def("seek", &seek<i64, i64, i32>, nogil);
    m.def("seek", &seek<double, i32, i32>, nogil);
    m.def("seek", &seek<double, i64, i64>, nogil);
    m.def("seek", &seek<double, i32, i64>, nogil);
    m.def("seek", &seek<double, i64, i32>, nogil);
    // radix.py, exactsum.py, columnar.py
    m.def("radix_order", &radix_order, nogil);
    m.def("row_order", &row_order, nogil);
    m.def("float_limbs", &float_limbs, nogil);
    m.def("round_limbs", &round_limbs, nogil);
    m.def("counting_order", &counting_order, nogil);
}

}  // namespace ddflow
