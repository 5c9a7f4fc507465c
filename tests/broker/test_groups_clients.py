"""Consumer groups and idempotent producers end to end with real Kafka clients
(confluent-kafka, kafka-python, aiokafka) against two in-process brokers on 127.0.0.1.

Per client: three consumers in one group over a 6-partition topic split the partitions
between them and every produced record reaches exactly one member; a second group gets
everything too; offsets committed after processing are what `committed` and the admin
APIs report; groups are listed, described and deleted through each client's admin."""
from __future__ import annotations

import asyncio
import threading
import time

import pytest

from tests.broker.harness import ThreadedCluster

PARTITIONS = 6
RECORDS = 240
STATIC = {
    "offsets.topic.num.partitions": "4", "offsets.topic.replication.factor": "1",
    "group.initial.rebalance.delay.ms": "200", "group.min.session.timeout.ms": "1000",
}


@pytest.fixture(scope="module")
def bootstrap():
    cluster = ThreadedCluster(2, static=STATIC)
    servers = cluster.start()
    yield servers
    cluster.stop()


def wait_until(done, timeout=30.0, what="condition", members=()):
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            state = [(sorted(m.assigned), len(m.records), m.error) for m in members]
            raise AssertionError(f"timed out waiting for {what}; members (assigned, records, error): {state}")
        time.sleep(0.05)


def commit_after_processing(consumer) -> None:
    """Synchronous commit as an application does it: a commit that races a rebalance fails with
    REBALANCE_IN_PROGRESS or ILLEGAL_GENERATION (Kafka answers so while the group is completing a
    rebalance or has moved to a new generation); the records are then redelivered to their next
    owner (at least once), so the application carries on. Any other error ends the member."""
    from confluent_kafka import KafkaError, KafkaException
    try:
        consumer.commit(asynchronous=False)
    except KafkaException as exc:
        if exc.args[0].code() not in (KafkaError.REBALANCE_IN_PROGRESS, KafkaError.ILLEGAL_GENERATION):
            raise


class Member:
    """One group consumer polling in its own thread: what it got and what it owns."""

    def __init__(self, loop):
        self.records: list[tuple[int, int, bytes]] = []  # (partition, offset, value)
        self.assigned: set[int] = set()
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(loop,), daemon=True)
        self.thread.start()

    def _run(self, loop) -> None:
        try:
            loop(self)
        except BaseException as exc:  # surfaced by check()
            self.error = exc

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)
        assert self.error is None, self.error


def check_split(members, expected_values):
    """Each member owns two partitions, disjoint, and every record reached exactly one member."""
    owned = [m.assigned for m in members]
    assert sorted(p for ps in owned for p in ps) == list(range(PARTITIONS)) and all(len(o) == 2 for o in owned)
    got = [v for m in members for _, _, v in m.records]
    assert sorted(got) == sorted(expected_values) and len(set(got)) == len(got)
    for m in members:
        assert {p for p, _, _ in m.records} <= m.assigned


def run_groups(make_loop, produce, group, n_members=3):
    members = [Member(make_loop(group)) for _ in range(n_members)]
    wait_until(lambda: sorted(len(m.assigned) for m in members) == [2] * n_members, what="a stable group",
               members=members)
    values = produce()
    wait_until(lambda: sum(len(m.records) for m in members) >= len(values), what="every record")
    return members, values


