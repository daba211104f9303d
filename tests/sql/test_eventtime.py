"""Event time in SQL against DuckDB: windows, sessions and temporal filters, exact at every complete time.

Random streams of bids arrive out of order within a lateness; some are
removed again (at their own event time, before the frontier passes it).
After every run, at every data time of the batch and at the frontier, the
accumulated output of each view equals DuckDB's from-scratch evaluation of
the same query on the rows accumulated by then (``now()`` replaced by
that time).  Window bounds are compared as microseconds.
"""
from __future__ import annotations

import datetime
import random
from collections import Counter

import duckdb
import pyarrow as pa
import pytest

import ddflow
from ddflow.base.schema import timestamp_micros
from tests.oracle import sql_bag

S = 1_000_000  # one second in microseconds
T0 = 1_767_225_600 * S  # 2026-01-01 00:00:00 UTC

AGGS = {  # ddflow (Spark SQL) aggregate -> the same in DuckDB
    "COUNT(*)": "COUNT(*)", "SUM(price)": "SUM(price)", "MIN(price)": "MIN(price)", "MAX(price)": "MAX(price)",
    "AVG(price)": "AVG(price)", "COUNT(DISTINCT price)": "COUNT(DISTINCT price)",
}


def _us(v):
    return timestamp_micros(v) if isinstance(v, datetime.datetime) else v


def _stream(rng: random.Random, batches: int, per_batch: int, lateness: int, spread: int):
    """Steps of ``(rows, diffs, frontier)``: bids ``(auction, price, ts_us)`` out of order within ``lateness``."""
    clock, live, steps = T0, [], []
    for _ in range(batches):
        clock += rng.randint(0, spread)
        rows, diffs = [], []
        for _ in range(per_batch):
            ts = clock - rng.randint(0, lateness)  # behind the latest event, never behind the frontier
            if live and rng.random() < 0.2:
                r = live.pop(rng.randrange(len(live)))
                if r[2] >= clock - lateness:  # still open: a removal at its own event time
                    rows.append(r)
                    diffs.append(-1)
                continue
            r = (rng.randint(1, 3), rng.choice([None, 1, 2, 5, 7, 10]), max(ts, clock - lateness))
            rows.append(r)
            diffs.append(1)
            live.append(r)
        steps.append((rows, diffs, clock - lateness + 1))
    return steps


def _duck(rows: Counter, sql: str) -> Counter:
    con = duckdb.connect()
    flat = [r for r, m in rows.items() for _ in range(m)]
    con.register("bids_raw", pa.table({"auction": pa.array([r[0] for r in flat], pa.int64()),
                                       "price": pa.array([r[1] for r in flat], pa.int64()),
                                       "t": pa.array([r[2] for r in flat], pa.int64())}))
    con.execute("CREATE VIEW bids AS SELECT auction, price, t, make_timestamp(t) AS ts FROM bids_raw")
    return sql_bag(con.execute(sql).fetchall())


