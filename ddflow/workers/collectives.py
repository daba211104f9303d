"""Collectives among the workers: allreduce, reduce-scatter and a tree merge, log2(W) pairwise exchanges each.

Every worker calls the same collectives in the same order (the schedule
is deterministic), so a shared sequence number pairs up their messages.
Where W is not a power of two, the workers beyond the largest power of
two P <= W fold into worker ``me - P`` first and hear back last.  No
central coordinator: each step is one message to one partner.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ddflow.base.updates import Updates
from ddflow.workers.transport import Channel, Message


class Collectives:
    """One worker's side of the collectives.  ``wait(done, work)`` blocks on its sockets until ``done()``."""

    def __init__(self, me: int, workers: int, peers: dict[int, Channel],
                 wait: Callable[[Callable[[], bool], Callable[[], None] | None], None]):
        self.me = me
        self.W = workers
        self.P = 1 << (workers.bit_length() - 1)  # the largest power of two <= W
        self.peers = peers
        self.wait = wait
        #: Arrived collective messages, one per (kind, sequence number).
        self.messages: dict[tuple[str, int], Message] = {}
        self.seq = 0

    def deliver(self, m: Message) -> None:
        """A collective message from a peer."""
        self.messages[(m.kind, m.meta[0])] = m

    def _next_seq(self) -> int:
        self.seq += 1
        return self.seq - 1

    def _await(self, kind: str, seq: int, work: Callable[[], None] | None = None) -> Message:
        key = (kind, seq)
        self.wait(lambda: key in self.messages, work)
        return self.messages.pop(key)

    def allreduce(self, value: int, op: Callable[[int, int], int]) -> int:
        """``op`` over every worker's ``value``, known to all, by recursive doubling.

        ``op`` must be commutative and associative (partners combine in opposite orders).
        """
        seq, me, W, P = self._next_seq(), self.me, self.W, self.P
        if me >= P:
            self.peers[me - P].send(Message("fold", (seq, value)))
            return self._await("unfold", seq).meta[1]
        if me + P < W:
            value = op(value, self._await("fold", seq).meta[1])
        k = 1
        while k < P:
            self.peers[me ^ k].send(Message(f"ar{k}", (seq, value)))
            value = op(value, self._await(f"ar{k}", seq).meta[1])
            k <<= 1
        if me + P < W:
            self.peers[me + P].send(Message("unfold", (seq, value)))
        return value

    def reduce_scatter(self, counts: np.ndarray, work: Callable[[], None] | None = None) -> int:
        """The sum over all workers of their ``counts[me]``, by recursive halving.

        ``counts`` has one entry per destination worker.  Each of the P core
        workers answers for itself and its folded partner, so the vector is
        P rows of two; at every step a worker keeps the half of the rows that
        holds its own and sends the other half to its partner: messages
        shrink from P/2 rows to one.
        """
        seq, me, W, P = self._next_seq(), self.me, self.W, self.P
        if me >= P:
            self.peers[me - P].send(Message("rsfold", (seq, counts.tolist())))
            return self._await("rsunfold", seq, work).meta[1]
        rows = np.zeros((P, 2), dtype=np.int64)
        rows[:, 0] = counts[:P]
        rows[: W - P, 1] = counts[P:]
        if me + P < W:
            theirs = np.asarray(self._await("rsfold", seq, work).meta[1], dtype=np.int64)
            rows[:, 0] += theirs[:P]
            rows[: W - P, 1] += theirs[P:]
        lo, k = 0, P // 2  # rows [lo, lo + 2k) are this worker's block
        while k:
            keep, give = (lo + k, lo) if me & k else (lo, lo + k)
            self.peers[me ^ k].send(Message(f"rs{k}", (seq, rows[give : give + k].tolist())))
            rows[keep : keep + k] += np.asarray(self._await(f"rs{k}", seq, work).meta[1], dtype=np.int64)
            lo, k = keep, k // 2
        if me + P < W:
            self.peers[me + P].send(Message("rsunfold", (seq, int(rows[me, 1]))))
        return int(rows[me, 0])

    def merge_up(self, outs: dict[int, Updates], merge: Callable[[Updates, Updates, int], Updates]) -> dict[int, Updates]:
        """Merge every worker's outputs pairwise up a binomial tree; worker 0 ends with the total.

        At level k (1, 2, 4, ...) a worker with bit k set sends what it holds
        to ``me - k`` and is done; the others merge in what ``me + k`` sends.
        """
        seq, me = self._next_seq(), self.me
        held = dict(outs)
        k = 1
        while k < self.W:
            if me & k:
                ids = sorted(held)
                self.peers[me - k].send(Message(f"merge{k}", (seq, ids), [held[i] for i in ids]))
                return {}
            if me + k < self.W:
                m = self._await(f"merge{k}", seq)
                for nid, u in zip(m.meta[1], m.batches):
                    held[nid] = merge(held[nid], u, nid) if nid in held else u
            k <<= 1
        return held
