"""Builds ddflow's native core, ``ddflow._native``, from ``native/`` (C++17, nanobind), with the package.

Why setuptools and not CMake: the package's folders map to import names
(``traces/`` is ``ddflow.traces``), which setuptools' ``package-dir``
already does, and one extension needs no more than a compiler call per
source.  nanobind's own sources are compiled into the extension (a static
core, as nanobind's CMake build makes by default).  Sources compile in
parallel, one per core (``DDFLOW_BUILD_JOBS`` to change).

``DDFLOW_SANITIZE=1`` builds with AddressSanitizer and UndefinedBehaviorSanitizer
and bounds checks on every native array access (``make asan``).
"""
from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).parent
SANITIZE = os.environ.get("DDFLOW_SANITIZE") == "1"


def _nanobind_sources() -> tuple[list[str], list[str]]:
    import nanobind

    root = Path(nanobind.source_dir()).parent
    return [str(root / "src" / "nb_combined.cpp")], [str(root / "include"), str(root / "ext" / "robin_map" / "include")]


def _extension() -> Extension:
    import numpy

    nb_sources, nb_includes = _nanobind_sources()
    ours = sorted(str(p.relative_to(HERE)) for p in (HERE / "native").rglob("*.cpp"))
    flags = ["-std=c++17", "-fvisibility=hidden", "-fno-strict-aliasing", "-Wall", "-Wno-unused-function"]
    link = []
    if SANITIZE:
        flags += ["-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined",
                  "-DDDFLOW_BOUNDS_CHECK=1"]
        link += ["-fsanitize=address,undefined"]
    else:
        flags += ["-O3", "-DNDEBUG", "-ffunction-sections", "-fdata-sections"]
        link += ["-Wl,--gc-sections", "-Wl,-s"]
    return Extension(
        "ddflow._native",
        sources=ours + nb_sources,
        include_dirs=[str(HERE / "native"), numpy.get_include(), *nb_includes],
        define_macros=[("NB_COMPACT_ASSERTIONS", None), ("NPY_NO_DEPRECATED_API", "NPY_1_22_API_VERSION")],
        extra_compile_args=flags,
        extra_link_args=link,
        language="c++",
    )


class ParallelBuildExt(build_ext):
    """build_ext that compiles an extension's sources in parallel (setuptools compiles them one by one)."""

    def build_extension(self, ext: Extension) -> None:
        jobs = int(os.environ.get("DDFLOW_BUILD_JOBS", os.cpu_count() or 1))
        compiler = self.compiler
        original = compiler.compile

        def compile_parallel(sources, output_dir=None, macros=None, include_dirs=None, debug=0, extra_preargs=None,
                             extra_postargs=None, depends=None):
            def one(src):
                return original([src], output_dir, macros, include_dirs, debug, extra_preargs, extra_postargs,
                                depends)[0]

            with ThreadPoolExecutor(max(1, jobs)) as pool:
                return list(pool.map(one, sources))

        compiler.compile = compile_parallel
        try:
            # gcc, not cc: the C++ flags; the compiler object compiles .cpp with the C compiler's name otherwise.
            super().build_extension(ext)
        finally:
            compiler.compile = original


setup(ext_modules=[_extension()], cmdclass={"build_ext": ParallelBuildExt})
