"""Arrays handed to compiled kernels by address: any number of them in one int64 matrix.

A trace is a list of batches, each a handful of arrays, and the list's
length changes with every insert and merge.  A matrix of addresses costs
one small ``np.stack`` and is one argument of a fixed type, so a kernel
can read every batch of a trace in one call whatever their number
(:mod:`traces.layout` builds the matrices; the native kernels read them
with ``view_at`` in ``native/base/array.hpp``).

:func:`view_i64`, :func:`view_i32` and :func:`view_2d` turn an address
back into an array without copying, with ctypes, so the plain-Python
references read the same matrices.  The caller keeps the owning
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


_address = None


def address(a: np.ndarray) -> int:
    """The address of ``a``'s first element (``a`` must be C-contiguous).  O(1), under a microsecond natively."""
    global _address
    if not a.flags.c_contiguous:
        raise ValueError("address() of an array that is not C-contiguous")
    if _address is None:
        from ddflow.base.native import native_enabled, native_module

        _address = native_module().base.address if native_enabled() else (
            lambda x: x.__array_interface__["data"][0])
    return int(_address(a))


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
