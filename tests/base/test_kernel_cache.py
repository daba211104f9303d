"""The kernels' disk cache: an edited helper is compiled again, a script's entry never poisons the package's.

Each run is a fresh interpreter on one ``NUMBA_CACHE_DIR``, compiling a
small ``lazy_jit`` kernel of a package made here, whose helper lives in
another module.  ``NUMBA_DEBUG_CACHE`` makes numba say whether it loaded
the kernel or compiled it.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

KERNEL = """
from ddflow.base.jit import lazy_jit
from kpkg.helper import twice


@lazy_jit(uses=(twice,))
def kernel(x):
    return twice(x) + 1
"""


def run(tmp_path: pathlib.Path, code: str, cache: str = "cache") -> tuple[str, str]:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / cache), "NUMBA_DEBUG_CACHE": "1", "DDFLOW_JIT": "1",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    return lines[-1], "\n".join(lines[:-1])


def loaded(log: str) -> bool:
    """Whether numba loaded the kernel itself (not only its helper) from the cache."""
    return re.search(r"\[cache\] data loaded from .*kernel\.kernel-", log) is not None


@pytest.fixture
def package(tmp_path):
    pkg = tmp_path / "kpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "kernel.py").write_text(KERNEL)
    (pkg / "helper.py").write_text("def twice(x):\n    return 2 * x\n")
    return pkg


def test_an_edited_helper_is_compiled_again(tmp_path, package):
    call = "from kpkg.kernel import kernel; print(kernel(3))"
    assert run(tmp_path, call)[0] == "7"
    result, log = run(tmp_path, call)
    assert result == "7" and loaded(log), log  # the cache is used when nothing changed
    (package / "helper.py").write_text("def twice(x):\n    return 3 * x\n")
    result, log = run(tmp_path, call)
    assert result == "10", "an edit of the helper's file loaded the old machine code"
    assert run(tmp_path, call)[0] == "10"


def test_a_module_run_under_another_name_does_not_poison_the_package(tmp_path, package):
    # As `python -m doctest kpkg/kernel.py` does: the same file, imported as the module `kernel`.
    as_script = ("import importlib.util, sys; spec = importlib.util.spec_from_file_location('kernel', 'kpkg/kernel.py'); "
                 "m = importlib.util.module_from_spec(spec); sys.modules['kernel'] = m; spec.loader.exec_module(m); "
                 "print(m.kernel(3))")
    assert run(tmp_path, as_script)[0] == "7"
    assert run(tmp_path, "from kpkg.kernel import kernel; print(kernel(3))")[0] == "7"
    result, log = run(tmp_path, as_script)
    assert result == "7" and loaded(log), log


_labs = ctypes.CDLL(ctypes.util.find_library("c")).labs
_labs.restype, _labs.argtypes = ctypes.c_long, [ctypes.c_long]


def _magnitude(x):
    return _labs(x)  # a ctypes function: machine code numba cannot cache


def test_a_kernel_numba_cannot_cache_runs_with_numba_s_warning():
    """numba reads more of a locator when it cannot cache: the kernel still runs, uncached, with numba's warning."""
    from numba.core.errors import NumbaWarning

    from ddflow.base.kernel_cache import njit_cached

    with pytest.warns(NumbaWarning, match="Cannot cache"):
        assert njit_cached(_magnitude)(-3) == 3


def test_two_processes_name_their_compiled_functions_apart(tmp_path, package):
    """numba names machine code (and the constants its environment holds) with a counter of the compiling
    process.  Two processes compiling the same kernels in the same order drew the same names, and a process
    loading entries of both was handed one copy's environment for the other (``'descr' is NULL`` when a
    helper returned an array).  The counter now starts at a random point in each process."""
    ids = ("from kpkg.kernel import kernel; kernel(3); import numba.core.bytecode as b; "
           "print(next(b.FunctionIdentity._unique_ids))")
    first, second = (int(run(tmp_path, ids, cache)[0]) for cache in ("cache-a", "cache-b"))  # both compile
    assert first != second and min(first, second) > 1 << 20


STEP = """
from ddflow.base.jit import lazy_jit
from kpkg.helper import twice


@lazy_jit(uses=(twice,))
def step(x):
    return twice(x) + 1


def py_step(x):  # Python calling a helper kernel by its module's name, as the walks call key_walk
    return step(x)
"""

OUTER = """
from ddflow.base.jit import helpers_of, lazy_jit
from kpkg.other import inc
from kpkg.step import step


@lazy_jit(uses=helpers_of(step) + (inc,))
def outer(x):
    return inc(step(x))
"""


def test_a_helper_kernel_python_calls_loads_whichever_caller_compiled_first(tmp_path, package):
    """A helper kernel is also compiled into each caller, under the caller's file set.  Once, compiling a
    caller bound that copy under the helper's name in its module, so Python then called the caller's copy:
    a process that met the two in the other order compiled again (seconds, for the walks' ``key_walk``)."""
    (package / "step.py").write_text(STEP)
    (package / "other.py").write_text("def inc(x):\n    return x + 1\n")
    (package / "outer.py").write_text(OUTER)
    imports = "import kpkg.outer as o, kpkg.step as s; "
    assert run(tmp_path, imports + "print(o.outer(3), s.py_step(3))")[0] == "8 7"
    result, log = run(tmp_path, imports + "print(s.py_step(3), o.outer(3))")
    assert result == "7 8"
    assert "data saved" not in log, log  # everything the first process ran was loaded, nothing compiled
    assert "data loaded" in log, log


WHOLE = """
from ddflow.base.jit import lazy_jit
from kpkg.step import step


@lazy_jit(calls=(step,))
def whole(x):
    return step(x) * 10
"""


def test_a_kernel_calling_another_as_it_is_loads_and_follows_its_files(tmp_path, package):
    """``calls``: a kernel calls another's own compiled code (a fused loop round calls three).  A second
    process loads it and compiles nothing; an edit of the called kernel's helper compiles it again."""
    (package / "step.py").write_text(STEP)
    (package / "whole.py").write_text(WHOLE)
    call = "import kpkg.whole as w, kpkg.step as s; print(w.whole(3), s.py_step(3))"
    assert run(tmp_path, call)[0] == "70 7"
    result, log = run(tmp_path, call)
    assert result == "70 7" and "data saved" not in log and "data loaded" in log, log
    (package / "helper.py").write_text("def twice(x):\n    return 3 * x\n")
    assert run(tmp_path, call)[0] == "100 10", "an edit of the called kernel's helper loaded the old machine code"
