"""Scripted sessions of the three real Kafka clients, used against a broker.

Each session: create a topic, produce a few records with every codec, consume
them back through a consumer group, commit, then describe/list groups and
configs. It returns the values it consumed, in order; the caller checks them.
"""
from __future__ import annotations

import asyncio
import time

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PER_CODEC = 3
TIMEOUT = 20.0


# Compressible padding: clients send tiny batches uncompressed when compression would not pay.
PADDING = "-padding" * 40


def value(prefix: str, codec: str, i: int) -> bytes:
    return f"{prefix}-{codec}-{i}{PADDING}".encode()


def expected_values(prefix: str) -> list[bytes]:
    return [value(prefix, codec, i) for codec in CODECS for i in range(PER_CODEC)]


def confluent_session(bootstrap: str, topic: str, group: str) -> list[bytes]:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import (
        AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, NewTopic,
    )

    base = {"bootstrap.servers": bootstrap, "client.id": "golden-confluent"}
    admin = AdminClient(base)
    admin.create_topics([NewTopic(topic, 1)])[topic].result(TIMEOUT)  # replication -1: CreateTopics v4
    for codec in CODECS:
        producer = Producer({**base, "compression.type": codec, "linger.ms": 5,
                             "enable.idempotence": codec == "none"})
        for i in range(PER_CODEC):
            producer.produce(topic, key=b"k", value=value("ck", codec, i))
        if producer.flush(TIMEOUT) != 0:
            raise RuntimeError(f"confluent producer ({codec}) did not deliver")
    consumer = Consumer({**base, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "session.timeout.ms": 10000})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT
    while len(got) < len(CODECS) * PER_CODEC and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.commit(asynchronous=False)
    consumer.close()
    admin.list_consumer_groups().result(TIMEOUT)
    for future in admin.describe_consumer_groups([group]).values():
        future.result(TIMEOUT)
    for future in admin.describe_configs([ConfigResource("topic", topic)]).values():
        future.result(TIMEOUT)
    # The admin tail exercises the remaining admin APIs (answers are checked by the client).
    admin.create_partitions([NewPartitions(topic, 2)])[topic].result(TIMEOUT)
    resource = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(TIMEOUT)
    for future in admin.delete_consumer_groups([group]).values():
        future.result(TIMEOUT)
    admin.delete_topics([topic])[topic].result(TIMEOUT)
    return got


def kafka_python_session(bootstrap: str, topic: str, group: str) -> list[bytes]:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="golden-kafka-python")
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    for codec in CODECS:
        producer = KafkaProducer(bootstrap_servers=bootstrap, client_id="golden-kafka-python",
                                 compression_type=None if codec == "none" else codec, linger_ms=5)
        for i in range(PER_CODEC):
            producer.send(topic, key=b"k", value=value("kp", codec, i))
        producer.flush(TIMEOUT)
        producer.close(TIMEOUT)
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, client_id="golden-kafka-python", group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             session_timeout_ms=10000, heartbeat_interval_ms=1000)
    got: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT
    while len(got) < len(CODECS) * PER_CODEC and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            got.extend(r.value for r in records)
    consumer.commit()
    consumer.close()
    admin.list_groups()
    admin.describe_groups([group])
    admin.list_group_offsets(group)
    admin.describe_cluster()
    admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "60000"})])
    admin.create_partitions({topic: NewPartitions(2)})
    admin.delete_groups([group])
    admin.delete_topics([topic])
    admin.close()
    return got


def aiokafka_session(bootstrap: str, topic: str, group: str) -> list[bytes]:
    return asyncio.run(asyncio.wait_for(_aiokafka_session(bootstrap, topic, group), TIMEOUT * 2))


async def _aiokafka_session(bootstrap: str, topic: str, group: str) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="golden-aiokafka")
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
        for codec in CODECS:
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id="golden-aiokafka",
                                        compression_type=None if codec == "none" else codec,
                                        enable_idempotence=codec == "none")
            await producer.start()
            try:
                for i in range(PER_CODEC):
                    await producer.send_and_wait(topic, key=b"k", value=value("aio", codec, i))
            finally:
                await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, client_id="golden-aiokafka",
                                    group_id=group, auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        got: list[bytes] = []
        try:
            deadline = time.monotonic() + TIMEOUT
            while len(got) < len(CODECS) * PER_CODEC and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    got.extend(r.value for r in records)
            await consumer.commit()
        finally:
            await consumer.stop()
        await admin.list_consumer_groups()
        await admin.describe_consumer_groups([group])
        return got
    finally:
        await admin.close()


SESSIONS = {
    "confluent": (confluent_session, "ck"),
    "kafka_python": (kafka_python_session, "kp"),
    "aiokafka": (aiokafka_session, "aio"),
}
