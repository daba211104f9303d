"""ddflow's native core, ``ddflow._native``, and the switch that runs the plain-Python reference instead.

The kernels are C++ (``native/``, one folder per layer), compiled when the
package is built (``pip install .``): nothing compiles at import or run
time, so the first call is as fast as the millionth, on a laptop and on a
new Spark executor.  Every kernel keeps its plain-Python reference, the
function the :func:`kernel` decorator is applied to, next to the code that
calls it.  ``DDFLOW_NATIVE=0`` runs the references alone (slow; for
debugging, and for checking the native code against them): then the
extension is not even imported.

A kernel is looked up by its package and name (``kernel("traces")`` on
``merge_rows`` finds ``ddflow._native.traces.merge_rows``, and
``kernel("operators.reduce")`` looks in ``ddflow._native.operators.reduce``:
the extension's submodules mirror the Python packages); the module's
name for it is the native function itself, so a call costs nanobind's
dispatch and nothing of Python's (``python -m bench.calls``).  The
reference stays reachable by :func:`reference`.

>>> from ddflow.base.native import reference
>>> def twice(a):
...     return 2 * a
>>> reference(kernel("base", native=False)(twice))(3)
6
"""
from __future__ import annotations

import os
from types import ModuleType
from typing import Callable

from ddflow.errors import DdflowError


class NativeError(DdflowError, ImportError):
    """The native extension cannot be loaded (not built, built for another Python, or damaged)."""


def native_enabled() -> bool:
    """Whether kernels run natively (``DDFLOW_NATIVE=0`` runs the plain-Python references).  O(1)."""
    return os.environ.get("DDFLOW_NATIVE", "1") != "0"


_module: ModuleType | None = None


def native_module() -> ModuleType:
    """``ddflow._native``, imported once; a :class:`NativeError` that says what to do if it cannot be.  O(1)."""
    global _module
    if _module is None:
        try:
            _native = _load()
        except ImportError as e:
            raise NativeError(
                f"ddflow's native extension (ddflow._native) could not be loaded: {e}. It is compiled when ddflow "
                "is installed: reinstall it (pip install ddflow, or pip install -e . in a checkout) with this "
                "Python, or set DDFLOW_NATIVE=0 to run the slow plain-Python reference instead") from None
        _module = _native
    return _module


def preload() -> None:
    """Load the extension now (before forking workers, which inherit it), unless the references run.  O(1).

    A process whose extension cannot load fails here with the :class:`NativeError` that says why, before
    any worker starts, rather than in each worker at its first kernel.
    """
    if native_enabled():
        native_module()


def _load() -> ModuleType:
    """The extension: the one built in the package, or the file ``DDFLOW_NATIVE_LIBRARY`` names (the sanitizer
    build that ``make asan`` tests)."""
    path = os.environ.get("DDFLOW_NATIVE_LIBRARY")
    if not path:
        from ddflow import _native

        return _native
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("ddflow._native", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"DDFLOW_NATIVE_LIBRARY={path!r} is not an extension module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules["ddflow._native"] = module
    return module


#: Each native kernel's plain-Python reference, by the native function (and by the reference itself).
_REFERENCES: dict[Callable, Callable] = {}


def kernel(layer: str, name: str | None = None, native: bool | None = None) -> Callable[[Callable], Callable]:
    """Decorator: the native kernel ``ddflow._native.<layer>.<name>`` in place of the plain function it decorates.

    ``name`` defaults to the function's own name without a leading
    underscore.  Under ``DDFLOW_NATIVE=0`` (or ``native=False``) the plain
    function itself is returned.  Either way :func:`reference` gives the
    plain function back.  Cost: one attribute lookup, at import.
    """
    use_native = native_enabled() if native is None else native

    def wrap(plain: Callable) -> Callable:
        _REFERENCES[plain] = plain
        if not use_native:
            return plain
        space = native_module()
        for part in layer.split("."):
            space = getattr(space, part)
        found = getattr(space, name or plain.__name__.lstrip("_"), None)
        if found is None:
            raise NativeError(f"ddflow._native.{layer} has no kernel {name or plain.__name__.lstrip('_')!r}: the "
                              "extension is older than this checkout; rebuild it (pip install -e .)")
        _REFERENCES[found] = plain
        return found

    return wrap


def layer_of(module: str) -> str:
    """The extension's submodule for kernels of Python module ``module``: its package, without ``ddflow.``.

    >>> layer_of("ddflow.operators.reduce.walk"), layer_of("ddflow.traces.merge")
    ('operators.reduce', 'traces')
    """
    return module.split(".", 1)[1].rsplit(".", 1)[0]


def reference(k: Callable) -> Callable:
    """The plain-Python reference of kernel ``k`` (``k`` itself if it is one).  O(1).

    >>> def twice(a):
    ...     return 2 * a
    >>> reference(twice) is twice
    True
    """
    return _REFERENCES.get(k, k)
