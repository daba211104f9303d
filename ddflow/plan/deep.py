"""Front-end passes on a deep stack: how SQL and Datalog take deeply nested input without a RecursionError.

A query nests: parentheses, ``NOT``, ``CASE``, subqueries, function calls.
Parsing and planning follow the nesting (sqlglot's parser is a recursive
descent of about 25 Python frames per parenthesis), so Python's default
limit of 1,000 frames gave a bare ``RecursionError`` at 49 nested
parentheses.  The front ends handle nesting in three ways:

- **Chains are flat.**  What a generated query makes long (10,000 AND-ed
  conditions, a 1,000-term sum, an IN list of 100,000 values, a long
  ``||``) is not nesting: the planners read a chain in one loop and build
  one n-ary node (``and``, ``or``, ``concat``, an arithmetic ``chain``,
  ``in``), so its length costs no depth in any pass.  Only true nesting
  does.
- **Nesting is bounded, with a clear error.**  Before anything recursive
  runs, an iterative scan of the tokens (and, for SQL, of the parse tree)
  measures the deepest nesting; past :data:`NESTING_LIMIT` levels the
  text is refused naming the construct, the depth and where it is
  ("parentheses nested 5,000 deep at line 1, column 9,981; the limit is
  1,000").  DuckDB's ``max_expression_depth`` is 1,000 too.
- **Up to the limit, a deep stack.**  The front end runs in a thread with
  a large stack (:data:`STACK_BYTES`) and a recursion limit sized for
  :data:`NESTING_LIMIT` levels (:data:`RECURSION_LIMIT`).  Python 3.11 does
  not use the C stack for Python-to-Python calls, but C calls in between
  (``type()``, builtins with callbacks, dataclass ``__eq__`` through
  tuples) do; the thread's own large stack is what makes the raised limit
  safe.  A RecursionError that still escapes (a construct the scans did
  not foresee) becomes a :class:`~ddflow.errors.SchemaError` saying so.
  Python has one recursion limit per process: while a front end runs,
  other threads see the raised limit too (on their own stacks).

Why these, measured (2 shared cores, heavily loaded, so read ratios):

- Flattening is the only one that makes long chains cheap everywhere.  A
  raised limit alone would have left a 10,000-term sum 10,000 deep in
  every pass, at run time too; and sqlglot's qualifier, which walks from
  each column up to its SELECT, took 401 s on such a sum (quadratic).  The
  SQL planner balances long chains before qualifying (:mod:`ddflow.sql.nesting`)
  and reads them back in order; 10,000 AND-ed conditions now plan in about
  10 s on this loaded machine, a 10,000-term sum in 5 s.
- The parser cannot be made iterative (it is sqlglot's), so its input is
  bounded before it runs: a scan of the tokens is linear and says exactly
  where the text goes too deep.  sqlglot takes about 25 frames per
  parenthesis and 12 per NOT or subquery.
- The deep stack then covers everything between Python's default and the
  limit: planning, rewriting and lowering recurse over the plan (and
  frozen dataclasses compare and hash recursively); rewriting all of them
  with explicit stacks would double the front end for input no one writes
  by hand.  Every construct nested 999 deep planned in a 32 MiB stack;
  :data:`STACK_BYTES` leaves a wide margin.  What runs after planning
  (evaluating an expression on every batch, printing, hashing and
  pickling it for a worker) is iterative (:mod:`ddflow.plan.expr`), and
  long runs of stateless operators are fused (:mod:`ddflow.plan.fused`),
  so a deep query costs nothing at run time.

>>> on_deep_stack(lambda n: (lambda f: f(f, n))(lambda f, k: k if k == 0 else f(f, k - 1)), 20_000)
0
"""
from __future__ import annotations

import sys
import threading
from typing import Callable, TypeVar

from ddflow.errors import SchemaError

T = TypeVar("T")

