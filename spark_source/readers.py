"""Batch and streaming readers (pyspark.sql.datasource), thin over the pure planning code.

Process model (reference spark.md §2.2): the object that answers
`latestOffset`/`partitions` is not the one whose `read()` runs, and both are
pickled. So readers hold only options; the cluster client is opened lazily and
cached per process (`shared_client`), and everything `read()` needs travels in
the `RangePartition`.
"""
from __future__ import annotations

import time
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from spark_source.cluster_io import EARLIEST_TS, LATEST_TS, LogClient, shared_client
from spark_source.initial_offsets import describe_source, initial_offsets
from spark_source.offsets import PartitionOffsets, from_json_dict, to_json_dict
from spark_source.options import SourceOptions
from spark_source.planning import OffsetRange, clamp_latest, pack_ranges, plan_ranges, rate_limit, split_ranges
from spark_source.range_reader import POLL_WAIT_S, read_range
from spark_source.resolve import discover, resolve

__all__ = ["RangePartition", "RaftKafkaBatchReader", "RaftKafkaStreamReader"]


class RangePartition(InputPartition):
    """The offset ranges one task reads, in order: everything a task's read() needs."""

    def __init__(self, ranges: tuple[OffsetRange, ...]):
        super().__init__(ranges)
        self.ranges = ranges

    def __repr__(self) -> str:
        return "RangePartition(" + ", ".join(f"{r.topic}-{r.partition} [{r.start}, {r.end})" for r in self.ranges) + ")"


class _ReaderBase:
    def __init__(self, options: SourceOptions):
        self.options = options

    def _client(self) -> LogClient:
        o = self.options
        return shared_client(o.bootstrap_servers, o.client_id, o.request_timeout_ms, o.security, o.tuning)

    def _to_partitions(self, ranges: list[OffsetRange]) -> list[RangePartition]:
        o = self.options
        pieces = split_ranges(ranges, o.min_partitions, o.max_records_per_partition)
        # minPartitions asks for parallelism: then every piece is its own task, as in Spark's Kafka source.
        packed = pack_ranges(pieces, None if o.min_partitions else o.min_records_per_partition,
                             o.max_records_per_partition)
        return [RangePartition(task) for task in packed]

    def _earliest(self, tps) -> PartitionOffsets:
        return self._client().list_offsets(sorted(tps), EARLIEST_TS) if tps else {}

    def read(self, partition):
        if not isinstance(partition, RangePartition):
            return  # Spark's placeholder when there is nothing to read
        o, client = self.options, self._client()
        for i, r in enumerate(partition.ranges):
            if i + 1 < len(partition.ranges):  # its first answer travels while this range is decoded
                after = partition.ranges[i + 1]
                client.prefetch_raw((after.topic, after.partition), after.start, max_wait_s=POLL_WAIT_S)
            yield from read_range(client, r, include_headers=o.include_headers,
                                  fail_on_data_loss=o.fail_on_data_loss,
                                  wait_timeout_s=(o.poll_timeout_ms or o.request_timeout_ms) / 1000)


class RaftKafkaBatchReader(_ReaderBase, DataSourceReader):
    def partitions(self):
        o, client = self.options, self._client()
        tps = discover(client, o.subscription)
        start = resolve(client, o.starting, tps, ending=False, option="startingOffsets")
        end = resolve(client, o.ending, tps, ending=True, option="endingOffsets")
        ranges = plan_ranges(start, end, self._earliest(tps), o.fail_on_data_loss)
        return self._to_partitions(ranges)


class RaftKafkaStreamReader(_ReaderBase, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are `{"topic": {"partition": next_offset}}`; only committed offsets, never moving back."""

    def __init__(self, options: SourceOptions):
        super().__init__(options)
        self._initial: dict | None = None
        self._target: PartitionOffsets | None = None  # frozen end for trigger(availableNow=True)
        self._last_trigger: float | None = None       # for minOffsetsPerTrigger + maxTriggerDelay
        self._latest: PartitionOffsets = {}

    def initialOffset(self) -> dict:
        # Spark asks twice per query start, and again after a restart while batch 0 has not committed
        # (G9): every answer must be the same. Earliest/explicit starts resolve the same each time;
        # others are stored in the cluster on first use when the query has a sourceId (without one
        # they are resolved once per query process: options.py warns).
        if self._initial is None:
            o, client = self.options, self._client()

            def resolve_now() -> PartitionOffsets:
                tps = discover(client, o.subscription)
                return resolve(client, o.starting, tps, ending=False, option="startingOffsets")

            if o.source_id is None:
                offsets = resolve_now()
            else:
                offsets = initial_offsets(client, o.source_id, describe_source(o.subscription, o.starting),
                                          resolve_now, int(time.time() * 1000))
            self._initial = to_json_dict(offsets)
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.options.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._fetch_latest()

    def _fetch_latest(self) -> PartitionOffsets:
        client = self._client()
        tps = discover(client, self.options.subscription)
        return client.list_offsets(tps, LATEST_TS) if tps else {}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_json_dict(start) if start else {}
        latest = self._target if self._target is not None else self._fetch_latest()
        new = sorted(set(latest) - set(begin))
        begin_all = {**begin, **self._earliest(new)}
        latest = clamp_latest(begin_all, latest)
        self._latest = latest
        if self._delay_for_min_offsets(begin_all, latest):
            return to_json_dict(begin)
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(begin_all, latest, limit.max_rows)
        return to_json_dict(latest)

    def _delay_for_min_offsets(self, begin: PartitionOffsets, latest: PartitionOffsets) -> bool:
        """Emulates minOffsetsPerTrigger + maxTriggerDelay (no CompositeReadLimit in Python, G17)."""
        wanted = self.options.min_offsets_per_trigger
        if not wanted or self._target is not None:
            return False  # availableNow ignores the minimum, as Spark's Kafka source does
        now = time.monotonic()
        if self._last_trigger is None:
            self._last_trigger = now
        backlog = sum(max(0, latest[tp] - begin.get(tp, 0)) for tp in latest)
        if backlog < wanted and (now - self._last_trigger) * 1000 < self.options.max_trigger_delay_ms:
            return True
        self._last_trigger = now
        return False

    def reportLatestOffset(self):
        return to_json_dict(self._latest) if self._latest else None

    def partitions(self, start: dict, end: dict):
        begin, until = from_json_dict(start or {}), from_json_dict(end or {})
        # `until` holds the partitions that existed at latestOffset; one only in `begin` is gone (data loss)
        ranges = plan_ranges(begin, until, self._earliest(set(until)), self.options.fail_on_data_loss)
        return self._to_partitions(ranges)

    def commit(self, end: dict) -> None:
        """Nothing to do: the checkpoint holds the offsets (Spark calls this one batch late, G7)."""
