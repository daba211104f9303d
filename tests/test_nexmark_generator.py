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


@pytest.mark.parametrize("module", ["bench.nexmark.generator", "bench.nexmark.queries", "bench.nexmark.oracle"])
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


# -- the oracle's windows against plain Python -------------------------------------------------------

from collections import Counter  # noqa: E402

from bench.nexmark import oracle  # noqa: E402
from bench.nexmark.queries import LEFT_OUT, NOTES, QUERIES  # noqa: E402


def _bids(rows):
    """A bid table of (bidder, price, ts_us) rows (other columns absent: the oracle reads only what a query names)."""
    b, p, t = zip(*rows) if rows else ((), (), ())
    return {"bid": pa.table({"bidder": pa.array(b, pa.int64()), "price": pa.array(p, pa.int64()),
                             "date_time": pa.array(t, pa.int64()).cast(pa.timestamp("us"))})}


def _hand_made(seed: int, n: int = 60) -> list[tuple[int, int, int]]:
    """Few bidders, times on a coarse grid (ties, rows exactly on window and gap boundaries)."""
    rng = np.random.default_rng(seed)
    return [(int(rng.integers(1, 4)), int(rng.integers(0, 20)), int(rng.integers(0, 40)) * 5) for _ in range(n)]


def _py_windows(rows, size, slide, offset, keep=lambda price: True):
    """Spark's windows by brute force: every start s = offset (mod slide) with s <= ts < s + size."""
    out = Counter()
    for bidder, price, ts in rows:
        if not keep(price):
            continue
        for s in range(-3 * size - abs(offset), ts + 1):
            if (s - offset) % slide == 0 and s <= ts < s + size:
                out[(bidder, s, s + size)] += 1
    return sorted((b, n, s, e) for (b, s, e), n in out.items())


def _py_sessions(rows, gap, keep=lambda price: True, by_bidder=True):
    """Spark's sessions: per key, [ts, ts + gap) intervals sorted by start, merged while start <= current end."""
    groups: dict = {}
    for bidder, price, ts in rows:
        if keep(price):
            groups.setdefault(bidder if by_bidder else None, []).append(ts)
    out = []
    for key, times in groups.items():
        times.sort()
        start, end, n = times[0], times[0] + gap, 1
        for t in times[1:]:
            if t <= end:
                end, n = max(end, t + gap), n + 1
            else:
                out.append((key, n, start, end))
                start, end, n = t, t + gap, 1
        out.append((key, n, start, end))
    return sorted(out, key=lambda r: (r[0] is None, r[0] or 0, r[1:]))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("size,slide,offset", [(10, 10, 0), (10, 5, 0), (10, 3, 0), (10, 2, 1), (7, 7, -3),
                                               (20, 15, 4)])
def test_oracle_windows_match_python(seed, size, slide, offset):
    rows = _hand_made(seed)
    args = f"'{size} microseconds', '{slide} microseconds', '{offset} microseconds'"
    q = (f"SELECT B.bidder, count(*) AS n, window.start AS s, window.end AS e FROM bid B WHERE B.price < 12 "
         f"GROUP BY B.bidder, window(B.date_time, {args})")
    assert oracle.evaluate(q, _bids(rows)) == oracle.bag(_py_windows(rows, size, slide, offset, lambda p: p < 12))
    # The window first in GROUP BY (sqlglot reads `GROUP BY window(` as a WINDOW clause unless told otherwise).
    q2 = (f"SELECT bidder, count(*) AS n, window.start, window.end FROM bid "
          f"GROUP BY window(date_time, {args}), bidder")
    assert oracle.evaluate(q2, _bids(rows)) == oracle.bag(_py_windows(rows, size, slide, offset))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("gap", [1, 5, 10, 25])
def test_oracle_sessions_match_python(seed, gap):
    rows = _hand_made(seed, 40)
    q = (f"SELECT bidder, count(*) AS n, session_window.start, session_window.end FROM bid WHERE price >= 5 "
         f"GROUP BY bidder, session_window(date_time, '{gap} microseconds')")
    assert oracle.evaluate(q, _bids(rows)) == oracle.bag(_py_sessions(rows, gap, lambda p: p >= 5))
    q_all = (f"SELECT NULL AS k, count(*) AS n, session_window.start, session_window.end FROM bid "
             f"GROUP BY session_window(date_time, '{gap} microseconds')")
    assert oracle.evaluate(q_all, _bids(rows)) == oracle.bag(_py_sessions(rows, gap, by_bidder=False))


