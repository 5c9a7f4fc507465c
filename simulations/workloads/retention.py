"""Retention and log cleaning under faults: a size-retained topic, a compacted topic, DeleteRecords.

Two single-partition topics beside the data topics, each rolling a segment every SEGMENT_MS, so
the brokers' retention passes and log cleaner (every second in the simulation) act many times
in a run:
- `retained`: cleanup.policy=delete, retention.bytes=RETENTION_BYTES; now and then the
  workload deletes its records below an offset it saw acknowledged (DeleteRecords, to the
  leader). A broker down for a few seconds comes back behind the leader's log start.
- `compacted`: cleanup.policy=compact with a dirty ratio that makes every rolled segment
  cleanable; keyed records over a small key space.

One producer process sends keyed acks=all records to both (ops "log_send"; the value starts
with its key), one process sends DeleteRecords (ops "delete_records"). A second producer writes
acks=1 filler to the retained topic (no ops: acks=1 may lose what it sent): it keeps appending
while the HW is held back (a follower frozen or cut off inside the ISR), where acks=all sends
stop at the producer's in-flight limit, so the log grows past retention.bytes above the HW and
retention must leave those segments alone. After the heal,
`final_read` reads both topics from their log start (ops "log_final_read").
simulations.checkers.retention checks what retention and compaction may have removed.
"""
from __future__ import annotations

import trio

from raftkafka.client import Admin, Consumer, KafkaError, NewTopic, Producer
from raftkafka.client.errors import ClientClosedError, error_for
from simulations.workloads.clients import CLIENT, _Process, _admin_options, client_error
from wire.protocol import DeleteRecordsRequest

__all__ = ["RETAINED", "COMPACTED", "RETENTION_BYTES", "SEGMENT_MS", "LOG_TOPICS", "new_topics",
           "LogProducerProcess", "FillerProcess", "DeleteRecordsProcess", "final_read", "key_of"]

RETAINED = "retained"
COMPACTED = "compacted"
SEGMENT_MS = 400  # a few batches per segment (segment.bytes is at least 1 MiB, as in Kafka)
RETENTION_BYTES = 1200
KEYS = 6
LOG_TOPICS = (RETAINED, COMPACTED)


def new_topics(replication_factor: int, min_isr: int) -> list[NewTopic]:
    common = {"min.insync.replicas": str(min_isr), "segment.ms": str(SEGMENT_MS)}
    return [
        NewTopic(RETAINED, 1, replication_factor, {**common, "cleanup.policy": "delete",
                                                   "retention.bytes": str(RETENTION_BYTES),
                                                   "retention.ms": "-1"}),
        NewTopic(COMPACTED, 1, replication_factor, {**common, "cleanup.policy": "compact",
                                                    "min.cleanable.dirty.ratio": "0.01"}),
    ]


def key_of(value: bytes) -> bytes:
    return value.split(b":", 1)[0]


class LogProducerProcess(_Process):
    """Keyed acks=all sends to the retained and the compacted topic."""

    RATE = 12.0

    def __init__(self, *args):
        super().__init__(*args)
        self.count = 0

    async def session(self) -> None:
        env = self.new_env()
        session = self.sessions
        async with Producer(env, self.settings.bootstrap, acks="all", enable_idempotence=True, linger_ms=2,
                            delivery_timeout_ms=8000, **CLIENT) as producer:
            async with trio.open_nursery() as nursery:
                while True:
                    await env.sleep(self.rng.expovariate(self.RATE))
                    topic = self.rng.choice(LOG_TOPICS)
                    self.count += 1
                    key = b"k%d" % self.rng.randrange(KEYS)
                    value = key + b":%s.%d.%d" % (self.name.encode(), session, self.count)
                    op = self.history.invoke(self.name, "log_send", value, topic=topic, partition=0)
                    try:
                        future = await producer.send(topic, value, key, partition=0)
                    except (KafkaError, ClientClosedError) as e:
                        self.history.info(op, e)
                        raise
                    nursery.start_soon(self._complete, op, future)

    async def _complete(self, op, future) -> None:
        try:
            metadata = await future
        except (KafkaError, ClientClosedError) as e:
            self.history.info(op, e)  # a failed send may still be in the log
        else:
            self.history.ok(op, metadata.offset)


