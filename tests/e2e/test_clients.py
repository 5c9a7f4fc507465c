"""Unmodified confluent-kafka, kafka-python and aiokafka against a 3-node `dev` cluster.

Each client: admin create (leaders placed across the three nodes), describe and delete;
produce with every codec, keys and headers, explicit partitions and timestamps; consume
everything back byte-identical and in order per partition from earliest, then from a
timestamp and from latest (assigned partitions).
"""
from __future__ import annotations

import asyncio
import time

import pytest

from tests.e2e.procs import Processes, free_base_port

pytestmark = pytest.mark.e2e

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PARTITIONS = 3
PER_CODEC = 30
T0 = 1_700_000_000_000  # record timestamps: T0 + running index (CreateTime)


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory):
    procs = Processes()
    try:
        base = free_base_port(3)
        procs.dev(3, base, str(tmp_path_factory.mktemp("clients") / "data"))
        yield ",".join(f"127.0.0.1:{base + 2 * i}" for i in range(3))
    finally:
        procs.kill_all()


def expected_messages(prefix: str):
    """(partition, codec, key, value, headers, timestamp) in production order."""
    out = []
    for n, (codec, i) in enumerate((c, i) for c in CODECS for i in range(PER_CODEC)):
        key = None if i % 7 == 0 else f"{prefix}-{codec}-key-{i}".encode()
        value = f"{prefix}-{codec}-{i}-".encode() + bytes(range(256)) * (i % 3)
        headers = [("codec", codec.encode()), ("i", str(i).encode())] if i % 2 else []
        out.append((n % PARTITIONS, codec, key, value, headers, T0 + n))
    return out


def per_partition(rows):
    """partition -> [(key, value, headers, timestamp)] in offset order."""
    parts: dict[int, list] = {}
    for partition, key, value, headers, ts in rows:
        parts.setdefault(partition, []).append((key, value, headers, ts))
    return parts


def expected_view(expected):
    return per_partition([(p, k, v, h, ts) for p, _, k, v, h, ts in expected])


def first_index_at(expected, partition: int, ts: int) -> int:
    """Offset (index within the partition) of the first record at or after ts."""
    rows = [e for e in expected if e[0] == partition]
    return next(i for i, e in enumerate(rows) if e[5] >= ts)


def poll_until(fn, done, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "timed out"
        fn()


# -- confluent-kafka (librdkafka) ---------------------------------------------------------
def test_confluent_kafka(bootstrap):
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = "ck-topic"
    admin.create_topics([NewTopic(topic, PARTITIONS)])[topic].result(30)
    # The answer to CreateTopics means committed; each broker applies the metadata on its own
    # (as in Kafka), so a Metadata request to another broker may not show the topic yet.
    listed = []
    poll_until(lambda: listed.append(admin.list_topics(topic, timeout=10)),
               lambda: listed and len(listed[-1].topics[topic].partitions) == PARTITIONS)
    md = listed[-1]
    assert sorted(md.brokers) == [1, 2, 3]
    assert sorted(p.leader for p in md.topics[topic].partitions.values()) == [1, 2, 3]

    expected = expected_messages("ck")
    for codec in CODECS:
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "compression.type": codec,
                             "linger.ms": 5, "enable.idempotence": False})
        errors = []
        for partition, c, key, value, headers, ts in expected:
            if c == codec:
                producer.produce(topic, value=value, key=key, headers=headers or None, partition=partition,
                                 timestamp=ts, on_delivery=lambda err, msg: err and errors.append(err))
        assert producer.flush(30) == 0 and errors == []

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "enable.partition.eof": False})

    def drain(want: int):
        got = []

        def poll():
            msg = consumer.poll(0.2)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append((msg.partition(), msg.key(), msg.value(),
                            [(k, v) for k, v in (msg.headers() or [])], msg.timestamp()[1]))

        poll_until(poll, lambda: len(got) >= want)
        return got

    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    assert per_partition(drain(len(expected))) == expected_view(expected)

    ts = T0 + len(expected) // 2
    found = consumer.offsets_for_times([TopicPartition(topic, p, ts) for p in range(PARTITIONS)], timeout=10)
    assert [f.offset for f in found] == [first_index_at(expected, p, ts) for p in range(PARTITIONS)]
    consumer.assign(found)
    later = [e for e in expected if e[5] >= ts]
    assert per_partition(drain(len(later))) == expected_view(later)

    # From latest: resolving "end" races with new writes, so keep writing until something
    # arrives; whatever arrives must be new (nothing from before the assignment).
    consumer.assign([TopicPartition(topic, p, OFFSET_END) for p in range(PARTITIONS)])
    producer = Producer({"bootstrap.servers": bootstrap})
    late = []
    for i in range(100):
        producer.produce(topic, value=b"late-%d" % i, partition=1)
        producer.flush(10)
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            late.append(msg.value())
            break
    assert late and late[0].startswith(b"late-")
    consumer.close()

    admin.delete_topics([topic])[topic].result(30)
    poll_until(lambda: time.sleep(0.1), lambda: topic not in admin.list_topics(timeout=10).topics)


