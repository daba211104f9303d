"""Spark's datetime patterns, calendar functions, EXTRACT's fields, timestampadd/diff, time zones and round, against Spark itself (a local session, UTC).

Random dates from year 1 to 9999 (month ends, leap days, before 1970), timestamps with microseconds, texts
written in several patterns, and epoch counts; each group is one Spark query of many columns compared with
ddflow's view as bags.  A text that does not match its pattern raises in both (Spark's ANSI mode).  An
incremental test checks the accumulated view at every complete time under inserts and deletes.
"""
from __future__ import annotations

import datetime
import math
import random
import re
from collections import Counter

import pytest

import ddflow
from ddflow.errors import SchemaError

SCHEMA = {"d": "date", "ts": "timestamp", "n": "bigint", "x": "double"}
SPARK_SCHEMA = "d date, ts timestamp, n bigint, x double"
#: Patterns texts are written in (and read back by); Java's letters as Spark allows them.
PARSED = ("yyyy-MM-dd HH:mm:ss", "dd/MM/yyyy", "yyyyMMdd", "MMM d, yyyy h:mm a", "yyyy-MM-dd'T'HH:mm:ss.SSSSSS",
          "d MMMM yyyy", "yy-M-d H:m:s", "yyyy-DDD", "HH:mm", "yyyy-MM-dd HH:mm XXX")


def _write(t: datetime.datetime, pattern: str, rng: random.Random) -> str:
    """``t`` written in ``pattern`` (for the patterns of PARSED), as a user's data would be."""
    out = pattern.replace("'T'", "T")
    subs = [("yyyy", f"{t.year:04d}"), ("yy", f"{t.year % 100:02d}"), ("MMMM", t.strftime("%B")),
            ("MMM", t.strftime("%b")), ("MM", f"{t.month:02d}"), ("M", str(t.month)), ("DDD", f"{t.timetuple().tm_yday:03d}"),
            ("dd", f"{t.day:02d}"), ("d", str(t.day)), ("HH", f"{t.hour:02d}"), ("H", str(t.hour)),
            ("h", str(t.hour % 12 or 12)), ("mm", f"{t.minute:02d}"), ("m", str(t.minute)),
            ("ss", f"{t.second:02d}"), ("s", str(t.second)), ("SSSSSS", f"{t.microsecond:06d}"),
            ("EEE", t.strftime("%a")), (" a", " PM" if t.hour >= 12 else " AM"),
            ("XXX", rng.choice(["Z", "+02:00", "-05:30"]))]
    for i, (k, v) in enumerate(subs):  # placeholders first, so a value is never read as a letter
        out = out.replace(k, f"\x00{i}\x00")
    for i, (k, v) in enumerate(subs):
        out = out.replace(f"\x00{i}\x00", v)
    return out


def _rows(seed: int, count: int) -> list[tuple]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        if rng.random() < 0.3:
            d = datetime.date(rng.randrange(1, 10000), rng.randrange(1, 13), 1) + datetime.timedelta(days=rng.choice([-1, 0, 27, 28]))
        else:
            d = datetime.date(1900, 1, 1) + datetime.timedelta(days=rng.randrange(0, 60000))
        ts = datetime.datetime(d.year, d.month, d.day, rng.randrange(24), rng.randrange(60), rng.randrange(60),
                               rng.choice([0, 1, 999999, rng.randrange(10**6)]))
        n = rng.choice([0, -1, 1, 86399, 1700000000, -2208988800, rng.randrange(-10**10, 10**10)])
        x = rng.choice([2.675, 0.125, -0.5, 1.5, 2.5, -2.5, 1e-7, 123456.789, 0.285, float("inf"), -0.0,
                        rng.uniform(-1e6, 1e6)])
        out.append((None if rng.random() < 0.1 else d, None if rng.random() < 0.1 else ts,
                    None if rng.random() < 0.1 else n, None if rng.random() < 0.1 else x))
    return out


def _norm(v):
    if isinstance(v, float):
        return "NaN" if math.isnan(v) else float(f"{v:.12g}") if math.isfinite(v) else v
    return v


def _bag(rows) -> Counter:
    return Counter(tuple(_norm(v) for v in r) for r in rows)


@pytest.fixture(scope="module")
def spark():
    from ddflow.streaming.spark import local_session

    session = local_session("ddflow-datetime-tests", "local[1]")
    yield session
    session.stop()


def _raises_at_run(query: str, schema: dict, rows: list, match: str) -> None:
    """``query`` is accepted, and its run over ``rows`` raises a SchemaError matching ``match``."""
    flow = ddflow.Dataflow()
    handle = flow.new_collection("t", schema=schema)[0]
    flow.sql(query).capture()
    handle.update(rows, times=0)
    flow.advance_to(1)
    with pytest.raises(SchemaError, match=match):
        flow.run()


