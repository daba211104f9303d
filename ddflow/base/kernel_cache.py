"""numba's disk cache for ddflow's kernels, keyed by everything a kernel's machine code comes from.

numba stamps a cached function with the contents of its own source file
only.  A kernel's machine code also holds the helpers it calls (numba
links them in) and the trace views of :mod:`ddflow.base.address`; after
an edit or an upgrade that touches only a helper's file, numba would load
the old code, silently.  And a cached function records the module name
it was compiled under: a kernel cached while its module ran as a script
(``python -m doctest ddflow/base/columnar.py`` names it ``columnar``)
then fails to load under its package name (``ModuleNotFoundError:
columnar``).

So :func:`njit_cached` stamps a kernel's cache entry with the contents of
every file it compiles from, and names the entry with its module (and
that file set): a script's entry and the package's live side by side.
The entry lives where numba would put it (next to the source, or under
``NUMBA_CACHE_DIR``).  numba is imported on the first compile, never at
import.  Setting ``NUMBA_CACHE_LOCATOR_CLASSES`` replaces numba's
locators, this one included: the stamping is then numba's own.

And numba names each compiled function, and the environment its machine
code reads its constants from, with a counter of the compiling process
(``qualname$7``).  A kernel's helpers are compiled once per kernel
(:func:`ddflow.base.jit.lazy_jit`), so one process can load two
entries, written by two processes, whose copies of a helper carry the
same name: numba then hands the second the first one's environment, and
a constant it needs is missing (``'descr' is NULL`` when it returns an
array) or another one's.  :func:`_distinct_function_ids` starts the
counter at a random point in each process, so names from different
processes do not meet.
"""
from __future__ import annotations

import functools
import hashlib
import inspect
import os
from typing import Callable, Sequence


@functools.lru_cache(maxsize=None)
def _digest(path: str, mtime_ns: int, size: int) -> bytes:
    """SHA-256 of the file at ``path``; the stat fields key the memo, so an edited file is read again."""
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).digest()


def sources_stamp(files: Sequence[str]) -> bytes:
    """One digest of the contents of ``files`` (order-free).  O(total size) once per file version."""
    h = hashlib.sha256()
    for path in sorted(set(files)):
        st = os.stat(path)
        h.update(path.encode() + _digest(path, st.st_mtime_ns, st.st_size))
    return h.digest()


#: Part of every entry's stamp: entries written before function ids were drawn at random
#: (:func:`_distinct_function_ids`) may share names, so they are not read.
ENTRY_FORMAT = b"random-function-ids"
#: Bits of the random start of numba's function counter: two processes' names meet with odds of about
#: (functions compiled)^2 / 2^ID_BITS.
ID_BITS = 48


def _distinct_function_ids() -> None:
    """Start numba's per-process function counter at a random point, past every id it gave out already.

    Called once, before ddflow compiles its first kernel; a forked child
    (a worker) draws again, since it would count on from its parent's
    point.  A numba without the counter (a later release that renamed it)
    is left as it is.  O(1).
    """
    import itertools
    import secrets

    from numba.core import bytecode

    identity = getattr(bytecode, "FunctionIdentity", None)
    if not isinstance(getattr(identity, "_unique_ids", None), itertools.count):
        return

    def draw() -> None:
        identity._unique_ids = itertools.count(next(identity._unique_ids) + (secrets.randbits(ID_BITS) << 8))

    draw()
    os.register_at_fork(after_in_child=draw)


