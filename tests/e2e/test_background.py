"""Background log work on a real node, driven by topic configs: size retention deletes old
segments (log start offset moves), compaction keeps the last value per key, and a deleted
topic's log directory goes away. `log.retention.check.interval.ms` comes from node.toml,
so this also proves the node file's static broker settings reach the broker."""
from __future__ import annotations

import os
import signal
import socket
import struct
import time

import pytest

from tests.e2e.procs import free_base_port, wait_until, write_single_node

pytestmark = pytest.mark.e2e

MB = 1 << 20


@pytest.fixture
def node(processes, tmp_path):
    base = free_base_port()
    data = tmp_path / "data"
    proc = processes.node(write_single_node(str(data), base, ("log.retention.check.interval.ms", 300),
                                            ("metrics.port", 0), ("metrics.host", "127.0.0.1")))
    proc.wait_line("serving Kafka clients")
    yield f"127.0.0.1:{base}", data, proc
    proc.signal(signal.SIGTERM)
    assert proc.wait(60) == 0


def create(admin, name, configs):
    from confluent_kafka.admin import NewTopic

    admin.create_topics([NewTopic(name, 1, config=configs)])[name].result(30)


def test_retention_compaction_and_topic_deletion_run_in_the_background(node):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient

    bootstrap, data, _ = node
    admin = AdminClient({"bootstrap.servers": bootstrap})
    create(admin, "sized", {"segment.bytes": str(MB), "retention.bytes": str(MB)})
    create(admin, "compacted", {"cleanup.policy": "compact", "segment.ms": "100",
                                "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0"})
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(4 * 1024):  # 4 MiB in 1 KiB records: at least four segments
        producer.produce("sized", value=b"%08d" % i + b"r" * 1016)
    for round_ in range(6):  # 6 rounds over 20 keys, each in its own segment (segment.ms)
        for k in range(20):
            producer.produce("compacted", key=b"key-%02d" % k, value=b"round-%d" % round_)
        producer.flush(30)
        time.sleep(0.15)
    producer.produce("compacted", key=b"tail", value=b"rolls the last round out of the active segment")
    assert producer.flush(30) == 0

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bg", "enable.auto.commit": False})
    wait_until(lambda: consumer.get_watermark_offsets(TopicPartition("sized", 0), timeout=5)[0] > 0,
               30, "retention to move the log start offset")
    low, high = consumer.get_watermark_offsets(TopicPartition("sized", 0), timeout=5)
    assert high == 4 * 1024 and (high - low) * 1024 <= 2 * MB  # at most the retained + active segment
    assert len([f for f in os.listdir(data / "sized-0") if f.endswith(".log")]) <= 2

    def compacted_view():
        consumer.assign([TopicPartition("compacted", 0, OFFSET_BEGINNING)])
        out = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            batch = consumer.consume(1000, 0.3)
            if not batch and out:
                break
            out += [(m.offset(), m.key(), m.value()) for m in batch if m.error() is None]
        return out

    view = wait_until(lambda: (lambda v: v if len(v) < 6 * 20 + 1 else None)(compacted_view()), 30,
                      "the cleaner to compact")
    latest = {}
    for _, key, value in view:
        latest[key] = value
    assert latest == {**{b"key-%02d" % k: b"round-5" for k in range(20)},
                      b"tail": b"rolls the last round out of the active segment"}
    assert [o for o, _, _ in view] == sorted(o for o, _, _ in view)  # offsets never change order
    consumer.close()

    admin.delete_topics(["sized"])["sized"].result(30)
    wait_until(lambda: not any(n.startswith("sized-0") for n in os.listdir(data)), 30,
               "the deleted topic's log directory to go")


def test_a_malformed_frame_closes_only_that_connection(node):
    from confluent_kafka.admin import AdminClient

    bootstrap, _, proc = node
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as bad:
        bad.sendall(struct.pack(">i", 12) + b"\xff" * 12)  # api key -1: not a request
        assert bad.recv(4096) == b""  # closed by the broker
    with socket.create_connection((host, int(port)), timeout=10) as huge:
        huge.sendall(struct.pack(">i", 0x7FFFFFFF))  # beyond socket.request.max.bytes
        assert huge.recv(4096) == b""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    assert list(metadata.brokers) == [1]
    assert proc.popen.poll() is None


def test_the_metrics_endpoint_counts_what_librdkafka_produced(node):
    import re
    import urllib.request

    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient

    bootstrap, _, proc = node
    port = int(proc.wait_line(r"metrics on http://127.0.0.1:(\d+)/metrics").group(1))
    create(AdminClient({"bootstrap.servers": bootstrap}), "metered", {})
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(1000):
        producer.produce("metered", value=b"m" * 100)
    assert producer.flush(30) == 0

    def scrape(name, **labels):
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        want = ",".join(f'{k}="{v}"' for k, v in labels.items())
        series = re.escape(f"{name}{{{want}}}" if labels else name)
        m = re.search(rf"^{series} (\S+)$", text, re.M)
        return float(m.group(1)) if m else None

    assert scrape("raftkafka_broker_topic_messages_in_total", topic="metered") == 1000
    assert scrape("raftkafka_broker_topic_bytes_in_total", topic="metered") >= 1000 * 100
    assert scrape("raftkafka_active_controller") == 1
