"""Debezium envelopes and Spark changelog rows: malformed ones are dead letters naming the field; events out of
order are applied in version order; duplicates are applied once.

Unit checks of the parsers, then a pipeline over a changelog source whose reader redelivers, shuffles and
damages events, against DuckDB on the table the events describe; and the streaming hook's contract.
"""
from __future__ import annotations

import base64
import datetime
import decimal
import json
import random

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddflow.pipelines import Pipeline, PipelineError, changelog, delta_table
from ddflow.pipelines.envelopes import changelog_rows, debezium_rows, parse_debezium_input
from lake import bag, duckdb_answer

COLUMNS = {"id": "bigint", "name": "string", "price": "decimal(10,2)", "day": "date", "at": "timestamp", "ok": "boolean"}


def event(op, before=None, after=None, **extra):
    return json.dumps({"op": op, "before": before, "after": after, "source": {"lsn": extra.get("lsn", 0)}, **extra},
                      default=str)


ROW = {"id": 1, "name": "a", "price": "1.50", "day": 18262, "at": 1_600_000_000_000_000, "ok": True}


def test_debezium_ops_and_encodings():
    after = dict(ROW, price="2.25", name=None)
    e = debezium_rows([event("c", after=ROW), event("u", before=ROW, after=after), event("d", before=after),
                       event("r", after=ROW), None], COLUMNS)
    assert e.rows.column("diff").to_pylist() == [1, -1, 1, -1, 1]
    assert e.event.tolist() == [0, 1, 1, 2, 3] and e.tombstones == 1 and not e.errors
    first = e.rows.slice(0, 1).to_pylist()[0]
    assert first["price"] == decimal.Decimal("1.50") and first["day"] == datetime.date(2020, 1, 1)
    assert first["at"] == datetime.datetime(2020, 9, 13, 12, 26, 40, tzinfo=datetime.timezone.utc)
    # The schema/payload wrapper: a precise decimal as base64, a millisecond timestamp, ISO strings.
    wrapped = json.dumps({"schema": {"fields": [{"field": "after", "fields": [
        {"field": "price", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2"}},
        {"field": "at", "name": "io.debezium.time.Timestamp"}]}]},
        "payload": {"op": "c", "after": dict(ROW, price=base64.b64encode((12345).to_bytes(2, "big", signed=True)).decode(),
                                             at=1_600_000_000_000, day="2020-01-02")}})
    row = debezium_rows([wrapped], COLUMNS).rows.to_pylist()[0]
    assert row["price"] == decimal.Decimal("123.45") and row["day"] == datetime.date(2020, 1, 2)
    assert row["at"] == datetime.datetime(2020, 9, 13, 12, 26, 40, tzinfo=datetime.timezone.utc)


@pytest.mark.parametrize("raw,reason", [
    ("{not json", "not JSON"),
    (json.dumps({"before": None, "after": ROW}), "field 'op' is missing"),
    (event("x", after=ROW), "field 'op' is 'x', not c, r, u or d"),
    (event("t"), "field 'op' is 't' (a truncate)"),
    (event("c"), "field 'after' is missing or null"),
    (event("u", after=ROW), "field 'before' is missing or null: an update needs the row it replaces"),
    (event("d"), "field 'before' is missing or null: a delete needs the row it removes"),
    (event("c", after={k: v for k, v in ROW.items() if k != "name"}), "field 'after.name' is missing"),
    (event("c", after=dict(ROW, id="7")), "field 'after.id': expected an integer"),
    (event("c", after=dict(ROW, price="1.234")), "field 'after.price': expected a decimal(10,2)"),
    (event("c", after=dict(ROW, price="abc")), "field 'after.price': expected a decimal(10,2)"),
    (event("c", after=dict(ROW, day="soon")), "field 'after.day': expected a date"),
    (event("c", after=dict(ROW, ok="yes")), "field 'after.ok': expected a boolean"),
    (event("u", before=dict(ROW, at=[1]), after=ROW), "field 'before.at': expected a timestamp"),
])
def test_a_malformed_envelope_is_a_dead_letter_naming_the_field(raw, reason):
    e = debezium_rows([event("c", after=ROW), raw], COLUMNS)
    assert e.rows.num_rows == 1 and len(e.errors) == 1
    i, why = e.errors[0]
    assert i == 1 and reason in why, why


def test_spark_changelog_rows():
    t = pa.table({"id": [1, 1, 2, 3, 4], "_change_type": ["insert", "update_preimage", "update_postimage", "merge",
                                                          None],
                  "_commit_version": [1, 2, 2, 2, None]})
    rows, versions, bad = changelog_rows(t, {"id": "bigint"})
    assert rows.to_pylist() == [{"id": 1, "diff": 1}, {"id": 1, "diff": -1}, {"id": 2, "diff": 1}]
    assert versions.tolist() == [1, 2, 2]
    assert [i for i, _ in bad] == [3, 4] and "'merge'" in bad[0][1] and "'_commit_version' is null" in bad[1][1]


def _history(seed: int):
    """A random table history as Debezium events (one per commit, at increasing LSNs) and the table after each."""
    rng = random.Random(seed)
    rows, events, states = {}, [], []
    for lsn in range(1, 25):
        op = rng.choice("ccud") if rows else "c"
        if op == "c":
            k = max(rows, default=0) + 1
            rows[k] = dict(ROW, id=k, name=rng.choice("abc"), price=str(decimal.Decimal(rng.randint(0, 999)).scaleb(-2)))
            events.append((lsn, event("c", after=rows[k], lsn=lsn)))
        elif op == "u":
            k = rng.choice(sorted(rows))
            new = dict(rows[k], name=rng.choice("abc"))
            events.append((lsn, event("u", before=rows[k], after=new, lsn=lsn)))
            rows[k] = new
        else:
            k = rng.choice(sorted(rows))
            events.append((lsn, event("d", before=rows.pop(k), lsn=lsn)))
        states.append((lsn, [dict(r) for r in rows.values()]))
    return events, states


SQL = "SELECT name, COUNT(*) AS n, SUM(price) AS total FROM orders GROUP BY name"


def _state_table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist([{"name": r["name"], "price": decimal.Decimal(r["price"])} for r in rows],
                                schema=pa.schema([("name", pa.string()), ("price", pa.decimal128(10, 2))]))


@settings(max_examples=4)
@given(seed=st.integers(0, 10**6))
def test_debezium_out_of_order_duplicate_and_malformed_events(seed, tmp_path_factory):
    """Each run's reader returns the new events shuffled, some again (duplicates, within the read and of
    earlier runs) and a malformed one; the view's table equals DuckDB's at every run's last position."""
    root = str(tmp_path_factory.mktemp("dbz"))
    events, states = _history(seed)
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(events)), 3)) + [len(events)]
    delivered, doubled = [0], [0]

    def read(since):
        upto = cuts[delivered[0]]
        batch = [e for e in events if (since or 0) - 3 < e[0] <= upto]   # a redelivery of 3 earlier positions
        doubled[0] = min(2, len(batch))
        batch += rng.sample(batch, doubled[0])                             # duplicates within the read
        rng.shuffle(batch)                                                  # out of order
        batch.append((upto, json.dumps({"op": "u", "after": ROW})))         # malformed: no before
        return pa.table({"offset": [p for p, _ in batch], "value": [v for _, v in batch]})

    p = Pipeline(f"{root}/state", name="dbz", dead_letters=f"{root}/dead")
    p.table("orders", changelog(read, COLUMNS, format="debezium", position="offset", name="orders-topic"))
    p.view("by_name", SQL, key="name")
    p.sink("by_name", delta_table(f"{root}/out"))
    from deltalake import DeltaTable
    for i, upto in enumerate(cuts):
        delivered[0] = i
        r = p.refresh()
        assert r.sources["orders"].duplicates >= doubled[0] > 0 and r.sources["orders"].rejected == 1
        state = dict(states)[upto]
        want = duckdb_answer(SQL, {"orders": _state_table(state)}, ["name", "n", "total"])
        assert bag(DeltaTable(f"{root}/out").to_pyarrow_table(), ["name", "n", "total"]) == want
        with open(f"{root}/dead/run-{i:012d}.jsonl") as f:
            dead = [json.loads(line) for line in f]
        assert len(dead) == 1 and "field 'before' is missing" in dead[0]["error"]
    p.close()


