"""Lazy compilation: a kernel compiled by numba on its first call, together with the plain helpers it calls.

Why lazy: an operator module stays importable without numba, ``import
ddflow`` compiles nothing, and a kernel nobody calls is never compiled.
``DDFLOW_JIT=0`` runs every kernel as the plain Python it is written in
(slow; for debugging and for checking kernels against themselves).
numba's disk cache, and what stamps its entries, is
:mod:`ddflow.base.kernel_cache`.

A kernel lists in ``uses`` the helpers it calls, directly or through one
another (:func:`helpers_of` gathers them), so that one operator step can
be one compiled call made of many functions.
"""
from __future__ import annotations

import os
from typing import Callable, Sequence


def jit_enabled() -> bool:
    """Whether kernels run compiled (``DDFLOW_JIT=0`` turns it off)."""
    return os.environ.get("DDFLOW_JIT", "1") != "0"


def init_compiler() -> None:
    """Build numba's typing and target contexts in this process now, once (about half a second).

    Why: numba builds them at a process's first kernel, importing and
    registering its implementations.  A process forked after this call
    inherits them; one forked before pays for them again in each child at
    its first kernel (1.1-1.3 s a worker, two forked workers measured;
    ``bench/README.md``, "A forked worker's first kernel").  Nothing under
    ``DDFLOW_JIT=0``.  O(1) after the first call.
    """
    if not jit_enabled():
        return
    from numba.core.registry import cpu_target

    from ddflow.base.address import register_views

    register_views()  # the views' overloads join the contexts built next
    cpu_target.target_context.refresh()  # refreshes the typing context too


def lazy_jit(f: Callable | None = None, *, uses: Sequence[Callable] = (), inline: Sequence[Callable] = (),
             calls: Sequence[Callable] = ()) -> Callable:
    """``f`` compiled by numba on its first call (plain Python under ``DDFLOW_JIT=0``).

    For operator kernels that live next to their operator: the operator
    module stays importable without numba, and nothing compiles before use.
    ``uses`` lists the plain helpers ``f`` calls, directly or through one
    another (such as :func:`ddflow.base.kernels.sorted_unique`); they are
    compiled with it, as copies whose names for one another are the
    compiled copies (:func:`_compile_with`).  The modules' own names are
    left alone, so Python calling a helper kernel (the walks call
    ``key_walk``) always calls that kernel's own compiled code, whichever
    caller compiled first.  ``inline``: those of ``uses`` compiled into
    ``f``'s code, not called (numba's ``inline="always"``): for small
    helpers its inner loop calls once a row.  A helper compiled on its own
    is a call that takes and releases a reference to each array it is
    passed.  Inlining is the kernel's choice, not the helper's: the merges'
    per-row helpers, inlined, merged batches of a loop's traces 1.1-1.3x
    and of top-level traces 1.5-2.1x faster, while components' walk, with
    two of them inlined as well, ran 1.1-1.2x slower in two runs; and
    inlining every helper everywhere doubled reach's compile time
    (``bench/README.md``, twenty-third slice).
    ``calls``: lazy kernels ``f`` calls as they are, their own compiled
    code (compiled first if need be) instead of copies compiled for ``f``:
    for a kernel made of whole kernels (:func:`ddflow.operators.round.loop_round`),
    whose copies would cost their compile time again.  Their files join
    ``f``'s cache stamp.
    Cost: nothing until the first call, which compiles or loads from the
    cache (seconds, or milliseconds); then numba's dispatch, under a
    microsecond.

    >>> def twice(x):
    ...     return 2 * x
    >>> kernel = lazy_jit(uses=(twice,))(lambda x: twice(x) + 1)
    >>> kernel.plain(3), [h.__name__ for h in kernel.uses]
    (7, ['twice'])
    """
    if f is None:
        return lambda g: lazy_jit(g, uses=uses, inline=inline, calls=calls)
    # A compiled helper (kernels() binds its compiled group_sums in its module) is taken from its plain function.
    uses = tuple(getattr(h, "py_func", h) for h in uses)
    inline = frozenset(getattr(h, "py_func", h) for h in inline)
    if not inline <= set(uses):
        raise ValueError(f"{f.__name__}: inline names helpers that uses does not list")
    calls = tuple(calls)
    compiled = None

    def dispatcher() -> Callable:
        """The compiled kernel (compiled or loaded now if need be; ``f`` itself under ``DDFLOW_JIT=0``)."""
        nonlocal compiled
        if compiled is None:
            if jit_enabled():
                from ddflow.base.address import register_views

                register_views()
                compiled = _compile_with(f, uses, inline, calls)
            else:
                compiled = f
        return compiled

    def call(*args):
        return (compiled if compiled is not None else dispatcher())(*args)

    if _native_check(f):
        call = _checked_against_native(f, call)

    call.__name__, call.__doc__, call.plain, call.uses, call.dispatcher = f.__name__, f.__doc__, f, uses, dispatcher
    call.calls = tuple(k.plain for k in calls)
    _lazy[f] = call
    return call


