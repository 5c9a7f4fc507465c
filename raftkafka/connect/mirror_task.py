"""One MirrorSourceTask: copies its share of a flow's source partitions to the target.

Records keep their partition, key, value, headers and timestamp. A partition's progress (the
last upstream offset copied) goes to `mm2-offsets.<source>.internal` on the target; a restarted
mirror resumes after it.

- at-least-once (the default): records go out through the idempotent producer (acks=all), so
  retries inside a run never duplicate; every `offset.flush.interval.ms`, once the producer
  acknowledged every record sent, the progress is written. Records copied after the last
  progress write are copied again after a crash.
- exactly-once (the target's `exactly.once.source.support=enabled`, KIP-618): the task's
  transactional producer writes a batch's records and the progress they reach in one
  transaction. A restarted task's `init_transactions` fences its predecessor and aborts the
  transaction it left open, and the progress read back (read_committed) is exactly what the
  committed records reach: a read_committed reader of the target sees every record once.

Offset syncs (`mm2-offset-syncs.<target>.internal` on the source) are written for records
the target holds: acknowledged ones, and with transactions only once their transaction
committed, so no sync names an aborted record.
"""
from __future__ import annotations

import functools

import trio

from raftkafka.client import Consumer, KafkaError, KafkaTimeoutError, Producer
from raftkafka.client.transactional import COMMITTING, FATAL_ERROR
from raftkafka.connect.delivery import Deliveries
from raftkafka.connect.mirror_checkpoints import OffsetSyncStore, PartitionSyncState
from raftkafka.connect.mirror_config import FlowConfig
from raftkafka.connect.mirror_records import OffsetSync, encode_progress

__all__ = ["MirrorTask"]

TopicPartition = tuple[str, int]


