"""End to end with real Kafka clients (confluent-kafka, kafka-python, aiokafka) against two
in-process brokers on 127.0.0.1 (RealEnv, real files, sendfile), RF=1 topics whose leaders
are spread over both brokers. Consumers use assigned partitions (groups come later)."""
from __future__ import annotations

import asyncio
import time

import pytest

from tests.broker.harness import ThreadedCluster

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PARTITIONS = 3
PER_CODEC = 40


@pytest.fixture(scope="module")
def bootstrap():
    cluster = ThreadedCluster(2)
    servers = cluster.start()
    yield servers
    cluster.stop()


def expected_messages(prefix: str):
    """(partition, key, value, headers) in production order."""
    out = []
    for codec in CODECS:
        for i in range(PER_CODEC):
            key = None if i % 7 == 0 else f"{codec}-key-{i}".encode()
            value = f"{prefix}-{codec}-{i}-".encode() + bytes(range(256)) * (i % 3)
            headers = [("codec", codec.encode()), ("i", str(i).encode())] if i % 2 else []
            out.append((i % PARTITIONS, codec, key, value, headers))
    return out


def per_partition(messages):
    parts = {}
    for partition, key, value, headers in messages:
        parts.setdefault(partition, []).append((key, value, headers))
    return parts


def poll_until(fn, done, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        fn()


# -- confluent-kafka (librdkafka) ---------------------------------------------------------
def test_confluent_kafka_admin_produce_consume(bootstrap):
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = "ck-topic"
    for f in admin.create_topics([NewTopic(topic, PARTITIONS)]).values():  # replication factor -1: the default
        f.result(15)
    md = admin.list_topics(topic, timeout=10)
    leaders = {p.leader for p in md.topics[topic].partitions.values()}
    assert leaders == {1, 2} and len(md.brokers) == 2

    expected = expected_messages("ck")
    for codec in CODECS:
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "compression.type": codec,
                             "linger.ms": 5, "enable.idempotence": False})
        errors = []
        for partition, c, key, value, headers in expected:
            if c == codec:
                producer.produce(topic, value=value, key=key, headers=headers or None, partition=partition,
                                 on_delivery=lambda err, msg: err and errors.append(err))
        assert producer.flush(15) == 0 and errors == []

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "enable.partition.eof": False})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got = []

    def poll():
        msg = consumer.poll(0.2)
        if msg is not None:
            assert msg.error() is None, msg.error()
            got.append((msg.partition(), msg.key(), msg.value(), [(k, v) for k, v in (msg.headers() or [])]))

    poll_until(poll, lambda: len(got) >= len(expected))
    assert per_partition(got) == per_partition([(p, k, v, h) for p, _, k, v, h in expected])

    # From a timestamp: the first message at or after it.
    ts_producer = Producer({"bootstrap.servers": bootstrap, "acks": "1"})
    base = int(time.time() * 1000)
    for i in range(5):
        ts_producer.produce(topic, value=b"ts-%d" % i, partition=0, timestamp=base + i * 1000)
    ts_producer.flush(10)
    (found,) = consumer.offsets_for_times([TopicPartition(topic, 0, base + 2500)], timeout=10)
    consumer.assign([TopicPartition(topic, 0, found.offset)])
    first = []
    poll_until(lambda: (lambda m: m is not None and first.append(m.value()))(consumer.poll(0.2)), lambda: first)
    assert first[0] == b"ts-3"

    # From latest: only what is produced after the assignment.
    consumer.assign([TopicPartition(topic, 1, OFFSET_END)])
    consumer.poll(0.5)
    ts_producer.produce(topic, value=b"late", partition=1)
    ts_producer.flush(10)
    late = []
    poll_until(lambda: (lambda m: m is not None and late.append(m.value()))(consumer.poll(0.2)), lambda: late)
    assert late == [b"late"]
    consumer.close()

    configs = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
    described = list(configs.values())[0].result(10)
    assert described["cleanup.policy"].value == "delete"
    for f in admin.create_partitions([NewPartitions(topic, PARTITIONS + 1)]).values():
        f.result(10)
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == PARTITIONS + 1
    for f in admin.delete_topics([topic]).values():
        f.result(10)
    assert topic not in admin.list_topics(timeout=10).topics


# -- kafka-python ----------------------------------------------------------------------
def test_kafka_python_admin_produce_consume(bootstrap):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    topic = "kp-topic"
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    expected = expected_messages("kp")
    for codec in CODECS:
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, enable_idempotence=False,
                                 compression_type=None if codec == "none" else codec)
        futures = [producer.send(topic, value=value, key=key, headers=headers, partition=partition)
                   for partition, c, key, value, headers in expected if c == codec]
        producer.flush(15)
        assert all(f.get(10).offset >= 0 for f in futures)
        producer.close()

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer.assign(tps)
    consumer.seek_to_beginning()
    got = []

    def poll():
        for records in consumer.poll(200).values():
            got.extend((r.partition, r.key, r.value, list(r.headers)) for r in records)

    poll_until(poll, lambda: len(got) >= len(expected))
    assert per_partition(got) == per_partition([(p, k, v, h) for p, _, k, v, h in expected])
    assert consumer.end_offsets(tps) == {tp: sum(1 for e in expected if e[0] == tp.partition) for tp in tps}
    assert consumer.beginning_offsets(tps) == {tp: 0 for tp in tps}
    consumer.close()
    admin.delete_topics([topic])
    admin.close()


# -- aiokafka --------------------------------------------------------------------------
def test_aiokafka_admin_produce_consume(bootstrap):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    topic = "aio-topic"
    expected = expected_messages("aio")

    async def run():
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        await admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
        for codec in CODECS:
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1,
                                        compression_type=None if codec == "none" else codec)
            await producer.start()
            sends = [await producer.send(topic, value=value, key=key, headers=headers, partition=partition)
                     for partition, c, key, value, headers in expected if c == codec]
            await asyncio.gather(*sends)
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await consumer.start()
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        await consumer.seek_to_beginning()
        got = []
        deadline = time.monotonic() + 30
        while len(got) < len(expected):
            assert time.monotonic() < deadline, "timed out"
            for records in (await consumer.getmany(timeout_ms=200)).values():
                got.extend((r.partition, r.key, r.value, list(r.headers)) for r in records)
        await consumer.stop()
        await admin.delete_topics([topic])
        await admin.close()
        return got

    got = asyncio.run(run())
    assert per_partition(got) == per_partition([(p, k, v, h) for p, _, k, v, h in expected])
