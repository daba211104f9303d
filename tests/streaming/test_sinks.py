"""Sinks without a broker: JSON encoding of Kafka records, idempotent file sinks, accumulation."""
import json

import pyarrow as pa
import pyarrow.compute as pc

from ddflow.streaming.sinks import JsonLinesSink, MemorySink, ParquetSink, _json_strings, accumulate


def test_json_strings_round_trip_every_kind():
    t = pa.table({"i": [1, -2, 2**62], "b": [True, False, True], "s": ['a"b', None, "ü"], "f": [1.5, -0.0, 3.0],
                  "n": pa.array([1, None, 3], pa.int64())})
    for name in t.column_names:
        texts = _json_strings(t.column(name)).to_pylist()
        assert [json.loads(x) for x in texts] == t.column(name).to_pylist(), name


def test_kafka_record_values_parse_to_the_changes():
    """The element-wise join KafkaSink uses gives one valid JSON object per change."""
    t = pa.table({"node": [3, 4], "root": ["x", "y"], "time": [7, 8], "diff": [1, -1]})
    texts = [_json_strings(t.column(c)) for c in ("node", "root")]
    v = pc.binary_join_element_wise('{"record": [', texts[0], ", ", texts[1], '], "time": ',
                                    _json_strings(t.column("time")), ', "diff": ', _json_strings(t.column("diff")), "}", "")
    assert [json.loads(x) for x in v.to_pylist()] == [
        {"record": [3, "x"], "time": 7, "diff": 1}, {"record": [4, "y"], "time": 8, "diff": -1}]


def test_file_sinks_rewrite_a_replayed_batch(tmp_path):
    a = pa.table({"k": [1, 2], "time": [0, 0], "diff": [1, 1]})
    b = pa.table({"k": [2], "time": [1], "diff": [-1]})
    for sink in (ParquetSink(str(tmp_path / "pq")), MemorySink()):
        sink.write(0, a)
        sink.write(1, b)
        sink.write(1, b)  # a replay of batch 1 replaces it, it does not add to it
        assert accumulate(sink.table()) == {(1,): 1}
    dl = JsonLinesSink(str(tmp_path / "dl"))
    dl.write(3, pa.table({"error": ["bad"], "value": [b"\xff"]}))
    dl.write(3, pa.table({"error": ["bad"], "value": [b"\xff"]}))
    assert [r["error"] for r in dl.rows()] == ["bad"]
