"""Clients follow a leader change without manual steps: RF=3 on a 3-node `dev` cluster,
SIGTERM (controlled shutdown) of the partition leader's node while a producer and a
consumer keep going; nothing acknowledged with acks=all is lost, and the leadership moved
before the process exited (its controlled shutdown completed rather than timing out)."""
from __future__ import annotations

import os
import signal
import time

import pytest

from tests.e2e.procs import free_base_port, wait_until

pytestmark = pytest.mark.e2e

TOPIC = "moving"


def test_producer_and_consumer_follow_the_leader_to_another_node(processes, tmp_path):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    base = free_base_port(3)
    dev, pids = processes.dev(3, base, str(tmp_path / "data"))
    bootstrap = ",".join(f"127.0.0.1:{base + 2 * i}" for i in range(3))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(30)

    def leader_and_isr():
        p = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0]
        return p.leader, sorted(p.isrs)

    wait_until(lambda: leader_and_isr()[1] == [1, 2, 3], 30, "a full ISR")
    old_leader, _ = leader_and_isr()

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2,
                         "message.timeout.ms": 60000})
    acked: dict[int, bytes] = {}
    failed = []

    def on_delivery(err, msg):
        if err is None:
            acked[msg.offset()] = msg.value()
        else:
            failed.append(err)

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "follow", "enable.auto.commit": False,
                         "topic.metadata.refresh.interval.ms": 1000})
    consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    got: list[tuple[int, bytes]] = []

    def step(i):
        producer.produce(TOPIC, value=b"v-%05d" % i, on_delivery=on_delivery)
        producer.poll(0)
        for msg in consumer.consume(500, 0.01):
            if msg.error() is None:
                got.append((msg.offset(), msg.value()))

    for i in range(500):
        step(i)
    assert producer.flush(30) == 0

    os.kill(pids[old_leader], signal.SIGTERM)  # controlled shutdown: leadership moves first
    dev.wait_line(rf"^node {old_leader} \(pid {pids[old_leader]}\) exited with code 0", 60)
    new_leader, isr = leader_and_isr()
    assert new_leader in {1, 2, 3} - {old_leader} and old_leader not in isr
    # The controller said the leadership had moved (and every broker had seen it) before the
    # process stopped: the broker's heartbeats were answered should_shutdown, not timed out.
    with open(tmp_path / "data" / f"node-{old_leader}" / "node.log") as f:
        assert "controlled shutdown complete" in f.read()

    for i in range(500, 1000):
        step(i)
    assert producer.flush(60) == 0 and failed == []
    assert len(acked) == 1000
    deadline = time.monotonic() + 60
    while len(got) < 1000 and time.monotonic() < deadline:
        for msg in consumer.consume(500, 0.2):
            if msg.error() is None:
                got.append((msg.offset(), msg.value()))
    consumer.close()
    assert got == sorted(acked.items())
    assert [v for _, v in got] == [b"v-%05d" % i for i in range(1000)]
