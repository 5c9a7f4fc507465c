"""Damaged or surprising state on disk never halts the cluster or loses data (issue 16, cases 1,
8 and 10), with real `python -m raftkafka` processes, kill -9 and confluent-kafka.

- A topic with a legal 220-character name is deleted: every broker stays up (the `-delete`
  directory name is cut to fit NAME_MAX).
- A topic deleted and re-created under the same name while a replica's node was down: the
  restarted node sets its old directory aside (`-stray`), re-fetches the new topic, and a
  consumer reading from it after it became leader sees only the new topic's records (without
  topic ids on disk, truncation by leader epoch kept old-0..4 there as offsets 0..4).
- A flipped byte in the newest metadata snapshot (after the log was trimmed) or in the middle
  of the metadata log of a single-voter node: the node refuses to start with one line naming
  the file, deletes nothing; with the file restored it serves every record it had.
"""
from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.procs import Processes, dev_config_path, free_base_port, pid_alive, wait_until, write_single_node

pytestmark = pytest.mark.e2e

# Short sessions: a kill -9'd broker is fenced, and re-registers, quickly. No auto-creation: a
# client still polling metadata for a deleted topic would create it again.
SETTINGS = ("broker.session.timeout.ms=2000", "broker.heartbeat.interval.ms=300",
            "auto.create.topics.enable=false")


@dataclass
class DevCluster:
    processes: Processes
    dev: object
    pids: dict[int, int]
    base: int
    data: Path

    def bootstrap(self, nodes=(1, 2, 3)) -> str:
        return ",".join(f"127.0.0.1:{self.base + 2 * (i - 1)}" for i in nodes)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    processes = Processes()
    try:
        base = free_base_port(3)
        data = tmp_path_factory.mktemp("damaged-state") / "data"
        dev, pids = processes.dev(3, base, str(data), *SETTINGS)
        yield DevCluster(processes, dev, pids, base, data)
    finally:
        processes.kill_all()


def produce(bootstrap: str, topic: str, values: list[bytes], *, batch_each: bool = False) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 30000})
    errors = []
    for v in values:
        producer.produce(topic, value=v, on_delivery=lambda err, msg: err and errors.append(err))
        if batch_each:
            producer.flush(40)
    assert producer.flush(40) == 0 and errors == []


def consume(bootstrap: str, topic: str, count: int, timeout: float = 40.0) -> list[bytes]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic[:20]}",
                         "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        for msg in consumer.consume(100, 0.2):
            if msg.error() is None:
                got.append(msg.value())
    consumer.close()
    return got


def create(admin, topic, **kw) -> None:
    from confluent_kafka.admin import NewTopic

    admin.create_topics([NewTopic(topic, **kw)])[topic].result(30)


def try_create(admin, topic, **kw) -> bool:
    from confluent_kafka import KafkaException

    try:
        create(admin, topic, **kw)
    except KafkaException as e:
        if "already exists" not in str(e):
            raise
        time.sleep(0.2)
        return False
    return True


def partition_state(admin, topic):
    meta = _topic_metadata(admin, topic)
    if meta.error is not None or 0 not in meta.partitions:
        return None
    p = meta.partitions[0]
    return p.leader, sorted(p.isrs)


def _topic_metadata(admin, topic, attempts=3):
    """The topic's metadata; a Metadata call that timed out (its broker was just killed, and
    librdkafka had it in flight there) is asked again."""
    from confluent_kafka import KafkaError, KafkaException
    for attempt in range(attempts):
        try:
            return admin.list_topics(topic, timeout=10).topics[topic]
        except KafkaException as e:
            if attempt == attempts - 1 or e.args[0].code() != KafkaError._TIMED_OUT:
                raise


def round_trip(bootstrap: str, topic: str, admin, **kw) -> None:
    """The cluster still creates, produces and consumes with a real client."""
    create(admin, topic, **kw)
    values = [b"%s-%d" % (topic.encode(), i) for i in range(20)]
    produce(bootstrap, topic, values)
    assert consume(bootstrap, topic, 20) == values


def test_deleting_a_topic_with_a_220_character_name_keeps_every_broker_up(cluster):
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    topic = "long." + "x" * 215
    create(admin, topic, num_partitions=2, replication_factor=3)
    produce(cluster.bootstrap(), topic, [b"v%d" % i for i in range(10)])
    admin.delete_topics([topic])[topic].result(30)
    wait_until(lambda: topic not in admin.list_topics(timeout=10).topics, 30, "the topic gone")
    for node in (1, 2, 3):  # every replica's directory is deleted, nothing left behind
        wait_until(lambda: not list((cluster.data / f"node-{node}").rglob("long.x*")), 30,
                   f"node {node} to delete its replicas")
    time.sleep(1)
    assert all(pid_alive(pid) for pid in cluster.pids.values()), cluster.dev.output()[-3000:]
    assert "halting" not in "".join((cluster.data / f"node-{i}" / "node.log").read_text() for i in (1, 2, 3))
    round_trip(cluster.bootstrap(), "after-long-delete", admin, num_partitions=1, replication_factor=3)


