"""JSON values for a table's decimal, date and timestamp columns (``streaming/parse.py``).

A JSON number for a ``decimal(p,s)`` column is read from its digits, never
through a float, and taken when it fits the scale and the precision; a JSON
string of a decimal is read as Spark's ``from_json`` reads one.  A value
that does not fit is a dead letter naming the column, the value and the
type.  The oracle is Python's ``decimal`` at a precision that cannot round,
and, for what Spark accepts, Spark 4's own ``from_json`` on the test
session.  Arrow's reader (the batch of good messages) and the per-message
parser (a batch with a bad one) must agree on every value.
"""
from __future__ import annotations

import decimal
import json

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddflow.streaming.driver import StreamingDataflow
from ddflow.streaming.parse import InputSpec, json_decimal, parse_input
from ddflow.streaming.sinks import MemorySink

D = decimal.Decimal
EXACT = decimal.Context(prec=2000, Emax=10**6, Emin=-10**6)


def parse(texts: list[bytes], typ: str = "decimal(10,2)") -> list:
    """Each message's field ``a``: its Decimal, None for a JSON null, or the dead letter's reason."""
    n = len(texts)
    table = pa.table({"value": pa.array(texts, pa.binary()), "topic": ["x"] * n,
                      "partition": pa.array([0] * n, pa.int32()), "offset": list(range(n))})
    spec = InputSpec("orders", ["a"], format="json", time="t", nullable=True)
    rows, bad = parse_input(spec, table, kinds=("i",), types=(typ,))
    out: list = [None] * n
    for r in (bad.to_pylist() if bad is not None else []):
        out[r["offset"]] = r["error"]
    kept = [i for i in range(n) if out[i] is None]
    for i, v in zip(kept, rows.column("a").to_pylist()):
        out[i] = v
    return out


def message(value_text: str) -> bytes:
    return b'{"a": ' + value_text.encode() + b', "t": 1}'


def both_paths(value_text: str, typ: str = "decimal(10,2)"):
    """The value through Arrow's reader (a batch of it alone) and the per-message parser (beside a bad message)."""
    fast = parse([message(value_text)], typ)[0]
    slow = parse([message(value_text), b"{oops"], typ)[0]
    assert fast == slow and type(fast) is type(slow), (value_text, fast, slow)
    return fast


@pytest.mark.parametrize("text, want", [
    ("1.25", D("1.25")), ("0.1", D("0.10")), ("-0.5", D("-0.50")), ("3", D("3.00")), ("1e2", D("100.00")),
    ("1.250", D("1.25")), ("0.1e1", D("1.00")), ("12345678.99", D("12345678.99")), ("-0", D("0")),
    ('"1.25"', D("1.25")), ('"+1.25"', D("1.25")), ('".5"', D("0.50")), ('"5."', D("5.00")),
    ('"1,234.5"', D("1234.50")), ('"1e2"', D("100.00")), ("null", None),
    ("1.255", "field 'a': 1.255 does not fit decimal(10,2) (more than 2 digits after the point)"),
    ('"1.255"', "field 'a': \"1.255\" does not fit decimal(10,2) (more than 2 digits after the point)"),
    ("123456789.1", "field 'a': 123456789.1 does not fit decimal(10,2) (more than 8 digits before the point)"),
    ("1e40", "does not fit decimal(10,2) (more than 8 digits before the point)"),
    ("1e-9999999999", "does not fit decimal(10,2) (more than 2 digits after the point)"),
    ('" 1.25"', "field 'a': \" 1.25\" is not a number for decimal(10,2)"),
    ('"abc"', "is not a number for decimal(10,2)"), ('""', "is not a number"), ('"NaN"', "is not a number"),
    ("true", "field 'a': true is not a number or a numeric string for decimal(10,2)"),
    ("[1]", "[1] is not a number or a numeric string"), ('{"x": 1}', "is not a number or a numeric string"),
    ("[1.5]", "field 'a': [1.5] is not a number or a numeric string for decimal(10,2)"),
])
def test_a_json_decimal_is_exact_or_a_dead_letter_naming_value_and_type(text, want):
    got = both_paths(text)
    if isinstance(want, str):
        assert isinstance(got, str) and want in got, got
    else:
        assert got == want and (want is None or got.as_tuple().exponent == -2), got


