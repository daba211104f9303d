"""What a streaming query reports per micro-batch: a progress record shaped like Spark's
``StreamingQueryProgress``, its counters (dead letters by reason, late rows, source lag), and its metrics endpoint.

Spark users know ``query.lastProgress`` and ``query.recentProgress``: one
JSON object per micro-batch with ``batchId``, ``numInputRows``, the rates,
``durationMs`` by phase and ``stateOperators``.  ddflow's records keep those
names and meanings (phases are ddflow's own: ``toArrow``, ``run``,
``sink``, ``stateCommit``; ``triggerExecution`` is their whole), add what
Spark cannot say (``retractions`` per output, ``deadLetters`` by reason,
``frontier``), and go to listeners, to the last ``keep`` in memory, and to
``<state>/.progress.jsonl`` (hidden from the state store, which ignores
dot files), which ``python -m ddflow.top STATE_DIR`` reads.
"""
from __future__ import annotations

import collections
import datetime
import json
import os
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ddflow.base.metrics import Family, Histogram

#: Progress records kept in memory (Spark's ``spark.sql.streaming.numRecentProgressUpdates`` is 100 too).
RECENT = 100
#: The progress file of a state directory, and how many lines it keeps before it rolls over to ``.1``.
PROGRESS_FILE = ".progress.jsonl"
ROLL_LINES = 1000

#: Dead letters' reasons, by what their error text starts with or contains (first match wins).
_REASONS = (("late", lambda e: e.startswith("late:")),
            ("time_past_max", lambda e: e.startswith("time past the largest data time")),
            ("time_ahead", lambda e: e.startswith("time more than")),
            ("time_before_frontier", lambda e: e.startswith("time before the frontier")),
            ("function_raised", lambda e: e.startswith("operator ") and " raised " in e),
            ("rejected", lambda e: e.startswith("input ")))


def reason_of(error: str) -> str:
    """A dead letter's reason, one word for its error text: what the ``reason`` label of its counter says.

    ``late``, ``time_past_max``, ``time_ahead``, ``time_before_frontier``,
    ``function_raised`` (a row-wise function raised), ``rejected`` (the
    input refused the update: a removal of an absent record, a sum past
    int64) or ``malformed`` (the message did not parse, or a field was
    missing or of the wrong type).

    >>> reason_of("late: event time before the watermark 10"), reason_of("field 'src' is missing")
    ('late', 'malformed')
    """
    for name, test in _REASONS:
        if test(error):
            return name
    return "malformed"


