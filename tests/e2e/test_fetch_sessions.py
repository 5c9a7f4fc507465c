"""Fetch sessions (KIP-227) with real clients: kafka-python consumes many RF=3 partitions through
incremental fetch sessions; librdkafka (confluent-kafka) and aiokafka, which fetch sessionless,
read the same data. Three in-process brokers on 127.0.0.1 (RealEnv, real files)."""
from __future__ import annotations

import asyncio
import time

import pytest

from tests.broker.harness import ThreadedCluster

TOPIC = "sessions"
PARTITIONS = 40
FAST = {"replica.fetch.wait.max.ms": "100", "replica.fetch.backoff.ms": "50"}


@pytest.fixture(scope="module")
def cluster():
    cluster = ThreadedCluster(3, static=FAST)
    bootstrap = cluster.start()
    from kafka.admin import KafkaAdminClient, NewTopic
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])
    admin.close()
    cluster.bootstrap = bootstrap
    cluster.expected = {p: [] for p in range(PARTITIONS)}
    produce(cluster, {p: 10 for p in range(PARTITIONS)}, "first")
    yield cluster
    cluster.stop()


def produce(cluster, counts: dict[int, int], tag: str) -> None:
    """acks=all writes with librdkafka. Not kafka-python's producer: with 40 partitions it can
    reach its in-flight limit and poll with timeout 0 in a loop, and a Python thread spinning in
    this process starves the brokers' trio thread of the GIL (the setup then timed out)."""
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    errors = []
    delivered = []

    def on_delivery(err, msg):
        (errors if err is not None else delivered).append(err or msg.offset())

    for partition, n in sorted(counts.items()):
        for i in range(n):
            value = f"{tag}-{partition}-{i}".encode()
            cluster.expected[partition].append(value)
            producer.produce(TOPIC, value=value, partition=partition, on_delivery=on_delivery)
    assert producer.flush(30) == 0
    assert not errors
    assert len(delivered) == sum(counts.values())


def poll_until(fn, done, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        fn()


def consumer_sessions(cluster):
    """(epoch, size) of every consumer (non-follower) fetch session on any broker."""
    def collect():
        return [(s.epoch, s.size) for b in cluster.cluster.brokers
                for s in b.fetch_sessions.sessions.values() if not s.privileged]
    return cluster.run_sync(collect)


def test_kafka_python_consumes_many_partitions_through_incremental_sessions(cluster):
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id=None, enable_auto_commit=False,
                             fetch_max_wait_ms=100)
    consumer.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
    consumer.seek_to_beginning()
    got: dict[int, list] = {p: [] for p in range(PARTITIONS)}

    def poll():
        for records in consumer.poll(200).values():
            for r in records:
                got[r.partition].append(r.value)

    def caught_up():
        return all(len(got[p]) >= len(cluster.expected[p]) for p in range(PARTITIONS))

    poll_until(poll, caught_up)
    # Idle rounds, then records on a quarter of the partitions (idle ones among them).
    for _ in range(5):
        poll()
    produce(cluster, {p: 3 for p in range(0, PARTITIONS, 4)}, "second")
    poll_until(poll, caught_up)
    for _ in range(3):
        poll()
    consumer.close()
    assert got == cluster.expected
    sessions = consumer_sessions(cluster)
    # One session per leader broker holding its partitions, used incrementally (epoch past 1).
    assert sessions and any(epoch > 2 for epoch, _ in sessions)
    assert sum(size for _, size in sessions) <= PARTITIONS
    followers_incremental = cluster.run_sync(lambda: sum(b.fetch_sessions.incremental_fetches
                                                         for b in cluster.cluster.brokers))
    assert followers_incremental > 0


def test_confluent_kafka_fetches_sessionless_and_reads_everything(cluster):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    want = {p: list(v) for p, v in cluster.expected.items()}
    got: dict[int, list] = {p: [] for p in range(PARTITIONS)}

    def poll():
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            got[msg.partition()].append(msg.value())

    poll_until(poll, lambda: all(len(got[p]) >= len(want[p]) for p in range(PARTITIONS)))
    consumer.close()
    assert got == want


def test_aiokafka_fetches_sessionless_and_reads_everything(cluster):
    from aiokafka import AIOKafkaConsumer, TopicPartition
    want = {p: list(v) for p, v in cluster.expected.items()}

    async def run():
        consumer = AIOKafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False,
                                    fetch_max_wait_ms=100)
        await consumer.start()
        try:
            consumer.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
            await consumer.seek_to_beginning()
            got: dict[int, list] = {p: [] for p in range(PARTITIONS)}
            deadline = time.monotonic() + 60
            while not all(len(got[p]) >= len(want[p]) for p in range(PARTITIONS)):
                assert time.monotonic() < deadline, "timed out"
                for tp, records in (await consumer.getmany(timeout_ms=200)).items():
                    got[tp.partition].extend(r.value for r in records)
            return got
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == want