def test_exponents_and_long_literals_are_exact_where_arrow_s_decimal_parse_is_not():
    """Arrow's reader with a decimal schema read 1.0e-38 as 0 for decimal(5,0) (hypothesis found it)."""
    assert "more than 0 digits after the point" in both_paths("1.0e-38", "decimal(5,0)")
    assert "1E-38 does not fit decimal(5,0)" in both_paths("1e-38", "decimal(5,0)")
    assert both_paths("0.000e5", "decimal(5,0)") == D("0")
    assert both_paths("12.5e-1", "decimal(5,2)") == D("1.25")
    assert "does not fit" in both_paths("1" * 39 + ".5", "decimal(38,2)")
    assert "more than 18 digits" in both_paths("1" * 36 + ".25", "decimal(38,2)")
    assert both_paths("0." + "0" * 30 + "1" + "0" * 8, "decimal(38,38)") == D("1e-31")


def test_a_wide_decimal_is_kept_to_its_precision_and_to_int64():
    assert both_paths("123456789012345678", "decimal(18,0)") == D("123456789012345678")
    assert "more than 18 digits" in both_paths("12345678901234567890", "decimal(38,0)")
    assert "more than 4 digits before the point" in both_paths("99999.5", "decimal(6,2)")
    assert both_paths("-9999.99", "decimal(6,2)") == D("-9999.99")


def exact_fit(text: str, p: int, s: int) -> D | None:
    """The decimal(p,s) value of ``text`` if it fits exactly, by Python's decimal at a precision that never rounds."""
    v = EXACT.create_decimal(text)
    scaled = EXACT.multiply(v, EXACT.power(10, s))
    if scaled != scaled.to_integral_value() or abs(scaled) >= 10**p or abs(scaled) >= 2**63:
        return None
    return EXACT.divide(scaled.to_integral_value(), EXACT.power(10, s))


NUMBERS = st.builds(lambda sign, whole, frac, exp: f"{sign}{whole}{frac}{exp}",
                    st.sampled_from(["", "-"]),
                    st.one_of(st.just("0"), st.integers(1, 10**25).map(str)),
                    st.one_of(st.just(""), st.text("0123456789", min_size=1, max_size=8).map(lambda f: "." + f)),
                    st.one_of(st.just(""), st.builds(lambda e, sg, n: f"{e}{sg}{n}", st.sampled_from("eE"),
                                                     st.sampled_from(["", "+", "-"]), st.integers(0, 40))))
TYPES = st.sampled_from([(10, 2), (5, 0), (18, 4), (38, 10), (3, 3)])


@settings(max_examples=300, deadline=None)
@given(NUMBERS, TYPES, st.booleans())
def test_random_json_numbers_and_strings_are_read_from_their_digits(text, ps, quoted):
    p, s = ps
    typ = f"decimal({p},{s})"
    got = both_paths(json.dumps(text) if quoted else text, typ)
    want = exact_fit(text, p, s)
    if want is None:
        assert isinstance(got, str) and ("does not fit" in got or "more than 18 digits" in got), (text, got)
    else:
        assert got == want, (text, got, want)
        assert json_decimal(D(text), typ) == int(want.scaleb(s))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=12))
def test_any_string_is_a_decimal_by_spark_s_grammar_or_a_dead_letter(text):
    got = both_paths(json.dumps(text))
    if not isinstance(got, str):  # taken: then it is the value of its text, commas dropped
        assert got == exact_fit(text.replace(",", ""), 10, 2), (text, got)


SPARK_CASES = ["1.25", "0.1", '"1.25"', "1.255", '"1.255"', "123456789.1", "12345678.99", "1", "1e2", '"1e2"',
               '"1,234.5"', '" 1.25"', '"1.25 "', '"+1.25"', '".5"', '"5."', '"abc"', '""', '"NaN"', "true",
               "1.250", "-0.5", '"-0.005"', "[1]", '{"x": 1}', '"1_000"', "0.1e1", '"0x10"', '"\\u0661"',
               '"1e-2"', '"-.5"', '"1.2.3"', '"1e"', '"--1"', "-0", '"+"', '"1,,2"', "99999999.995"]


