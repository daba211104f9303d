"""Windows over rows of 61 to 127 columns: the two bounds go before the mask, which may need a word more.

A row of 62 columns and its window bounds is 64 columns: its mask grows
from one word to two (and 125 + 2 from two to three).  Checked against a
plain-Python tumbling and hopping window of the same rows, NULLs in every
word included.
"""
from __future__ import annotations

import datetime
import random

import pytest

import ddflow
from ddflow.base.schema import Schema
from ddflow.plan.expr import Col
from ddflow.plan.ir import Scan, Windowed
from ddflow.plan.owner import PlanOwner

S = 1_000_000
EPOCH = datetime.datetime(1970, 1, 1)


@pytest.mark.parametrize("n", [61, 62, 63, 64, 125, 127])
def test_window_bounds_before_a_mask_of_any_width(n):
    rng = random.Random(n)
    names = tuple(f"c{j}" for j in range(n - 1)) + ("ts",)
    schema = Schema(names, ("bigint",) * (n - 1) + ("timestamp",))
    flow = ddflow.Dataflow()
    handle, _ = flow.new_collection("t", schema=dict(zip(names, schema.types)))
    width, slide = 10 * S, 5 * S
    rel = Windowed(Scan("t", schema), Col(n - 1, "timestamp", "ts"), width, slide)
    cap = PlanOwner(flow, rewrite=False).lower(rel).capture()
    rows = []
    for _ in range(12):
        ts = None if rng.random() < 0.2 else EPOCH + datetime.timedelta(microseconds=rng.randrange(0, 40 * S))
        rows.append(tuple(None if rng.random() < 0.3 else rng.randint(0, 3) for _ in range(n - 1)) + (ts,))
    handle.update(rows[:8], times=0)
    handle.update(rows[:3], times=1, diffs=-1)
    handle.update(rows[8:], times=2)
    flow.advance_to(3)
    flow.run()
    for t in range(3):
        live = rows[3:8] if t >= 1 else rows[:8]
        live = live + rows[8:] if t >= 2 else live
        want: dict[tuple, int] = {}
        for r in live:
            if r[-1] is None:
                continue
            us = int((r[-1] - EPOCH).total_seconds()) * S + r[-1].microsecond
            start = us - us % slide
            for s in (start - slide, start):
                if s <= us < s + width:
                    key = r + (EPOCH + datetime.timedelta(microseconds=s), EPOCH + datetime.timedelta(microseconds=s + width))
                    want[key] = want.get(key, 0) + 1
        assert cap.contents(t) == want
