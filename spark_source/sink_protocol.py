"""The exactly-once streaming sink protocol (no Spark imports; `LogClient` only).

Per sink id S there is a one-partition ledger topic `_raftkafka-sink-S`.

Task (batch B, Spark partition P), in `write_task`:
1. Scan the ledger backwards to the last `commit` of a batch < B. If a
   `commit` of B (or later) is there, batch B already reached the sink: write
   nothing (a query restarted after the sink commit but before Spark's own
   `commits/B`).
2. If an earlier attempt of (B, P) left a `begin` record, read the target
   partitions from the marks in it and collect the row indexes it already wrote
   (each record carries a header `raftkafka.sink` = "S:B:P:i"). Otherwise
   append `begin` (with each target partition's high watermark as its mark)
   before writing any data. The target partitions are those of the `topic`
   option, or else those the task's rows go to (all rows are read first then).
3. Append the rows not yet written, in order per target partition, as whole
   batches (`SinkRows.sections`), a chunk of rows at a time as Spark hands them
   over, acks=all, idempotently (`BatchAppender`): a
   batch re-sent inside this attempt (lost answer, leader change) is dropped by
   the broker if it had landed. If the appender gives up on a batch (delivery
   timeout, fatal error), the task fails with
   AmbiguousWriteError and the next attempt (Spark's task retry, or the
   restarted query re-running batch B) resumes at step 1.

Driver, `commit(B)`: append `commit` B to the ledger.

Guarantee: every row of a micro-batch is appended to its target exactly once
across task retries and query restarts, provided (a) the task's input rows and
their order are the same on a re-run (true for narrow transformations over a
replayable source such as raftkafka, Spark's precondition for idempotent sinks),
(b) no two attempts of one task run at the same time (no speculative execution),
(c) the ledger and target partitions keep their records (no retention below
them while the batch may re-run), and (d) a failed attempt's last appends are
committed (or truncated by a leader change) before the next attempt scans: the
scan reads up to the high watermark, so an append still waiting for its
replicas at that moment would be missed and written again. Attempts are
seconds apart (Spark reschedules a task; a query restarts) while replication
takes milliseconds, and a producer's retries end with its delivery timeout.
A batch that fails and is never re-run may leave a prefix of its rows written.
Records carry the `raftkafka.sink` header. Within one attempt rows keep their
order per partition; a re-run appends the missing rows after the others.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterable

from spark_source.cluster_io import EARLIEST_TS, LATEST_TS, LogClient, appending, scan
from spark_source.offsets import TopicPartition
from spark_source.sink_rows import SinkRows
from wire.batch_header import HEADER_SIZE
from wire.records import SimpleRecord, build_batch

__all__ = ["SINK_HEADER", "ledger_topic", "LedgerView", "read_ledger", "append_ledger", "write_task", "TaskResult"]

SINK_HEADER = "raftkafka.sink"


def ledger_topic(sink_id: str) -> str:
    return f"_raftkafka-sink-{sink_id}"


@dataclass
class LedgerView:
    committed: bool                                  # batch B already committed
    marks: dict[TopicPartition, int] | None          # from an earlier attempt's begin record


@dataclass
class TaskResult:
    written: int
    skipped_as_duplicates: int
    batch_already_committed: bool


def read_ledger(client: LogClient, sink_id: str, batch_id: int, task: int) -> LedgerView:
    """Newest-first scan of the ledger back to the last commit of an earlier batch."""
    tp = (ledger_topic(sink_id), 0)
    log_start = client.list_offsets([tp], EARLIEST_TS)[tp]
    end = client.list_offsets([tp], LATEST_TS)[tp]
    window, upper, marks = 64, end, None
    while upper > log_start:
        lower = max(log_start, upper - window)
        entries = [json.loads(rec.value) for rec in scan(client, tp, lower, upper)]
        for entry in reversed(entries):
            if entry["kind"] == "commit":
                if entry["batch"] >= batch_id:
                    return LedgerView(True, None)
                return LedgerView(False, marks)
            if entry["kind"] == "begin" and entry["batch"] == batch_id and entry["task"] == task:
                marks = {(t, int(p)): off for t, parts in entry["marks"].items() for p, off in parts.items()}
        upper, window = lower, window * 4
    return LedgerView(False, marks)


def append_ledger(client: LogClient, sink_id: str, entry: dict, timestamp_ms: int) -> None:
    """One ledger record, through the same idempotent batch appends as the data (no producer is
    started for it: Spark commits each micro-batch from a fresh Python process)."""
    value = json.dumps(entry, sort_keys=True, separators=(",", ":")).encode()
    section = build_batch([SimpleRecord(None, value)], base_timestamp=0)[HEADER_SIZE:]
    client.produce_sections([((ledger_topic(sink_id), 0), section, 1)], timestamp_ms)


def _tag(sink_id: str, batch_id: int, task: int) -> str:
    return f"{sink_id}:{batch_id}:{task}:"


def already_written(client: LogClient, marks: dict[TopicPartition, int], sink_id: str, batch_id: int,
                    task: int) -> set[int]:
    """Row indexes of (batch, task) found in the target partitions at or after their marks."""
    prefix = _tag(sink_id, batch_id, task).encode()
    done: set[int] = set()
    for tp in sorted(marks):
        end = client.list_offsets([tp], LATEST_TS)[tp]
        for rec in scan(client, tp, marks[tp], end):
            for key, value in rec.headers:
                if key == SINK_HEADER and value is not None and value.startswith(prefix):
                    done.add(int(value[len(prefix):]))
    return done


def write_task(client: LogClient, sink_id: str, batch_id: int, task: int, chunks: Iterable[SinkRows], *,
               timestamp_ms: int, targets: list[TopicPartition] | None = None) -> TaskResult:
    """Steps 1-3 of the protocol for one task. `chunks`: the task's rows in input order, a chunk
    at a time as Spark hands them over. `targets`: every partition a row may go to, when known
    before the rows (the `topic` option's): then each chunk is appended as it comes, while the
    next is read; otherwise all chunks are read first, to mark the partitions they use."""
    view = read_ledger(client, sink_id, batch_id, task)
    if view.committed:
        return TaskResult(0, sum(len(chunk) for chunk in chunks), True)
    marks = view.marks
    done: set[int] = set()
    if marks is None:
        if targets is None:
            chunks = list(chunks)
            targets = sorted({tp for chunk in chunks for tp in chunk.used_targets()})
        marks = client.list_offsets(targets, LATEST_TS) if targets else {}
        append_ledger(client, sink_id, {"kind": "begin", "batch": batch_id, "task": task,
                                        "marks": _nested(marks)}, timestamp_ms)
    else:
        done = already_written(client, marks, sink_id, batch_id, task)
    tag, rows = _tag(sink_id, batch_id, task).encode(), 0
    # AmbiguousWriteError fails the task; the next attempt resumes from the ledger.
    with appending(client, timestamp_ms) as writer:
        for chunk in chunks:
            rows += len(chunk)
            writer.add(chunk.sections(done, tag))
    skipped = sum(1 for i in done if i < rows)
    return TaskResult(rows - skipped, skipped, False)


def _nested(marks: dict[TopicPartition, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(marks.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out
