"""KIP-951 with librdkafka: a Produce answered NOT_LEADER_OR_FOLLOWER names the new leader,
and the producer moves to it from that answer, before any Metadata answer (3-node `dev`,
SIGTERM of the partition leader: its controlled shutdown moves leadership while it still
answers)."""
from __future__ import annotations

import os
import re
import signal
import time

import pytest

from tests.e2e.procs import free_base_port, wait_until

pytestmark = pytest.mark.e2e

TOPIC = "hints"


def test_librdkafka_takes_the_new_leader_from_the_produce_answer(processes, tmp_path):
    import logging

    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    base = free_base_port(3)
    _, pids = processes.dev(3, base, str(tmp_path / "data"))
    bootstrap = ",".join(f"127.0.0.1:{base + 2 * i}" for i in range(3))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(30)
    wait_until(lambda: len(admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0].isrs) == 3,
               30, "a full ISR")

    lines: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())

    logger = logging.getLogger("test_leader_hints")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(Capture())
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "debug": "protocol,metadata,msg", "topic.metadata.refresh.interval.ms": 600000},
                        logger=logger)
    acked = []
    for _ in range(100):
        producer.produce(TOPIC, b"before", on_delivery=lambda err, msg: acked.append(err))
        producer.poll(0.005)
    producer.flush(20)
    assert len(acked) == 100 and not any(acked)
    old = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0].leader

    start = len(lines)
    os.kill(pids[old], signal.SIGTERM)
    deadline = time.monotonic() + 20
    moved = None
    while time.monotonic() < deadline and moved is None:
        producer.produce(TOPIC, b"after", on_delivery=lambda err, msg: acked.append(err))
        producer.poll(0.01)
        moved = next((i for i in range(start, len(lines)) if "updated with leader" in lines[i]), None)
    producer.flush(20)
    assert moved is not None, "the producer never took a new leader from a Produce answer (KIP-951)"
    # librdkafka takes the hinted leader while parsing the answer and may log that answer's
    # error just after: the NOT_LEADER answer is the one right around the move.
    assert "Not leader for partition" in "\n".join(lines[start:moved + 20]), lines[start:moved + 20][-8:]
    # Learnt from the Produce answer: no Metadata answer had come since the leader stopped.
    assert not any("Received MetadataResponse" in line for line in lines[start:moved]), lines[start:moved]
    new = int(re.search(r"updated with leader (\d+)", lines[moved]).group(1))
    assert new != old
    assert not any(acked), [e for e in acked if e][:3]
