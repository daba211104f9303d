"""The contract every reduce tactic keeps, and the output trace they share.

A tactic is a strategy for retiring the times of the keys whose input
changed.  The algebra (what to compute per key) is the node's
:class:`~ddflow.operators.reduce.logic.Logic`; the tactic decides how to
visit times.  Modelled on differential dataflow's ``ReduceTactic``.

Contract.  :meth:`ReduceTactic.step` is called with ``new``, the input
updates complete under ``bound`` (already in the input trace), or None;
a tactic that sets ``takes_unready`` gets all the input dequeued instead,
and keeps the updates not yet complete as its own pending work.
When it returns, for every key ``k`` and every time ``t < bound``
(coordinate-wise):

    sum(out[k, s] for s <= t) == logic(k, sum(in[k, s] for s <= t))

every output update carries a time at which the input of its key
changed or the least upper bound of such times, and every time at which
the output of a key may still change but that is not yet complete is
reported by :meth:`ReduceTactic.work_times` until it is retired.  So a
step with no new input and no reported time complete under ``bound``
retires nothing: the scheduler does not call it
(:meth:`~ddflow.operators.reduce.node.ReduceNode.has_ready_work`).  The
accumulated output at every time fixes the output updates (the updates at
a time are the accumulation there minus the sum of those strictly
before), so any two tactics that keep the contract emit the same
consolidated output over a run.  :class:`~ddflow.operators.reduce.general.GeneralTactic`
keeps it for every logic and depth and is the reference the others are
tested against.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Iterable

import numpy as np

from ddflow.base.kernels import SMALL_ROWS
from ddflow.base.updates import Updates
from ddflow.traces import Trace, TraceHandle
from ddflow.traces.layout import empty_table

if TYPE_CHECKING:
    from ddflow.operators.reduce.logic import Logic
    from ddflow.operators.reduce.node import ReduceNode


#: What a tactic's one-call step reports: done; outside the tactic's contract (a seed at an iteration
#: other than the round); a sum past int64.  The step changes nothing unless it is done.
DONE, BAD_ROUND, OVERFLOW = 0, 1, 2
#: :meth:`ReduceTactic.out_target`'s buffer and table when a kernel has no arena to write to.
_NOWHERE = (np.empty(0, dtype=np.int64), np.empty((0, 1), dtype=np.int64))


class ReduceTactic(ABC):
    """How a reduce node retires times; see the module docstring for the contract."""

    #: :meth:`step` is given all the input dequeued, complete under its bound or not, and keeps
    #: what is not complete as its own work (reported by :meth:`work_times`); otherwise the
    #: node gives it the complete part only and requeues the rest.
    takes_unready = False

    def __init__(self, node: "ReduceNode"):
        self.node = node
        self.out_trace: Trace | None = None
        self.out_handle: TraceHandle | None = None

    @classmethod
    @abstractmethod
    def accepts(cls, logic: "Logic", depth: int) -> bool:
        """Whether this tactic keeps the contract for ``logic`` at times of ``depth``."""

    @abstractmethod
    def step(self, new: Updates | None, bound: np.ndarray) -> None:
        """Retire everything complete under ``bound``; emit through ``self.node``."""

    def work_times(self) -> Iterable[np.ndarray]:
        """Times still to be retired (each an ``(n, depth)`` array)."""
        return ()

    def held_columns(self) -> Iterable[np.ndarray]:
        """Object columns of the output trace; tactics with pending rows add theirs.  O(batches)."""
        return self.out_trace.object_columns() if self.out_trace is not None else []

    def trace_handles(self) -> list[TraceHandle]:
        return [self.out_handle] if self.out_handle is not None else []

    def out_table(self, arity: int) -> np.ndarray:
        """The output trace's table (:class:`ddflow.traces.layout.BatchTable`), empty before any output.  O(1) cached."""
        return self.out_trace.spine.table().matrix if self.out_trace is not None else empty_table(arity)

    def out_target(self, out_kinds: tuple[str, ...]) -> tuple[np.ndarray, int, np.ndarray, int, int]:
        """Where a step's kernel writes an output of a few updates: ``(buf, used, T, at, small)``.

        The output trace's arena (:meth:`ddflow.traces.spine.Spine.arena_room`),
        with room for ``small = SMALL_ROWS`` updates, when the trace exists
        with int64 columns of ``out_kinds``; otherwise nowhere (``small``
        0: the kernel builds a trie, :meth:`output` inserts it).  Call it
        before reading the output's table: making room may merge.  O(1),
        or a merge, or a copy of the table's rows.
        """
        t = self.out_trace
        if t is None or not t.ints or t.kinds != out_kinds:
            return _NOWHERE[0], 0, _NOWHERE[1], 0, 0
        return (*t.spine.arena_room(SMALL_ROWS).target(), SMALL_ROWS)

    def output_written(self, out: Updates, used: int) -> None:
        """Emit ``out``, which the step's kernel wrote into the output trace's arena (leaving ``used`` words used)."""
        self.out_trace.spine.arena_written(used, len(out.diffs))
        self.node.emit(out)

    def output(self, out: Updates, trie: tuple | None = None) -> None:
        """Record consolidated output in the output trace (what later steps subtract) and emit it.

        ``trie``: ``out``'s trie levels and table row, as
        :func:`ddflow.traces.layout.build_trie` returns them, when the kernel
        that made ``out`` built them too (:meth:`ddflow.traces.Trace.insert_trie`).
        """
        node = self.node
        if self.out_trace is None:
            self.out_trace = Trace(out.kinds, node.depth, name=f"{node.name}.output")
            self.out_handle = self.out_trace.reader()
        elif out.kinds != self.out_trace.kinds:
            out, trie = node.ctx.coerce(out, self.out_trace.kinds, node.name), None
        if trie is not None:
            self.out_trace.insert_trie(out, *trie)
        else:
            self.out_trace.insert_updates(out, consolidated=True)
        node.emit(out)