def _compare(spark, rows, query: str, schema=SCHEMA, spark_schema=SPARK_SCHEMA):
    spark.createDataFrame(rows, spark_schema).createOrReplaceTempView("t")
    want = _bag(tuple(r) for r in spark.sql(query).collect())
    flow = ddflow.Dataflow()
    handle = flow.new_collection("t", schema=schema)[0]
    cap = flow.sql(query).capture()
    handle.update(rows, times=0)
    flow.advance_to(1)
    flow.run()
    got = _bag(r for r, m in cap.contents(0).items() for _ in range(m))
    assert got == want, (set(got) - set(want), set(want) - set(got))


FORMATS = ("SELECT d, ts, date_format(ts, 'yyyy-MM-dd HH:mm:ss.SSS') AS f1, date_format(d, 'EEEE, MMMM d, yy') AS f2, "
           "date_format(ts, 'h:mm a K k D DD DDD Q QQ QQQ q') AS f3, date_format(ts, 'EEE MMM L LL S SS SSSSSS') AS f4, "
           "date_format(ts, \"'quoted' '' G z X Z x\") AS f5, date_format(d, 'y yyy yyyyy') AS f6, "
           "date_format(ts, NULL) AS f7, date_format('2024-02-03 04:05:06', 'yyyyMMddHHmmss') AS f8 FROM t")

CALENDAR = ("SELECT d, ts, last_day(d) AS c1, last_day(ts) AS c2, next_day(d, 'Mon') AS c3, next_day(d, 'FRIDAY') AS c4, "
            "next_day(ts, 'su') AS c5, months_between(ts, d) AS c6, months_between(d, ts, false) AS c7, "
            "months_between(last_day(d), last_day(ts)) AS c8, unix_date(d) AS c9, unix_seconds(ts) AS c10, "
            "unix_millis(ts) AS c11, unix_micros(ts) AS c12, unix_timestamp(ts) AS c13, unix_timestamp(d) AS c14, "
            "to_unix_timestamp(ts) AS c15, next_day(d, NULL) AS c16, last_day('2024-02-10') AS c17, to_date(ts) AS c18, "
            "to_timestamp(d) AS c19, to_date('2024-02-10') AS c20 FROM t")

EPOCHS = ("SELECT n, from_unixtime(n) AS e1, from_unixtime(n, 'yyyy/MM/dd HH') AS e2, date_from_unix_date(n % 100000) AS e3, "
          "timestamp_seconds(n) AS e4, timestamp_millis(n) AS e5, timestamp_micros(n) AS e6, "
          "make_date(1 + abs(n) % 9999, 1 + abs(n) % 12, 1 + abs(n) % 28) AS e7 FROM t")

ROUNDS = ("SELECT x, n, round(x) AS r1, round(x, 2) AS r2, round(x, -2) AS r3, bround(x, 2) AS r4, round(n, -1) AS r5, "
          "round(n, 3) AS r6, round(CAST(x AS DECIMAL(20, 6)), 1) AS r7, round(CAST(x AS DECIMAL(20, 6)), -3) AS r8, "
          "round(x, 10) AS r9, round(sqrt(-1.0), 1) AS r10 FROM t WHERE x IS NULL OR abs(x) < 1e12")


UNITS = ("SELECT d, ts, n, extract(YEAR FROM d) AS u1, date_part('Y', ts) AS u2, extract(QUARTER FROM ts) AS u3, "
         "date_part('mons', d) AS u4, extract(WEEK FROM d) AS u5, date_part('D', ts) AS u6, extract(DOW FROM d) AS u7, "
         "date_part('dow_iso', ts) AS u8, extract(DOY FROM d) AS u9, date_part('HOURS', ts) AS u10, "
         "extract(MINUTE FROM ts) AS u11, extract(SECOND FROM ts) AS u12, datepart('secs', ts) AS u13, "
         "timestampadd(MONTH, n % 100, ts) AS u14, timestampadd(HOUR, n % 100000, d) AS u15, "
         "timestampadd(YEAR, n % 50, ts) AS u16, timestampadd(MICROSECOND, n, ts) AS u17, "
         "dateadd(WEEK, n % 1000, ts) AS u18, timestampadd(QUARTER, -3, d) AS u19, "
         "timestampdiff(MONTH, d, ts) AS u20, timestampdiff(DAY, ts, d) AS u21, timestampdiff(QUARTER, ts, d) AS u22, "
         "timestampdiff(YEAR, d, timestampadd(SECOND, n, ts)) AS u23, timestampdiff(MILLISECOND, ts, d) AS u24, "
         "timestampdiff(WEEK, d, ts) AS u25, datediff(DAY, ts, d) AS u26, timestampdiff(HOUR, d, ts) AS u27, "
         "timestampdiff(MONTH, ts, timestampadd(DAY, n % 1000, d)) AS u28, datediff(ts, d) AS u29, "
         "weekday(d) AS u30, weekday(ts) AS u31, dayname(ts) AS u32, monthname(d) AS u33 "
         "FROM t WHERE d IS NULL OR year(d) BETWEEN 60 AND 9940")


