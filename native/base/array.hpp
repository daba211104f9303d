// Arrays as the native kernels see them: views of numpy buffers in, owned buffers out.
//
// Why our own small types instead of nb::ndarray: a kernel call must cost well under a microsecond plus
// its work (bench.calls measures it), and a kernel is called with up to a dozen arrays.  A view is a
// pointer and a shape read from the numpy array object itself (the numpy C API, a few loads); an
// output is a malloc'd buffer that becomes a numpy array owning it only when the kernel returns, so a
// kernel can run without the GIL (allocating a numpy array needs it).
//
// Kernels are plain C++ over these types: no Python object is touched inside one.  Under
// DDFLOW_BOUNDS_CHECK (the sanitizer build, `make asan`) every element access is checked, and a bad
// index aborts with the kernel's file and line: an out-of-bounds access is a crash, never an exception.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace ddflow {

using i64 = int64_t;
using i32 = int32_t;

#if DDFLOW_BOUNDS_CHECK
[[noreturn]] inline void bounds_fail(const char* what, i64 i, i64 n) {
    std::fprintf(stderr, "ddflow native: %s index %lld out of bounds [0, %lld)\n", what, (long long)i, (long long)n);
    std::abort();
}
#define DDFLOW_CHECK_INDEX(what, i, n) \
    do { if ((i) < 0 || (i) >= (n)) ::ddflow::bounds_fail(what, (i), (n)); } while (0)
#else
#define DDFLOW_CHECK_INDEX(what, i, n) ((void)0)
#endif

// A 1-d view of `n` elements at `p` (C-contiguous).  Const T for arrays a kernel only reads.
template <class T>
struct Vec {
    T* p = nullptr;
    i64 n = 0;
    Vec() = default;
    Vec(T* p_, i64 n_) : p(p_), n(n_) {}
    template <class U, class = std::enable_if_t<std::is_same_v<const U, T>>>
    Vec(const Vec<U>& o) : p(o.p), n(o.n) {}  // a mutable view reads as a const one
    T& operator[](i64 i) const { DDFLOW_CHECK_INDEX("vector", i, n); return p[i]; }
    i64 size() const { return n; }
    Vec slice(i64 a, i64 b) const { return Vec(p + a, b - a); }
};

// A 2-d C-ordered view: `rows` x `cols` at `p`.
template <class T>
struct Mat {
    T* p = nullptr;
    i64 rows = 0, cols = 0;
    Mat() = default;
    Mat(T* p_, i64 r, i64 c) : p(p_), rows(r), cols(c) {}
    template <class U, class = std::enable_if_t<std::is_same_v<const U, T>>>
    Mat(const Mat<U>& o) : p(o.p), rows(o.rows), cols(o.cols) {}
    T& operator()(i64 i, i64 j) const {
        DDFLOW_CHECK_INDEX("matrix row", i, rows);
        DDFLOW_CHECK_INDEX("matrix column", j, cols);
        return p[i * cols + j];
    }
    T* row(i64 i) const { DDFLOW_CHECK_INDEX("matrix row", i, rows); return p + i * cols; }
    Vec<T> row_vec(i64 i) const { return Vec<T>(row(i), cols); }
};

// An owned buffer of `rows` elements (1-d), or `rows` x `cols` (2-d), freed unless released.
// What a kernel returns: it becomes a numpy array that owns the memory (base/convert.hpp).
template <class T>
struct Array {
    T* p = nullptr;
    i64 rows = 0, cols = 1;
    int nd = 1;
    Array() = default;
    explicit Array(i64 n) : rows(n) { alloc(n); }
    Array(i64 r, i64 c) : rows(r), cols(c), nd(2) { alloc(r * c); }
    Array(const Array&) = delete;
    Array& operator=(const Array&) = delete;
    Array(Array&& o) noexcept : p(o.p), rows(o.rows), cols(o.cols), nd(o.nd) { o.p = nullptr; o.rows = 0; }
    Array& operator=(Array&& o) noexcept {
        if (this != &o) {
            std::free(p);
            p = o.p; rows = o.rows; cols = o.cols; nd = o.nd;
            o.p = nullptr; o.rows = 0;
        }
        return *this;
    }
    ~Array() { std::free(p); }

