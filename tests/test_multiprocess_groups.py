"""Consumer groups and the idempotent producer against real node processes
(`python -m raftkafka node --roles broker,controller`, three of them, RF 3), killed with
SIGKILL: a consumer process, partition leaders while librdkafka produces idempotently,
and the broker coordinating a group.

One cluster serves the module and the tests run in file order: the last one leaves a
node dead.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

import pytest

from raftkafka.bench.replication import ReplicationProcesses

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs POSIX signals")

STATIC = {
    "offsets.topic.num.partitions": "3", "offsets.topic.replication.factor": "3",
    "group.initial.rebalance.delay.ms": "200", "group.min.session.timeout.ms": "1000",
}
SESSION_MS = 2000
PARTITIONS = 6

CONSUMER = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Consumer
    bootstrap, topic, group = sys.argv[1:4]
    def assigned(c, parts):  # eager protocol: the whole new assignment
        print("A", " ".join(str(p.partition) for p in parts), flush=True)
    def revoked(c, parts):
        print("A", flush=True)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "session.timeout.ms": %d, "heartbeat.interval.ms": 200,
                  "partition.assignment.strategy": "range"})
    c.subscribe([topic], on_assign=assigned, on_revoke=revoked)
    while True:
        msgs = [m for m in c.consume(20, 0.2) if not m.error()]
        for m in msgs:
            time.sleep(0.002)  # "processing"
            print("R", m.partition(), m.offset(), m.value().decode(), flush=True)
        if msgs:
            c.commit(asynchronous=False)  # commit after processing
""" % SESSION_MS)


@pytest.fixture(scope="module")
def cluster():
    with tempfile.TemporaryDirectory(prefix="raftkafka-groups-mp-") as base:
        procs = ReplicationProcesses(base, 3, static=STATIC)
        procs.format()
        for i in procs.ids:
            procs.start(i)
        try:
            wait_for_brokers(procs.bootstrap, 3)
            yield procs
        finally:
            procs.stop_all()


def wait_until(done, timeout=60.0, what="condition", step=0.1):
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(step)


def wait_for_brokers(bootstrap, n):
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def ready():
        try:
            return len(admin.list_topics(timeout=2).brokers) >= n
        except Exception:  # noqa: BLE001 - still starting
            return False
    wait_until(ready, 60, "brokers")


def create_topic(bootstrap, topic, partitions):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    wait_for_brokers(bootstrap, 3)  # a node the previous test restarted may still be registering
    admin.create_topics([NewTopic(topic, partitions, 3)])[topic].result(30)

    def full_isr():
        md = admin.list_topics(topic, timeout=5).topics[topic]
        return md.error is None and len(md.partitions) == partitions and all(
            len(p.isrs) == 3 and p.leader >= 0 for p in md.partitions.values())
    wait_until(full_isr, 30, "a full ISR")


def produce(bootstrap, topic, values, partitions):
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    errors = []
    for i, v in enumerate(values):
        producer.produce(topic, v.encode(), partition=i % partitions, on_delivery=lambda e, m: e and errors.append(e))
    assert producer.flush(30) == 0 and errors == []


class ConsumerProcess:
    def __init__(self, base, bootstrap, topic, group, name):
        self.path = os.path.join(base, f"{name}.out")
        self.out = open(self.path, "wb")
        self.proc = subprocess.Popen([sys.executable, "-c", CONSUMER, bootstrap, topic, group],
                                     stdout=self.out, stderr=subprocess.DEVNULL)

    def lines(self):
        # Only whole lines: the child may be midway through writing the last one.
        with open(self.path) as f:
            text = f.read()
        return [line.split() for line in text[:text.rfind("\n") + 1].splitlines() if line]

    def values(self):
        return [parts[3] for parts in self.lines() if parts[0] == "R"]

    def assignment(self):
        last = [parts[1:] for parts in self.lines() if parts[0] == "A"]
        return {int(p) for p in last[-1]} if last else set()

    def kill(self):
        self.proc.kill()
        self.proc.wait(10)
        self.out.close()


