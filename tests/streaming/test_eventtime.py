"""Event time through the streaming driver: the watermark, late rows as dead letters, ``mode="final"``, restarts.

Micro-batches shaped like Spark's Kafka rows go through ``process_arrow``
(the same code Spark's ``foreachBatch`` calls).  The oracle is plain
Python over the rows applied: tumbling windows of the rows on time,
counted per auction.
"""
from __future__ import annotations

import json
import random
from collections import Counter

import pyarrow as pa
import pytest

from ddflow.streaming.driver import StreamingDataflow
from ddflow.streaming.sinks import MemorySink

S = 1_000_000
T0 = 1_767_225_600 * S
WIDTH = 4 * S
VIEW = ("SELECT auction, window.start AS ws, window.end AS we, COUNT(*) AS n FROM bids "
        "GROUP BY auction, window(ts, '4 seconds')")


def kafka_rows(values: list[dict], start: int) -> pa.Table:
    n = len(values)
    return pa.table({
        "key": pa.nulls(n, pa.binary()),
        "value": pa.array([json.dumps(v).encode() for v in values], pa.binary()),
        "topic": pa.array(["bids"] * n, pa.string()),
        "partition": pa.array([0] * n, pa.int32()),
        "offset": pa.array(range(start, start + n), pa.int64()),
        "timestamp": pa.array([T0 + i for i in range(start, start + n)], pa.timestamp("us", tz="UTC")),
        "timestampType": pa.array([0] * n, pa.int32()),
    })


def stream(state: str | None = None) -> tuple[StreamingDataflow, MemorySink, MemorySink, MemorySink]:
    changes, final, dead = MemorySink(), MemorySink(), MemorySink()
    s = (StreamingDataflow(name="bids")
         .table("bids", {"auction": "bigint", "ts": "timestamp"}, format="json", time="ts", diff="diff",
                lateness="2 seconds")
         .view("counts", VIEW).view("closed", VIEW)
         .output("counts", changes).output("closed", final, mode="final")
         .deadLetter(dead))
    if state is not None:
        s.stateLocation(state, snapshotEvery=3)
    return s, changes, final, dead


def batches(seed: int, n: int = 12):
    """Bids out of order within 3 s (one second more than the lateness: some are late), a few removed again."""
    rng = random.Random(seed)
    clock, out, offset, sent = T0, [], 0, []
    for _ in range(n):
        clock += rng.randint(0, 2 * S)
        msgs = []
        for _ in range(rng.randint(1, 8)):
            if sent and rng.random() < 0.15:
                m = dict(sent.pop(rng.randrange(len(sent))), diff=-1)
            else:
                m = {"auction": rng.randint(1, 3), "ts": clock - rng.randint(0, 3 * S), "diff": 1}
                sent.append(m)
            msgs.append(m)
        out.append(kafka_rows(msgs, offset))
        offset += len(msgs)
    return out


def windows(applied: Counter, upto: int) -> dict[tuple, int]:
    """Per auction and window [ws, we) of the applied rows with ts < upto: the count (plain Python)."""
    acc: Counter = Counter()
    for (a, ts), m in applied.items():
        if ts < upto:
            acc[(a, ts - ts % WIDTH)] += m
    return {(a, ws, ws + WIDTH, n): 1 for (a, ws), n in acc.items() if n}


def _us(v) -> int:
    return int(pa.scalar(v, pa.timestamp("us")).cast(pa.int64()).as_py()) if not isinstance(v, int) else v


def _keyed(contents: dict) -> dict:
    return {(r[0], _us(r[1]), _us(r[2]), r[3]): m for r, m in contents.items()}


@pytest.mark.parametrize("seed", range(3))
def test_watermark_windows_late_rows_and_final_mode(seed):
    s, changes, final, dead = stream()
    s.open()
    applied: Counter = Counter()
    latest = None
    for b, t in enumerate(batches(seed)):
        frontier_before = s.flow.frontier
        s.process_arrow(t, b)
        for v in t.column("value").to_pylist():
            m = json.loads(v)
            if m["ts"] >= frontier_before:  # not late: applied
                applied[(m["auction"], m["ts"])] += m["diff"]
                latest = max(latest or m["ts"], m["ts"])
        watermark = s.flow.frontier
        assert watermark == max(latest - 2 * S, frontier_before)
        got = _keyed(changes.contents())
        assert {k: v for k, v in got.items()} == windows(applied, watermark), f"batch {b}"
        # final: exactly the windows the watermark passed, each written once with +1
        want_final = {k: v for k, v in windows(applied, watermark).items() if k[2] <= watermark - 1}
        assert _keyed(final.contents()) == want_final
        assert all(d == 1 for d in final.table().column("diff").to_pylist()) if final.table().num_rows else True
    late = dead.table()
    if late.num_rows:
        assert all("late: event time before the watermark" in e for e in late.column("error").to_pylist())


def test_late_rows_are_dead_letters_never_applied_and_never_lost():
    s, changes, final, dead = stream()
    s.process_arrow(kafka_rows([{"auction": 1, "ts": T0 + 10 * S, "diff": 1}], 0), 0)  # watermark T0 + 8 s
    s.process_arrow(kafka_rows([{"auction": 1, "ts": T0 + 7 * S, "diff": 1},
                                {"auction": 2, "ts": T0 + 9 * S, "diff": 1}], 1), 1)
    assert s.flow.frontier == T0 + 8 * S
    letters = dead.table().to_pylist()
    assert len(letters) == 1 and json.loads(letters[0]["value"])["ts"] == T0 + 7 * S
    assert "2000000 us" in letters[0]["error"]
    assert _keyed(changes.contents()) == {}  # no window closed, none of the late row counted anywhere


def test_a_restart_resumes_windows_and_the_watermark_exactly(tmp_path):
    bs = batches(9, n=10)
    ref, ref_changes, ref_final, _ = stream()
    for b, t in enumerate(bs):
        ref.process_arrow(t, b)
    s, changes, final, _ = stream(str(tmp_path / "state"))
    for b, t in enumerate(bs[:6]):
        s.process_arrow(t, b)
    s.stop()
    s2, changes2, final2, _ = stream(str(tmp_path / "state"))
    for b, t in enumerate(bs[6:], start=6):
        s2.process_arrow(t, b)
    assert s2.flow.frontier == ref.flow.frontier
    merged = {**changes.batches, **changes2.batches}
    got = Counter()
    for t in merged.values():
        for r in t.to_pylist():
            got[(r["auction"], _us(r["ws"]), _us(r["we"]), r["n"])] += r["diff"]
    assert {k: v for k, v in got.items() if v} == _keyed(ref_changes.contents())


def test_final_is_refused_for_a_view_whose_rows_never_close():
    s = (StreamingDataflow(name="x")
         .table("bids", {"auction": "bigint", "ts": "timestamp"}, format="json", time="ts", lateness=S)
         .view("all", "SELECT auction, COUNT(*) AS n FROM bids GROUP BY auction")
         .output("all", MemorySink(), mode="final"))
    with pytest.raises(Exception, match="mode='final' needs a query whose rows close"):
        s.open()


def test_lateness_needs_a_timestamp_time_column():
    with pytest.raises(ValueError, match="lateness needs time= to name a timestamp column"):
        StreamingDataflow().table("bids", {"auction": "bigint", "t": "bigint"}, format="json", time="t",
                                  lateness="1 second")
