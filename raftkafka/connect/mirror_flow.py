"""One replication flow (A->B): keep topics in step, copy records with `tasks.max` tasks
(mirror_task.py: at-least-once, or exactly-once with transactions), write checkpoints and
heartbeats, each on its own cadence, in one trio nursery.

The flow's source partitions are split round-robin over min(tasks.max, partitions) tasks, as
MirrorSourceConnector splits them. When the replicated partitions change (a new topic, added
partitions) every task ends at a clean point (its progress written, its transaction
committed) and a new set of tasks starts with the new split, as Connect reconfigures tasks.
"""
from __future__ import annotations

import re
from contextlib import AsyncExitStack

import trio

from raftkafka.client import Admin, Consumer, KafkaError, Producer
from raftkafka.client.transactions_admin import list_transactions
from raftkafka.connect.mirror_checkpoints import Checkpointer, OffsetSyncStore
from raftkafka.connect.mirror_config import FlowConfig
from raftkafka.connect.mirror_records import Heartbeat, OffsetSync, RecordFormatError, decode_progress
from raftkafka.connect.mirror_task import MirrorTask
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
        self.partitions: list[tuple[str, int]] = []  # their partitions, split over the tasks
        self.generation = 0  # moves when `partitions` change: the tasks restart with a new split

    def _client(self, cls, cluster, kind: str, **extra):
        return cls(self.env, cluster.bootstrap_servers, **{**extra, **self.kwargs[(cluster.alias, kind)]})

    def _target_producer(self, **extra) -> Producer:
        return self._client(Producer, self.flow.target, "producer", linger_ms=5, batch_size=262_144, **extra)

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
            await self._load_offset_syncs()
            await self._refresh_topics(source, target)
            if flow.sync_topic_configs:
                await sync_topic_configs(flow, source, target, self.wanted)
            async with self._target_producer() as producer, \
                    self._client(Producer, flow.source, "producer") as sync_producer, \
                    trio.open_nursery() as nursery:
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
                await self._run_tasks(target, producer, sync_producer)

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

    async def _refresh_topics(self, source: Admin, target: Admin) -> None:
        topics = await source_topics(self.flow, source)
        await ensure_remote_topics(self.flow, source, target, topics, self.log)
        self.wanted = topics
        partitions = sorted((t, p) for t, n in topics.items() for p in range(n))
        if partitions != self.partitions:
            self.partitions = partitions
            self.generation += 1

    # ------------------------------------------------------------------ tasks

    async def _run_tasks(self, target: Admin, producer: Producer, sync_producer: Producer) -> None:
        """Run the tasks of each generation of the partition split, one generation after another."""
        flow = self.flow
        first = True
        while True:
            generation, partitions = self.generation, self.partitions
            if not partitions:
                await self.env.sleep(0.5)
                continue
            count = min(flow.tasks_max, len(partitions))
            async with AsyncExitStack() as stack:
                consumers = [await stack.enter_async_context(self._client(
                    Consumer, flow.source, "consumer", enable_auto_commit=False, auto_offset_reset="earliest"))
                    for _ in range(count)]
                if flow.exactly_once:
                    # A transaction's first AddPartitionsToTxn meets CONCURRENT_TRANSACTIONS while the
                    # previous one's markers are written; Kafka's producer retries that after 20 ms,
                    # not retry.backoff.ms (B.producer.retry.backoff.ms still overrides this).
                    producers = [await stack.enter_async_context(self._target_producer(
                        transactional_id=flow.transactional_id(i), retry_backoff_ms=20)) for i in range(count)]
                    for task_producer in producers:
                        await task_producer.init_transactions()  # fences this task of an earlier run
                    if first:
                        await self._fence_other_tasks(target, count)
                else:
                    producers = [producer] * count
                if first:
                    await self._load_progress()
                    first = False
                topics = len({t for t, _ in partitions})
                self.log(f"{flow.name}: replicating {topics} topics ({len(self.progress)} partitions resume from "
                         f"their progress) in {count} task{'s' if count > 1 else ''}, "
                         f"{'exactly-once' if flow.exactly_once else 'at-least-once'}")
                async with trio.open_nursery() as nursery:
                    for i in range(count):
                        task = MirrorTask(self.env, flow, partitions[i::count], self.progress, self.store, self.log)
                        nursery.start_soon(task.run, consumers[i], producers[i], sync_producer,
                                           lambda: self.generation == generation)

    async def _fence_other_tasks(self, target: Admin, count: int) -> None:
        """An earlier run with more tasks may have left a transaction open under a task id this
        run does not use; it would hold back the progress read_committed until it timed out.
        Fence those ids (InitProducerId aborts their transactions), as Connect fences the
        tasks of a connector's earlier generation."""
        ours = {self.flow.transactional_id(task) for task in range(count)}
        pattern = re.compile(re.escape(self.flow.transactional_id(0)[:-1]) + r"\d+")
        try:
            ongoing = await list_transactions(target, states=["Ongoing"])
        except KafkaError as e:  # e.g. not allowed to describe them: those ids time out on their own
            self.log(f"{self.flow.name}: cannot list transactions to fence an earlier run's other tasks: {e}")
            return
        stale = sorted(t.transactional_id for t in ongoing
                       if pattern.fullmatch(t.transactional_id) and t.transactional_id not in ours)
        for transactional_id in stale:
            async with self._target_producer(transactional_id=transactional_id) as fencer:
                await fencer.init_transactions()
            self.log(f"{self.flow.name}: fenced {transactional_id}, a task of an earlier run")

    # ------------------------------------------------------------------ state from earlier runs

    async def _load_offset_syncs(self) -> None:
        flow = self.flow
        for r in await read_topic(self.env, flow.source.bootstrap_servers,
                                  self.kwargs[(flow.source.alias, "consumer")], flow.offset_syncs_topic):
            try:
                self.store.add(OffsetSync.decode(r.key, r.value))
            except RecordFormatError:
                self.log(f"{flow.name}: skipping an unreadable record at {r.topic}-{r.partition}@{r.offset}")

    async def _load_progress(self) -> None:
        """The committed progress only: a transaction a killed task left open was aborted by now."""
        flow = self.flow
        kwargs = {**self.kwargs[(flow.target.alias, "consumer")], "isolation_level": "read_committed"}
        for r in await read_topic(self.env, flow.target.bootstrap_servers, kwargs, flow.progress_topic):
            decoded = decode_progress(flow.source.alias, r.key or b"", r.value)
            if decoded is not None:
                tp, offset = decoded
                if offset is None:
                    self.progress.pop(tp, None)
                else:
                    self.progress[tp] = offset
