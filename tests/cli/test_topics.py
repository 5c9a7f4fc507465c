"""`topics` against three real brokers."""
from __future__ import annotations

import base64
import re
import uuid

from raftkafka.cli.topics import format_describe
from raftkafka.client.cluster import PartitionInfo, TopicInfo


def partition_lines(out: str, topic: str) -> list[str]:
    return [line.strip() for line in out.splitlines() if line.startswith(f"\tTopic: {topic}\t")]


def test_create_describe_alter_delete(cli, brokers, topic_name):
    r = cli("topics", "--bootstrap-server", brokers, "--create", "--topic", topic_name, "--partitions", 3,
            "--replication-factor", 2, "--config", "cleanup.policy=compact", "--config", "retention.ms=60000")
    assert (r.code, r.out) == (0, f"Created topic {topic_name}.\n")

    r = cli("topics", "--bootstrap-server", brokers, "--list")
    assert r.code == 0 and topic_name in r.out.splitlines()

    r = cli("topics", "--bootstrap-server", brokers, "--describe", "--topic", topic_name)
    assert r.code == 0
    header = r.out.splitlines()[0]
    topic_id = re.fullmatch(rf"Topic: {topic_name}\tTopicId: ([A-Za-z0-9_-]{{22}})\tPartitionCount: 3\t"
                            r"ReplicationFactor: 2\tConfigs: cleanup.policy=compact,retention.ms=60000", header)
    assert topic_id, header  # Kafka's Uuid text: URL-safe base64, unpadded
    assert uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id.group(1) + "==")).int != 0
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": brokers})
    described = admin.describe_topics(TopicCollection([topic_name]))[topic_name].result(30)
    # the same id (librdkafka writes standard base64 where Kafka's tools write the URL-safe kind)
    assert base64.b64decode(str(described.topic_id) + "==") == base64.urlsafe_b64decode(topic_id.group(1) + "==")
    lines = partition_lines(r.out, topic_name)
    assert len(lines) == 3
    for number, line in enumerate(lines):
        fields = {k: v.strip() for k, v in (f.split(":", 1) for f in line.split("\t"))}
        assert fields["Partition"] == str(number)
        replicas = fields["Replicas"].split(",")
        assert len(replicas) == 2 and len(set(replicas)) == 2
        assert fields["Leader"] in replicas
        assert sorted(fields["Isr"].split(",")) == sorted(replicas)
        assert (fields["Elr"], fields["LastKnownElr"]) == ("", "")  # asked by DescribeTopicPartitions: none yet

    r = cli("topics", "--bootstrap-server", brokers, "--alter", "--topic", topic_name, "--partitions", 5)
    assert r.code == 0
    r = cli("topics", "--bootstrap-server", brokers, "--describe", "--topic", topic_name)
    assert "PartitionCount: 5" in r.out and len(partition_lines(r.out, topic_name)) == 5

    r = cli("topics", "--bootstrap-server", brokers, "--describe", "--topic", topic_name,
            "--under-replicated-partitions")
    assert (r.code, r.out) == (0, "")  # all replicas in sync

    r = cli("topics", "--bootstrap-server", brokers, "--delete", "--topic", topic_name)
    assert (r.code, r.out) == (0, f"Deleted topic {topic_name}.\n")
    r = cli("topics", "--bootstrap-server", brokers, "--list")
    assert topic_name not in r.out.splitlines()


def test_existing_topic_is_one_line_error_unless_if_not_exists(cli, brokers, topic_name):
    assert cli("topics", "--bootstrap-server", brokers, "--create", "--topic", topic_name).code == 0
    r = cli("topics", "--bootstrap-server", brokers, "--create", "--topic", topic_name)
    assert (r.code, r.out, r.err) == (1, "", f"error: Topic '{topic_name}' already exists.\n")
    r = cli("topics", "--bootstrap-server", brokers, "--create", "--topic", topic_name, "--if-not-exists")
    assert (r.code, r.err) == (0, "")


def test_broker_refusals_are_one_line(cli, brokers, topic_name):
    r = cli("topics", "--bootstrap-server", brokers, "--create", "--topic", topic_name, "--replication-factor", 4)
    assert r.code == 1 and r.err.count("\n") == 1 and "INVALID_REPLICATION_FACTOR" in r.err
    r = cli("topics", "--bootstrap-server", brokers, "--create", "--topic", topic_name, "--config", "no.such=1")
    assert r.code == 1 and r.err.count("\n") == 1 and "INVALID_CONFIG" in r.err
    cli("topics", "--bootstrap-server", brokers, "--create", "--topic", topic_name, "--partitions", 2)
    r = cli("topics", "--bootstrap-server", brokers, "--alter", "--topic", topic_name, "--partitions", 1)
    assert r.code == 1 and "INVALID_PARTITIONS" in r.err


