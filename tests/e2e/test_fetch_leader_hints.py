"""KIP-951 for consumers with librdkafka: it fetches with Fetch v16 (topic ids, last fetched
epoch), and a Fetch answered NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH names the new
leader, so the consumer moves to it from that answer, before any Metadata answer, and goes on
consuming there (3-node `dev`, SIGTERM of the partition leader: its controlled shutdown moves
leadership while it still answers)."""
from __future__ import annotations

import logging
import os
import re
import signal
import time

import pytest

from tests.e2e.procs import free_base_port, wait_until

pytestmark = pytest.mark.e2e

TOPIC = "fetch-hints"


def test_librdkafka_consumer_takes_the_new_leader_from_the_fetch_answer(processes, tmp_path):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    base = free_base_port(3)
    _, pids = processes.dev(3, base, str(tmp_path / "data"))
    bootstrap = ",".join(f"127.0.0.1:{base + 2 * i}" for i in range(3))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(30)
    wait_until(lambda: len(admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0].isrs) == 3,
               30, "a full ISR")
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(50):
        producer.produce(TOPIC, f"before-{i}".encode())
    assert producer.flush(20) == 0

    lines: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())

    logger = logging.getLogger("test_fetch_leader_hints")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(Capture())
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "debug": "protocol,metadata,fetch", "topic.metadata.refresh.interval.ms": 600000,
                         "fetch.wait.max.ms": 200}, logger=logger)
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    seen: list[bytes] = []

    def consume(until: float, want: int) -> None:
        while time.monotonic() < until and len(seen) < want:
            msg = consumer.poll(0.05)
            if msg is not None and msg.error() is None:
                seen.append(msg.value())

    consume(time.monotonic() + 30, 50)
    assert len(seen) == 50
    assert any(re.search(r"Sent FetchRequest \(v16\b", line) for line in lines), \
        [line for line in lines if "FetchRequest" in line][:3]

    old = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0].leader
    start = len(lines)
    os.kill(pids[old], signal.SIGTERM)
    deadline = time.monotonic() + 20
    moved = None
    while time.monotonic() < deadline and moved is None:
        consume(time.monotonic() + 0.05, 1 << 30)
        moved = next((i for i in range(start, len(lines)) if "updated with leader" in lines[i]), None)
    assert moved is not None, "the consumer never took a new leader from a Fetch answer (KIP-951)"
    around = "\n".join(lines[max(start, moved - 20):moved + 20])
    assert "Not leader for partition" in around or "leader epoch" in around.lower(), lines[moved - 8:moved + 8]
    # Learnt from the Fetch answer: no Metadata answer had come since the leader stopped.
    assert not any("Received MetadataResponse" in line for line in lines[start:moved]), lines[start:moved]
    new = int(re.search(r"updated with leader (\d+)", lines[moved]).group(1))
    assert new != old

    # The consumer reads on from the new leader.
    for i in range(20):
        producer.produce(TOPIC, f"after-{i}".encode())
    assert producer.flush(30) == 0
    consume(time.monotonic() + 30, 70)
    consumer.close()
    assert seen == [f"before-{i}".encode() for i in range(50)] + [f"after-{i}".encode() for i in range(20)]
