"""Interop with librdkafka (confluent-kafka) through real TCP: our producer → librdkafka
consumer and librdkafka producer → our consumer, with keys on the same partitions.

librdkafka's default partitioner is consistent_random (CRC32); Java's is murmur2.
We default to murmur2, so librdkafka is configured with partitioner=murmur2_random.
These are plain (sync) tests: our side uses the blocking wrappers.
"""
from __future__ import annotations

import time

import confluent_kafka
import pytest

from raftkafka.client.blocking import BlockingAdmin, BlockingConsumer, BlockingProducer
from raftkafka.client.partitioner import crc32_partition, murmur2_partition
from tests.client.served import ServedMiniCluster

PARTITIONS = 4
KEYS = [b"user-%d" % i for i in range(60)]


@pytest.fixture
def served():
    with ServedMiniCluster((1, 2)) as served:
        yield served


def rdkafka_consume(bootstrap, topic, count, timeout=30.0):
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "interop", "enable.auto.commit": False,
        "fetch.wait.max.ms": 50, "api.version.request": True})
    consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                     for p in range(PARTITIONS)])
    records, deadline = [], time.monotonic() + timeout
    try:
        while len(records) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            records.append(msg)
    finally:
        consumer.close()
    return records


@pytest.mark.parametrize("compression", ["none", "lz4"])
def test_our_producer_to_librdkafka_consumer(served, compression):
    served.call(served.mini.create_topic, "ours", PARTITIONS)
    with BlockingProducer(served.bootstrap, compression=compression, linger_ms=2) as producer:
        futures = [producer.send("ours", b"value-" + key, key=key, headers={"h": b"1"}) for key in KEYS]
        producer.flush()
        placed = {key: f.result(10).partition for key, f in zip(KEYS, futures)}
    records = rdkafka_consume(served.bootstrap, "ours", len(KEYS))
    assert len(records) == len(KEYS)
    for msg in records:
        assert msg.value() == b"value-" + msg.key()
        assert msg.partition() == placed[msg.key()] == murmur2_partition(msg.key(), PARTITIONS)
        assert msg.headers() == [("h", b"1")]
    per_partition = {}
    for msg in records:
        per_partition.setdefault(msg.partition(), []).append(msg.offset())
    assert all(offsets == list(range(len(offsets))) for offsets in per_partition.values())


@pytest.mark.parametrize("partitioner,expected", [("murmur2_random", murmur2_partition),
                                                  ("consistent_random", crc32_partition)])
def test_librdkafka_producer_to_our_consumer(served, partitioner, expected):
    served.call(served.mini.create_topic, "theirs", PARTITIONS)
    producer = confluent_kafka.Producer({"bootstrap.servers": served.bootstrap, "partitioner": partitioner,
                                         "linger.ms": 5, "compression.codec": "snappy"})
    delivered = {}
    for key in KEYS:
        producer.produce("theirs", b"v-" + key, key=key,
                         on_delivery=lambda err, msg: delivered.__setitem__(msg.key(), (err, msg.partition())))
    assert producer.flush(30) == 0
    assert all(err is None for err, _ in delivered.values())
    with BlockingConsumer(served.bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=50) as consumer:
        consumer.assign([("theirs", p) for p in range(PARTITIONS)])
        records, deadline = [], time.monotonic() + 30
        while len(records) < len(KEYS) and time.monotonic() < deadline:
            records += consumer.poll(0.5)
    assert sorted(r.key for r in records) == sorted(KEYS)
    for r in records:
        assert r.value == b"v-" + r.key
        assert r.partition == delivered[r.key][1] == expected(r.key, PARTITIONS)
    # Our own partitioner, configured the same way, agrees with librdkafka key by key.
    with BlockingProducer(served.bootstrap, partitioner=partitioner) as ours:
        for key in KEYS[:10]:
            assert ours.send_and_wait("theirs", b"again", key=key).partition == delivered[key][1]


def test_blocking_admin_and_group_consumer(served):
    with BlockingAdmin(served.bootstrap) as admin:
        admin.create_topic("g-topic", 2)
        assert "g-topic" in admin.list_topics()
    with BlockingProducer(served.bootstrap) as producer:
        for i in range(10):
            producer.send("g-topic", b"%d" % i, key=b"%d" % i)
    with BlockingConsumer(served.bootstrap, group_id="blocking", auto_offset_reset="earliest",
                          fetch_max_wait_ms=50, heartbeat_interval_ms=200) as consumer:
        consumer.subscribe(["g-topic"])
        records, deadline = [], time.monotonic() + 30
        while len(records) < 10 and time.monotonic() < deadline:
            records += consumer.poll(0.5)
        assert sorted(r.value for r in records) == sorted(b"%d" % i for i in range(10))
        assert consumer.assignment() == {("g-topic", 0), ("g-topic", 1)}
