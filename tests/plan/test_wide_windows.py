"""Windows and sessions over rows of 61 to 127 columns: the two bounds go before the mask, which may need a word more.

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
from ddflow.plan.ir import Scan, Sessionized, Windowed
from ddflow.plan.owner import PlanOwner

S = 1_000_000
EPOCH = datetime.datetime(1970, 1, 1)


def _us(ts: datetime.datetime) -> int:
    d = ts - EPOCH
    return (d.days * 86_400 + d.seconds) * S + d.microseconds


def _at(us: int) -> datetime.datetime:
    return EPOCH + datetime.timedelta(microseconds=us)


def _hopping(live: list[tuple], width: int, slide: int) -> dict[tuple, int]:
    want: dict[tuple, int] = {}
    for r in live:
        if r[-1] is None:
            continue
        us = _us(r[-1])
        for s in range(us - us % slide - width, us + 1, slide):
            if s <= us < s + width:
                want[r + (_at(s), _at(s + width))] = want.get(r + (_at(s), _at(s + width)), 0) + 1
    return want


def _sessions(live: list[tuple], gap: int) -> dict[tuple, int]:
    """Per key (column 0, NULL a key too): times at most ``gap`` apart share a session ``[first, last + gap)``."""
    want: dict[tuple, int] = {}
    for key in {r[0] for r in live}:
        rows = sorted((r for r in live if r[0] == key and r[-1] is not None), key=lambda r: _us(r[-1]))
        runs: list[list[tuple]] = []
        for r in rows:
            if runs and _us(r[-1]) - _us(runs[-1][-1][-1]) <= gap:
                runs[-1].append(r)
            else:
                runs.append([r])
        for run in runs:
            bounds = (run[0][-1], _at(_us(run[-1][-1]) + gap))
            for r in run:
                want[r + bounds] = want.get(r + bounds, 0) + 1
    return want


@pytest.mark.parametrize("n", [61, 62, 63, 64, 125, 127])
@pytest.mark.parametrize("kind", ["window", "session"])
def test_window_and_session_bounds_before_a_mask_of_any_width(n, kind):
    rng = random.Random(n)
    names = tuple(f"c{j}" for j in range(n - 1)) + ("ts",)
    schema = Schema(names, ("bigint",) * (n - 1) + ("timestamp",))
    flow = ddflow.Dataflow()
    handle, _ = flow.new_collection("t", schema=dict(zip(names, schema.types)))
    width, slide, gap = 10 * S, 5 * S, 3 * S
    ts = Col(n - 1, "timestamp", "ts")
    rel = (Windowed(Scan("t", schema), ts, width, slide) if kind == "window"
           else Sessionized(Scan("t", schema), (Col(0, "bigint", "c0"),), ts, gap))
    cap = PlanOwner(flow, rewrite=False).lower(rel).capture()
    rows = []
    for _ in range(12):
        at = None if rng.random() < 0.2 else _at(rng.randrange(0, 40) * S // 2)
        rows.append(tuple(None if rng.random() < 0.3 else rng.randint(0, 1 if kind == "session" else 3)
                          for _ in range(n - 1)) + (at,))
    handle.update(rows[:8], times=0)
    handle.update(rows[:3], times=1, diffs=-1)
    handle.update(rows[8:], times=2)
    flow.advance_to(3)
    flow.run()
    for t, live in enumerate((rows[:8], rows[3:8], rows[3:])):
        want = _hopping(live, width, slide) if kind == "window" else _sessions(live, gap)
        assert want and cap.contents(t) == want
