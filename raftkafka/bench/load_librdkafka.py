"""Benchmark load driven by librdkafka through confluent-kafka (`bench --client librdkafka`).

Same shape as `load_ours`, but blocking: librdkafka runs its own threads, we
only call produce()/poll() and count delivery reports. Properties are passed
to librdkafka as given (it speaks Kafka's names: acks, linger.ms, batch.size,
compression.type, ...). Failures raise `LoadError` with librdkafka's message.
"""
from __future__ import annotations

import uuid
from array import array

from raftkafka.bench.perf import Progress, Result, Stats, Throttle, clock, payload

__all__ = ["produce", "consume", "LoadError"]

_CONNECT_TIMEOUT_S = 5.0
_POLL_EVERY = 1024  # records between delivery-report polls (per producer instance)


class LoadError(Exception):
    """librdkafka could not do the run (unreachable cluster, unknown topic, bad property)."""


def _kafka():
    try:
        import confluent_kafka
    except ImportError:
        raise LoadError("--client librdkafka needs the confluent-kafka package") from None
    return confluent_kafka


def _check_topic(client, topic: str) -> int:
    """The topic's partition count; one clear error when the cluster or the topic is not there."""
    ck = _kafka()
    try:
        metadata = client.list_topics(topic, timeout=_CONNECT_TIMEOUT_S)
    except ck.KafkaException as e:
        raise LoadError(f"cannot reach the cluster: {e.args[0].str() if e.args else e}") from None
    info = metadata.topics.get(topic)
    if info is None or info.error is not None or not info.partitions:
        reason = info.error.str() if info is not None and info.error is not None else "unknown topic"
        raise LoadError(f"topic {topic!r}: {reason}")
    return len(info.partitions)


def _config(base: dict, properties: dict[str, str]) -> dict:
    # librdkafka logs every failed connect to stderr; the command reports failures itself.
    config = {"log_level": 0, **base}
    config.update(properties)
    return config


class _Deliveries:
    """Counts librdkafka's delivery reports with as little Python per record as possible.

    One bound method serves every message (no closure per record) and the latency
    is librdkafka's own (`Message.latency()`: produce() call to acknowledgement),
    so the per-record cost in this process is one call and one array append; the
    main loop folds the new latencies into `Stats` in bulk. At 1M records/s a few
    hundred nanoseconds per record decide whether the client or the broker is measured.
    """

    __slots__ = ("latencies_s", "folded", "stats")

    def __init__(self, stats: Stats):
        self.latencies_s = array("d")
        self.folded = 0
        self.stats = stats

    def __call__(self, error, message) -> None:
        if error is None:
            latency = message.latency()
            self.latencies_s.append(latency if latency is not None else 0.0)
        else:
            self.stats.error(error.str())

    def fold(self, record_size: int) -> None:
        """Hand the reports since the last fold to `stats` (and its progress line)."""
        new = self.latencies_s[self.folded:]
        self.folded += len(new)
        if new:
            self.stats.record_many(record_size, [s * 1000 for s in new])


def produce(bootstrap: str, topic: str, num_records: int, record_size: int, throughput: float,
            properties: dict[str, str], progress: Progress | None, producers: int = 1) -> Result:
    """Send `num_records` records round-robin through `producers` librdkafka producer instances
    (each its own client with its own connections, like separate applications)."""
    ck = _kafka()
    stats = Stats(progress)
    deliveries = _Deliveries(stats)
    config = _config({"bootstrap.servers": bootstrap, "client.id": "raftkafka-bench",
                      "allow.auto.create.topics": False}, properties)
    config["on_delivery"] = deliveries
    clients = []
    try:
        for _ in range(max(1, producers)):
            clients.append(ck.Producer(config))
    except ck.KafkaException as e:
        raise LoadError(f"librdkafka producer settings: {e.args[0].str() if e.args else e}") from None
    for client in clients:
        _check_topic(client, topic)
    value = payload(record_size)
    throttle = Throttle(throughput)
    count = len(clients)
    stats.start()
    for i in range(num_records):
        producer = clients[i % count]
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:  # the local queue is full: serve delivery reports, then retry
                producer.poll(0.01)
        if i % _POLL_EVERY < count:  # every producer serves its reports once per round
            producer.poll(0)
            if i % _POLL_EVERY == 0:
                deliveries.fold(record_size)
        if throughput > 0:
            # Pace by waiting inside poll(): librdkafka's latency runs until the report is
            # served, so a paced run that slept instead measured its own sleeps.
            while (pause := throttle.delay(i + 1, clock() - stats.started)) > 0:
                producer.poll(pause)
    deadline = clock() + 120
    for producer in clients:
        remaining = producer.flush(max(0.0, deadline - clock()))
        if remaining:
            stats.error(f"{remaining} records still undelivered after 120 s")
    deliveries.fold(record_size)
    return stats.finish()


def consume(bootstrap: str, topic: str, messages: int, timeout_s: float, properties: dict[str, str],
            group: str | None, progress: Progress | None) -> Result:
    ck = _kafka()
    config = _config({"bootstrap.servers": bootstrap, "client.id": "raftkafka-bench",
                      "group.id": group or f"perf-consumer-{uuid.uuid4().hex[:8]}",
                      "auto.offset.reset": "earliest", "enable.auto.commit": bool(group),
                      "enable.partition.eof": False}, properties)
    try:
        consumer = ck.Consumer(config)
    except ck.KafkaException as e:
        raise LoadError(f"librdkafka consumer settings: {e.args[0].str() if e.args else e}") from None
    try:
        partitions = _check_topic(consumer, topic)
        if group:
            consumer.subscribe([topic])
        else:
            consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
        stats = Stats(progress, with_latency=False)
        stats.start()
        last_record = clock()
        while stats.records < messages:
            batch = consumer.consume(min(1000, messages - stats.records), timeout=min(1.0, timeout_s))
            nbytes, count = 0, 0
            for message in batch:
                if message.error() is not None:
                    if message.error().fatal():
                        raise LoadError(f"consume: {message.error().str()}")
                    continue
                count += 1
                nbytes += len(message.value() or b"") + len(message.key() or b"")
            if count:
                last_record = clock()
                stats.add_many(count, nbytes)
            elif clock() - last_record >= timeout_s:
                stats.error(f"no record for {timeout_s:g}s after {stats.records} of {messages}")
                break
        return stats.finish(end=last_record)
    finally:
        consumer.close()
