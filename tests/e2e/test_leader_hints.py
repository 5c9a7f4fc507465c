"""KIP-951 with librdkafka: a Produce (v10) or Fetch (v16) answered NOT_LEADER_OR_FOLLOWER
names the new leader, and the producer or consumer moves to it from that answer, before any
Metadata answer (3-node `dev`, SIGTERM of the partition leader: its controlled shutdown moves
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


def _cluster_with_topic(processes, tmp_path, topic):
    """A 3-node cluster and a topic of one partition on all three, its ISR full:
    (bootstrap servers, admin client, pid by node id)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    base = free_base_port(3)
    _, pids = processes.dev(3, base, str(tmp_path / "data"))
    bootstrap = ",".join(f"127.0.0.1:{base + 2 * i}" for i in range(3))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    wait_until(lambda: len(admin.list_topics(topic, timeout=10).topics[topic].partitions[0].isrs) == 3,
               30, "a full ISR")
    return bootstrap, admin, pids


def _captured_logger(name):
    """A logger for librdkafka's debug lines and the list they land in."""
    lines: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())

    logger = logging.getLogger(name)
    logger.setLevel(logging.DEBUG)
    logger.addHandler(Capture())
    return logger, lines


def _stop_leader_and_see_the_move(admin, pids, topic, lines, step, what):
    """SIGTERM the partition's leader and run `step` until librdkafka takes a new leader;
    check that it learnt it from a refused answer, not from Metadata. The new leader's id."""
    old = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader
    start = len(lines)
    os.kill(pids[old], signal.SIGTERM)
    deadline = time.monotonic() + 20
    moved = None
    while time.monotonic() < deadline and moved is None:
        step()
        moved = next((i for i in range(start, len(lines)) if "updated with leader" in lines[i]), None)
    assert moved is not None, f"the client never took a new leader from a {what} answer (KIP-951)"
    # librdkafka takes the hinted leader while parsing the answer and may log that answer's
    # error just after: the NOT_LEADER answer is the one right around the move. Its log lines
    # reach `lines` only as the client is polled, so poll on until they have come.
    refused = re.compile(r"Not leader for partition|NOT_LEADER_FOR_PARTITION|FENCED_LEADER_EPOCH")
    deadline = time.monotonic() + 5
    while not refused.search("\n".join(lines[start:moved + 20])) and time.monotonic() < deadline:
        step()
    assert refused.search("\n".join(lines[start:moved + 20])), lines[start:moved + 20][-8:]
    # Learnt from the answer: no Metadata answer had come since the leader stopped.
    assert not any("Received MetadataResponse" in line for line in lines[start:moved]), lines[start:moved]
    new = int(re.search(r"updated with leader (\d+)", lines[moved]).group(1))
    assert new != old
    return new


def test_librdkafka_takes_the_new_leader_from_the_produce_answer(processes, tmp_path):
    from confluent_kafka import Producer

    topic = "hints"
    bootstrap, admin, pids = _cluster_with_topic(processes, tmp_path, topic)
    logger, lines = _captured_logger("test_leader_hints")
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "debug": "protocol,metadata,msg", "topic.metadata.refresh.interval.ms": 600000},
                        logger=logger)
    acked = []
    for _ in range(100):
        producer.produce(topic, b"before", on_delivery=lambda err, msg: acked.append(err))
        producer.poll(0.005)
    producer.flush(20)
    assert len(acked) == 100 and not any(acked)

    def produce_one():
        producer.produce(topic, b"after", on_delivery=lambda err, msg: acked.append(err))
        producer.poll(0.01)

    _stop_leader_and_see_the_move(admin, pids, topic, lines, produce_one, "Produce")
    producer.flush(20)
    assert not any(acked), [e for e in acked if e][:3]


def test_librdkafka_consumer_fetches_with_v16_and_takes_the_new_leader_from_the_fetch_answer(processes, tmp_path):
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = "fetch-hints"
    bootstrap, admin, pids = _cluster_with_topic(processes, tmp_path, topic)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(50):
        producer.produce(topic, f"before-{i}".encode())
    assert producer.flush(20) == 0
    logger, lines = _captured_logger("test_fetch_leader_hints")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "debug": "protocol,metadata,fetch", "topic.metadata.refresh.interval.ms": 600000,
                         "fetch.wait.max.ms": 200}, logger=logger)
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen: list[bytes] = []

    def consume(seconds: float, want: int = 1 << 30) -> None:
        until = time.monotonic() + seconds
        while time.monotonic() < until and len(seen) < want:
            msg = consumer.poll(0.05)
            if msg is not None and msg.error() is None:
                seen.append(msg.value())

    consume(30, 50)
    assert len(seen) == 50
    assert any(re.search(r"Sent FetchRequest \(v16\b", line) for line in lines), \
        [line for line in lines if "FetchRequest" in line][:3]
    _stop_leader_and_see_the_move(admin, pids, topic, lines, lambda: consume(0.05), "Fetch")
    # It reads on from the new leader.
    for i in range(20):
        producer.produce(topic, f"after-{i}".encode())
    assert producer.flush(30) == 0
    consume(30, 70)
    consumer.close()
    assert seen == [f"before-{i}".encode() for i in range(50)] + [f"after-{i}".encode() for i in range(20)]
