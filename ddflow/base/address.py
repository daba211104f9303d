"""Arrays handed to compiled kernels by address: any number of them in one int64 matrix.

A trace is a list of batches, each a handful of arrays, and the list's
length changes with every insert and merge.  numba specialises a kernel
on its argument types, so a tuple of arrays compiles once per length,
and a typed list costs about 2 us per array to build from Python.  A
matrix of addresses costs one small ``np.stack`` and is one argument of a
fixed type, so a kernel can read every batch of a trace in one call
whatever their number (:mod:`traces.layout` builds the matrices).

Inside a kernel :func:`view_i64`, :func:`view_i32` and :func:`view_2d`
turn an address back into an array without copying (numba's ``carray``);
under ``DDFLOW_JIT=0`` the same functions build the views with ctypes, so
the kernels run unchanged as plain Python.  The caller keeps the owning
arrays alive for the duration of the call: a matrix is only ever built
next to the objects that own the arrays, and kept with them.

>>> a = np.arange(5, dtype=np.int64)
>>> view_i64(address(a), 5).tolist()
[0, 1, 2, 3, 4]
"""
from __future__ import annotations

import ctypes

import numpy as np

_C = {np.dtype(np.int64): ctypes.c_int64, np.dtype(np.int32): ctypes.c_int32}


def _data(a):
    """The address of ``a``'s data (compiled: about 0.4 us a call, against 2 us for ``a.ctypes.data``)."""
    return a.ctypes.data


_compiled_data = None


def address(a: np.ndarray) -> int:
    """The address of ``a``'s first element (``a`` must be C-contiguous).  O(1), under a microsecond."""
    global _compiled_data
    if not a.flags.c_contiguous:
        raise ValueError("address() of an array that is not C-contiguous")
    if _compiled_data is None:
        from ddflow.base.jit import jit_enabled

        if jit_enabled():
            from ddflow.base.kernel_cache import njit_cached

            _compiled_data = njit_cached(_data)
        else:
            _compiled_data = lambda x: x.__array_interface__["data"][0]  # noqa: E731
    return int(_compiled_data(a))


def _plain(addr: int, shape: tuple, dtype) -> np.ndarray:
    if addr == 0 or 0 in shape:
        return np.zeros(shape, dtype=dtype)
    return np.ctypeslib.as_array(ctypes.cast(int(addr), ctypes.POINTER(_C[np.dtype(dtype)])), tuple(int(s) for s in shape))


def view_i64(addr, n):
    """The ``n`` int64 values at ``addr``, as an array view.  O(1)."""
    return _plain(addr, (n,), np.int64)


def view_i32(addr, n):
    """The ``n`` int32 values at ``addr``, as an array view.  O(1)."""
    return _plain(addr, (n,), np.int32)


def view_2d(addr, n, m):
    """The ``(n, m)`` C-ordered int64 matrix at ``addr``, as an array view.  O(1)."""
    return _plain(addr, (n, m), np.int64)


_registered = False


def register_views() -> None:
    """Teach numba the three views (called before the first kernel that uses them compiles)."""
    global _registered
    if _registered:
        return
    import numba
    from numba.core import cgutils, types
    from numba.extending import intrinsic, overload

    @intrinsic
    def _pointer(typingctx, addr):
        def codegen(context, builder, sig, args):
            return builder.inttoptr(args[0], cgutils.voidptr_t)

        return types.voidptr(addr), codegen

    @overload(view_i64)
    def _ov_i64(addr, n):
        return lambda addr, n: numba.carray(_pointer(addr), (n,), np.int64)

    @overload(view_i32)
    def _ov_i32(addr, n):
        return lambda addr, n: numba.carray(_pointer(addr), (n,), np.int32)

    @overload(view_2d)
    def _ov_2d(addr, n, m):
        return lambda addr, n, m: numba.carray(_pointer(addr), (n, m), np.int64)

    _registered = True