def test_malformed_rows_fail_the_run_without_a_dead_letter_directory(tmp_path):
    t = pa.table({"id": [1], "name": ["a"], "price": [None], "day": [None], "at": [None], "ok": [None],
                  "_change_type": ["upsert"], "_commit_version": [1]}).cast(pa.schema([
                      ("id", pa.int64()), ("name", pa.string()), ("price", pa.decimal128(10, 2)), ("day", pa.date32()),
                      ("at", pa.timestamp("us", tz="UTC")), ("ok", pa.bool_()), ("_change_type", pa.string()),
                      ("_commit_version", pa.int64())]))
    p = Pipeline(f"{tmp_path}/state", name="x")
    p.table("orders", changelog(lambda since: t, COLUMNS))
    p.view("v", "SELECT id FROM orders")
    with pytest.raises(PipelineError, match=r"field '_change_type' is 'upsert'.*dead_letters=DIR"):
        p.refresh()
    p.close()


def test_the_streaming_hook_parses_kafka_messages():
    """``parse_debezium_input`` has ``parse_input``'s contract: fields, time, diff, provenance; dead letters."""
    from ddflow.streaming.parse import InputSpec
    spec = InputSpec("orders", list(COLUMNS), format="debezium", time="kafka.offset", nullable=True)
    msgs = [event("c", after=ROW).encode(), event("u", before=ROW, after=dict(ROW, name="b")).encode(), b"{oops",
            None]
    table = pa.table({"topic": ["t"] * 4, "partition": [0] * 4, "offset": [10, 11, 12, 13], "value": msgs})
    out, bad = parse_debezium_input(spec, table, types=COLUMNS)
    assert out.column("name").to_pylist() == ["a", "a", "b"] and out.column("diff").to_pylist() == [1, -1, 1]
    assert out.column("time").to_pylist() == [10, 11, 11] and out.column("__offset").to_pylist() == [10, 11, 11]
    assert bad.num_rows == 1 and bad.column("offset").to_pylist() == [12] and "not JSON" in bad.column("error")[0].as_py()
    spec = InputSpec("orders", list(COLUMNS), format="debezium", time="source.lsn", nullable=True)
    out, bad = parse_debezium_input(spec, pa.table({"value": [event("c", after=ROW, lsn=99)]}), types=COLUMNS)
    assert out.column("time").to_pylist() == [99] and bad is None