@pytest.mark.parametrize("query", [FORMATS, CALENDAR, EPOCHS, UNITS], ids=["formats", "calendar", "epochs", "units"])
def test_datetime_functions_equal_spark(spark, query):
    _compare(spark, _rows(11, 250), query)


def test_round_equals_spark(spark):
    _compare(spark, _rows(12, 250), ROUNDS)


def test_texts_read_by_their_patterns_equal_spark(spark):
    rng = random.Random(5)
    rows = []
    for d, ts, _, _ in _rows(13, 120):
        t = ts or datetime.datetime(2001, 2, 3, 4, 5, 6)
        for i, p in enumerate(PARSED):
            rows.append((i, _write(t, p, rng), p))
    cols = ", ".join(f'to_timestamp(CASE WHEN k = {i} THEN s END, "{p}") AS p{i}, '
                     f'to_date(CASE WHEN k = {i} THEN s END, "{p}") AS q{i}, '
                     f'unix_timestamp(CASE WHEN k = {i} THEN s END, "{p}") AS u{i}' for i, p in enumerate(PARSED))
    _compare(spark, [r[:2] for r in rows], f"SELECT k, s, {cols} FROM t",
             schema={"k": "bigint", "s": "string"}, spark_schema="k bigint, s string")


def test_try_to_timestamp_and_try_to_date_are_null_where_the_text_does_not_read_as_in_spark(spark):
    rng = random.Random(14)
    texts = ["bad", "2024-13-01", "2024-02-30", "02/01/2020", "31/12/1999", "2020-01-02", "2020-01-02 03:04:05",
             "2020-1-2", " 2020-01-02", "", None]
    rows = [(t,) for t in texts] + [(_write(ts or datetime.datetime(2001, 2, 3), rng.choice(PARSED[:2]), rng),)
                                    for _, ts, _, _ in _rows(15, 60)]
    q = ("SELECT s, try_to_timestamp(s) AS a, try_to_timestamp(s, 'dd/MM/yyyy') AS b, try_to_date(s) AS c, "
         "try_to_date(s, 'yyyy-MM-dd') AS d, try_to_timestamp(s, 'yyyy-MM-dd HH:mm:ss') AS e FROM t")
    _compare(spark, rows, q, schema={"s": "string"}, spark_schema="s string")


@pytest.mark.parametrize("text, pattern", [("2024-13-01", "yyyy-MM-dd"), ("2024-02-30", "yyyy-MM-dd"),
                                           ("2024-2-3", "yyyy-MM-dd"), ("x", "yyyy")])
def test_a_text_its_pattern_cannot_read_raises_as_in_spark(spark, text, pattern):
    q = f"SELECT to_timestamp(s, '{pattern}') AS v FROM t"
    spark.createDataFrame([(text,)], "s string").createOrReplaceTempView("t")
    with pytest.raises(Exception, match="CANNOT_PARSE_TIMESTAMP|DATETIME|Invalid|parse|could not be parsed"):
        spark.sql(q).collect()
    _raises_at_run(q, {"s": "string"}, [(text,)], f"{text!r}.*{pattern!r}")


@pytest.mark.parametrize("expr, named", [
    ("date_format(ts, 'YYYY')", "'Y'"), ("date_format(ts, 'ww')", "'w'"), ("date_format(ts, s)", "constant"),
    ("to_timestamp(s, '[yyyy]')", "optional sections"), ("to_date(s, 'yyyy-MM-dd Q')", "cannot be parsed"),
    ("to_date(s, 'EEE dd MMM yyyy')", "'E'.*cannot be parsed"),
    ("next_day(ts, 'Mond')", "not a day of the week"), ("unix_timestamp()", "wall clock"),
    ('date_format(ts, "yyyy\'")', "unclosed quote"), ("extract(yyyy FROM d)", r"EXTRACT\(YYYY\) is not supported"),
    ("date_part(s, d)", r"date_part\(\)"), ("timestampadd(FORTNIGHT, 1, d)", "timestampadd's unit must be one of")])
