"""KafkaSink on the real (embedded) broker: a plain reader sees each change exactly once across restarts.

A crash in the middle of a batch's write leaves a prefix of each
partition's records on the topic; the restarted sink (a new instance, as
after a process restart) must write only the rest.  The oracle is the
same batches written by a sink that never stopped, read plainly (no
de-duplication), record for record and partition for partition.

A record on the topic that the sink did not write, or that does not
match what the replay would write at that point, stops the sink with an
error naming it: it is never a reason to skip.
"""
from __future__ import annotations

import json

import pyarrow as pa
import pytest

from ddflow.streaming.broker import produce
from ddflow.streaming.sinks import (AUTH_HEADER, KafkaSink, SinkError, _read_all, authenticator, encode_records,
                                    last_ids, read_changes, read_topic, sink_key)

pytestmark = pytest.mark.kafka

KEY = b"a state key of this test, 32 b.."


def changes(batch: int, n: int) -> pa.Table:
    """A batch's changes, already in the sink's order (4-digit nodes: their JSON text sorts as the numbers do),
    so the first rows of the table are the first records the sink writes."""
    return pa.table({"node": list(range(1000 + batch * 100, 1000 + batch * 100 + n)), "root": [batch % 3] * n,
                     "time": [batch] * n, "diff": [1 if i % 4 else -1 for i in range(n)]})


def bag(records: list[dict]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in records)


def raw_records(bootstrap: str, topic: str) -> list[tuple[bytes, tuple]]:
    """(value, headers) of every record, the authenticator left out (it covers the topic's name)."""
    return [(v, tuple(sorted(x for x in h if x[0] != AUTH_HEADER))) for v, h in read_topic(bootstrap, topic)]


def count(bootstrap: str, topic: str) -> int:
    return len(read_topic(bootstrap, topic))


def test_changes_are_in_the_sinks_order():
    t = changes(1, 40)
    assert encode_records(t) == encode_records(t.take(list(reversed(range(40)))))
    assert [json.loads(v)["record"][0] for v in encode_records(t)[0]] == t.column("node").to_pylist()


@pytest.mark.parametrize("partitions", [1, 3])
@pytest.mark.parametrize("cut", [0, 1, 17, 40])
def test_a_restarted_sink_resumes_a_batch_after_what_a_crash_left(kafka_bootstrap, new_topic, partitions, cut):
    batches = {b: changes(b, 40) for b in range(3)}
    ref_topic, topic = new_topic(partitions), new_topic(partitions)
    ref = KafkaSink(kafka_bootstrap, ref_topic, key=KEY)
    for b, t in batches.items():
        ref.write(b, t)

    first = KafkaSink(kafka_bootstrap, topic, key=KEY)
    first.write(0, batches[0])
    first.write(1, batches[1].slice(0, cut))  # the records a crash in batch 1's write left on the topic
    first.close()
    again = KafkaSink(kafka_bootstrap, topic, key=KEY)  # the restart replays batch 1, then goes on
    again.write(1, batches[1].take(list(reversed(range(40)))))  # (in another row order: the same records)
    again.write(2, batches[2])
    assert again.skipped == cut
    # (Plain reads; the order across partitions is the consumer's, so compare as bags.)
    assert bag(read_changes(kafka_bootstrap, topic)) == bag(read_changes(kafka_bootstrap, ref_topic))
    assert sorted(raw_records(kafka_bootstrap, topic)) == sorted(raw_records(kafka_bootstrap, ref_topic))
    assert set(last_ids(kafka_bootstrap, topic).values()) <= {(2, s) for s in range(40)}
    assert len(read_changes(kafka_bootstrap, topic, state_key=KEY)) == 120  # every record is the query's


def test_a_replay_of_a_batch_written_in_full_writes_nothing(kafka_bootstrap, new_topic):
    topic = new_topic(2)
    KafkaSink(kafka_bootstrap, topic, key=KEY).write(0, changes(0, 25))
    again = KafkaSink(kafka_bootstrap, topic, key=KEY)
    again.write(0, changes(0, 25))
    assert again.skipped == 25 and len(read_changes(kafka_bootstrap, topic)) == 25


def test_a_topic_written_by_someone_else_is_refused(kafka_bootstrap, new_topic):
    topic = new_topic(1)
    produce(kafka_bootstrap, topic, [(None, b"not ours")])
    with pytest.raises(SinkError, match=f"Kafka topic '{topic}' partition 0 offset 0: a record without"):
        KafkaSink(kafka_bootstrap, topic, key=KEY).write(0, changes(0, 3))
    assert count(kafka_bootstrap, topic) == 1


