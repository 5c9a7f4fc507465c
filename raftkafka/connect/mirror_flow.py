"""One replication flow (A->B): copy records, keep topics in step, write offset syncs, progress
and checkpoints, each on its own cadence, in one trio nursery.

Records keep their partition, key, value, headers and timestamp; they are sent with our
idempotent producer (acks=all), so retries inside a run never duplicate. Progress (the last
upstream offset copied, per partition) is written to `mm2-offsets.<source>.internal` on the
target every `offset.flush.interval.ms`, after the producer acknowledged every record up to it;
a restart (after kill -9 too) resumes after it. Records copied after the last progress write
are copied again: at-least-once. Exactly-once (MM2's `exactly.once.support`) needs
transactions, which raftkafka does not have yet.
"""
from __future__ import annotations

import functools

import trio

from raftkafka.client import Admin, Consumer, KafkaError, Producer
from raftkafka.connect.delivery import Deliveries
from raftkafka.connect.mirror_checkpoints import Checkpointer, OffsetSyncStore, PartitionSyncState
from raftkafka.connect.mirror_config import FlowConfig
from raftkafka.connect.mirror_records import (Heartbeat, OffsetSync, RecordFormatError, decode_progress,
                                              encode_progress)
from raftkafka.connect.mirror_topics import (ensure_internal_topic, ensure_remote_topics, source_topics,
                                             sync_topic_configs)

__all__ = ["MirrorFlow", "read_topic"]


async def read_topic(env, bootstrap: str, kwargs: dict, topic: str) -> list:
    """Every record of `topic`, from its beginning to its end as of now."""
    async with Consumer(env, bootstrap, enable_auto_commit=False, **kwargs) as consumer:
        partitions = [(topic, p) for p in await _partitions(consumer, topic)]
        ends = await consumer.end_offsets(partitions)
        consumer.assign(partitions)
        consumer.seek_to_beginning()
        records = []
        while [tp for tp in partitions if await consumer.position(tp) < ends[tp]]:
            records += await consumer.poll(1.0)
        return records


async def _partitions(consumer: Consumer, topic: str) -> list[int]:
    info = await consumer.cluster.topic(topic, wait=consumer.cluster.request_timeout)
    return sorted(info.partitions)