class Progress:
    """A query's progress records and counters, kept across the dataflow's reopenings.

    Cost: per micro-batch, one record of O(operators) built from
    :meth:`ddflow.Dataflow.metrics`, one line appended to the progress
    file, and O(dead letters) to count them by reason.
    """

    def __init__(self, name: str, keep: int = RECENT):
        self.name = name
        self.run_id = os.urandom(8).hex()
        self.recent: collections.deque[dict] = collections.deque(maxlen=keep)
        self.listeners: list[Callable[[dict], None]] = []
        #: Dead letters by (input, reason), late rows by input, since this process started the query.
        self.dead_letters: collections.Counter[tuple[str, str]] = collections.Counter()
        self.late_rows: collections.Counter[str] = collections.Counter()
        self.batch_seconds = Histogram()
        self.batches = 0
        self.rows = 0
        #: Per (topic, partition): the next offset to read, the broker's end, the last read message's timestamp (s).
        self.offsets: dict[tuple[str, int], dict[str, Any]] = {}
        self.lag_probe: Callable[[str, list[int]], dict[int, int]] | None = None
        self.path: str | None = None
        self._last_start: float | None = None
        self._probed = 0.0

    # -- per micro-batch ---------------------------------------------------------------
    def count_dead(self, dead: pa.Table) -> None:
        """Count a batch's dead letters by input and reason (late rows apart too).  O(dead letters)."""
        for name, error in zip(dead.column("input").to_pylist(), dead.column("error").to_pylist()):
            reason = reason_of(error or "")
            self.dead_letters[(name, reason)] += 1
            if reason in ("late", "time_before_frontier"):
                self.late_rows[name] += 1

    def read_offsets(self, table: pa.Table | None) -> None:
        """Note how far each Kafka partition was read, from the batch's ``topic``, ``partition``, ``offset`` (and
        ``timestamp``) columns; then ask the broker, if a probe is set, where each partition ends.  A batch
        without those columns (not from Kafka, or routed) changes nothing."""
        if table is None or not {"topic", "partition", "offset"} <= set(table.column_names) or not table.num_rows:
            return
        cols = ["topic", "partition", "offset"] + (["timestamp"] if "timestamp" in table.column_names else [])
        aggs = [("offset", "max")] + ([("timestamp", "max")] if "timestamp" in cols else [])
        g = table.select(cols).group_by(["topic", "partition"]).aggregate(aggs).to_pylist()
        for row in g:
            key = (row["topic"], int(row["partition"]))
            seen = self.offsets.setdefault(key, {"read": 0, "end": None, "timestamp": None})
            seen["read"] = max(seen["read"], int(row["offset_max"]) + 1)
            ts = row.get("timestamp_max")
            if isinstance(ts, datetime.datetime):
                seen["timestamp"] = ts.replace(tzinfo=ts.tzinfo or datetime.UTC).timestamp()
        self.probe_lag()

    def probe_lag(self) -> None:
        """Ask the broker where each partition read so far ends (its high watermark).  O(partitions) requests."""
        if self.lag_probe is None:
            return
        self._probed = time.monotonic()
        by_topic: dict[str, list[int]] = collections.defaultdict(list)
        for topic, part in self.offsets.copy():  # copied at once: a scrape's thread reads it too
            by_topic[topic].append(part)
        for topic, parts in by_topic.items():
            for part, end in self.lag_probe(topic, sorted(parts)).items():
                self.offsets[(topic, part)]["end"] = end

    def lag(self) -> dict[str, dict]:
        """Per ``topic:partition``: ``offsets`` behind the broker's end and ``seconds`` since the last message
        read was written, when it is behind (0 when caught up); both None without a probe (``serveMetrics``'s
        ``kafkaBootstrap``)."""
        now = time.time()
        out = {}
        for (topic, part), s in sorted(self.offsets.copy().items()):
            behind = None if s["end"] is None else max(s["end"] - s["read"], 0)
            seconds = (None if behind is None or s["timestamp"] is None else 0.0 if behind == 0
                       else max(now - s["timestamp"], 0.0))
            out[f"{topic}:{part}"] = {"offsets": behind, "seconds": seconds, "read": s["read"], "end": s["end"]}
        return out

    def record(self, batch_id: int, rows: int, updates: int, durations: Mapping[str, float],
               metrics: Mapping[str, Any], outputs: Mapping[str, pa.Table], dead: int, started: float,
               watermark: Any = None) -> dict:
        """The progress record of one micro-batch (Spark's field names), kept, written and given to listeners.

        ``durations`` are seconds by phase; ``metrics`` the dataflow's
        :meth:`~ddflow.Dataflow.metrics` after the batch; ``started`` the
        batch's start (``time.perf_counter``).
        """
        total = sum(durations.values())
        since = started - self._last_start if self._last_start is not None else None
        self._last_start = started
        self.batches += 1
        self.rows += rows
        self.batch_seconds.observe(total)
        ops = metrics.get("operators", {})
        retractions = {}
        for name, t in outputs.items():
            retractions[name] = int(pc.sum(pc.less(t.column("diff"), 0)).as_py() or 0) if "diff" in t.column_names \
                else 0
        rec = {
            "id": self.name, "runId": self.run_id, "name": self.name,
            "timestamp": datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds"),
            "batchId": batch_id, "numInputRows": rows,
            "inputRowsPerSecond": rows / since if since else 0.0,
            "processedRowsPerSecond": rows / total if total > 0 else 0.0,
            "durationMs": {**{k: round(v * 1000.0, 3) for k, v in durations.items()},
                           "triggerExecution": round(total * 1000.0, 3)},
            "eventTime": {"watermark": watermark} if watermark is not None else {},
            "stateOperators": [{"operatorName": op, "kind": s.get("kind", ""), "numRowsTotal": s["records"],
                                "memoryUsedBytes": s["bytes"], "numRowsUpdated": s["updates_out"]}
                               for op, s in ops.items() if s["records"]],
            "sources": [{"description": key, "endOffset": s["read"], "latestOffset": s["end"],
                         "offsetsBehind": s["offsets"], "secondsBehind": s["seconds"]}
                        for key, s in self.lag().items()],
            "sink": {"description": "ddflow outputs", "numOutputRows": sum(t.num_rows for t in outputs.values())},
            "numUpdates": updates, "numDeadLetters": dead, "frontier": metrics.get("frontier"),
            "outputs": {name: {"numOutputRows": t.num_rows, "numRetractions": retractions[name]}
                        for name, t in outputs.items()},
        }
        self.recent.append(rec)
        self._write(rec)
        for fn in list(self.listeners):
            try:
                fn(rec)
            except Exception as e:  # noqa: BLE001 - a listener's failure must not fail the query (Spark's rule)
                warnings.warn(f"{self.name}: progress listener {fn!r} raised {type(e).__name__}: {e}", stacklevel=2)
        return rec

    def _write(self, rec: dict) -> None:
        if self.path is None:
            return
        path = os.path.join(self.path, PROGRESS_FILE)
        line = json.dumps(rec, default=str) + "\n"
        # 0600 as the state's own files (it names the query's operators and sources), whatever the umask.
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.write(line)
        if self.batches % ROLL_LINES == 0:
            os.replace(path, path.replace(".jsonl", ".1.jsonl"))

    # -- metrics -----------------------------------------------------------------------
    def families(self) -> list[Family]:
        """The query's own families (beside the dataflow's, :func:`ddflow.base.metrics.families`).

        ``ddflow_batches_total``, ``ddflow_input_rows_total``,
        ``ddflow_batch_seconds`` (histogram), ``ddflow_dead_letters_total``
        by input and reason, ``ddflow_late_rows_total`` by input; the lag
        is :meth:`lag_families`, read when scraped.
        """
        q = {"query": self.name}
        out = [Family("ddflow_batches_total", "counter", "Micro-batches processed.", [(q, self.batches)]),
               Family("ddflow_input_rows_total", "counter", "Rows the micro-batches brought.", [(q, self.rows)]),
               Family("ddflow_batch_seconds", "histogram", "Seconds a micro-batch took, all phases.",
                      [(q, self.batch_seconds)])]
        dl = Family("ddflow_dead_letters_total", "counter", "Dead letters, by input and reason.")
        for (name, reason), n in sorted(self.dead_letters.items()):
            dl.add({**q, "input": name, "reason": reason}, n)
        late = Family("ddflow_late_rows_total", "counter", "Rows dropped behind the watermark, by input.")
        for name, n in sorted(self.late_rows.items()):
            late.add({**q, "input": name}, n)
        return out + [dl, late]

    def lag_families(self, fresh: float | None = 1.0) -> list[Family]:
        """Per Kafka partition read: ``ddflow_source_lag_offsets`` and ``ddflow_source_lag_seconds``.

        Asks the broker again first when its last answer is older than
        ``fresh`` seconds (None: never), so a scrape sees the lag grow while
        no micro-batch runs (a stuck query is the case that matters).
        """
        if fresh is not None and time.monotonic() - self._probed >= fresh:
            self.probe_lag()
        q = {"query": self.name}
        lag_o = Family("ddflow_source_lag_offsets", "gauge", "Messages a Kafka partition holds past what was read.")
        lag_s = Family("ddflow_source_lag_seconds", "gauge",
                       "Seconds since the last message read was written, while the partition is behind.")
        for key, s in self.lag().items():
            topic, part = key.rsplit(":", 1)
            labels = {**q, "topic": topic, "partition": part}
            if s["offsets"] is not None:
                lag_o.add(labels, s["offsets"])
            if s["seconds"] is not None:
                lag_s.add(labels, s["seconds"])
        return [lag_o, lag_s]