def test_patterns_fields_and_units_spark_does_not_allow_are_refused_at_sql(expr, named):
    flow = ddflow.Dataflow()
    flow.new_collection("t", schema={"ts": "timestamp", "s": "string", "d": "date"})
    with pytest.raises(SchemaError, match=named):
        flow.sql(f"SELECT {expr} AS v FROM t")


def test_results_past_year_9999_raise():
    _raises_at_run("SELECT date_from_unix_date(n) AS v FROM t", {"n": "bigint"}, [(10**8,)], "years 1 to 9999")


@pytest.mark.parametrize("n, unit", [(9223372036854775807, "MICROSECOND"), (-8000, "YEAR")])
def test_timestampadd_past_int64_raises_as_spark_does_and_past_year_9999_raises(spark, n, unit):
    q = f"SELECT timestampadd({unit}, n, ts) AS v FROM t"
    rows = [(datetime.datetime(2020, 1, 1), n)]
    if unit == "MICROSECOND":  # Spark's timestamps reach past year 9999; int64's microseconds are its bound
        spark.createDataFrame(rows, "ts timestamp, n bigint").createOrReplaceTempView("t")
        with pytest.raises(Exception, match="DATETIME_OVERFLOW"):
            spark.sql(q).collect()
    _raises_at_run(q, {"ts": "timestamp", "n": "bigint"}, rows,
                   f"timestampadd: adding {n} {unit} to a timestamp is past the years 1 to 9999 that ddflow holds")


#: Zones as users write them: regions (with gaps, overlaps, abolished DST, half-hour and LMT offsets), offsets in
#: Java's forms and Spark's one-digit ones, UTC and GMT prefixes, Java's short IDs.
ZONES = ("America/New_York", "Europe/Paris", "Asia/Kolkata", "Australia/Sydney", "America/Sao_Paulo",
         "Pacific/Apia", "Asia/Kathmandu", "UTC", "GMT", "Z", "+05:30", "-8", "+8:00", "-03:3", "+0930", "UTC+8",
         "GMT-03:00", "UT+1", "PST", "IST", "EST", "Etc/GMT+5")


def _transitions(zone: str, year: int) -> list[tuple[datetime.datetime, datetime.timedelta]]:
    """The UTC instants in ``year`` where ``zone``'s offset changes, each with the offset before it."""
    import zoneinfo

    z, utc = zoneinfo.ZoneInfo(zone), datetime.timezone.utc
    t = datetime.datetime(year, 1, 1, tzinfo=utc)
    out, last = [], t.astimezone(z).utcoffset()
    while t.year == year:
        nxt = t + datetime.timedelta(hours=1)
        if nxt.astimezone(z).utcoffset() != last:
            m = t
            while m.astimezone(z).utcoffset() == last:
                m += datetime.timedelta(minutes=15)
            out.append((m.replace(tzinfo=None), last))
            last = nxt.astimezone(z).utcoffset()
        t = nxt
    return out


def _zoned_rows(seed: int, count: int) -> list[tuple]:
    """Random timestamps, and around each DST change of the region zones: the instants, and the wall times of
    their gaps and overlaps (every 15 minutes from an hour and a half before to an hour and a half after)."""
    rng = random.Random(seed)
    out = []
    for z in ("America/New_York", "Europe/Paris", "Australia/Sydney", "America/Sao_Paulo", "Pacific/Apia"):
        for year in (1995, 2020):
            for instant, before in _transitions(z, year):
                for k in range(-6, 7):
                    step = datetime.timedelta(minutes=15 * k)
                    out.append((instant + step, z, instant.date()))
                    out.append((instant + before + step, z, instant.date()))  # wall times about the change
    for _ in range(count):
        base = datetime.datetime(rng.choice([1850, 1901, 1970, 1995, 2020, 2030]), 1, 1)
        if rng.random() < 0.5:  # near a DST change: March to April, October to November, every 15 minutes
            ts = base.replace(month=rng.choice([3, 4, 10, 11]), day=rng.randrange(1, 29), hour=rng.randrange(24),
                              minute=rng.choice([0, 15, 30, 45]))
        else:
            ts = base + datetime.timedelta(seconds=rng.randrange(365 * 86400), microseconds=rng.randrange(10**6))
        out.append((None if rng.random() < 0.05 else ts, None if rng.random() < 0.05 else rng.choice(ZONES),
                    ts.date()))
    return out


