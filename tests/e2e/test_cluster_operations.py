"""Cluster operations against a real 3-node `dev` cluster, with Kafka's admin clients and our CLI:
DeleteRecords (confluent-kafka, kafka-python's consumer, `delete-records`), DescribeLogDirs
(kafka-python, `log-dirs --describe`), DescribeQuorum on the Kafka port (kafka-python,
`quorum --bootstrap-server`), and decommissioning a broker (`cluster unregister`).

One cluster for the module (its start is most of the cost); the tests run in file order and
the last one stops node 3."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from storage.java_properties import parse_properties
from tests.e2e.procs import REPO, Processes, free_base_port, wait_until
from wire.kafka_uuid import uuid_from_str

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    procs = Processes()
    try:
        base = free_base_port(3)
        data = tmp_path_factory.mktemp("ops") / "data"
        dev, pids = procs.dev(3, base, str(data))
        bootstrap = ",".join(f"127.0.0.1:{base + 2 * i}" for i in range(3))
        yield dev, pids, bootstrap, data
    finally:
        procs.kill_all()


def cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "raftkafka", *args], capture_output=True, text=True,
                          timeout=60, env=env)


def create(bootstrap: str, name: str, partitions: int, rf: int, **configs) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, rf, config=configs)])[name].result(30)


def produce(bootstrap: str, topic: str, n: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(n):
        producer.produce(topic, value=b"r-%04d" % i, partition=0)
    assert producer.flush(30) == 0


def test_delete_records_moves_the_log_start_on_every_replica(cluster):
    from confluent_kafka import KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaConsumer, TopicPartition as KTP

    _, _, bootstrap, _ = cluster
    create(bootstrap, "trimmed", 1, 3)
    produce(bootstrap, "trimmed", 100)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    result = admin.delete_records([TopicPartition("trimmed", 0, 40)])
    (future,) = result.values()
    assert future.result(30).low_watermark == 40  # the low watermark: every live replica starts there
    with pytest.raises(KafkaException, match="OFFSET_OUT_OF_RANGE"):
        list(admin.delete_records([TopicPartition("trimmed", 0, 1000)]).values())[0].result(30)

    offsets = {"partitions": [{"topic": "trimmed", "partition": 0, "offset": 60},
                              {"topic": "missing", "partition": 0, "offset": 1}], "version": 1}
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"delete-records-{os.getpid()}.json")
    with open(path, "w") as f:
        json.dump(offsets, f)
    try:
        r = cli("delete-records", "--bootstrap-server", bootstrap, "--offset-json-file", path)
    finally:
        os.unlink(path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[:2] == ["Executing records delete operation", "Records delete operation completed:"]
    assert "partition: trimmed-0\tlow_watermark: 60" in lines
    assert any(line.startswith("partition: missing-0\terror: ") and "UNKNOWN_TOPIC_OR_PARTITION" in line
               for line in lines)

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    try:
        tp = KTP("trimmed", 0)
        assert consumer.beginning_offsets([tp])[tp] == 60
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        records = consumer.poll(10_000, max_records=1)
        assert [r.offset for r in records[tp]] == [60] and records[tp][0].value == b"r-0060"
    finally:
        consumer.close()


def test_describe_log_dirs_shows_sizes_per_broker(cluster):
    from kafka.admin import KafkaAdminClient

    _, _, bootstrap, _ = cluster
    create(bootstrap, "sized", 1, 2)
    produce(bootstrap, "sized", 50)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        answers = admin.describe_log_dirs({"sized": [0]})
    finally:
        admin.close()
    holders = {}
    for answer in answers:
        for d in answer["log_dirs"]:
            assert d["error_code"] == 0 and d["log_dir"]
            for t in d["topics"]:
                for p in t["partitions"]:
                    holders[answer["broker"]] = p["partition_size"]
                    assert t["name"] == "sized" and p["offset_lag"] >= 0 and not p["is_future_key"]
    assert len(holders) == 2 and all(size > 50 * 6 for size in holders.values())

    r = cli("log-dirs", "--describe", "--bootstrap-server", bootstrap, "--topic-list", "sized")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "Querying brokers for log directories information"
    assert lines[1] == "Received log directory information from brokers 1,2,3"
    shown = json.loads(lines[2])
    assert shown["version"] == 1 and [b["broker"] for b in shown["brokers"]] == [1, 2, 3]
    sizes = {b["broker"]: p["size"] for b in shown["brokers"] for d in b["logDirs"] for p in d["partitions"]}
    assert sizes == holders
    assert {p["partition"] for b in shown["brokers"] for d in b["logDirs"] for p in d["partitions"]} == {"sized-0"}
    r = cli("log-dirs", "--describe", "--bootstrap-server", bootstrap, "--broker-list", "1,7")
    assert r.returncode == 1 and "do not exist from --broker-list: 7" in r.stderr


def test_describe_quorum_on_the_kafka_port(cluster):
    from kafka.admin import KafkaAdminClient

    _, _, bootstrap, data = cluster
    directories = {n: parse_properties((data / f"node-{n}" / "meta.properties").read_text())["directory.id"]
                   for n in (1, 2, 3)}
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        quorum = admin.describe_metadata_quorum()
    finally:
        admin.close()
    (partition,) = quorum["topics"][0]["partitions"]
    assert quorum["topics"][0]["topic_name"] == "__cluster_metadata" and partition["error"] is None
    assert partition["leader_id"] in (1, 2, 3) and partition["high_watermark"] > 0
    # Each voter's directory id (DescribeQuorum v2, KIP-853) is the one its meta.properties holds.
    assert {v["replica_id"]: v["replica_directory_id"] for v in partition["current_voters"]} \
        == {n: str(uuid_from_str(d)) for n, d in directories.items()}
    assert sorted(n["node_id"] for n in quorum["nodes"]) == [1, 2, 3]

    r = cli("quorum", "--bootstrap-server", bootstrap, "describe", "--status")
    assert r.returncode == 0, r.stderr
    status = dict(line.split(":", 1) for line in r.stdout.splitlines() if ":" in line)
    assert status["ClusterId"].strip() and int(status["LeaderId"]) in (1, 2, 3)
    assert status["CurrentVoters"].strip().startswith("[{\"id\": 1")
    r = cli("quorum", "--bootstrap-server", bootstrap, "describe", "--replication")
    assert r.returncode == 0, r.stderr
    rows = [line.split() for line in r.stdout.splitlines()]
    assert rows[0][:3] == ["NodeId", "DirectoryId", "LogEndOffset"]
    assert {int(row[0]): row[1] for row in rows[1:] if row[-1] in ("Leader", "Follower")} == directories
    controller = "127.0.0.1:%d" % (int(bootstrap.split(",")[0].rsplit(":", 1)[1]) + 1)
    r = cli("quorum", "--bootstrap-controller", controller, "describe", "--status")
    assert r.returncode == 0, r.stderr
    direct = dict(line.split(":", 1) for line in r.stdout.splitlines() if ":" in line)
    assert direct["ClusterId"] == status["ClusterId"] and int(direct["LeaderId"]) in (1, 2, 3)
    assert {v["id"]: v["directoryId"] for v in json.loads(direct["CurrentVoters"])} == directories


def test_unregister_a_broker_once_it_holds_no_replicas(cluster):
    from confluent_kafka.admin import AdminClient

    dev, pids, bootstrap, data = cluster
    r = cli("cluster", "unregister", "--bootstrap-server", bootstrap, "--id", "9")
    assert r.returncode == 1 and "BROKER_ID_NOT_REGISTERED" in r.stderr
    r = cli("cluster", "cluster-id", "--bootstrap-server", bootstrap)
    assert r.returncode == 0 and r.stdout.startswith("Cluster ID: ") and len(r.stdout.strip()) > 12

    create(bootstrap, "held", 1, 3)  # a replica on every broker: this test's own, not an earlier test's
    os.kill(pids[3], signal.SIGTERM)  # a controlled shutdown first
    dev.wait_line(rf"^node 3 \(pid {pids[3]}\) exited with code 0", 60)
    r = cli("cluster", "unregister", "--bootstrap-server", bootstrap, "--id", "3")
    assert r.returncode == 1 and "still holds replicas" in r.stderr and "held-0" in r.stderr

    admin = AdminClient({"bootstrap.servers": bootstrap})
    holding = [name for name, t in admin.list_topics(timeout=10).topics.items()
               if any(3 in p.replicas for p in t.partitions.values())]
    for future in admin.delete_topics(holding).values():
        future.result(30)
    r = cli("cluster", "unregister", "--bootstrap-server", bootstrap, "--id", "3")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "Broker 3 is no longer registered."
    wait_until(lambda: sorted(admin.list_topics(timeout=10).brokers) == [1, 2], 10, "broker 3 gone")

    # A running broker that holds no replicas may be unregistered too; as in Kafka it registers
    # again at its next heartbeat.
    rest = [name for name in admin.list_topics(timeout=10).topics if not name.startswith("__")]
    for future in (admin.delete_topics(rest).values() if rest else ()):
        future.result(30)
    r = cli("cluster", "unregister", "--bootstrap-server", bootstrap, "--id", "2")
    assert r.returncode == 0 and r.stdout.strip() == "Broker 2 is no longer registered.", r.stderr
    wait_until(lambda: sorted(admin.list_topics(timeout=10).brokers) == [1, 2], 30, "broker 2 back")
    wait_until(lambda: "BROKER_ID_NOT_REGISTERED; registering again" in (data / "node-2" / "node.log").read_text(),
               30, "broker 2 to register again")