def kafka_lag_probe(bootstrap: str) -> Callable[[str, list[int]], dict[int, int]]:
    """A probe that asks the broker at ``bootstrap`` where partitions end (confluent-kafka).

    The end as :func:`ddflow.streaming.broker.probe_end_offsets` finds it
    (a broker's reported high watermark can be a lower bound; it reads the
    last record batch forward).  One consumer, made on first use, kept by
    the probe; ``probe.close()`` releases it.  Cost: a watermark request
    and a short read per partition asked about.
    """
    holder: list[Any] = []
    lock = threading.Lock()  # the query's thread (a batch's record) and the endpoint's (a scrape) both ask

    def probe(topic: str, parts: list[int]) -> dict[int, int]:
        from confluent_kafka import Consumer
        from ddflow.streaming.broker import consumer_config, probe_end_offsets

        with lock:
            if not holder:
                holder.append(Consumer(consumer_config(bootstrap, **{"group.id": "ddflow-lag-probe"})))
            return probe_end_offsets(holder[0], topic, parts, bootstrap)

    def close() -> None:
        with lock:
            if holder:
                holder.pop().close()

    probe.close = close  # type: ignore[attr-defined]
    return probe


def read_progress(state_dir: str, last: int = 1) -> list[dict]:
    """The last ``last`` progress records a query wrote to its state directory (oldest first); [] if none.

    What ``python -m ddflow.top STATE_DIR`` shows.  Cost: one read of the
    progress file (at most ``ROLL_LINES`` lines).
    """
    lines: list[str] = []
    for fn in (PROGRESS_FILE.replace(".jsonl", ".1.jsonl"), PROGRESS_FILE):
        p = os.path.join(state_dir, fn)
        if os.path.exists(p):
            with open(p, encoding="utf-8") as f:
                lines += [line for line in f if line.strip()]
    out = []
    for line in lines[-last:]:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a line cut short by a crash while it was written
    return out