class MirrorTask:
    def __init__(self, env, flow: FlowConfig, partitions: list[TopicPartition], progress: dict,
                 store: OffsetSyncStore, log):
        """`progress`: the flow's last upstream offset copied per partition, shared by its tasks
        (each writes only its own partitions)."""
        self.env = env
        self.flow = flow
        self.partitions = partitions
        self.progress = progress
        self.store = store
        self.log = log
        self._states: dict[TopicPartition, PartitionSyncState] = {}
        self._acked: list[tuple[OffsetSync, bool]] = []  # acknowledged, not yet known to be on the target
        self._latest: dict[TopicPartition, OffsetSync] = {}  # per partition: the last record on the target
        self._due: list[OffsetSync] = []  # offset syncs to write

    async def run(self, consumer: Consumer, producer: Producer, sync_producer: Producer, running) -> None:
        """Copy until `running()` turns false, then stop with everything copied so far recorded."""
        self._seek(consumer)
        if self.flow.exactly_once:
            await self._copy_in_transactions(consumer, producer, sync_producer, running)
        else:
            await self._copy_at_least_once(consumer, producer, sync_producer, running)

    def _seek(self, consumer: Consumer) -> None:
        consumer.assign(self.partitions)
        for tp in self.partitions:
            if tp in self.progress:
                consumer.seek(tp, self.progress[tp] + 1)
            else:
                consumer.seek_to_beginning(tp)

    async def _send(self, records, producer: Producer, deliveries: Deliveries, copied: dict) -> None:
        for r in records:
            tp = (r.topic, r.partition)
            future = await producer.send(self.flow.policy.remote_topic(self.flow.source.alias, r.topic), r.value,
                                         r.key, partition=r.partition, headers=r.headers, timestamp_ms=r.timestamp)
            deliveries.track(future, functools.partial(self._on_acked, tp, r.offset))
            copied[tp] = r.offset

    async def _copy_at_least_once(self, consumer, producer, sync_producer, running) -> None:
        deliveries, copied = Deliveries(), {}
        next_flush = self.env.now() + self.flow.flush_interval
        while running():
            await self._send(await consumer.poll(0.5), producer, deliveries, copied)
            deliveries.raise_error()
            self._accept_acked()
            if self.env.now() >= next_flush:
                await self._write_progress(producer, deliveries, copied)
                deliveries, copied = Deliveries(), {}
                next_flush = self.env.now() + self.flow.flush_interval
            await self._write_syncs(sync_producer)
        await self._write_progress(producer, deliveries, copied)
        await self._write_syncs(sync_producer)

    async def _write_progress(self, producer: Producer, deliveries: Deliveries, copied: dict) -> None:
        """After every record sent so far is acknowledged: their progress."""
        await producer.flush()
        deliveries.raise_error()
        self._accept_acked()
        self._sync_latest()  # as MirrorMaker's delayed syncs: a group that read everything translates exactly
        if copied:
            await self._send_progress(producer, copied)
            await producer.flush()
            self.progress.update(copied)

    async def _copy_in_transactions(self, consumer, producer, sync_producer, running) -> None:
        interval = self.flow.transaction_interval or 0  # 0: one transaction per batch polled
        deliveries, copied = Deliveries(), {}  # copied: in the open transaction
        boundary = self.env.now() + interval
        next_flush = self.env.now() + self.flow.flush_interval
        while running():
            try:
                records = await consumer.poll(0.5)
                if records and not copied:
                    producer.begin_transaction()
                await self._add_partitions(producer, records)
                await self._send(records, producer, deliveries, copied)
                if copied and self.env.now() >= boundary:
                    await self._commit(producer, copied)
                    deliveries, copied = Deliveries(), {}
                    boundary = self.env.now() + interval
            except KafkaError as e:
                if producer.transactions.state == FATAL_ERROR or not copied:
                    raise  # fenced by a newer mirror, or not about a transaction
                self.log(f"{self.flow.name}: transaction aborted ({e}); its records are copied again")
                await producer.abort_transaction()
                self._acked.clear()
                self._states.clear()
                self._seek(consumer)
                deliveries, copied = Deliveries(), {}
            if self.env.now() >= next_flush:
                self._sync_latest()
                next_flush = self.env.now() + self.flow.flush_interval
            await self._write_syncs(sync_producer)
        if copied:
            await self._commit(producer, copied)
        self._sync_latest()
        await self._write_syncs(sync_producer)

    async def _add_partitions(self, producer: Producer, records) -> None:
        """Add the batch's partitions (and the progress topic's) to the transaction together:
        asked for at once, they ride in one or two AddPartitionsToTxn requests instead of one
        each, every one a replicated write at the coordinator."""
        remote = {(self.flow.policy.remote_topic(self.flow.source.alias, r.topic), r.partition) for r in records}
        if remote:
            remote.add((self.flow.progress_topic, 0))
        async with trio.open_nursery() as nursery:
            for topic, partition in sorted(remote - producer.transactions.partitions):
                nursery.start_soon(producer.transactions.before_send, topic, partition)

    async def _commit(self, producer: Producer, copied: dict) -> None:
        await self._send_progress(producer, copied)
        try:
            await producer.commit_transaction()
        except KafkaTimeoutError:
            if producer.transactions.state != COMMITTING:
                raise
            self.log(f"{self.flow.name}: a transaction's commit timed out; finishing it")
            await producer.commit_transaction()  # a timed-out commit can only be called again
        self.progress.update(copied)
        self._accept_acked()

    async def _send_progress(self, producer: Producer, copied: dict) -> None:
        for (topic, partition), offset in sorted(copied.items()):
            key, value = encode_progress(self.flow.source.alias, topic, partition, offset)
            await producer.send(self.flow.progress_topic, value, key, partition=0)

    # ------------------------------------------------------------------ offset syncs

    def _on_acked(self, tp: TopicPartition, upstream: int, metadata) -> None:
        state = self._states.get(tp)
        if state is None:
            state = self._states[tp] = PartitionSyncState(self.flow.offset_lag_max)
        sync = OffsetSync(tp[0], tp[1], upstream, metadata.offset)
        self._acked.append((sync, state.update(upstream, metadata.offset)))

    def _accept_acked(self) -> None:
        """The acknowledged records are on the target for good (acknowledged, or their transaction committed)."""
        for sync, due in self._acked:
            self._latest[(sync.topic, sync.partition)] = sync
            if due:
                self._due.append(sync)
        self._acked.clear()

    def _sync_latest(self) -> None:
        """Each partition's last record copied gets a sync, so a group that has read everything
        translates to the end exactly."""
        for tp, sync in self._latest.items():
            state = self._states.get(tp)
            if state is None or state.last_sync_downstream != sync.downstream:
                if state is not None:
                    state.last_sync_downstream = sync.downstream
                self._due.append(sync)
        self._latest.clear()

    async def _write_syncs(self, sync_producer: Producer) -> None:
        for sync in self._due:
            await sync_producer.send(self.flow.offset_syncs_topic, sync.value(), sync.key(), partition=0)
            self.store.add(sync)
        self._due.clear()