@functools.lru_cache(maxsize=None)
def _cache_class() -> type:
    """numba's function cache, its locator keyed as the module docstring says (built once numba is imported)."""
    from numba.core.caching import CompileResultCacheImpl, FunctionCache

    _distinct_function_ids()

    class Locator:
        """numba's own locator for the kernel's file, stamped with all its files and named with its module."""

        def __init__(self, inner, py_func):
            self._inner, self._files, self._module = inner, py_func._kernel_sources, py_func.__module__
            # The file set names the entry too: a helper compiled for kernels with different uses= lists
            # gets one entry per list, instead of one entry each stamp overwrites in turn.
            self._set = hashlib.sha256("\0".join(self._files).encode()).hexdigest()[:8]

        def __getattr__(self, name):  # what else numba reads of a locator (_py_file when it warns it cannot cache)
            return getattr(self._inner, name)

        @classmethod
        def from_function(cls, py_func, py_file):
            for base in CompileResultCacheImpl._locator_classes:
                inner = base.from_function(py_func, py_file)
                if inner is not None:
                    return cls(inner, py_func)
            return None

        def ensure_cache_path(self):
            self._inner.ensure_cache_path()

        def get_cache_path(self):
            return self._inner.get_cache_path()

        def get_source_stamp(self):
            return sources_stamp(self._files) + ENTRY_FORMAT

        def get_disambiguator(self):
            return f"{self._inner.get_disambiguator()}-{self._module}-{self._set}"

    class Impl(CompileResultCacheImpl):
        _locator_classes = [Locator]

    class KernelCache(FunctionCache):
        _impl_class = Impl

    return KernelCache


def njit_cached(f: Callable, helpers: Sequence[Callable] = (), inline: bool = False) -> Callable:
    """``f`` compiled by numba (``nogil``), cached on disk with the helpers it calls in its stamp.

    ``helpers`` are the plain functions ``f`` calls, directly or through one
    another; their files (and ddflow.base.address's) join ``f``'s file in the
    stamp.  A compiled function passed in is compiled again from its plain
    function.  ``inline``: ``f`` is a helper compiled into the code of the
    kernels that call it (see :func:`ddflow.base.jit.lazy_jit`'s
    ``inline``).  Cost: a dispatcher; compiling waits for the first call.
    """
    from numba import njit

    from ddflow.base import address

    py = getattr(f, "py_func", f)
    py._kernel_sources = tuple(sorted({inspect.getfile(getattr(h, "py_func", h)) for h in (py, *helpers)}
                                      | {inspect.getfile(address)}))
    dispatcher = njit(nogil=True, inline="always" if inline else "never")(py)
    dispatcher._cache = _cache_class()(py)  # what Dispatcher.enable_caching does, with the cache above
    return dispatcher


def entry_kernels() -> dict[str, Callable[[], list]]:
    """Each kernel Python calls, by ``module.name``: a function listing the machine code this process holds of it.

    The kernels of :func:`ddflow.base.kernels.kernels` and every
    :func:`~ddflow.base.jit.lazy_jit` kernel of an imported module.  A
    lazy kernel that another lists in ``uses`` (or ``calls``) is compiled into (or linked with) that one,
    and may be called from Python too (the walks call ``key_walk`` for
    several value fields).  Its list holds the signatures of every
    dispatcher made of it, and ``"in <caller>"`` for each caller that holds
    machine code (compiled or loaded: a caller loaded from the cache leaves
    its helpers' dispatchers without signatures).  What the cache must hold
    for a process to compile nothing: :mod:`ddflow.warmup` checks it.
    O(kernels * helpers).
    """
    from ddflow.base import jit, kernels

    def own(f) -> list[str]:
        return sorted({str(s) for d in jit._dispatchers.get(f, ()) for s in d.signatures})

    def held(f) -> Callable[[], list]:
        return lambda: own(f) + [f"in {c.__name__}" for c, k in jit._lazy.items()
                                 if (f in k.uses or f in k.calls) and own(c)]

    out = {f"{f.__module__}.{f.__name__}": held(f) for f in jit._lazy}
    for name in ("pack", "consolidate", "seek", "consolidate_small", "trie_starts"):
        out[f"ddflow.base.kernels.kernels().{name}"] = (
            lambda name=name: [str(s) for s in getattr(getattr(kernels._compiled, name, None), "signatures", ())])
    return out