#: The deepest nesting a query or program may have (parentheses, NOTs, CASEs, subqueries, calls in one another).
NESTING_LIMIT = 1000
#: Python frames a front end may use per level of nesting: sqlglot's parser takes about 25 per parenthesis,
#: planning and rewriting a few more.
FRAMES_PER_LEVEL = 60
#: The recursion limit while a front end runs (on its own thread, with :data:`STACK_BYTES` of stack).
RECURSION_LIMIT = NESTING_LIMIT * FRAMES_PER_LEVEL + 20_000
#: The front end's thread stack: room for :data:`RECURSION_LIMIT` frames with C calls between them (virtual
#: memory; only the pages a deep query touches are ever used).  Every construct nested 999 deep planned in 32 MiB.
STACK_BYTES = 256 << 20
#: A smaller stack tried where the large one cannot be had (a ``ulimit -v``); past both, the front end runs on
#: the caller's thread with Python's own limit, and a RecursionError is the SchemaError it becomes.
FALLBACK_STACK_BYTES = 64 << 20

_lock = threading.Lock()
_state = threading.local()
_active = 0
_saved_limit = 0


def on_deep_stack(fn: Callable[..., T], *args, what: str = "the query", **kw) -> T:
    """``fn(*args, **kw)`` on a thread with a deep stack and a raised recursion limit; its result or its error.

    Re-entrant: called from such a thread, ``fn`` runs there directly.
    ``what`` names the input in the error a RecursionError becomes.
    Cost: one thread start (about 0.1 ms); the stack is virtual memory.
    """
    if getattr(_state, "deep", False):
        return fn(*args, **kw)
    out: dict = {}

    def run() -> None:
        _state.deep = True
        try:
            out["value"] = fn(*args, **kw)
        except RecursionError:
            out["error"] = SchemaError(
                f"{what} is nested too deeply to plan (a construct the nesting checks do not measure went past "
                f"Python's recursion limit); the limit is {NESTING_LIMIT:,} levels of nesting")
        except BaseException as err:  # noqa: BLE001 - re-raised in the caller's thread, unchanged
            out["error"] = err

    worker = _started(run)
    if worker is None:  # no thread of a deep stack to be had: here, within Python's own limit
        run()
        _state.deep = False
    else:
        try:
            while worker.is_alive():
                worker.join(0.1)  # in steps, so Ctrl-C reaches the caller
        finally:
            _restore_limit()
    if "error" in out:
        raise out["error"]
    return out["value"]


def _started(run: Callable[[], None]) -> threading.Thread | None:
    """A started thread running ``run`` on a deep stack (the recursion limit raised for it), or None."""
    _raise_limit()
    for size in (STACK_BYTES, FALLBACK_STACK_BYTES):
        with _lock:  # threading.stack_size is process-wide: set only while this thread starts
            try:
                old = threading.stack_size(size)
            except (ValueError, RuntimeError):
                continue
            try:
                worker = threading.Thread(target=run, name="ddflow-front-end", daemon=True)
                worker.start()
                return worker
            except RuntimeError:  # "can't start new thread": no room for this stack
                continue
            finally:
                threading.stack_size(old)
    _restore_limit()
    return None


def _raise_limit() -> None:
    global _active, _saved_limit
    with _lock:
        if _active == 0:
            _saved_limit = sys.getrecursionlimit()
            sys.setrecursionlimit(max(_saved_limit, RECURSION_LIMIT))
        _active += 1


def _restore_limit() -> None:
    global _active
    with _lock:
        _active -= 1
        if _active == 0:
            sys.setrecursionlimit(_saved_limit)


def too_deep(what: str, depth: int, where: str, source: str = "SQL") -> SchemaError:
    """The refusal of input nested past :data:`NESTING_LIMIT`: the construct, its depth and where it is.

    >>> print(too_deep("parentheses", 5000, " at line 1, column 9"))
    SQL: parentheses nested 5,000 deep at line 1, column 9; the limit is 1,000
    """
    return SchemaError(f"{source}: {what} nested {depth:,} deep{where}; the limit is {NESTING_LIMIT:,}")