@pytest.mark.spark
def test_what_spark_s_from_json_takes_ddflow_takes_and_what_spark_would_round_is_a_dead_letter(spark):
    """Spark 4's ``from_json`` (default options) on the same values: where Spark gives a value it did not round,
    ddflow gives the same value; where Spark gives NULL (not a decimal, or too many digits), ddflow gives a dead
    letter; where Spark rounds HALF_UP past the scale, ddflow gives a dead letter saying it does not fit."""
    from pyspark.sql import functions as F

    df = spark.createDataFrame([(f'{{"a": {v}}}',) for v in SPARK_CASES], "value string")
    theirs = [r["j"]["a"] if r["j"] is not None else None
              for r in df.select(F.from_json("value", "a decimal(10,2)").alias("j")).collect()]
    for text, spark_value in zip(SPARK_CASES, theirs):
        ours = both_paths(text)
        if not isinstance(ours, str):
            assert ours == spark_value, (text, ours, spark_value)
            continue
        if spark_value is None:
            continue  # Spark's NULL for a value that is not a decimal(10,2): here a dead letter with the reason
        raw = json.loads(text)
        exact = D(raw.replace(",", "") if isinstance(raw, str) else text)
        assert spark_value != exact and "more than 2 digits after the point" in ours, (text, ours, spark_value)


def kafka_rows(values: list[bytes]) -> pa.Table:
    n = len(values)
    return pa.table({"value": pa.array(values, pa.binary()), "topic": ["orders"] * n,
                     "partition": pa.array([0] * n, pa.int32()), "offset": list(range(n))})


def test_decimals_dates_and_timestamps_from_json_through_a_view():
    """Exact sums of JSON decimals; a date is an integer of days, a timestamp of microseconds, each within years
    1 to 9999 (Spark's range): past it, a dead letter, not a failed batch."""
    out, dead = MemorySink(), MemorySink()
    s = (StreamingDataflow(name="json-types")
         .table("orders", {"cust": "string", "price": "decimal(10,2)", "d": "date", "ts": "timestamp"},
                format="json", time="t")
         .view("totals", "SELECT cust, SUM(price) AS total, MIN(d) AS d, MAX(ts) AS ts FROM orders GROUP BY cust")
         .output("totals", out).deadLetter(dead))
    msgs = [b'{"cust": "a", "price": 0.1, "d": 0, "ts": 0, "t": 0}',
            b'{"cust": "a", "price": 0.2, "d": 20000, "ts": 1767225600000000, "t": 0}',
            b'{"cust": "b", "price": "19.99", "d": -719162, "ts": 253402300799999999, "t": 0}',
            b'{"cust": "b", "price": 1.255, "t": 0}',
            b'{"cust": "c", "price": 1, "d": 2932897, "t": 0}',
            b'{"cust": "c", "price": 1, "ts": 4611686018427387904, "t": 0}']
    s.process_arrow(kafka_rows(msgs), 0)
    import datetime

    assert out.contents() == {
        ("a", D("0.30"), datetime.date(1970, 1, 1), datetime.datetime(2026, 1, 1)): 1,
        ("b", D("19.99"), datetime.date(1, 1, 1), datetime.datetime(9999, 12, 31, 23, 59, 59, 999999)): 1}
    assert [(r["offset"], r["error"]) for r in dead.table().to_pylist()] == [
        (3, "field 'price': 1.255 does not fit decimal(10,2) (more than 2 digits after the point)"),
        (4, "field 'd' has value 2932897, outside the date range (years 1 to 9999: -719162 to 2932896 days since "
            "1970-01-01)"),
        (5, "field 'ts' has value 4611686018427387904, outside the timestamp range (years 1 to 9999: "
            "-62135596800000000 to 253402300799999999 microseconds since 1970-01-01)")]