def test_a_topic_recreated_while_a_replica_was_down_never_serves_the_old_records(cluster):
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    topic = "reborn"
    create(admin, topic, num_partitions=1, replica_assignment=[[1, 3]])
    wait_until(lambda: partition_state(admin, topic) == (1, [1, 3]), 30, "leader 1, ISR [1, 3]")
    old = [b"old-%d" % i for i in range(10)]
    # One batch per record: a truncation by leader epoch to offset 5 keeps old-0..4 whole.
    produce(cluster.bootstrap(), topic, old, batch_each=True)

    # A clean stop: node 3 keeps the old records with their epochs and high watermark on disk.
    os.kill(cluster.pids[3], signal.SIGTERM)
    cluster.dev.wait_line(rf"^node 3 \(pid {cluster.pids[3]}\) exited with code 0", 60)
    up = cluster.bootstrap((1, 2))
    wait_until(lambda: partition_state(admin, topic) == (1, [1]), 30, "node 3 out of the ISR")
    admin.delete_topics([topic])[topic].result(30)
    wait_until(lambda: partition_state(admin, topic) is None, 30, "the old topic gone")
    # Node 3 is fenced but registered. The broker asked may not have seen the deletion yet.
    wait_until(lambda: try_create(admin, topic, num_partitions=1, replica_assignment=[[1, 3]]), 30,
               "the topic created again")
    new = [b"new-%d" % i for i in range(5)]
    produce(up, topic, new)

    node3 = cluster.processes.node(dev_config_path(str(cluster.data), 3))
    node3.wait_line(r"serving Kafka clients", 60)
    wait_until(lambda: partition_state(admin, topic) == (1, [1, 3]), 60, "node 3 back in the ISR")
    # Node 3 leads now: what it serves is what the new topic holds.
    os.kill(cluster.pids[1], signal.SIGKILL)
    wait_until(lambda: (partition_state(admin, topic) or (None,))[0] == 3, 60, "node 3 leading")
    assert consume(cluster.bootstrap((2, 3)), topic, len(new)) == new
    assert list((cluster.data / "node-3").rglob("reborn-0.*-stray")), "the old directory is set aside"
    round_trip(cluster.bootstrap((2, 3)), "after-reborn", AdminClient({"bootstrap.servers": cluster.bootstrap((2, 3))}),
               num_partitions=1, replication_factor=2)


def _flip(path: Path, position: int) -> bytes:
    raw = path.read_bytes()
    damaged = bytearray(raw)
    damaged[position] ^= 0x01
    path.write_bytes(bytes(damaged))
    return raw


def _refused(processes, config, pattern: str) -> str:
    node = processes.node(config)
    assert node.wait(60) == 1
    errors = [line for line in node.lines if line.startswith("error:")]
    assert len(errors) == 1 and pattern in errors[0], node.output()[-3000:]
    assert "Traceback" not in node.output()
    return errors[0]


def test_a_damaged_metadata_snapshot_or_log_is_refused_by_a_single_voter_and_nothing_is_deleted(processes, tmp_path):
    from confluent_kafka.admin import AdminClient

    base = free_base_port()
    bootstrap = f"127.0.0.1:{base}"
    data = tmp_path / "data"
    config = write_single_node(str(data), base, ("broker.session.timeout.ms", 2000),
                               ("broker.heartbeat.interval.ms", 300),
                               ("metadata.log.max.records.between.snapshots", 40),
                               ("metadata.log.segment.bytes", 1024))
    node = processes.node(config)
    node.wait_line("serving Kafka clients")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    create(admin, "kept", num_partitions=1, replication_factor=1)
    values = [b"kept-%d" % i for i in range(50)]
    produce(bootstrap, "kept", values)
    for i in range(12):  # metadata records enough for snapshots and a trimmed metadata log
        create(admin, f"filler-{i}", num_partitions=2, replication_factor=1)
    metadata = next(data.rglob("__cluster_metadata-0"))
    wait_until(lambda: list(metadata.glob("*.checkpoint")) and min(metadata.glob("*.log")).name != "0" * 20 + ".log",
               30, "a snapshot and a trimmed metadata log")
    node.popen.kill()
    node.wait(10)

    snapshot = max(metadata.glob("*.checkpoint"))
    good = _flip(snapshot, snapshot.stat().st_size - 3)
    line = _refused(processes, config, "is damaged")
    assert str(snapshot) in line
    assert len(list(data.rglob("kept-0"))) == 1 and not list(data.rglob("*-stray"))
    snapshot.write_bytes(good)  # the operator restores the file

    segment = min(metadata.glob("*.log"))
    first_frame = 4 + int.from_bytes(segment.read_bytes()[:4], "big")
    assert segment.stat().st_size > first_frame + 17  # more entries follow the first
    good = _flip(segment, first_frame - 1)  # the first entry's last byte
    line = _refused(processes, config, "is damaged and valid entries follow")
    assert str(segment) in line
    segment.write_bytes(good)

    node = processes.node(config)
    node.wait_line("serving Kafka clients", 60)
    assert consume(bootstrap, "kept", len(values)) == values
    round_trip(bootstrap, "after-damage", admin, num_partitions=1, replication_factor=1)