def _hopping(width: int, slide: int, agg: str) -> tuple[str, str]:
    spark = (f"SELECT auction, window.start AS ws, window.end AS we, {agg} AS v FROM bids "
             f"GROUP BY auction, window(ts, '{width} seconds', '{slide} seconds')")
    k = -(-width // slide)
    duck = (f"SELECT auction, ws, ws + {width * S} AS we, {AGGS[agg]} AS v FROM ("
            f"  SELECT b.*, t - ((t % {slide * S}) + {slide * S}) % {slide * S} - k * {slide * S} AS ws "
            f"  FROM bids b, range({k}) r(k)) WHERE ws + {width * S} > t GROUP BY auction, ws")
    return spark, duck


def _session(gap: int, agg: str) -> tuple[str, str]:
    spark = (f"SELECT auction, session_window.start AS ss, session_window.end AS se, {agg} AS v FROM bids "
             f"GROUP BY auction, session_window(ts, '{gap} seconds')")
    duck = f"""
        WITH d AS (SELECT DISTINCT auction, t FROM bids),
        m AS (SELECT auction, t, CASE WHEN t - LAG(t) OVER (PARTITION BY auction ORDER BY t) <= {gap * S}
                                      THEN 0 ELSE 1 END AS brk FROM d),
        g AS (SELECT auction, t, SUM(brk) OVER (PARTITION BY auction ORDER BY t ROWS UNBOUNDED PRECEDING) AS sid FROM m),
        s AS (SELECT auction, sid, MIN(t) AS ss, MAX(t) + {gap * S} AS se FROM g GROUP BY auction, sid)
        SELECT b.auction, s.ss, s.se, {AGGS[agg].replace('price', 'b.price')} AS v
        FROM bids b JOIN g ON b.auction = g.auction AND b.t = g.t JOIN s ON g.auction = s.auction AND g.sid = s.sid
        GROUP BY b.auction, s.ss, s.se"""
    return spark, duck


def _temporal(op: str, secs: int) -> tuple[str, str]:
    spark = f"SELECT auction, price, ts FROM bids WHERE ts {op} now() - INTERVAL {secs} SECONDS"
    duck = f"SELECT auction, price, t FROM bids WHERE t {op} $now - {secs * S}"
    return spark, duck


def _check(flow, handle, views, steps, every_time: bool = True):
    caps = {name: (flow.sql(spark).capture(), duck) for name, (spark, duck) in views.items()}
    acc: Counter = Counter()
    checked: list[int] = []  # data times submitted and not yet complete
    for rows, diffs, frontier in steps:
        handle.update([(a, p, datetime.datetime(1970, 1, 1) + datetime.timedelta(microseconds=t)) for a, p, t in rows],
                      diffs=diffs)
        flow.advance_to(frontier)
        flow.run()
        for r, d in zip(rows, diffs):
            acc[r] += d
        done = [t for t in checked if t < frontier]  # the data times this run completed
        checked = [t for t in checked if t >= frontier] + [t for _, _, t in rows if t >= frontier]
        times = sorted(set(done) | {frontier - 1}) if every_time else [frontier - 1]
        for t in times:
            upto = Counter({r: m for r, m in acc.items() if r[2] <= t and m > 0})  # the input as of time t
            for name, (cap, duck) in caps.items():
                got = sql_bag(tuple(_us(v) for v in row) for row, m in cap.contents(t).items() for _ in range(m))
                want = _duck(upto, duck.replace("$now", str(t)))
                assert got == want, f"{name} at time {t}: ddflow {sorted(got - want)} vs duckdb {sorted(want - got)}"


@pytest.mark.parametrize("seed,workers", [(s, 1) for s in range(6)] + [(6, 2), (7, 2)])
def test_windows_and_sessions_match_duckdb(seed, workers):
    rng = random.Random(seed)
    width = rng.choice([2, 3, 4, 6])
    slide = rng.choice([d for d in (1, 2, 3, width) if d <= width])
    views = {}
    for i, agg in enumerate(rng.sample(sorted(AGGS), 3)):
        views[f"hop{i}"] = _hopping(width, slide, agg)
    views["tumble"] = _hopping(width, width, rng.choice(sorted(AGGS)))
    views["session"] = _session(rng.choice([1, 2, 3]), rng.choice(sorted(AGGS)))
    if workers > 1:
        views["temporal"] = _temporal(">=", 2)
    flow = ddflow.Dataflow(workers=workers)
    handle, _ = flow.new_collection("bids", schema={"auction": "bigint", "price": "bigint", "ts": "timestamp"},
                                    event_time="ts")
    _check(flow, handle, views, _stream(rng, batches=8, per_batch=7, lateness=3 * S, spread=3 * S))


@pytest.mark.parametrize("seed", range(4))
def test_temporal_filters_match_duckdb_to_the_microsecond(seed):
    rng = random.Random(100 + seed)
    views = {f"{op}{secs}": _temporal(op, secs) for op in (">", ">=", "<", "<=") for secs in (rng.randint(1, 4),)}
    views["between"] = ("SELECT auction, ts FROM bids WHERE ts BETWEEN now() - INTERVAL 2 SECONDS AND now()",
                        "SELECT auction, t FROM bids WHERE t BETWEEN $now - 2000000 AND $now")
    views["having"] = ("SELECT auction, MAX(ts) AS m FROM bids GROUP BY auction HAVING MAX(ts) + INTERVAL 1 SECOND > now()",
                       "SELECT auction, MAX(t) AS m FROM bids GROUP BY auction HAVING MAX(t) + 1000000 > $now")
    flow = ddflow.Dataflow()
    handle, _ = flow.new_collection("bids", schema={"auction": "bigint", "price": "bigint", "ts": "timestamp"},
                                    event_time="ts")
    steps = _stream(rng, batches=8, per_batch=6, lateness=2 * S, spread=2 * S)
    # event times exactly on whole seconds, so boundaries (ts + k s == now) are hit, and checks in between
    steps = [([(a, p, t - t % S) for a, p, t in rows], diffs, (f - 1) - (f - 1) % S) for rows, diffs, f in steps]
    _check(flow, handle, views, steps)


def test_windows_joined_on_their_bounds_match_duckdb():
    """Nexmark q8's shape: two windowed aggregates joined on the window's start and end."""
    rng = random.Random(7)
    spark = """
        SELECT a.auction, a.ws, a.n, b.top FROM
          (SELECT auction, window.start AS ws, window.end AS we, COUNT(*) AS n FROM bids
           GROUP BY auction, window(ts, '4 seconds')) a
        JOIN
          (SELECT window.start AS ws, window.end AS we, MAX(price) AS top FROM bids
           GROUP BY window(ts, '4 seconds')) b
        ON a.ws = b.ws AND a.we = b.we"""
    duck = f"""
        SELECT a.auction, a.ws, a.n, b.top FROM
          (SELECT auction, t - t % {4 * S} AS ws, COUNT(*) AS n FROM bids GROUP BY auction, t - t % {4 * S}) a
        JOIN (SELECT t - t % {4 * S} AS ws, MAX(price) AS top FROM bids GROUP BY t - t % {4 * S}) b ON a.ws = b.ws"""
    flow = ddflow.Dataflow()
    handle, _ = flow.new_collection("bids", schema={"auction": "bigint", "price": "bigint", "ts": "timestamp"},
                                    event_time="ts")
    _check(flow, handle, {"q8": (spark, duck)}, _stream(rng, batches=8, per_batch=7, lateness=3 * S, spread=3 * S))


def test_windows_on_a_plain_timestamp_column_are_exact_without_expiry():
    """A window over a column that is not the event time (data times given) never expires, and is still exact."""
    flow = ddflow.Dataflow()
    h, _ = flow.new_collection("bids", schema={"auction": "bigint", "price": "bigint", "ts": "timestamp"})
    sql = "SELECT auction, window.start AS ws, COUNT(*) AS n FROM bids GROUP BY auction, window(ts, '10 seconds')"
    assert "expires" not in flow.explain(sql)
    out = flow.sql(sql).capture()
    h.update([(1, 1, datetime.datetime(2026, 1, 1, 0, 0, 5)), (1, 2, datetime.datetime(2026, 1, 1, 0, 0, 1))], times=0)
    h.update([(1, 3, datetime.datetime(2026, 1, 1, 0, 0, 2))], times=7)  # arrives late in data time: still counted
    flow.advance_to(10)
    flow.run()
    assert out.contents(9) == {(1, datetime.datetime(2026, 1, 1), 3): 1}


def test_window_state_is_bounded_once_windows_close():
    """Many windows pass; what the traces hold stays at the open windows' size (plus unmerged small batches)."""
    flow = ddflow.Dataflow()
    h, _ = flow.new_collection("bids", schema={"auction": "bigint", "price": "bigint", "ts": "timestamp"},
                               event_time="ts")
    out = flow.sql("SELECT auction, window.start AS ws, COUNT(*) AS n, MAX(price) AS m FROM bids "
                   "GROUP BY auction, window(ts, '2 seconds', '1 second')").capture()
    s = flow.sql("SELECT auction, session_window.start AS ss, COUNT(*) AS n FROM bids "
                 "GROUP BY auction, session_window(ts, '1 second')").capture()
    f = flow.sql("SELECT auction, price FROM bids WHERE ts > now() - INTERVAL 3 SECONDS").capture()
    rng = random.Random(3)
    sizes = []
    for step in range(200):
        base = T0 + step * S
        rows = [(rng.randint(1, 50), rng.randint(1, 100), base + rng.randint(0, S - 1)) for _ in range(200)]
        h.update([(a, p, datetime.datetime(1970, 1, 1) + datetime.timedelta(microseconds=t)) for a, p, t in rows])
        flow.advance_to(base + S)
        flow.run()
        for c in (out, s, f):
            c.drain()
        sizes.append(flow.trace_size())
    # 200 rows a second: the open state is a few seconds of rows; 40,000 rows went through
    assert max(sizes[100:]) < 3 * max(sizes[20:40]) and max(sizes[100:]) < 12_000, sizes[::20]


@pytest.mark.parametrize("seed", range(3))
def test_final_mode_is_the_changelog_of_closed_windows_each_row_once(seed):
    """mode='final': each window's (session's) row appears once, when it closes, as the changelog has it then."""
    rng = random.Random(50 + seed)
    flow = ddflow.Dataflow()
    handle, _ = flow.new_collection("bids", schema={"auction": "bigint", "price": "bigint", "ts": "timestamp"},
                                    event_time="ts")
    fe = flow._frontend()
    views = {"hop": (_hopping(4, 2, "SUM(price)")[0], lambda r: _us(r[2])),
             "session": (_session(2, "COUNT(*)")[0], lambda r: _us(r[2]) + 1)}
    caps = {n: (fe.sql(q).capture(), fe.sql(q, mode="final").capture(), close) for n, (q, close) in views.items()}
    for rows, diffs, frontier in _stream(rng, batches=10, per_batch=8, lateness=2 * S, spread=2 * S):
        handle.update([(a, p, datetime.datetime(1970, 1, 1) + datetime.timedelta(microseconds=t)) for a, p, t in rows],
                      diffs=diffs)
        flow.advance_to(frontier)
        flow.run()
        t = frontier - 1
        for name, (changelog, final, close) in caps.items():
            want = {r: m for r, m in changelog.contents(t).items() if close(r) <= t}
            assert final.contents(t) == want, name
            per_time = Counter()
            for r, tt, d in final.updates().to_rows(flow.interner):
                per_time[(r, tt)] += d
            assert all(d == 1 for d in per_time.values() if d), name  # appended once, never retracted


def test_final_mode_is_refused_for_a_query_whose_rows_never_close():
    flow = ddflow.Dataflow()
    flow.new_collection("bids", schema={"auction": "bigint", "price": "bigint", "ts": "timestamp"}, event_time="ts")
    with pytest.raises(ddflow.SchemaError, match="mode='final' needs a query whose rows close"):
        flow._frontend().sql("SELECT auction, COUNT(*) FROM bids GROUP BY auction", mode="final")


def test_aggregate_filter_clauses_match_duckdb():
    """``AGG(x) FILTER (WHERE c)`` (Nexmark q15-q17 count bids per price band so)."""
    rng = random.Random(11)
    rows = Counter((rng.randint(1, 3), rng.choice([None, 1, 2, 5, 7, 10]), T0 + rng.randint(0, 9) * S) for _ in range(60))
    q = ("SELECT auction, COUNT(*) FILTER (WHERE price > 2) AS a, SUM(price) FILTER (WHERE price < 7) AS b, "
         "COUNT(DISTINCT price) FILTER (WHERE price <> 5) AS c, MAX(price) FILTER (WHERE t > {mid}) AS d "
         "FROM bids GROUP BY auction")
    flow = ddflow.Dataflow()
    h, _ = flow.new_collection("bids", schema={"auction": "bigint", "price": "bigint", "t": "bigint"})
    out = flow.sql(q.format(mid=T0 + 4 * S)).capture()
    h.update([r for r, m in rows.items() for _ in range(m)], times=0)
    flow.advance_to(1)
    flow.run()
    got = sql_bag(r for r, m in out.contents(0).items() for _ in range(m))
    assert got == _duck(rows, q.format(mid=T0 + 4 * S))


def test_hot_items_shape_matches_duckdb_and_is_closed_at_the_top():
    """Nexmark q5's shape: per-window counts joined with the per-window max of those counts."""
    counts = ("SELECT auction, COUNT(*) AS num, window.start AS ws, window.end AS we FROM bids "
              "GROUP BY auction, window(ts, '4 seconds', '2 seconds')")
    spark = (f"SELECT a.auction, a.ws, a.num FROM ({counts}) a JOIN (SELECT MAX(c.num) AS maxn, c.ws, c.we "
             f"FROM ({counts}) c GROUP BY c.ws, c.we) m ON a.ws = m.ws AND a.we = m.we AND a.num >= m.maxn")
    inner = (f"SELECT auction, COUNT(*) AS num, ws FROM (SELECT b.*, t - t % {2 * S} - k * {2 * S} AS ws "
             f"FROM bids b, range(2) r(k)) WHERE ws + {4 * S} > t GROUP BY auction, ws")
    duck = (f"SELECT a.auction, a.ws, a.num FROM ({inner}) a JOIN (SELECT MAX(num) AS maxn, ws FROM ({inner}) "
            f"GROUP BY ws) m ON a.ws = m.ws AND a.num >= m.maxn")
    flow = ddflow.Dataflow()
    handle, _ = flow.new_collection("bids", schema={"auction": "bigint", "price": "bigint", "ts": "timestamp"},
                                    event_time="ts")
    assert flow.explain(spark).splitlines()[1].strip().startswith("CloseAt")  # nothing below keeps a closed window
    _check(flow, handle, {"q5": (spark, duck)}, _stream(random.Random(5), batches=8, per_batch=7,
                                                       lateness=3 * S, spread=3 * S))
