// How Vec, Mat and Array (base/array.hpp) cross into and out of Python: nanobind type casters over the
// numpy C API.  Included by the binding files only (each layer's bind.cpp); kernels never see Python.
//
// In: a numpy array of exactly the element type, C-contiguous, of the right number of dimensions, and
// writeable where the view is not const; anything else does not match, and the call raises TypeError
// naming the expected types (no silent copy or conversion: a kernel that writes into its argument must
// write into the caller's array).  Out: an Array's buffer becomes a numpy array that owns it (a capsule
// frees it), without a copy.
#pragma once

#include <nanobind/nanobind.h>

#ifndef PY_ARRAY_UNIQUE_SYMBOL
#define PY_ARRAY_UNIQUE_SYMBOL ddflow_native_ARRAY_API
#endif
#ifndef DDFLOW_NUMPY_IMPORT  // module.cpp imports numpy's C API; every other file uses that import
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>

#include "base/array.hpp"

namespace ddflow {

template <class T> struct dtype_of;
template <> struct dtype_of<int64_t> { static constexpr char kind = 'i'; static constexpr int num = NPY_INT64; };
template <> struct dtype_of<int32_t> { static constexpr char kind = 'i'; static constexpr int num = NPY_INT32; };
template <> struct dtype_of<uint64_t> { static constexpr char kind = 'u'; static constexpr int num = NPY_UINT64; };
template <> struct dtype_of<uint8_t> { static constexpr char kind = 'u'; static constexpr int num = NPY_UINT8; };
template <> struct dtype_of<double> { static constexpr char kind = 'f'; static constexpr int num = NPY_FLOAT64; };
template <> struct dtype_of<bool> { static constexpr char kind = 'b'; static constexpr int num = NPY_BOOL; };

// Whether `o` is a numpy array of element type T (native byte order), `ndim` dimensions, C-contiguous,
// and writeable if `writeable`.
template <class T>
inline PyArrayObject* matching_array(PyObject* o, int ndim, bool writeable) {
    if (!PyArray_Check(o)) return nullptr;
    PyArrayObject* a = reinterpret_cast<PyArrayObject*>(o);
    PyArray_Descr* d = PyArray_DESCR(a);
    if (PyArray_NDIM(a) != ndim || d->kind != dtype_of<T>::kind || PyArray_ITEMSIZE(a) != (npy_intp)sizeof(T))
        return nullptr;
    if (d->byteorder == '>') return nullptr;
    if (!PyArray_IS_C_CONTIGUOUS(a)) return nullptr;
    if (writeable && !PyArray_ISWRITEABLE(a)) return nullptr;
    return a;
}

inline void free_capsule(PyObject* cap) { std::free(PyCapsule_GetPointer(cap, "ddflow.native")); }

// A numpy array owning `a`'s buffer (which `a` gives up).
template <class T>
inline PyObject* to_numpy(Array<T>& a) {
    npy_intp dims[2] = {(npy_intp)a.rows, (npy_intp)a.cols};
    // Row j of a 2-d array starts at p + j * cols, even when cols is 0 (numpy's default strides would put it at
    // p + j): where a table row made for the array (traces/layout.hpp's trie_row) says its rows are.
    npy_intp strides[2] = {(npy_intp)(sizeof(T) * (size_t)(a.nd == 2 ? a.cols : 1)), (npy_intp)sizeof(T)};
    int nd = a.nd;
    T* p = a.release();
    PyObject* arr = PyArray_New(&PyArray_Type, nd, dims, dtype_of<T>::num, strides, p, (int)sizeof(T),
                                NPY_ARRAY_CARRAY, nullptr);
    if (!arr) { std::free(p); return nullptr; }
    PyObject* cap = PyCapsule_New(p, "ddflow.native", free_capsule);
    if (!cap || PyArray_SetBaseObject(reinterpret_cast<PyArrayObject*>(arr), cap) < 0) {
        Py_XDECREF(cap);
        Py_DECREF(arr);
        if (!cap) std::free(p);
        return nullptr;
    }
    return arr;
}

}  // namespace ddflow

NAMESPACE_BEGIN(NB_NAMESPACE)
NAMESPACE_BEGIN(detail)

template <class T> struct dtype_label { static constexpr auto name = const_name("int64"); };
template <> struct dtype_label<int32_t> { static constexpr auto name = const_name("int32"); };
template <> struct dtype_label<uint64_t> { static constexpr auto name = const_name("uint64"); };
template <> struct dtype_label<uint8_t> { static constexpr auto name = const_name("uint8"); };
template <> struct dtype_label<double> { static constexpr auto name = const_name("float64"); };
template <> struct dtype_label<bool> { static constexpr auto name = const_name("bool"); };

template <class T> struct type_caster<ddflow::Vec<T>> {
    using E = std::remove_const_t<T>;
    NB_TYPE_CASTER(ddflow::Vec<T>, const_name("numpy.ndarray[") + dtype_label<E>::name +
                                       const_name<std::is_const_v<T>>(", 1d]", ", 1d, writeable]"))
    bool from_python(handle src, uint8_t, cleanup_list*) noexcept {
        PyArrayObject* a = ddflow::matching_array<E>(src.ptr(), 1, !std::is_const_v<T>);
        if (!a) return false;
        value = ddflow::Vec<T>(static_cast<T*>(PyArray_DATA(a)), PyArray_DIM(a, 0));
        return true;
    }
};

template <class T> struct type_caster<ddflow::Mat<T>> {
    using E = std::remove_const_t<T>;
    NB_TYPE_CASTER(ddflow::Mat<T>, const_name("numpy.ndarray[") + dtype_label<E>::name +
                                       const_name<std::is_const_v<T>>(", 2d]", ", 2d, writeable]"))
    bool from_python(handle src, uint8_t, cleanup_list*) noexcept {
        PyArrayObject* a = ddflow::matching_array<E>(src.ptr(), 2, !std::is_const_v<T>);
        if (!a) return false;
        value = ddflow::Mat<T>(static_cast<T*>(PyArray_DATA(a)), PyArray_DIM(a, 0), PyArray_DIM(a, 1));
        return true;
    }
};

template <class T> struct type_caster<ddflow::Array<T>> {
    NB_TYPE_CASTER(ddflow::Array<T>, const_name("numpy.ndarray[") + dtype_label<T>::name + const_name("]"))
    bool from_python(handle, uint8_t, cleanup_list*) noexcept { return false; }
    static handle from_cpp(ddflow::Array<T>&& a, rv_policy, cleanup_list*) noexcept {
        return handle(ddflow::to_numpy(a));
    }
    static handle from_cpp(ddflow::Array<T>& a, rv_policy, cleanup_list*) noexcept {
        return handle(ddflow::to_numpy(a));
    }
};

NAMESPACE_END(detail)
NAMESPACE_END(NB_NAMESPACE)