    i64 size() const { return rows * cols; }
    bool is_2d() const { return nd == 2; }
    T& operator[](i64 i) const { DDFLOW_CHECK_INDEX("array", i, size()); return p[i]; }
    T& operator()(i64 i, i64 j) const {
        DDFLOW_CHECK_INDEX("array row", i, rows);
        DDFLOW_CHECK_INDEX("array column", j, cols);
        return p[i * cols + j];
    }
    Vec<T> vec() const { return Vec<T>(p, size()); }
    Mat<T> mat() const { return Mat<T>(p, rows, cols); }
    // Keep the first `n` elements (rows, for a 2-d array): what numba's `a[:n]` returned.
    void truncate(i64 n) {
        DDFLOW_CHECK_INDEX("truncate", n, rows + 1);
        rows = n;
    }
    // Keep the first `n` columns of a 2-d array (rows keep their stride by being copied down).
    void truncate_cols(i64 n);
    T* release() { T* q = p; p = nullptr; return q; }

  private:
    void alloc(i64 count) {
        // At least one element: malloc(0) may return null, and null means "no buffer".
        size_t bytes = sizeof(T) * (size_t)(count > 0 ? count : 1);
        p = static_cast<T*>(std::malloc(bytes));
        if (!p) {
            std::fprintf(stderr, "ddflow native: out of memory allocating %zu bytes\n", bytes);
            std::abort();
        }
    }
};

template <class T>
void Array<T>::truncate_cols(i64 n) {
    DDFLOW_CHECK_INDEX("truncate columns", n, cols + 1);
    if (n == cols) return;
    for (i64 i = 0; i < rows; ++i) std::memmove(p + i * n, p + i * cols, sizeof(T) * (size_t)n);
    cols = n;
}

// The transpose of a 2-d view, without a copy: element (i, j) is m(j, i) (numpy's `C.T`), for kernels that read
// an (m, k) matrix of columns as k rows of m fields (traces/arena.py's write_trie, the reduce family's tries).
// Has what the generic row readers use: `rows`, `cols`, `operator()(i, j)`.
template <class T>
struct Transposed {
    Mat<T> m;
    i64 rows = 0, cols = 0;
    Transposed() = default;
    explicit Transposed(Mat<T> m_) : m(m_), rows(m_.cols), cols(m_.rows) {}
    T& operator()(i64 i, i64 j) const { return m(j, i); }
};

// Views of arrays known by address (a spine's table of batches, traces/layout.py): the caller keeps the
// owning arrays alive for the call, as the reference's ddflow.base.address views require.
template <class T>
inline Vec<T> view_at(i64 addr, i64 n) { return Vec<T>(reinterpret_cast<T*>((intptr_t)addr), addr ? n : 0); }
template <class T>
inline Mat<T> view2d_at(i64 addr, i64 rows, i64 cols) {
    return Mat<T>(reinterpret_cast<T*>((intptr_t)addr), addr ? rows : 0, cols);
}

// A fresh 1-d array of `n` elements, filled with `v`.
template <class T>
Array<T> filled(i64 n, T v) {
    Array<T> a(n);
    for (i64 i = 0; i < n; ++i) a.p[i] = v;
    return a;
}

// A 1-d copy of a view.
template <class T>
Array<std::remove_const_t<T>> copy_of(Vec<T> v) {
    Array<std::remove_const_t<T>> a(v.n);
    if (v.n) std::memcpy(a.p, v.p, sizeof(T) * (size_t)v.n);
    return a;
}

}  // namespace ddflow
