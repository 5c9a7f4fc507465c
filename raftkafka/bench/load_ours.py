"""Benchmark load driven by our own client (`bench --client ours`).

    result = trio.run(produce, "h:9092", "topic", 100_000, 100, -1, {"acks": "1"}, progress)
    result = trio.run(consume, "h:9092", "topic", 100_000, 10.0, {}, None, progress)

Properties use Kafka's names and are mapped onto the client's keywords.
"""
from __future__ import annotations

from array import array
from collections import deque

import trio

from raftkafka.bench.perf import Progress, Result, Stats, Throttle, clock, payload
from raftkafka.cli.common import TOPIC_WAIT_S, client_kwargs, wait_reachable
from raftkafka.client import Consumer, KafkaError, Producer
from storage.env import RealEnv

__all__ = ["produce", "consume"]


_FOLD_EVERY = 1024  # records between folds of the delivery latencies into Stats


class _Deliveries:
    """One callback for every record's future (no closure per record), like load_librdkafka's:
    per record one call and one array append; the main loop folds the latencies into `Stats`
    in bulk.

    A partition's records are acknowledged in the order they were sent (batches in sequence
    order; without idempotence a retry may reorder them, and then a latency goes to a
    neighbour), so each partition's send times wait in a queue for their acknowledgements."""

    __slots__ = ("sent", "stats", "latencies_ms", "folded")

    def __init__(self, stats: Stats):
        self.sent: dict[int, deque[float]] = {}
        self.stats = stats
        self.latencies_ms = array("d")
        self.folded = 0

    def __call__(self, future) -> None:
        sent_at = self.sent[future.partition].popleft()
        error = future.exception()
        if error is None:
            self.latencies_ms.append((clock() - sent_at) * 1000)
        else:
            self.stats.error(error)

    def fold(self, record_size: int) -> None:
        new = self.latencies_ms[self.folded:]
        self.folded += len(new)
        if new:
            self.stats.record_many(record_size, new)


async def produce(bootstrap: str, topic: str, num_records: int, record_size: int, throughput: float,
                  properties: dict[str, str], progress: Progress | None) -> Result:
    """Send `num_records` records, one `send` each (as the librdkafka run calls produce() per record)."""
    # A perf test against a mistyped topic should fail, not create it (librdkafka run: the same).
    options = client_kwargs(Producer, {"allow.auto.create.topics": "false", **properties}, "producer")
    value = payload(record_size)
    stats = Stats(progress)
    throttle = Throttle(throughput)
    deliveries = _Deliveries(stats)

    async with Producer(RealEnv(), bootstrap, **options) as producer:
        await wait_reachable(producer.cluster, bootstrap)
        await producer.cluster.topic(topic, wait=TOPIC_WAIT_S)
        stats.start()
        send, sent = producer.send, deliveries.sent
        for i in range(num_records):
            sent_at = clock()
            try:
                future = await send(topic, value)
            except KafkaError as e:  # buffer full for max.block.ms, and the like
                stats.error(e)
                continue
            queue = sent.get(future.partition)
            if queue is None:
                queue = sent[future.partition] = deque()
            queue.append(sent_at)
            future.add_callback(deliveries)
            if i % _FOLD_EVERY == 0:
                deliveries.fold(record_size)
            if throughput > 0 and (pause := throttle.delay(i + 1, sent_at - stats.started)) > 0:
                await trio.sleep(pause)
            elif i % 64 == 0:
                await trio.lowlevel.checkpoint()  # let the sender task ship batches
        await producer.flush()
    deliveries.fold(record_size)
    return stats.finish()


async def consume(bootstrap: str, topic: str, messages: int, timeout_s: float, properties: dict[str, str],
                  group: str | None, progress: Progress | None) -> Result:
    """Read `messages` records from the beginning (or until `timeout_s` passes without any)."""
    properties = {"auto.offset.reset": "earliest", **properties}
    if group:
        properties["group.id"] = group
    options = client_kwargs(Consumer, properties, "consumer")
    stats = Stats(progress, with_latency=False)
    async with Consumer(RealEnv(), bootstrap, **options) as consumer:
        await wait_reachable(consumer.cluster, bootstrap)
        info = await consumer.cluster.topic(topic, wait=TOPIC_WAIT_S)
        if group:
            consumer.subscribe([topic])
        else:
            consumer.assign([(topic, p) for p in sorted(info.partitions)])
            consumer.seek_to_beginning()
        stats.start()
        last_record = clock()
        while stats.records < messages:
            records = await consumer.poll(min(1.0, timeout_s), max_records=messages - stats.records)
            if records:
                last_record = clock()
                stats.add_many(len(records), sum(len(r.value or b"") + len(r.key or b"") for r in records))
            elif clock() - last_record >= timeout_s:
                stats.error(f"no record for {timeout_s:g}s after {stats.records} of {messages}")
                break
    return stats.finish(end=last_record)