#: Kernels whose native twin is not compared under DDFLOW_NATIVE_CHECK: they write through the addresses in their
#: arguments (a copy of the table would still point at the caller's buffers), so running both would write twice.
NATIVE_CHECK_SKIP = frozenset(("arena_insert", "insert_fields", "join_table_into", "feedback_round_into",
                               "loop_round", "write_trie"))


#: Kernels whose result holds, at this index, a table row (:func:`traces.layout.trie_row`) of arrays the kernel made:
#: its addresses differ between the two runs, so DDFLOW_NATIVE_CHECK compares what they can (the counts, and which
#: address fields are set); the kernels' tests check that each row describes its own arrays.
NATIVE_CHECK_ROWS = {"trie_with_row": 4, "merge_pair": 6, "merge_table": 6, "walk_step": 7, "walk_step_kept": 7,
                     "loop_step": 7}

#: Kernels that may write a batch into an arena (:func:`traces.arena.write_trie`): the positions of the arena's
#: buffer and table among their arguments (``used`` follows the buffer, the row ``at`` the table; the words used
#: come last in the result).  The row written holds addresses into the buffer, the caller's or its copy's:
#: DDFLOW_NATIVE_CHECK compares that row with them as offsets into it.
NATIVE_CHECK_ARENAS = {"walk_step": (10, 12), "walk_step_kept": (10, 12), "loop_step": (9, 11)}


def _native_check(f: Callable) -> bool:
    """Whether DDFLOW_NATIVE_CHECK asks to check kernel ``f``: ``1`` every kernel, or a comma-separated list of the
    layers to check (``traces,graph,base``: a port's own kernels while another layer's are half done)."""
    wanted = os.environ.get("DDFLOW_NATIVE_CHECK", "")
    if wanted in ("", "0"):
        return False
    if wanted == "1":
        return True
    from ddflow.base.native import layer_of

    return layer_of(f.__module__) in wanted.split(",")


def _checked_against_native(f: Callable, call: Callable) -> Callable:
    """While the kernels move to native code: ``call``, then the native twin on copies of the same arguments, and an
    AssertionError naming the kernel where the results (or the arguments written in place) differ.

    ``DDFLOW_NATIVE_CHECK=1`` turns it on (for the port's differential tests: any engine test becomes a check
    of every native kernel it reaches, on the engine's own inputs).  A kernel without a twin yet runs alone.
    """
    import numpy as np

    from ddflow.base.native import layer_of

    layer = layer_of(f.__module__)
    name = f.__name__.lstrip("_")
    twin = None

    def copy(a):
        if isinstance(a, np.ndarray):
            # What the native twin will be handed after the flip: C-contiguous (else its binding refuses it), and
            # read-only where the caller's array is (a twin that writes into it would be refused too).
            assert a.flags.c_contiguous, f"native {layer}.{name} would refuse an argument that is not C-contiguous"
            c = np.array(a, copy=True)
            c.flags.writeable = a.flags.writeable
            return c
        if isinstance(a, tuple):
            return tuple(copy(x) for x in a)
        return a

    def same(a, b, where):
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            a, b = np.asarray(a), np.asarray(b)
            ok = a.shape == b.shape and (a.dtype == b.dtype or (a.size == 0 and b.size == 0)) and \
                np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
            assert ok, f"native {layer}.{name} differs from the reference at {where}: {a!r} != {b!r}"
        elif isinstance(a, tuple) and isinstance(b, tuple):
            assert len(a) == len(b), f"native {layer}.{name}: {len(b)} results, the reference {len(a)}"
            for i, (x, y) in enumerate(zip(a, b)):
                same(x, y, f"{where}[{i}]")
        else:
            assert a == b or (a != a and b != b), f"native {layer}.{name} differs at {where}: {a!r} != {b!r}"

    def checked(*args):
        nonlocal twin
        if twin is None:
            from ddflow.base.native import native_module

            space = native_module()
            for part in layer.split("."):
                space = getattr(space, part, None)
            twin = getattr(space, name, False) if name not in NATIVE_CHECK_SKIP else False
        if twin is False:
            return call(*args)
        mine = tuple(copy(a) for a in args)
        out = call(*args)
        got = twin(*mine)
        at = NATIVE_CHECK_ROWS.get(name)
        if at is None:
            same(out, got, "the result")
        else:  # a table row: the counts (its first 3 fields) and which addresses are set
            row = lambda r: np.concatenate([r[:3], r[3:] != 0]) if len(r) else r  # noqa: E731
            same(row(out[at]), row(got[at]), f"the result's table row [{at}]")
            same(out[:at] + out[at + 1:], got[:at] + got[at + 1:], "the result (but its row)")
        arena = NATIVE_CHECK_ARENAS.get(name)
        for i, (a, b) in enumerate(zip(args, mine)):
            if isinstance(a, np.ndarray) and a.flags.writeable:
                if arena is not None and i == arena[1] and out[-1] != args[arena[0] + 1]:
                    # the arena's table, a batch written (the words used changed): row `at`'s addresses as offsets
                    a, b = in_buffer(a, args[arena[0]], args[i + 1]), in_buffer(b, mine[arena[0]], args[i + 1])
                same(a, b, f"argument {i} after the call")
        return out

    def in_buffer(T, buf, at):
        if not 0 <= at < len(T):
            return T
        T, base = T.copy(), buf.ctypes.data
        inside = (T[at] >= base) & (T[at] < base + buf.nbytes)
        T[at] = np.where(inside, T[at] - base, T[at])
        return T

    for attr in ("__name__", "__doc__"):
        setattr(checked, attr, getattr(call, attr))
    return checked


