"""Benchmark load driven by librdkafka through confluent-kafka (`bench --client librdkafka`).

Same shape as `load_ours`, but blocking: librdkafka runs its own threads, we
only call produce()/poll() and count delivery reports. Properties are passed
to librdkafka as given (it speaks Kafka's names: acks, linger.ms, batch.size,
compression.type, ...). Failures raise `LoadError` with librdkafka's message.
"""
from __future__ import annotations

import time
import uuid

from raftkafka.bench.perf import Progress, Result, Stats, Throttle, clock, payload

__all__ = ["produce", "consume", "LoadError"]

_CONNECT_TIMEOUT_S = 5.0


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


def produce(bootstrap: str, topic: str, num_records: int, record_size: int, throughput: float,
            properties: dict[str, str], progress: Progress | None) -> Result:
    ck = _kafka()
    try:
        producer = ck.Producer(_config({"bootstrap.servers": bootstrap, "client.id": "raftkafka-bench",
                                        "allow.auto.create.topics": False}, properties))
    except ck.KafkaException as e:
        raise LoadError(f"librdkafka producer settings: {e.args[0].str() if e.args else e}") from None
    _check_topic(producer, topic)
    value = payload(record_size)
    stats = Stats(progress)
    throttle = Throttle(throughput)

    def delivered(sent_at: float):
        def report(error, _message) -> None:
            if error is not None:
                stats.error(error.str())
            else:
                stats.record(record_size, (clock() - sent_at) * 1000)
        return report

    stats.start()
    for i in range(num_records):
        sent_at = clock()
        while True:
            try:
                producer.produce(topic, value, on_delivery=delivered(sent_at))
                break
            except BufferError:  # the local queue is full: serve delivery reports, then retry
                producer.poll(0.01)
        producer.poll(0)
        pause = throttle.delay(i + 1, sent_at - stats.started)
        if pause > 0:
            time.sleep(pause)
    remaining = producer.flush(120)
    if remaining:
        stats.error(f"{remaining} records still undelivered after 120 s")
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