# -- confluent-kafka ---------------------------------------------------------------------------
def test_confluent_kafka_groups(bootstrap):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = "ck-groups"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        f.result(15)

    def config(group):
        return {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 200}

    def make_loop(group):
        def loop(member):
            consumer = Consumer(config(group))
            consumer.subscribe([topic])
            try:
                while not member.stop.is_set():
                    msgs = consumer.consume(100, 0.1)
                    member.assigned = {tp.partition for tp in consumer.assignment()}
                    msgs = [m for m in msgs if not m.error()]
                    member.records.extend((m.partition(), m.offset(), m.value()) for m in msgs)
                    if msgs:
                        commit_after_processing(consumer)
            finally:
                consumer.close()
        return loop

    def produce():
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
        values = [b"ck-%d" % i for i in range(RECORDS)]
        for i, v in enumerate(values):
            producer.produce(topic, v, partition=i % PARTITIONS)
        assert producer.flush(15) == 0
        return values

    members, values = run_groups(make_loop, produce, "ck-g1")
    check_split(members, values)
    second = Member(make_loop("ck-g2"))
    wait_until(lambda: len(second.records) >= RECORDS, what="the second group")
    assert sorted(v for _, _, v in second.records) == sorted(values)

    groups = {g.group_id: g for g in admin.list_consumer_groups().result(15).valid}
    assert {"ck-g1", "ck-g2"} <= set(groups)
    described = admin.describe_consumer_groups(["ck-g1"])["ck-g1"].result(15)
    assert described.state.name == "STABLE" and len(described.members) == 3
    assert sorted(tp.partition for m in described.members for tp in m.assignment.topic_partitions) == \
        list(range(PARTITIONS))
    for m in members + [second]:
        m.close()
    probe = Consumer(config("ck-g1"))
    committed = probe.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=15)
    probe.close()
    assert sum(tp.offset for tp in committed) == RECORDS
    assert [f.result(15) for f in admin.delete_consumer_groups(["ck-g1"]).values()] == [None]
    assert "ck-g1" not in {g.group_id for g in admin.list_consumer_groups().result(15).valid}


# -- kafka-python -------------------------------------------------------------------------------
def test_kafka_python_groups(bootstrap):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic

    topic = "kp-groups"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])

    def make_loop(group):
        def loop(member):
            consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                     auto_offset_reset="earliest", enable_auto_commit=False,
                                     session_timeout_ms=6000, heartbeat_interval_ms=200)
            try:
                while not member.stop.is_set():
                    batches = consumer.poll(100)
                    member.assigned = {tp.partition for tp in consumer.assignment()}
                    got = [(tp.partition, r.offset, r.value) for tp, rs in batches.items() for r in rs]
                    member.records.extend(got)
                    if got:
                        consumer.commit()
            finally:
                consumer.close()
        return loop

    def produce():
        producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)  # idempotent by default
        values = [b"kp-%d" % i for i in range(RECORDS)]
        for i, v in enumerate(values):
            producer.send(topic, v, partition=i % PARTITIONS)
        producer.flush(15)
        producer.close()
        return values

    members, values = run_groups(make_loop, produce, "kp-g1")
    check_split(members, values)
    second = Member(make_loop("kp-g2"))
    wait_until(lambda: len(second.records) >= RECORDS, what="the second group")
    assert sorted(v for _, _, v in second.records) == sorted(values)
    listed = {g["group_id"] for g in admin.list_groups()}
    assert {"kp-g1", "kp-g2"} <= listed
    described = admin.describe_groups(["kp-g1"])["kp-g1"]
    assert described["group_state"] == "Stable" and len(described["members"]) == 3
    for m in members + [second]:
        m.close()
    offsets = admin.list_group_offsets("kp-g1")["kp-g1"]
    assert sum(o.offset for tp, o in offsets.items() if tp.topic == topic) == RECORDS
    assert admin.delete_groups(["kp-g1"]) == {"kp-g1": "OK"}
    assert "kp-g1" not in {g["group_id"] for g in admin.list_groups()}
    admin.close()


