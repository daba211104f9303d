"""KafkaSink on the real (embedded) broker: a plain reader sees each change exactly once across restarts.

A crash in the middle of a batch's write leaves a prefix of each
partition's records on the topic; the restarted sink (a new instance, as
after a process restart) must write only the rest.  The oracle is the
same batches written by a sink that never stopped, read plainly (no
de-duplication), record for record and partition for partition.
"""
from __future__ import annotations

import json

import pyarrow as pa
import pytest

from ddflow.streaming.sinks import KafkaSink, SinkError, last_ids, read_changes, read_topic

pytestmark = pytest.mark.kafka


def changes(batch: int, n: int) -> pa.Table:
    return pa.table({"node": list(range(batch * 100, batch * 100 + n)), "root": [batch % 3] * n,
                     "time": [batch] * n, "diff": [1 if i % 4 else -1 for i in range(n)]})


def bag(records: list[dict]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in records)


def raw_records(bootstrap: str, topic: str) -> list[tuple[bytes, tuple]]:
    return [(v, tuple(sorted(h))) for v, h in read_topic(bootstrap, topic)]


@pytest.mark.parametrize("partitions", [1, 3])
@pytest.mark.parametrize("cut", [0, 1, 17, 40])
def test_a_restarted_sink_resumes_a_batch_after_what_a_crash_left(kafka_bootstrap, new_topic, partitions, cut):
    batches = {b: changes(b, 40) for b in range(3)}
    ref_topic, topic = new_topic(partitions), new_topic(partitions)
    ref = KafkaSink(kafka_bootstrap, ref_topic)
    for b, t in batches.items():
        ref.write(b, t)

    first = KafkaSink(kafka_bootstrap, topic)
    first.write(0, batches[0])
    first.write(1, batches[1].slice(0, cut))  # the records a crash in batch 1's write left on the topic
    first.close()
    again = KafkaSink(kafka_bootstrap, topic)  # the restart replays batch 1, then goes on
    again.write(1, batches[1])
    again.write(2, batches[2])
    assert again.skipped == cut
    # (Plain reads; the order across partitions is the consumer's, so compare as bags.)
    assert bag(read_changes(kafka_bootstrap, topic)) == bag(read_changes(kafka_bootstrap, ref_topic))
    assert sorted(raw_records(kafka_bootstrap, topic)) == sorted(raw_records(kafka_bootstrap, ref_topic))
    assert set(last_ids(kafka_bootstrap, topic).values()) <= {(2, s) for s in range(40)}


def test_a_replay_of_a_batch_written_in_full_writes_nothing(kafka_bootstrap, new_topic):
    topic = new_topic(2)
    KafkaSink(kafka_bootstrap, topic).write(0, changes(0, 25))
    again = KafkaSink(kafka_bootstrap, topic)
    again.write(0, changes(0, 25))
    assert again.skipped == 25 and len(read_changes(kafka_bootstrap, topic)) == 25


def test_a_topic_written_by_someone_else_is_refused(kafka_bootstrap, new_topic):
    from ddflow.streaming.broker import produce

    topic = new_topic(1)
    produce(kafka_bootstrap, topic, [(None, b"not ours")])
    with pytest.raises(SinkError, match="without batch_id/seq headers"):
        KafkaSink(kafka_bootstrap, topic).write(0, changes(0, 3))
