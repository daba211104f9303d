"""Nexmark's generator (proportions, ids, hot ratios, determinism, bounded disorder) and its DuckDB oracle.

The oracle's translation of Spark's ``window`` and ``session_window`` is
checked against a plain-Python evaluation of the windows on small
hand-made inputs, so the oracle the benchmark trusts is itself proven.
"""
from __future__ import annotations

import doctest

import numpy as np
import pyarrow as pa
import pytest

from bench.nexmark import generator as gen

FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


@pytest.mark.parametrize("module", ["bench.nexmark.generator"])
def test_doc_examples(module):
    import importlib

    result = doctest.testmod(importlib.import_module(module), optionflags=FLAGS)
    assert result.failed == 0 and result.attempted > 0


# -- the generator ---------------------------------------------------------------------------------


def test_proportions_and_ids():
    t = gen.generate(5000, seed=2, disorder_us=20_000)
    assert {k: v.num_rows for k, v in t.items()} == {"person": 100, "auction": 300, "bid": 4600}
    for name in gen.TABLES:
        assert t[name].schema == gen.ARROW_SCHEMAS[name]
    assert sorted(t["person"].column("id").to_pylist()) == list(range(1000, 1100))
    assert sorted(t["auction"].column("id").to_pylist()) == list(range(1000, 1300))
    # Every block of 50 events holds 1 person, 3 auctions and 46 bids (by event time, before disorder).
    for name, per in (("person", 1), ("auction", 3), ("bid", 46)):
        ts = np.array(t[name].column("date_time").cast(pa.int64()).to_pylist()) - gen.BASE_TIME_US
        block = ts // (50 * 100)  # 100 us per event at the default rate
        assert (np.bincount(block) == per).all()
    cat = np.array(t["auction"].column("category").to_pylist())
    assert set(cat.tolist()) == {10, 11, 12, 13, 14}
    a = t["auction"]
    assert (np.array(a.column("reserve").to_pylist()) > np.array(a.column("initial_bid").to_pylist())).all()
    expires = np.array(a.column("expires").cast(pa.int64()).to_pylist())
    assert (expires > np.array(a.column("date_time").cast(pa.int64()).to_pylist())).all()


def test_hot_ratios():
    """Hot auctions 1/2 of bids, hot bidders 3/4, hot sellers 3/4 of auctions (plus the random draws that hit them)."""
    n = np.arange(200_000, dtype=np.int64)
    b = n[n % 50 >= 4]
    bids = gen.bids(b)
    hot_auction = (gen.last_auction(b) // 100) * 100 + gen.FIRST_AUCTION_ID
    hot_bidder = (gen.last_person(b) // 100) * 100 + 1 + gen.FIRST_PERSON_ID
    assert 0.49 < np.mean(np.array(bids.column("auction").to_pylist()) == hot_auction) < 0.53
    assert 0.74 < np.mean(np.array(bids.column("bidder").to_pylist()) == hot_bidder) < 0.77
    hot_channel = np.isin(np.array(bids.column("channel").to_pylist(), dtype=object), gen.HOT_CHANNELS)
    assert 0.49 < hot_channel.mean() < 0.51
    a = n[(n % 50 >= 1) & (n % 50 < 4)]
    hot_seller = (gen.last_person(a) // 100) * 100 + gen.FIRST_PERSON_ID
    assert 0.74 < np.mean(np.array(gen.auctions(a).column("seller").to_pylist()) == hot_seller) < 0.77


def test_deterministic_by_seed_and_chunking():
    one = gen.generate(3000, seed=7, disorder_us=30_000)
    assert all(one[k].equals(gen.generate(3000, seed=7, disorder_us=30_000)[k]) for k in gen.TABLES)
    assert not one["bid"].equals(gen.generate(3000, seed=8, disorder_us=30_000)["bid"])
    for size in (1, 37, 1000, 5000):
        parts = list(gen.batches(3000, size, seed=7, disorder_us=30_000))
        assert [sum(t.num_rows for t in p.values()) for p in parts][:-1] == [size] * (len(parts) - 1)
        for k in gen.TABLES:
            assert pa.concat_tables([p[k] for p in parts]).equals(one[k])
    orders = [np.concatenate(list(gen.arrival_order(3000, 7, 10_000, 30_000, chunk))) for chunk in (1, 64, 5000)]
    assert all((o == orders[0]).all() for o in orders)
    assert sorted(orders[0].tolist()) == list(range(3000))


@pytest.mark.parametrize("disorder", [0, 1, 2_500, 100_000])
def test_disorder_is_bounded(disorder):
    """In arrival order no event is more than ``disorder`` microseconds older than one that arrived before it."""
    order = np.concatenate(list(gen.arrival_order(20_000, 1, 10_000, disorder, chunk=777)))
    ts = gen.event_time(order)
    behind = np.maximum.accumulate(ts)[:-1] - ts[1:]
    assert behind.max() <= disorder
    if disorder >= 2_500:
        assert behind.max() > disorder // 2  # it does shuffle, close to the bound
    if disorder == 0:
        assert (order == np.arange(20_000)).all()
    # Per batch: the frontier (largest event time seen - disorder) never passes a later event.
    seen = None
    for b in gen.batches(20_000, 333, seed=1, disorder_us=disorder):
        ts = np.concatenate([t.column("date_time").cast(pa.int64()).to_numpy() for t in b.values()])
        if seen is not None:
            assert ts.min() >= seen - disorder
        seen = max(seen or ts.max(), ts.max())