def test_time_zone_functions_equal_spark(spark):
    zs = ", ".join(f"from_utc_timestamp(ts, '{z}') AS f{i}, to_utc_timestamp(ts, '{z}') AS t{i}"
                   for i, z in enumerate(ZONES))
    q = (f"SELECT ts, z, {zs}, from_utc_timestamp(ts, z) AS fz, to_utc_timestamp(ts, z) AS tz, "
         "from_utc_timestamp(d, 'Asia/Tokyo') AS fd, convert_timezone('America/New_York', 'Asia/Tokyo', ts) AS c1, "
         "convert_timezone(z, 'Europe/Paris', ts) AS c2, convert_timezone('Australia/Sydney', ts) AS c3, "
         "to_utc_timestamp(from_utc_timestamp(ts, z), z) AS rt FROM t")
    _compare(spark, _zoned_rows(17, 300), q, schema={"ts": "timestamp", "z": "string", "d": "date"},
             spark_schema="ts timestamp, z string, d date")


@pytest.mark.parametrize("zone", ["Mars/Base", "+19:00", "UTC+", "america/new_york"])
def test_a_zone_spark_cannot_read_is_refused_as_a_constant_and_raises_in_a_column(spark, zone):
    spark.createDataFrame([(datetime.datetime(2020, 1, 1), zone)], "ts timestamp, z string").createOrReplaceTempView("t")
    with pytest.raises(Exception, match="INVALID_TIMEZONE|Invalid ID|invalid|not in valid range"):
        spark.sql("SELECT from_utc_timestamp(ts, z) AS v FROM t").collect()
    schema = {"ts": "timestamp", "z": "string"}
    flow = ddflow.Dataflow()
    flow.new_collection("t", schema=schema)
    with pytest.raises(SchemaError, match=re.escape(f"the time zone {zone!r} is not one Spark reads")):
        flow.sql(f"SELECT from_utc_timestamp(ts, '{zone}') AS v FROM t")
    _raises_at_run("SELECT from_utc_timestamp(ts, z) AS v FROM t", schema, [(datetime.datetime(2020, 1, 1), zone)],
                   re.escape(f"from_utc_timestamp: the time zone {zone!r} is not one Spark reads"))


def test_incrementally_at_every_time():
    """Inserts and deletes over several times per advance: the view equals the query of the rows live then."""
    rng = random.Random(3)
    q = ("SELECT date_format(ts, 'yyyy-MM') AS m, COUNT(*) AS c, MAX(months_between(ts, d)) AS b, "
         "MIN(round(x, 1)) AS r FROM t GROUP BY date_format(ts, 'yyyy-MM')")
    rows = [r for r in _rows(21, 80) if r[3] is None or math.isfinite(r[3])]
    flow = ddflow.Dataflow()
    handle = flow.new_collection("t", schema=SCHEMA)[0]
    cap = flow.sql(q).capture()
    live: Counter = Counter()
    for step in range(4):
        for t in range(step * 3, step * 3 + 3):
            adds = rng.sample(rows, 6)
            dels = [r for r in live if rng.random() < 0.3]
            handle.update(adds + dels, times=t, diffs=[1] * len(adds) + [-1] * len(dels))
            live.update(adds)
            live.subtract(dels)
            live = +live
        flow.advance_to(step * 3 + 3)
        flow.run()
        want = _oracle(live)
        assert cap.contents(step * 3 + 2) == want


def _oracle(live: Counter) -> dict:
    """The query of test_incrementally_at_every_time in plain Python."""
    from decimal import ROUND_HALF_UP, Decimal

    from ddflow.plan.datetimes import compile_pattern, format_micros
    import numpy as np

    groups: dict = {}
    for (d, ts, n, x), m in live.items():
        if ts is None:
            key = None
        else:
            us = (ts - datetime.datetime(1970, 1, 1)) // datetime.timedelta(microseconds=1)
            key = format_micros(np.array([us]), np.array([False]), compile_pattern("yyyy-MM"))[0]
        g = groups.setdefault(key, [0, [], []])
        g[0] += m
        if ts is not None and d is not None:
            a, b = ts.date(), d
            months = (a.year - b.year) * 12 + a.month - b.month
            import calendar
            last = lambda z: z.day == calendar.monthrange(z.year, z.month)[1]
            if a.day == b.day or (last(a) and last(b)):
                v = float(months)
            else:
                secs = (a.day - b.day) * 86400 + ts.hour * 3600 + ts.minute * 60 + ts.second
                v = math.floor((months + secs / (31 * 86400)) * 1e8 + 0.5) / 1e8
            g[1].append(v)
        if x is not None:
            g[2].append(float(Decimal(repr(x)).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)) + 0.0)
    return {(k, c, max(b) if b else None, min(r) if r else None): 1 for k, (c, b, r) in groups.items()}
