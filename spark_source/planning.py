"""Pure planning: offset ranges, their splits, the per-trigger budget, data-loss checks.

Nothing here talks to a broker; the readers feed it offsets they resolved.
The splitting and rate-limit rules are those of Spark's Kafka source
(`KafkaOffsetRangeCalculator`, `KafkaMicroBatchStream.rateLimit`), so a query
plans the same batches after switching from `format("kafka")`. One rule is ours:
small ranges are packed into one task (`pack_ranges`), because a Spark task of a
Python source costs tens of milliseconds before it reads a record.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from spark_source.offsets import PartitionOffsets

__all__ = [
    "OffsetRange",
    "DataLossError",
    "report_data_loss",
    "plan_ranges",
    "split_ranges",
    "pack_ranges",
    "rate_limit",
    "clamp_latest",
]

log = logging.getLogger("raftkafka.spark")

_INSTRUCTION = (" Some data may have been lost because they are not available in the cluster any more; either the"
                " data was aged out by retention or the topic may have been deleted before all the data in the"
                " topic was processed. If you don't want your streaming query to fail on such cases, set the"
                " source option 'failOnDataLoss' to 'false'.")


class DataLossError(RuntimeError):
    """Records the query should have read are gone (retention, topic deletion, truncation)."""


def report_data_loss(message: str, fail_on_data_loss: bool) -> None:
    """Raise (failOnDataLoss=true) or log a warning, as Spark's Kafka source does."""
    if fail_on_data_loss:
        raise DataLossError(message + _INSTRUCTION)
    log.warning("%s", message)


@dataclass(frozen=True, order=True)
class OffsetRange:
    """Records [start, end) of one topic partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def plan_ranges(start: PartitionOffsets, end: PartitionOffsets, earliest: PartitionOffsets,
                fail_on_data_loss: bool) -> list[OffsetRange]:
    """One range per topic partition of `end`, from `start` (or earliest for new partitions).

    `earliest` holds each partition's current log start; a start below it means
    retention deleted records we were meant to read. Empty ranges are dropped.
    """
    ranges = []
    for tp in sorted(end):
        until = end[tp]
        if tp in start:
            begin = start[tp]
        else:
            begin = earliest.get(tp, 0)
            if begin != 0:
                report_data_loss(f"Added partition {tp[0]}-{tp[1]} starts from {begin} instead of 0.",
                                 fail_on_data_loss)
        log_start = earliest.get(tp)
        if log_start is not None and begin < log_start and until > begin:
            report_data_loss(f"Cannot fetch offset {begin} of {tp[0]}-{tp[1]}: the log starts at {log_start} "
                             "(records were deleted by retention).", fail_on_data_loss)
            begin = min(log_start, until)
        if until < begin:
            report_data_loss(f"Partition {tp[0]}-{tp[1]}'s offset was changed from {begin} to {until}, "
                             "some data may have been missed.", fail_on_data_loss)
            continue
        if until > begin:
            ranges.append(OffsetRange(tp[0], tp[1], begin, until))
    missing = sorted(set(start) - set(end))
    if missing:
        names = ", ".join(f"{t}-{p}" for t, p in missing)
        report_data_loss(f"Partitions {names} are gone (topic deleted?), some data may have been missed.",
                         fail_on_data_loss)
    return ranges


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None = None,
                 max_records_per_partition: int | None = None) -> list[OffsetRange]:
    """Split big ranges so there are about `min_partitions` tasks / at most N records per task.

    As KafkaOffsetRangeCalculator: `min_partitions` only acts when it exceeds the
    range count; each range gets round(size / ideal) pieces (at least one), and the
    last piece takes the rounding remainder.
    """
    out = list(ranges)
    if max_records_per_partition is not None:
        out = [piece for r in out for piece in _divide(r, math.ceil(r.size / max_records_per_partition))]
    if min_partitions is not None and min_partitions > len(out):
        total = sum(r.size for r in out)
        if total > 0:
            ideal = total / min_partitions
            out = [piece for r in out for piece in _divide(r, max(int(math.floor(r.size / ideal + 0.5)), 1))]
    return [r for r in out if r.size > 0]


def pack_ranges(ranges: list[OffsetRange], min_records: int | None,
                max_records: int | None = None) -> list[tuple[OffsetRange, ...]]:
    """Group consecutive ranges into tasks: a task takes the next range while it holds fewer than
    `min_records` records, and never goes past `max_records` (maxRecordsPerPartition) by packing.
    None: one range per task, as Spark's Kafka source plans.

    Deterministic in its inputs, so a replayed micro-batch gives each task the same rows (the
    sink's precondition, sink_protocol.py)."""
    if not min_records:
        return [(r,) for r in ranges]
    tasks: list[list[OffsetRange]] = []
    held = 0
    for r in ranges:
        if tasks and held < min_records and (max_records is None or held + r.size <= max_records):
            tasks[-1].append(r)
            held += r.size
        else:
            tasks.append([r])
            held = r.size
    return [tuple(task) for task in tasks]


def _divide(r: OffsetRange, parts: int) -> list[OffsetRange]:
    pieces, remaining, begin = [], r.size, r.start
    for part in range(max(parts, 1)):
        this = remaining // (parts - part)
        remaining -= this
        end = min(begin + this, r.end)
        pieces.append(OffsetRange(r.topic, r.partition, begin, end))
        begin = end
    return pieces


def rate_limit(start: PartitionOffsets, latest: PartitionOffsets, max_rows: int) -> PartitionOffsets:
    """Cap the next batch at about `max_rows`, shared in proportion to each partition's backlog.

    A share below one record is rounded up ("don't completely starve small
    topic partitions"), others down, and no partition passes its latest offset.
    Partitions absent from `start` count from 0 here (they are new and start at earliest,
    which the caller folded into `start` already when it knows it).
    """
    sizes = {tp: latest[tp] - start.get(tp, 0) for tp in sorted(latest) if latest[tp] - start.get(tp, 0) > 0}
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(latest)
    out: PartitionOffsets = {}
    for tp in sorted(latest):
        if tp not in sizes:
            out[tp] = latest[tp]
            continue
        share = max_rows * (sizes[tp] / total)
        take = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(latest[tp], start.get(tp, 0) + take)
    return out


def clamp_latest(start: PartitionOffsets, latest: PartitionOffsets) -> PartitionOffsets:
    """Never hand Spark an end below where a partition already is.

    Only committed (high-watermark) offsets are read, and those never move back
    on a healthy cluster; a leader that answers with a lower watermark during a
    hand-off is a transient view, so the previous position stands (reference
    spark.md §3.7-2). Real loss shows up as a log start above our position.
    """
    out = dict(latest)
    for tp, offset in sorted(start.items()):
        if tp in out and out[tp] < offset:
            out[tp] = offset
    return out

