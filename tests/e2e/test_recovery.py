"""Broker recovery: kill -9 during heavy produce, a torn tail on disk, restart.

The restarted node scans the log after its recovery point (no clean-shutdown marker),
cuts the torn tail, and serves every acknowledged record at its acknowledged offset. A
clean SIGTERM stop then writes the marker, and the next start skips the scan (the node
says so in its log).
"""
from __future__ import annotations

import os
import re
import signal
import threading
import time

import pytest

from tests.e2e.procs import free_base_port, wait_until, write_single_node

pytestmark = pytest.mark.e2e

TOPIC = "heavy"
GARBAGE = b"\x00\x00\x00\x00\x00\x00\x07\xd0\x00\x00\x01\x00" + b"torn-write" * 20  # a batch header cut short


def consume_all(bootstrap: str, until: int, timeout: float = 60.0) -> list[tuple[int, bytes]]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "recovery", "enable.auto.commit": False,
                         "fetch.max.bytes": 8 << 20})
    consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < until and time.monotonic() < deadline:
        for msg in consumer.consume(10_000, 0.2):
            assert msg.error() is None, msg.error()
            got.append((msg.offset(), msg.value()))
    consumer.close()
    return got


def test_kill_9_during_produce_then_torn_tail_recovers_and_sigterm_restart_skips_the_scan(processes, tmp_path):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    base = free_base_port()
    bootstrap = f"127.0.0.1:{base}"
    data = tmp_path / "data"
    # After kill -9 the old incarnation's session must lapse before the new one may register
    # (as in Kafka): keep it short.
    config = write_single_node(str(data), base, ("broker.session.timeout.ms", 2000),
                               ("broker.heartbeat.interval.ms", 300))
    node = processes.node(config)
    node.wait_line("serving Kafka clients")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1)])[TOPIC].result(30)

    acked: dict[int, bytes] = {}
    stop = threading.Event()

    def on_delivery(err, msg):
        if err is None:
            acked[msg.offset()] = msg.value()

    def produce():
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 2,
                             "message.timeout.ms": 5000, "enable.idempotence": False})
        i = 0
        while not stop.is_set():
            try:
                producer.produce(TOPIC, value=b"record-%08d-" % i + b"x" * 80, on_delivery=on_delivery)
                i += 1
            except BufferError:
                producer.poll(0.01)
            producer.poll(0)
        producer.flush(10)  # deliveries after the kill fail; they are not acked

    producer_thread = threading.Thread(target=produce, daemon=True)
    producer_thread.start()
    try:
        wait_until(lambda: len(acked) >= 20_000, 120, "20k acknowledged records")
        node.signal(signal.SIGKILL)  # mid-produce
        node.wait(30)
    finally:
        stop.set()
        producer_thread.join(30)
    assert len(acked) >= 20_000

    # What a crash mid-write leaves: a partial batch after the last complete one.
    partition_dir = data / f"{TOPIC}-0"
    last_segment = sorted(p for p in os.listdir(partition_dir) if p.endswith(".log"))[-1]
    with open(partition_dir / last_segment, "ab") as f:
        f.write(GARBAGE)

    restarted = processes.node(config)
    restarted.wait_line("serving Kafka clients")
    m = restarted.wait_line(r"logs recovered after an unclean shutdown .* (\d+) bytes truncated")
    assert int(m.group(1)) >= len(GARBAGE)
    assert "skipped the recovery scan" not in restarted.output()
    got = consume_all(bootstrap, max(acked) + 1)
    assert [o for o, _ in got] == list(range(len(got)))  # gapless from 0
    by_offset = dict(got)
    assert all(by_offset.get(o) == v for o, v in acked.items())  # every acked record, where it was acked

    restarted.signal(signal.SIGTERM)
    assert restarted.wait(60) == 0
    assert (data / ".kafka_cleanshutdown").exists()
    clean = processes.node(config)
    clean.wait_line("serving Kafka clients")
    clean.wait_line(r"logs loaded: clean shutdown marker found in .*; skipped the recovery scan \(\d+ logs\)")
    assert not re.search("logs recovered after an unclean shutdown", clean.output())
    assert consume_all(bootstrap, len(got)) == got
    clean.signal(signal.SIGTERM)
    assert clean.wait(60) == 0