# -- kafka-python ----------------------------------------------------------------------
def test_kafka_python(bootstrap):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    topic = "kp-topic"
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    seen = []  # metadata reaches each broker on its own: ask until the one asked has it
    poll_until(lambda: seen.append(admin.describe_topics([topic])[0]),
               lambda: seen and len(seen[-1]["partitions"]) == PARTITIONS)
    described = seen[-1]
    assert described["error_code"] == 0
    assert sorted(p["leader_id"] for p in described["partitions"]) == [1, 2, 3]

    expected = expected_messages("kp")
    for codec in CODECS:
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, enable_idempotence=False,
                                 compression_type=None if codec == "none" else codec)
        futures = [producer.send(topic, value=value, key=key, headers=headers, partition=partition,
                                 timestamp_ms=ts)
                   for partition, c, key, value, headers, ts in expected if c == codec]
        producer.flush(30)
        assert all(f.get(10).offset >= 0 for f in futures)
        producer.close()

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]

    def drain(want: int):
        got = []

        def poll():
            for records in consumer.poll(200).values():
                got.extend((r.partition, r.key, r.value, list(r.headers), r.timestamp) for r in records)

        poll_until(poll, lambda: len(got) >= want)
        return got

    consumer.assign(tps)
    consumer.seek_to_beginning()
    assert per_partition(drain(len(expected))) == expected_view(expected)

    ts = T0 + len(expected) // 2
    found = consumer.offsets_for_times({tp: ts for tp in tps})
    assert [found[tp].offset for tp in tps] == [first_index_at(expected, p, ts) for p in range(PARTITIONS)]
    for tp in tps:
        consumer.seek(tp, found[tp].offset)
    later = [e for e in expected if e[5] >= ts]
    assert per_partition(drain(len(later))) == expected_view(later)

    consumer.seek_to_end()
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    late = []
    for i in range(100):  # as for confluent-kafka: whatever arrives after seek_to_end is new
        producer.send(topic, value=b"late-%d" % i, partition=2).get(10)
        late += [r.value for records in consumer.poll(200).values() for r in records]
        if late:
            break
    producer.close()
    assert late and all(v.startswith(b"late-") for v in late)
    consumer.close()

    admin.delete_topics([topic])
    poll_until(lambda: time.sleep(0.1), lambda: topic not in admin.list_topics())
    admin.close()


# -- aiokafka --------------------------------------------------------------------------
def test_aiokafka(bootstrap):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    topic = "aio-topic"
    expected = expected_messages("aio")

    async def run():
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        await admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
        deadline = time.monotonic() + 30  # metadata reaches each broker on its own
        while True:
            (described,) = await admin.describe_topics([topic])
            if len(described["partitions"]) == PARTITIONS or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
        assert sorted(p["leader"] for p in described["partitions"]) == [1, 2, 3]
        for codec in CODECS:
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1,
                                        compression_type=None if codec == "none" else codec)
            await producer.start()
            sends = [await producer.send(topic, value=value, key=key, headers=headers, partition=partition,
                                         timestamp_ms=ts)
                     for partition, c, key, value, headers, ts in expected if c == codec]
            await asyncio.gather(*sends)
            await producer.stop()

        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await consumer.start()
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]

        async def drain(want: int):
            got = []
            deadline = time.monotonic() + 30
            while len(got) < want:
                assert time.monotonic() < deadline, "timed out"
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    got.extend((r.partition, r.key, r.value, list(r.headers), r.timestamp) for r in records)
            return got

        consumer.assign(tps)
        await consumer.seek_to_beginning()
        assert per_partition(await drain(len(expected))) == expected_view(expected)

        ts = T0 + len(expected) // 2
        found = await consumer.offsets_for_times({tp: ts for tp in tps})
        assert [found[tp].offset for tp in tps] == [first_index_at(expected, p, ts) for p in range(PARTITIONS)]
        for tp in tps:
            consumer.seek(tp, found[tp].offset)
        later = [e for e in expected if e[5] >= ts]
        assert per_partition(await drain(len(later))) == expected_view(later)

        await consumer.seek_to_end()
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        late = []
        for i in range(100):  # whatever arrives after seek_to_end is new
            await producer.send_and_wait(topic, value=b"late-%d" % i, partition=0)
            late += [r.value for records in (await consumer.getmany(timeout_ms=200)).values() for r in records]
            if late:
                break
        await producer.stop()
        assert late and all(v.startswith(b"late-") for v in late)
        await consumer.stop()

        await admin.delete_topics([topic])
        deadline = time.monotonic() + 30
        while topic in await admin.list_topics():
            assert time.monotonic() < deadline, "topic not deleted"
            await asyncio.sleep(0.1)
        await admin.close()

    asyncio.run(run())
