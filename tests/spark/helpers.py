"""Producing and consuming with a real Kafka client (confluent-kafka) for the Spark tests."""
from __future__ import annotations

import time


def create_topic(bootstrap: str, name: str, partitions: int, replication_factor: int = 3) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, partitions, replication_factor)]).values():
        f.result(15)
    deadline = time.monotonic() + 15
    while len(admin.list_topics(name, timeout=10).topics[name].partitions) < partitions:
        assert time.monotonic() < deadline, f"topic {name} never appeared"
        time.sleep(0.1)


def produce(bootstrap: str, topic: str, messages, *, timestamp=None) -> None:
    """messages: (partition, key, value[, headers]); acks=all so everything is committed, idempotent so
    retries across a leader change add no duplicates."""
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "enable.idempotence": True})
    errors = []
    for m in messages:
        partition, key, value = m[:3]
        headers = m[3] if len(m) > 3 else None
        kwargs = {"timestamp": timestamp} if timestamp is not None else {}
        producer.produce(topic, value=value, key=key, partition=partition, headers=headers,
                         on_delivery=lambda err, msg: err and errors.append(err), **kwargs)
    assert producer.flush(60) == 0 and errors == []


def consume_all(bootstrap: str, topic: str, expected: int, timeout: float = 30.0):
    """Every record of `topic` from the beginning as (partition, offset, key, value, headers)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient
    parts = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10).topics[topic].partitions
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "spark-tests", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(parts)])
    got, deadline = [], time.monotonic() + timeout
    while len(got) < expected and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            got.append((msg.partition(), msg.offset(), msg.key(), msg.value(), msg.headers() or []))
    consumer.poll(0.5)  # anything beyond `expected` would be a duplicate: give it a chance to show up
    while (msg := consumer.poll(0.2)) is not None:
        if msg.error() is None:
            got.append((msg.partition(), msg.offset(), msg.key(), msg.value(), msg.headers() or []))
    consumer.close()
    return got