def test_unknown_topic(cli, brokers):
    for action in ("--describe", "--delete"):
        r = cli("topics", "--bootstrap-server", brokers, action, "--topic", "no-such-topic")
        assert (r.code, r.err) == (1, "error: Topic 'no-such-topic' does not exist as expected\n")
    r = cli("topics", "--bootstrap-server", brokers, "--delete", "--topic", "no-such-topic", "--if-exists")
    assert r.code == 0


def test_topic_regex_for_list_and_describe(cli, brokers, topic_name):
    for suffix in ("a", "b"):
        cli("topics", "--bootstrap-server", brokers, "--create", "--topic", f"{topic_name}.{suffix}")
    r = cli("topics", "--bootstrap-server", brokers, "--list", "--topic", f"{topic_name}\\..*")
    assert r.out.splitlines() == [f"{topic_name}.a", f"{topic_name}.b"]
    r = cli("topics", "--bootstrap-server", brokers, "--describe", "--topic", f"{topic_name}\\.b")
    assert [line for line in r.out.splitlines() if line.startswith("Topic:")][0].startswith(f"Topic: {topic_name}.b\t")


def test_bad_flags_are_one_line(cli, brokers):
    cases = [
        (["--create", "--topic", "x", "--partitions", "0"], 1, "--partitions must be at least 1"),
        (["--create"], 1, "--create needs --topic"),
        (["--alter", "--topic", "x"], 1, "--alter needs --partitions"),
        (["--list", "--config", "a=b"], 1, "--config and --replication-factor only apply to --create"),
        (["--create", "--topic", "x", "--config", "novalue"], 1, "is not key=value"),
        (["--create", "--topic", "x", "--partitions", "many"], 2, "invalid int value"),
        (["--list", "--describe"], 2, "not allowed with argument"),
        (["--describe", "--topic", "("], 1, "not a valid regular expression"),
    ]
    for flags, code, text in cases:
        r = cli("topics", "--bootstrap-server", brokers, *flags)
        assert r.code == code, (flags, r)
        assert r.err.count("\n") == 1 and text in r.err, (flags, r)


def test_unreachable_cluster(cli, tmp_path):
    config = tmp_path / "admin.properties"
    config.write_text("# fail fast\nrequest.timeout.ms=300\n")
    r = cli("topics", "--bootstrap-server", "127.0.0.1:1", "--command-config", config, "--list")
    assert r.code == 1 and r.err.startswith("error: cannot reach any broker at 127.0.0.1:1") and r.err.count("\n") == 1
    r = cli("topics", "--bootstrap-server", "nonsense", "--list")
    assert r.code == 1 and "--bootstrap-server" in r.err
    config.write_text("no.such.property=1\n")
    r = cli("topics", "--bootstrap-server", "127.0.0.1:1", "--command-config", config, "--list")
    assert (r.code, r.err) == (1, "error: unknown admin property 'no.such.property'\n")


def test_describe_partition_filters():
    info = TopicInfo("t", partitions={
        0: PartitionInfo(0, 1, (1, 2), (1, 2)),
        1: PartitionInfo(1, 2, (2, 3), (2,), elr=(3,), last_known_elr=()),  # from DescribeTopicPartitions
        2: PartitionInfo(2, -1, (3, 1), ()),
    })
    full = format_describe({"t": info}, {"t": {"retention.ms": "5"}})
    assert full.splitlines() == [
        "Topic: t\tPartitionCount: 3\tReplicationFactor: 2\tConfigs: retention.ms=5",
        "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2\tElr: N/A\tLastKnownElr: N/A",
        "\tTopic: t\tPartition: 1\tLeader: 2\tReplicas: 2,3\tIsr: 2\tElr: 3\tLastKnownElr: ",
        "\tTopic: t\tPartition: 2\tLeader: none\tReplicas: 3,1\tIsr: \tElr: N/A\tLastKnownElr: N/A",
    ]
    under = format_describe({"t": info}, {}, under_replicated=True)
    assert [line.split("\t")[2] for line in under.splitlines()] == ["Partition: 1", "Partition: 2"]
    unavailable = format_describe({"t": info}, {}, unavailable=True)
    assert [line.split("\t")[2] for line in unavailable.splitlines()] == ["Partition: 2"]
    assert format_describe({"t": info}, {}, with_overrides=True) == ""