def test_a_killed_consumer_s_partitions_move_to_the_others_and_nothing_is_skipped(cluster):
    topic, group = "mp-kill-consumer", "mp-g1"
    create_topic(cluster.bootstrap, topic, PARTITIONS)
    values = [f"v{i}" for i in range(1200)]
    consumers = [ConsumerProcess(cluster.base, cluster.bootstrap, topic, group, f"c{i}") for i in range(3)]
    try:
        wait_until(lambda: sorted(len(c.assignment()) for c in consumers) == [2, 2, 2], 60, "a stable group")
        # Records go in only once the group is stable (the first consumer up would otherwise read
        # them all alone), and half after the kill, so the survivors must read the victim's partitions.
        produce(cluster.bootstrap, topic, values[:600], PARTITIONS)
        victim, *survivors = consumers
        wait_until(lambda: len(victim.values()) >= 20, 30, "the victim to consume")
        victim.kill()  # SIGKILL: no LeaveGroup, the coordinator must notice the silence
        produce(cluster.bootstrap, topic, values[600:], PARTITIONS)
        wait_until(lambda: sorted(p for c in survivors for p in c.assignment()) == list(range(PARTITIONS)),
                   60, "the survivors to take over")
        seen = lambda: set(victim.values()) | {v for c in survivors for v in c.values()}
        wait_until(lambda: seen() == set(values), 60, "every record")
        # The survivors never saw a record twice between them (each partition had one owner at a time).
        survived = [v for c in survivors for v in c.values()]
        assert len(survived) == len(set(survived))
    finally:
        for c in consumers:
            if c.proc.poll() is None:
                c.kill()


def test_idempotent_librdkafka_has_no_duplicates_or_gaps_while_leaders_are_killed(cluster):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient

    topic, partitions, total = "mp-idempotence", 3, 6000
    create_topic(cluster.bootstrap, topic, partitions)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 2, "message.timeout.ms": 60000})
    delivered, errors, sent = [], [], threading.Event()

    def on_delivery(err, msg):
        (errors if err else delivered).append(err or msg.value())

    def run():
        for i in range(total):
            while True:
                try:
                    producer.produce(topic, f"{i % partitions}:{i // partitions}".encode(), partition=i % partitions,
                                     on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
            if i % 100 == 0:
                time.sleep(0.2)  # ~12 s in all: the kills happen mid-run
        sent.set()
        producer.flush(90)  # (delivery callbacks run inside poll/flush)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    killed = []
    for round_ in range(2):
        wait_until(lambda: len(delivered) > (round_ + 1) * total // 4, 60,
                   f"progress (round {round_}: {len(delivered)} delivered, errors {errors[:3]})")
        leader = admin.list_topics(topic, timeout=10).topics[topic].partitions[round_].leader
        cluster.kill(leader)
        killed.append(leader)
        time.sleep(1.0)
        cluster.start(leader)  # back with its files: it truncates and catches up as a follower
        wait_for_brokers(cluster.bootstrap, 3)
    thread.join(120)
    assert sent.is_set() and producer.flush(10) == 0
    assert errors == [] and len(delivered) == total

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "mp-idem-check",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: dict[int, list[int]] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + 60
    while sum(map(len, got.values())) < total and time.monotonic() < deadline:
        for m in consumer.consume(500, 0.5):
            if not m.error():
                p, n = m.value().decode().split(":")
                got[int(p)].append(int(n))
    consumer.close()
    for p in range(partitions):  # each partition: exactly 0, 1, 2, ... in order, no duplicate, no gap
        assert got[p] == list(range(total // partitions)), (p, killed)


def test_killing_the_coordinator_moves_the_group_and_keeps_its_committed_offsets(cluster):
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    topic, group = "mp-coordinator", "mp-g2"
    create_topic(cluster.bootstrap, topic, 3)
    produce(cluster.bootstrap, topic, [f"a{i}" for i in range(300)], 3)
    config = {"bootstrap.servers": cluster.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 200}
    consumer = Consumer(config)
    consumer.subscribe([topic])
    seen = 0
    while seen < 150:
        msgs = [m for m in consumer.consume(50, 0.5) if not m.error()]
        seen += len(msgs)
        if msgs:
            consumer.commit(asynchronous=False)
    before = {tp.partition: tp.offset for tp in consumer.committed(
        [TopicPartition(topic, p) for p in range(3)], timeout=10)}
    consumer.close()
    assert sum(max(0, o) for o in before.values()) == seen  # -1001: nothing committed there yet

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    coordinator = admin.describe_consumer_groups([group])[group].result(15).coordinator.id
    cluster.kill(coordinator)

    resumed = Consumer(config)
    after = {tp.partition: tp.offset for tp in resumed.committed(
        [TopicPartition(topic, p) for p in range(3)], timeout=60)}
    assert after == before
    resumed.subscribe([topic])
    rest = []
    deadline = time.monotonic() + 60
    while len(rest) < 300 - seen and time.monotonic() < deadline:
        rest += [m.value().decode() for m in resumed.consume(50, 0.5) if not m.error()]
    # A new admin client: the first one's view names the killed node, which it may still try first.
    after_kill = AdminClient({"bootstrap.servers": cluster.bootstrap})
    new_coordinator = after_kill.describe_consumer_groups([group])[group].result(60).coordinator.id
    resumed.close()
    assert len(rest) == 300 - seen and new_coordinator != coordinator