class FillerProcess(_Process):
    """acks=1 records to the retained topic: answered at the leader's append, so they go on
    while the HW stands still."""

    RATE = 10.0

    async def session(self) -> None:
        env = self.new_env()
        async with Producer(env, self.settings.bootstrap, acks="1", enable_idempotence=False, linger_ms=2,
                            delivery_timeout_ms=8000, **CLIENT) as producer:
            count = 0
            while True:
                await env.sleep(self.rng.expovariate(self.RATE))
                count += 1
                await producer.send(RETAINED, b"fill:%s.%d.%d" % (self.name.encode(), self.sessions, count),
                                    partition=0)


class DeleteRecordsProcess(_Process):
    """DeleteRecords on the retained topic, below an offset some send was acknowledged at."""

    async def session(self) -> None:
        env = self.new_env()
        async with Admin(env, self.settings.bootstrap, **_admin_options()) as admin:
            while True:
                await trio.sleep(self.rng.uniform(1.0, 3.0))
                acked = [op.result for op in self.history.of("log_send", "ok") if op.topic == RETAINED]
                if not acked:
                    continue
                target = self.rng.randint(0, max(acked))
                op = self.history.invoke(self.name, "delete_records", target, topic=RETAINED, partition=0)
                try:
                    low = await delete_records(admin, RETAINED, 0, target)
                except KafkaError as e:
                    self.history.info(op, e)
                    continue
                self.history.ok(op, low)


async def delete_records(admin: Admin, topic: str, partition: int, offset: int) -> int:
    """DeleteRecords of one partition, sent to its leader; its low watermark."""
    cluster = admin.cluster
    cluster.add_topics({topic})
    await cluster.refresh()
    leader = cluster.leader(topic, partition)
    if leader < 0:
        raise error_for(6, context="DeleteRecords: no leader")  # NOT_LEADER_OR_FOLLOWER
    R = DeleteRecordsRequest
    response = await cluster.send(leader, R(timeout_ms=3000, topics=[R.DeleteRecordsTopic(
        name=topic, partitions=[R.DeleteRecordsPartition(partition_index=partition, offset=offset)])]))
    result = response.topics[0].partitions[0]
    if result.error_code:
        raise error_for(result.error_code, context=f"DeleteRecords {topic}-{partition}")
    return result.low_watermark


async def final_read(env_for, history, bootstrap: list[str], deadline: float) -> dict[str, dict[int, bytes]]:
    """Each log topic read from its log start to its end (after the heal); {} if it did not finish."""
    session = 0
    with trio.move_on_at(deadline):
        while True:
            session += 1
            try:
                return await _read(env_for("log-final-reader", session), history, bootstrap)
            except Exception as e:  # noqa: BLE001 - a failed client session: try a new one
                if not client_error(e):
                    raise
                await trio.sleep(0.2)
    return {}


async def _read(env, history, bootstrap) -> dict[str, dict[int, bytes]]:
    tps = [(t, 0) for t in LOG_TOPICS]
    async with Consumer(env, bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=200, **CLIENT) as consumer:
        starts = await consumer.beginning_offsets(tps)
        ends = await consumer.end_offsets(tps)
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, starts[tp])
        seen: dict[str, dict[int, bytes]] = {t: {} for t, _ in tps}
        positions = dict(starts)
        while any(positions[tp] < ends[tp] for tp in tps):
            for r in await consumer.poll(0.5):
                seen[r.topic][r.offset] = r.value
                positions[(r.topic, r.partition)] = r.offset + 1
        # Retention may have moved a log start while we read (a restarted leader's first pass).
        starts = {tp: max(starts[tp], offset) for tp, offset in (await consumer.beginning_offsets(tps)).items()}
    for t, p in tps:
        op = history.invoke("log-final-reader", "log_final_read", starts[(t, p)], topic=t, partition=p)
        history.ok(op, sorted(seen[t].items()))
    return seen
