"""The two ways a kernel test runs a kernel: its plain-Python reference, or its native function.

Every kernel is ``@kernel("<layer>")`` (ddflow.base.native): the module's
name for it is the native function ``ddflow._native.<layer>.<name>``, and
:func:`ddflow.base.native.reference` gives back the plain Python.  A test
parametrized over :data:`MODES` runs each through :func:`as_run` and holds
both to the same reference or property; the native one is looked up in the
extension, so the comparison runs under ``DDFLOW_NATIVE=0`` too (where the
engine runs the references alone).

>>> from ddflow.traces.merge import merge_rows
>>> as_run(merge_rows, "native") is native_module().traces.merge_rows
True
"""
from __future__ import annotations

from typing import Callable

from ddflow.base.native import layer_of, native_module, reference

#: How a test runs a kernel: its plain-Python reference (``reference(k)``), or its native function (``ddflow._native``).
MODES = ("plain", "native")


def native_of(k: Callable) -> Callable:
    """Kernel ``k``'s native function: ``ddflow._native.<package>.<name>``, the reference's package and name without
    its leading underscore.  Where the engine runs natively that is ``k`` itself (checked)."""
    plain = reference(k)
    space = native_module()
    for part in layer_of(plain.__module__).split("."):
        space = getattr(space, part)
    found = getattr(space, plain.__name__.lstrip("_"))
    assert k is plain or k is found, f"{plain.__qualname__}: the module's kernel is not {found!r}"
    return found


def as_run(k: Callable, mode: str) -> Callable:
    """Kernel ``k`` as ``mode`` (one of :data:`MODES`) runs it."""
    if mode == "plain":
        return reference(k)
    if mode == "native":
        return native_of(k)
    raise ValueError(f"mode {mode!r} is none of {MODES}")