def forge(bootstrap: str, topic: str, headers: list, value: bytes = b'{"record": [1], "time": 0, "diff": 1}',
          partition: int = 0) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap})
    p.produce(topic, value=value, key=b"1", partition=partition, headers=headers)
    assert p.flush(10) == 0


@pytest.mark.parametrize("how", ["no authenticator", "a made-up authenticator", "another query's key",
                                 "copied from another partition"])
def test_a_forged_record_stops_the_next_sink_and_is_never_a_reason_to_skip(kafka_bootstrap, new_topic, how):
    """The issue's attack: a record with header batch_id=999999999 made a restarted sink skip the next batch."""
    topic = new_topic(2)
    first = KafkaSink(kafka_bootstrap, topic, key=KEY)
    first.write(0, changes(0, 10))
    first.close()
    value = b'{"record": [1], "time": 0, "diff": 1}'
    headers = [("batch_id", b"999999999"), ("seq", b"0")]
    if how == "a made-up authenticator":
        headers.append((AUTH_HEADER, b"0" * 64))
    elif how == "another query's key":
        headers.append((AUTH_HEADER, authenticator(sink_key(b"another key, of another query.."), topic, 1,
                                                   999999999, 0, b"1", value)))
    elif how == "copied from another partition":  # genuine for partition 0, put on partition 1
        headers.append((AUTH_HEADER, authenticator(sink_key(KEY), topic, 0, 999999999, 0, b"1", value)))
    forge(kafka_bootstrap, topic, headers, value, partition=1)
    n = count(kafka_bootstrap, topic)
    offset = max(o for p, o, *_ in _read_all(kafka_bootstrap, topic) if p == 1)
    again = KafkaSink(kafka_bootstrap, topic, key=KEY)
    with pytest.raises(SinkError, match=f"Kafka topic '{topic}' partition 1 offset {offset}: a record") as e:
        again.write(1, changes(1, 10))
    assert ("without" in str(e.value)) == (how == "no authenticator")
    assert again.skipped == 0 and count(kafka_bootstrap, topic) == n  # nothing skipped, nothing written


def test_a_last_record_of_a_later_batch_is_an_error(kafka_bootstrap, new_topic):
    """Genuine records of batch 5 on the topic while the sink writes batch 3: the topic is ahead of the state."""
    topic = new_topic(1)
    KafkaSink(kafka_bootstrap, topic, key=KEY).write(5, changes(5, 4))
    again = KafkaSink(kafka_bootstrap, topic, key=KEY)
    with pytest.raises(SinkError, match=r"offset 3: the last record is of batch 5, later than batch 3"):
        again.write(3, changes(3, 4))
    assert count(kafka_bootstrap, topic) == 4


def test_a_replay_that_differs_from_the_first_run_is_an_error(kafka_bootstrap, new_topic):
    """The topic holds the first 6 records of batch 1; the replay has other records there: no skip, no write."""
    topic = new_topic(1)
    first = KafkaSink(kafka_bootstrap, topic, key=KEY)
    first.write(1, changes(1, 6))
    replay = changes(1, 20).set_column(3, "diff", pa.array([7] * 20))  # other values at every seq
    again = KafkaSink(kafka_bootstrap, topic, key=KEY)
    with pytest.raises(SinkError, match=r"partition 0 offset 5: record seq=5 of batch 1 is not the record this "
                                        r"replay of batch 1 has at seq 5"):
        again.write(1, replay)
    short = KafkaSink(kafka_bootstrap, topic, key=KEY)
    with pytest.raises(SinkError, match="is not the record this replay"):
        short.write(1, changes(1, 3))  # a replay with fewer records than the topic already holds
    assert count(kafka_bootstrap, topic) == 6


def test_a_sink_without_a_key_refuses_to_write(kafka_bootstrap, new_topic):
    topic = new_topic(1)
    with pytest.raises(SinkError, match="no key to sign its records with"):
        KafkaSink(kafka_bootstrap, topic).write(0, changes(0, 2))
    sink = KafkaSink(kafka_bootstrap, topic)
    sink.bind(KEY)  # what the driver does when the query opens
    sink.write(0, changes(0, 2))
    assert len(read_changes(kafka_bootstrap, topic, state_key=KEY)) == 2
    with pytest.raises(SinkError, match="is not this query's"):
        read_changes(kafka_bootstrap, topic, state_key=b"another key, of another query..")
    with pytest.raises(ValueError, match="at least 16 bytes"):
        KafkaSink(kafka_bootstrap, topic, key=b"short")
