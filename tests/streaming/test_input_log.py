"""The input log holds what the inputs applied: random update streams, restarted anywhere, give what no restart gives.

Random micro-batches of edge updates (removals of absent edges, diffs of 2
and past int64, times that straddle batches under ``before-max``) go
through a query that never stops and through one restarted from its state
after random batches, with snapshots every 1 to 3 batches.  Every batch
after a restart must give the uninterrupted query's output changes and dead
letters exactly: the log, less what the inputs rejected (removed from the
batch's log, or cancelled when an earlier batch logged it), restores the
same counts and the same updates still to be checked, in the same order.
"""
from __future__ import annotations

import json

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ddflow
from ddflow.errors import SchemaError
from ddflow.streaming.driver import StreamingDataflow
from ddflow.streaming.sinks import MemorySink

BIG = (1 << 62) + 1


def build(flow: ddflow.Dataflow):
    h, edges = flow.new_collection("edges", schema=("i", "i"))
    return {"edges": h}, {"deg": edges.project(0).count(), "edges": edges.consolidate()}


def stream(policy: str, state: str | None = None, every: int = 1) -> StreamingDataflow:
    s = (StreamingDataflow(build).input("edges", fields=["src", "dst"], format="json", time="t", diff="diff")
         .output("deg", MemorySink(), names=["src", "n"]).output("edges", MemorySink(), names=["src", "dst"])
         .deadLetter(MemorySink()).frontierPolicy(policy))
    return s.stateLocation(state, snapshotEvery=every) if state is not None else s


def rows(msgs: list[dict], start: int) -> pa.Table:
    n = len(msgs)
    return pa.table({"value": pa.array([json.dumps(m).encode() for m in msgs], pa.binary()),
                     "topic": ["edges"] * n, "partition": pa.array([0] * n, pa.int32()),
                     "offset": list(range(start, start + n))})


#: (src, dst, time past the batch's index, diff); diffs past int64 only for edge (3, 3), whose count is its own
#: multiplicity (a count over several such edges would overflow downstream, which fails the run by design).
UPDATE = st.one_of(st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 2),
                             st.sampled_from([1, 1, 1, -1, -1, 2, -2])),
                   st.tuples(st.just(3), st.just(3), st.integers(0, 2), st.sampled_from([BIG, -BIG, 1, -1])))
BATCHES = st.lists(st.lists(UPDATE, min_size=1, max_size=6), min_size=2, max_size=7)


def batches_of(drawn: list) -> list[pa.Table]:
    """Each batch's times start at the batch's index (so some straddle the previous batch's largest time)."""
    out, offset = [], 0
    for b, ups in enumerate(drawn):
        msgs = [{"src": s, "dst": d, "t": b + dt, "diff": diff} for s, d, dt, diff in ups]
        out.append(rows(msgs, offset))
        offset += len(msgs)
    return out


def outputs(s: StreamingDataflow, b: int) -> tuple:
    dead = s.dead_letter.batches.get(b)
    return (tuple(s.outputs[n].sink.batches[b].to_pylist().__repr__() for n in ("deg", "edges")),
            [(r["error"], r["offset"], r["value"]) for r in dead.to_pylist()] if dead is not None else [])


def outcome(s: StreamingDataflow, b: int, t: pa.Table) -> tuple:
    """Batch ``b``'s output changes and dead letters, or the refusal of a batch whose diffs add up past int64."""
    try:
        s.process_arrow(t, b)
    except SchemaError as e:
        return ("refused", str(e))
    return outputs(s, b)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(BATCHES, st.sampled_from(["after-batch", "before-max"]), st.integers(1, 3), st.data())
def test_random_streams_restarted_anywhere_give_what_no_restart_gives(tmp_path_factory, drawn, policy, every, data):
    """A batch the uninterrupted query refuses (a sum past int64 in one record and time) is refused the same way
    after restarts, and both stop there."""
    batches = batches_of(drawn)
    restarts = data.draw(st.sets(st.integers(1, len(batches) - 1), max_size=2))
    ref = stream(policy)
    expected = []
    for b, t in enumerate(batches):
        expected.append(outcome(ref, b, t))
        if expected[-1][0] == "refused":
            break
    state = str(tmp_path_factory.mktemp("state"))
    s = stream(policy, state, every)
    for b, want in enumerate(expected):
        if b in restarts:
            s.stop()
            s = stream(policy, state, every)
        assert outcome(s, b, batches[b]) == want, (b, restarts)