class MirrorFlow:
    def __init__(self, env, flow: FlowConfig, kwargs: dict, log):
        """`kwargs`: client keyword arguments per (alias, kind), kind in producer/consumer/admin."""
        self.env = env
        self.flow = flow
        self.kwargs = kwargs
        self.log = log
        self.store = OffsetSyncStore()
        self.progress: dict[tuple[str, int], int] = {}  # source partition -> last upstream offset copied
        self.wanted: dict[str, int] = {}  # replicated source topics -> partition count

    def _client(self, cls, cluster, kind: str, **extra):
        return cls(self.env, cluster.bootstrap_servers, **{**extra, **self.kwargs[(cluster.alias, kind)]})

    async def run(self, wait_reachable) -> None:
        flow = self.flow
        async with self._client(Admin, flow.source, "admin") as source, \
                self._client(Admin, flow.target, "admin") as target:
            await wait_reachable(source.cluster, flow.source.bootstrap_servers)
            await wait_reachable(target.cluster, flow.target.bootstrap_servers)
            await ensure_internal_topic(source, flow.offset_syncs_topic, flow.offset_syncs_rf)
            await ensure_internal_topic(target, flow.progress_topic, flow.progress_rf)
            if flow.emit_checkpoints or flow.sync_group_offsets:
                await ensure_internal_topic(target, flow.checkpoints_topic, flow.checkpoints_rf)
            if flow.emit_heartbeats:
                await ensure_internal_topic(target, "heartbeats", flow.heartbeats_rf)
            await self._load_state()
            await self._refresh_topics(source, target)
            if flow.sync_topic_configs:
                await sync_topic_configs(flow, source, target, self.wanted)
            async with self._client(Producer, flow.target, "producer", linger_ms=5, batch_size=262_144) as producer, \
                    self._client(Producer, flow.source, "producer") as sync_producer, \
                    self._client(Consumer, flow.source, "consumer", enable_auto_commit=False,
                                 auto_offset_reset="earliest") as consumer, \
                    trio.open_nursery() as nursery:
                self.log(f"{flow.name}: replicating {len(self.wanted)} topics "
                         f"({len(self.progress)} partitions resume from their progress)")
                if flow.refresh_topics:
                    nursery.start_soon(self._every, flow.refresh_topics, self._refresh_topics, source, target)
                if flow.sync_topic_configs:
                    nursery.start_soon(self._every, flow.sync_topic_configs,
                                       lambda s, t: sync_topic_configs(flow, s, t, self.wanted), source, target)
                if flow.emit_heartbeats:
                    nursery.start_soon(self._every, flow.emit_heartbeats, self._heartbeat, producer)
                checkpointer = Checkpointer(self.env, flow, source, target, producer, self.store, self.log)
                if flow.emit_checkpoints:
                    nursery.start_soon(self._every, flow.emit_checkpoints, checkpointer.emit_checkpoints)
                if flow.sync_group_offsets:
                    nursery.start_soon(self._every, flow.sync_group_offsets, checkpointer.sync_group_offsets)
                await self._copy(consumer, producer, sync_producer)

    async def _every(self, interval: float, fn, *args) -> None:
        """A periodic chore; a retriable error (a coordinator loading, a leader moving) waits for
        the next round instead of ending the flow."""
        while True:
            await self.env.sleep(interval)
            try:
                await fn(*args)
            except KafkaError as e:
                if not e.retriable:
                    raise
                self.log(f"{self.flow.name}: {getattr(fn, '__name__', 'task')}: {e}; retried in {interval:g}s")

    async def _heartbeat(self, producer: Producer) -> None:
        """MirrorHeartbeatConnector's record: replicated onwards, its age shows the replication lag."""
        beat = Heartbeat(self.flow.source.alias, self.flow.target.alias, self.env.wall_ms())
        await producer.send("heartbeats", beat.value(), beat.key(), partition=0)

    # ------------------------------------------------------------------ state from earlier runs

    async def _load_state(self) -> None:
        flow = self.flow
        for r in await read_topic(self.env, flow.target.bootstrap_servers,
                                  self.kwargs[(flow.target.alias, "consumer")], flow.progress_topic):
            decoded = decode_progress(flow.source.alias, r.key or b"", r.value)
            if decoded is not None:
                tp, offset = decoded
                if offset is None:
                    self.progress.pop(tp, None)
                else:
                    self.progress[tp] = offset
        for r in await read_topic(self.env, flow.source.bootstrap_servers,
                                  self.kwargs[(flow.source.alias, "consumer")], flow.offset_syncs_topic):
            try:
                self.store.add(OffsetSync.decode(r.key, r.value))
            except RecordFormatError:
                self.log(f"{flow.name}: skipping an unreadable record at {r.topic}-{r.partition}@{r.offset}")

    async def _refresh_topics(self, source: Admin, target: Admin) -> None:
        topics = await source_topics(self.flow, source)
        await ensure_remote_topics(self.flow, source, target, topics, self.log)
        self.wanted = topics

    # ------------------------------------------------------------------ copying

    def _reassign(self, consumer: Consumer) -> None:
        wanted = {(t, p) for t, n in self.wanted.items() for p in range(n)}
        assigned = consumer.assignment()
        if wanted == assigned:
            return
        consumer.assign(sorted(wanted))
        for tp in sorted(wanted - assigned):
            if tp in self.progress:
                consumer.seek(tp, self.progress[tp] + 1)
            else:
                consumer.seek_to_beginning(tp)

    async def _copy(self, consumer: Consumer, producer: Producer, sync_producer: Producer) -> None:
        flow = self.flow
        states: dict[tuple[str, int], PartitionSyncState] = {}
        latest: dict[tuple[str, int], OffsetSync] = {}  # per partition: the last record acknowledged
        due: list[OffsetSync] = []  # offset syncs to write

        def acked(tp, upstream, metadata) -> None:
            state = states.get(tp)
            if state is None:
                state = states[tp] = PartitionSyncState(flow.offset_lag_max)
            sync = latest[tp] = OffsetSync(tp[0], tp[1], upstream, metadata.offset)
            if state.update(upstream, metadata.offset):
                due.append(sync)

        deliveries = Deliveries()
        copied: dict[tuple[str, int], int] = {}  # since the last progress write
        next_flush = self.env.now() + flow.flush_interval
        while True:
            self._reassign(consumer)
            if not consumer.assignment():
                await self.env.sleep(0.5)
                continue
            for r in await consumer.poll(0.5):
                tp = (r.topic, r.partition)
                future = await producer.send(flow.policy.remote_topic(flow.source.alias, r.topic), r.value, r.key,
                                             partition=r.partition, headers=r.headers, timestamp_ms=r.timestamp)
                deliveries.track(future, functools.partial(acked, tp, r.offset))
                copied[tp] = r.offset
            deliveries.raise_error()
            if self.env.now() >= next_flush:
                await self._write_progress(producer, deliveries, copied)
                # As MirrorMaker's delayed syncs: each partition's last record gets a sync at a
                # flush, so a group that has read everything translates exactly.
                for tp, sync in latest.items():
                    if states[tp].last_sync_downstream != sync.downstream:
                        states[tp].last_sync_downstream = sync.downstream
                        due.append(sync)
                latest.clear()
                deliveries = Deliveries()
                copied = {}
                next_flush = self.env.now() + flow.flush_interval
            if due:
                for sync in due:
                    await sync_producer.send(flow.offset_syncs_topic, sync.value(), sync.key(), partition=0)
                    self.store.add(sync)
                due.clear()

    async def _write_progress(self, producer: Producer, deliveries: Deliveries, copied: dict) -> None:
        await producer.flush()
        deliveries.raise_error()
        if not copied:
            return
        for (topic, partition), offset in sorted(copied.items()):
            key, value = encode_progress(self.flow.source.alias, topic, partition, offset)
            await producer.send(self.flow.progress_topic, value, key, partition=0)
            self.progress[(topic, partition)] = offset
        await producer.flush()
