"""Shared pytest configuration: hypothesis profiles, and the tests that compile kernels run last.

``ci`` (the default) has no per-example deadline, so a slow or busy machine
never fails a property test; ``dev`` runs fewer examples for quick loops.
Select with ``HYPOTHESIS_PROFILE=dev``.
"""
import os

from hypothesis import settings

settings.register_profile("ci", deadline=None)
settings.register_profile("dev", deadline=None, max_examples=20)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_collection_modifyitems(items):
    """Tests marked ``compiles`` run after all others, in their order.

    They call kernels with argument types the engine never passes (a helper
    called on its own, writable arrays where a trace hands read-only ones),
    so numba compiles them in this process, which then keeps the compiler's
    memory (hundreds of MB; ``make test`` compiles everything else in
    ``python -m ddflow.warmup`` first).  Every worker an oracle test forks
    copies this process's page tables, so a fork costs in proportion to its
    memory: run last, the compiling slows no fork.
    """
    items.sort(key=lambda item: item.get_closest_marker("compiles") is not None)