def test_oracle_session_edges():
    """Exactly gap apart extends the session; a filtered-out row does not bridge two sessions; ties are one session."""
    rows = [(1, 0, 0), (1, 0, 10), (1, 0, 20), (1, 99, 28), (1, 0, 35), (1, 0, 35), (2, 0, 10)]
    q = ("SELECT bidder, count(*) AS n, session_window.start, session_window.end FROM bid WHERE price < 50 "
         "GROUP BY bidder, session_window(date_time, '10 microseconds')")
    assert oracle.evaluate(q, _bids(rows)) == [(1, 2, 35, 45), (1, 3, 0, 30), (2, 1, 10, 20)]


def test_oracle_cutoff_and_units():
    rows = [(1, 0, 0), (1, 0, 1_500_000), (1, 0, 2_000_000)]
    q = "SELECT count(*) AS n, window.start FROM bid GROUP BY window(date_time, '1 second')"
    assert oracle.evaluate(q, _bids(rows)) == [(1, 0), (1, 1_000_000), (1, 2_000_000)]
    assert oracle.evaluate(q, _bids(rows), before_us=2_000_000) == [(1, 0), (1, 1_000_000)]
    assert oracle.duration_us(oracle.sqlglot.parse_one("INTERVAL '10' SECOND")) == 10_000_000
    with pytest.raises(ValueError):
        oracle.duration_us(oracle.exp.Literal.string("10 parsecs"))


def test_every_query_runs_on_the_oracle():
    """All queries translate and run on generated events; the Duck's cutoff equals evaluating the cut tables."""
    assert set(QUERIES) == set(NOTES) and not set(QUERIES) & set(LEFT_OUT)
    t = gen.generate(20_000, seed=5, disorder_us=200_000)
    duck = oracle.Duck()
    for part in gen.batches(20_000, 7_000, seed=5, disorder_us=200_000):
        duck.append(part)
    cut = gen.BASE_TIME_US + 1_234_567
    duck.cutoff(cut)
    sizes = {}
    for name, q in QUERIES.items():
        rows = duck.query(q)
        sizes[name] = len(rows)
        if name in ("q5", "q11", "q12", "q22"):
            assert rows == oracle.evaluate(q, t, before_us=cut), name
    assert all(sizes[q] > 0 for q in QUERIES if q not in ("q2",)), sizes


def test_generated_windows_match_python():
    """q12 (bids per bidder per 10 s window) on generated bids, against plain Python."""
    t = gen.generate(30_000, seed=1, disorder_us=500_000)["bid"]
    ts = t.column("date_time").cast(pa.int64()).to_pylist()
    want = Counter((b, x - x % 10_000_000) for b, x in zip(t.column("bidder").to_pylist(), ts))
    expect = oracle.bag((b, n, s, s + 10_000_000) for (b, s), n in want.items())
    assert oracle.evaluate(QUERIES["q12"], {"bid": t}) == expect


# -- the runner (tiny sizes; it measures nothing here) -----------------------------------------------

import json  # noqa: E402

from bench.nexmark import __main__ as runner  # noqa: E402


def test_runner_checks_and_reports(tmp_path, capsys, monkeypatch):
    """q0, q12 and q16 (date_format) match DuckDB at every checkpoint; a query ddflow refuses (an ARRAY
    aggregate) is reported and the others go on."""
    monkeypatch.setitem(runner.QUERIES, "qx", "SELECT auction, collect_list(price) AS prices FROM bid GROUP BY auction")
    out = tmp_path / "n.jsonl"
    rc = runner.main(["--events", "3000", "--batch", "400", "--disorder-us", "50000", "--checkpoints", "2",
                      "--queries", "q0,qx,q16,q12", "--json", str(out)])
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert rc == 0
    assert [r["query"] for r in lines if "refused" in r] == ["qx"]
    for q in ("q0", "q12", "q16"):
        cps = [r for r in lines if r["query"] == q and r.get("phase") == "checkpoint"]
        assert len(cps) == 2 and all(r["correct"] for r in cps) and cps[-1]["events_done"] == 3000
        assert cps[-1]["rows"] > 0 and cps[-1]["frontier_us"] > cps[0]["frontier_us"]
    assert "| qx |" in capsys.readouterr().out


def test_runner_catches_a_wrong_view(monkeypatch, capsys):
    """A view that loses a row fails its checkpoint (exit 1) with the rows that differ."""
    real = runner.View.upto

    def lossy(self, frontier):
        state = real(self, frontier)
        return {r: m for i, (r, m) in enumerate(state.items()) if i}

    monkeypatch.setattr(runner.View, "upto", lossy)
    rc = runner.main(["--events", "1000", "--batch", "500", "--disorder-us", "0", "--queries", "q12"])
    assert rc == 1
    assert "DuckDB has 1 rows ddflow has not" in capsys.readouterr().out
