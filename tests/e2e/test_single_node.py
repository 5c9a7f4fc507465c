"""The bare command: formats ./raftkafka-data on first start, serves librdkafka, keeps data."""
from __future__ import annotations

import os
import signal
import time

import pytest

from tests.e2e.procs import free_base_port, ports_free

pytestmark = pytest.mark.e2e


def produce(bootstrap: str, topic: str, n: int, prefix: bytes) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5})
    errors = []
    for i in range(n):
        producer.produce(topic, key=b"k%d" % i, value=prefix + b"-%d" % i,
                         on_delivery=lambda err, msg: err and errors.append(err))
    assert producer.flush(30) == 0 and errors == []


def consume_all(bootstrap: str, topic: str, n: int, partitions: int = 1) -> list[tuple[int, bytes, bytes]]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "e2e", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            got.append((msg.offset(), msg.key(), msg.value()))
    consumer.close()
    return got


def test_bare_command_formats_serves_and_keeps_data_across_restarts(processes, tmp_path):
    base = free_base_port()
    bootstrap = f"localhost:{base}"
    node = processes.start("--base-port", str(base), cwd=str(tmp_path))
    node.wait_line(r"^Formatted .*raftkafka-data \(cluster ", 30)
    node.wait_line(rf"serving Kafka clients on PLAINTEXT://127.0.0.1:{base}, controllers on CONTROLLER://127.0.0.1:{base + 1}")
    node.wait_line(rf"Connect any Kafka client to\s+localhost:{base}")
    data = tmp_path / "raftkafka-data"
    assert (data / "meta.properties").exists() and (data / "node.toml").exists()

    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("quickstart", 1)])["quickstart"].result(30)
    produce(bootstrap, "quickstart", 200, b"first")
    node.signal(signal.SIGTERM)
    assert node.wait(60) == 0
    assert "controlled shutdown complete" in node.output()

    again = processes.start("--base-port", str(base), cwd=str(tmp_path))
    again.wait_line(r"serving Kafka clients")
    assert "Formatted" not in again.output()  # formatted once only
    assert "skipped the recovery scan" in again.output()
    got = consume_all(bootstrap, "quickstart", 200)
    assert got == [(i, b"k%d" % i, b"first-%d" % i) for i in range(200)]
    again.signal(signal.SIGINT)  # Ctrl-C is a clean stop too
    assert again.wait(60) == 0


def test_bare_command_without_flags_uses_9092_and_9093(processes, tmp_path):
    if not ports_free([9092, 9093]):
        pytest.skip("9092/9093 are in use on this machine")
    node = processes.start(cwd=str(tmp_path))
    node.wait_line(r"serving Kafka clients on PLAINTEXT://127.0.0.1:9092, controllers on CONTROLLER://127.0.0.1:9093")
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": "localhost:9092"}).list_topics(timeout=20)
    assert [(b.id, b.host, b.port) for b in metadata.brokers.values()] == [(1, "127.0.0.1", 9092)]
    assert os.path.isdir(tmp_path / "raftkafka-data")
    node.signal(signal.SIGTERM)
    assert node.wait(60) == 0


def test_a_busy_port_is_one_clear_line(processes, tmp_path):
    import socket

    base = free_base_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", base))
        s.listen()
        node = processes.start("--base-port", str(base), cwd=str(tmp_path))
        assert node.wait(30) == 1
    assert node.lines == [f"error: port {base} on 127.0.0.1 is in use (pick other ports with --base-port)"]