def _compile_with(f: Callable, uses: tuple, inline: frozenset = frozenset(), calls: tuple = ()) -> Callable:
    """A dispatcher for ``f`` whose calls to ``uses`` reach compiled copies made for it alone.

    numba resolves a kernel's global names when it compiles, so the helpers
    must be compiled where ``f`` looks them up.  Binding them in their
    modules (as this once did) made a module's name for a helper kernel
    the dispatcher of whichever caller compiled first; each such dispatcher
    is cached under its caller's file set, so a process meeting the callers
    in another order than the warm-up compiled again, for seconds.  So ``f``
    and each helper are copied, with a copy of their module's globals in
    which the helpers' names are the helpers' dispatchers (those in
    ``inline`` compiled into their callers).  O(helpers + module sizes),
    once per kernel.
    """
    from types import FunctionType

    from ddflow.base.kernel_cache import njit_cached

    spaces: dict[int, dict] = {}
    copies = {}
    for g in (f, *uses):
        space = spaces.setdefault(id(g.__globals__), dict(g.__globals__))
        c = FunctionType(g.__code__, space, g.__name__, g.__defaults__, g.__closure__)
        c.__qualname__, c.__kwdefaults__, c.__doc__ = g.__qualname__, g.__kwdefaults__, g.__doc__
        c.__dict__.update(g.__dict__)
        copies[g] = c
    jitted = {h.__name__: njit_cached(copies[h], uses, h in inline) for h in uses}
    for h in uses:
        _dispatchers.setdefault(h, []).append(jitted[h.__name__])
    for space in spaces.values():
        space.update({name: d for name, d in jitted.items() if name in space})
    spaces[id(f.__globals__)].update({k.__name__: k.dispatcher() for k in calls})
    _dispatchers.setdefault(f, []).append(dispatcher := njit_cached(copies[f], (*uses, *helpers_of(*calls))))
    return dispatcher


#: Each lazy kernel by its plain function, and every dispatcher compiled of a plain function (for
#: a kernel that another compiles as its helper, and for :func:`ddflow.base.kernel_cache.entry_kernels`).
_lazy: dict = {}
_dispatchers: dict = {}


def helpers_of(*fs: Callable) -> tuple:
    """The plain functions a kernel calling each of ``fs`` must list in its ``uses``.

    A :func:`lazy_jit` kernel contributes its plain function and its own
    ``uses``; a plain helper contributes itself and any helpers it names in
    a ``uses`` attribute of its own.  What lets one kernel call
    several others, so that an operator's step is one compiled call.

    >>> def twice(x):
    ...     return 2 * x
    >>> [f.__name__ for f in helpers_of(lazy_jit(uses=(twice,))(lambda x: twice(x) + 1))]
    ['<lambda>', 'twice']
    """
    out: dict = {}
    for f in fs:
        for h in (getattr(f, "plain", f), *getattr(f, "uses", ())):
            out.setdefault(getattr(h, "py_func", h), None)
    return tuple(out)