# -- aiokafka -----------------------------------------------------------------------------------
def test_aiokafka_groups(bootstrap):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    topic = "aio-groups"

    async def consume_into(member, group, stop):
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    session_timeout_ms=6000, heartbeat_interval_ms=200)
        await consumer.start()
        try:
            while not stop.is_set():
                batches = await consumer.getmany(timeout_ms=100)
                member["assigned"] = {tp.partition for tp in consumer.assignment()}
                got = [(tp.partition, r.offset, r.value) for tp, rs in batches.items() for r in rs]
                member["records"].extend(got)
                if got:
                    await consumer.commit()
        finally:
            await consumer.stop()

    async def until(done, what, timeout=30.0):
        deadline = time.monotonic() + timeout
        while not done():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            await asyncio.sleep(0.05)

    async def main():
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        await admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
        stop = asyncio.Event()
        members = [{"records": [], "assigned": set()} for _ in range(3)]
        tasks = [asyncio.create_task(consume_into(m, "aio-g1", stop)) for m in members]
        await until(lambda: sorted(len(m["assigned"]) for m in members) == [2, 2, 2], "a stable group")
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
        await producer.start()
        values = [b"aio-%d" % i for i in range(RECORDS)]
        for i, v in enumerate(values):
            await producer.send(topic, v, partition=i % PARTITIONS)
        await producer.stop()
        await until(lambda: sum(len(m["records"]) for m in members) >= RECORDS, "every record")
        second = {"records": [], "assigned": set()}
        tasks.append(asyncio.create_task(consume_into(second, "aio-g2", stop)))
        await until(lambda: len(second["records"]) >= RECORDS, "the second group")
        listed = {g[0] for g in await admin.list_consumer_groups()}
        described = await admin.describe_consumer_groups(["aio-g1"])
        stop.set()
        await asyncio.gather(*tasks)
        offsets = await admin.list_consumer_group_offsets("aio-g1")
        await admin.close()
        return members, second, values, listed, described, offsets

    members, second, values, listed, described, offsets = asyncio.run(main())
    owned = [m["assigned"] for m in members]
    assert sorted(p for ps in owned for p in ps) == list(range(PARTITIONS))
    got = [v for m in members for _, _, v in m["records"]]
    assert sorted(got) == sorted(values) and len(set(got)) == len(got)
    assert sorted(v for _, _, v in second["records"]) == sorted(values)
    assert {"aio-g1", "aio-g2"} <= listed
    (error, group_id, state, protocol_type, _, members_described, *_), = described[0].groups  # raw tuples
    assert (error, group_id, state, protocol_type, len(members_described)) == (0, "aio-g1", "Stable", "consumer", 3)
    assert sum(o.offset for tp, o in offsets.items() if tp.topic == topic) == RECORDS


def test_confluent_kafka_cooperative_sticky_group_grows_without_losing_records(bootstrap):
    """KIP-429 incremental rebalancing runs on the classic protocol: the broker only relays."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = "ck-coop"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        f.result(15)

    def make_loop(member):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ck-coop-g", "auto.offset.reset": "earliest",
                             "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 200,
                             "partition.assignment.strategy": "cooperative-sticky"})
        consumer.subscribe([topic])
        try:
            while not member.stop.is_set():
                msgs = [m for m in consumer.consume(100, 0.1) if not m.error()]
                member.assigned = {tp.partition for tp in consumer.assignment()}
                member.records.extend((m.partition(), m.offset(), m.value()) for m in msgs)
                if msgs:
                    commit_after_processing(consumer)
        finally:
            consumer.close()

    first = [Member(make_loop), Member(make_loop)]
    wait_until(lambda: sorted(len(m.assigned) for m in first) == [3, 3], what="two members", members=first)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    values = [b"coop-%d" % i for i in range(RECORDS)]
    for i, v in enumerate(values[:RECORDS // 2]):
        producer.produce(topic, v, partition=i % PARTITIONS)
    assert producer.flush(15) == 0
    third = Member(make_loop)
    members = first + [third]
    wait_until(lambda: sorted(len(m.assigned) for m in members) == [2, 2, 2], what="three members",
               members=members)
    for i, v in enumerate(values[RECORDS // 2:], start=RECORDS // 2):
        producer.produce(topic, v, partition=i % PARTITIONS)
    assert producer.flush(15) == 0
    wait_until(lambda: {v for m in members for _, _, v in m.records} == set(values), what="every record",
               members=members)
    for m in members:
        m.close()
    assert sorted(p for m in members for p in m.assigned) == list(range(PARTITIONS))
