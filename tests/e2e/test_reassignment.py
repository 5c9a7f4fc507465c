"""Cluster operations on a live 3-node `dev` cluster, through the CLI, while an idempotent
acks=all producer and a consumer group keep going (confluent-kafka): partitions move to
other brokers (their leader among the removed replicas) and a topic's replication factor
goes from 2 to 3; `--verify` until done (and it clears the throttle). Nothing acknowledged
is lost or duplicated, no committed group offset goes backwards, and the removed replicas'
logs are gone."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tests.e2e.procs import free_base_port, wait_until

pytestmark = pytest.mark.e2e

MOVED, GROWN = "moved", "grown"


def test_reassign_and_raise_the_replication_factor_under_load(processes, tmp_path):
    from confluent_kafka import Consumer, ElectionType, KafkaError, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    base = free_base_port(3)
    data = tmp_path / "data"
    processes.dev(3, base, str(data))
    bootstrap = ",".join(f"127.0.0.1:{base + 2 * i}" for i in range(3))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(MOVED, 3, replica_assignment=[[1, 2], [2, 1], [1, 2]]),
                                   NewTopic(GROWN, 2, replica_assignment=[[1, 2], [2, 3]])])
    for f in futures.values():
        f.result(30)

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5, "message.timeout.ms": 60000})
    acked: set[bytes] = set()
    failed = []

    def on_delivery(err, msg):
        (failed.append(err) if err is not None else acked.add(msg.value()))

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ops", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 1000})
    consumer.subscribe([MOVED, GROWN])
    committed: dict[tuple[str, int], int] = {}
    regressions = []
    sent = [0]
    last_commit = [time.monotonic()]

    def step():
        i = sent[0]
        sent[0] += 1
        producer.produce(MOVED if i % 2 else GROWN, key=b"k%d" % (i % 7), value=b"v-%06d" % i,
                         on_delivery=on_delivery)
        producer.poll(0)
        consumer.consume(200, 0.005)
        if time.monotonic() - last_commit[0] > 0.3:
            last_commit[0] = time.monotonic()
            try:
                consumer.commit(asynchronous=False)
            except Exception:  # nothing consumed yet, or a rebalance: the next commit tries again
                pass
            for tp in consumer.committed(consumer.assignment(), timeout=10):
                if tp.offset >= 0:
                    key = (tp.topic, tp.partition)
                    if tp.offset < committed.get(key, -1):
                        regressions.append((key, committed[key], tp.offset))
                    committed[key] = max(tp.offset, committed.get(key, -1))

    def cli(*args) -> str:
        """Run a CLI command while the clients keep going."""
        env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", os.getcwd())}
        proc = subprocess.Popen([sys.executable, "-m", "raftkafka", *args, "--bootstrap-server", bootstrap],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        while proc.poll() is None:
            step()
        out = proc.stdout.read()
        assert proc.returncode == 0, out
        return out

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(acked) < 300:
        step()
    plan = tmp_path / "plan.json"
    target = {(MOVED, 0): [3, 2], (MOVED, 1): [3, 1], (MOVED, 2): [2, 3],
              (GROWN, 0): [1, 2, 3], (GROWN, 1): [2, 3, 1]}
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r} for (t, p), r in target.items()]}))
    out = cli("reassign-partitions", "--reassignment-json-file", str(plan), "--execute", "--throttle", "50000000")
    assert "Current partition replica assignment" in out and '"replicas":[1,2]' in out
    assert "The inter-broker throttle limit was set to 50000000 B/s" in out
    assert "Successfully started partition reassignments for grown-0,grown-1,moved-0,moved-1,moved-2" in out
    while True:
        out = cli("reassign-partitions", "--reassignment-json-file", str(plan), "--verify")
        if "still in progress" not in out:
            break
    assert out.count("is completed.") == 5 and "Clearing topic-level throttles on topics grown,moved" in out
    for _ in range(300):
        step()
    assert producer.flush(30) == 0 and failed == []

    # Kafka's AdminClient elects the preferred leaders (ElectLeaders v2 through librdkafka).
    elected = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(t, p) for t, p in target]).result(30)
    assert all(e is None or e.code() == KafkaError.ELECTION_NOT_NEEDED for e in elected.values()), elected
    topics = admin.list_topics(timeout=10).topics
    assert all(topics[t].partitions[p].leader == r[0] for (t, p), r in target.items())
    for (t, p), replicas in target.items():
        assert topics[t].partitions[p].replicas == replicas
        assert sorted(topics[t].partitions[p].isrs) == sorted(replicas)
    assert topics[MOVED].partitions[0].leader in (3, 2)  # its leader, broker 1, was removed
    assert (data / "node-3" / f"{MOVED}-0").is_dir()  # the new replica's log
    wait_until(lambda: not (data / "node-1" / f"{MOVED}-0").exists(), 10, "the removed replica's log deleted")

    # Every acknowledged record is in the logs exactly once.
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False})
    seen: list[bytes] = []
    for t, parts in ((MOVED, 3), (GROWN, 2)):
        for p in range(parts):
            low, high = reader.get_watermark_offsets(TopicPartition(t, p), timeout=10)
            reader.assign([TopicPartition(t, p, low)])
            got = 0
            while got < high - low:
                for msg in reader.consume(500, 1.0):
                    if msg.error() is None and msg.offset() < high:
                        seen.append(msg.value())
                        got += 1
    reader.close()
    consumer.close()
    assert len(seen) == len(set(seen)), "duplicates in the log"
    assert acked <= set(seen), f"{len(acked - set(seen))} acknowledged records lost"
    assert regressions == [] and committed
