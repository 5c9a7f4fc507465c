"""DescribeTopicPartitions (KIP-966) on a real node, asked by a real client (kafka-python's
describe_topic_partitions) and by `topics --describe`.

The node runs the StandardAuthorizer with allow.everyone.if.no.acl.found=true, as librdkafka's
test clusters do; DENY ACLs on two topic names (one existing, one not) make those invisible:
listing every topic leaves them out, naming them answers TOPIC_AUTHORIZATION_FAILED with a
zero topic id either way, so the answer does not tell whether they exist.
"""
from __future__ import annotations

import pytest

from metadata.authorizer import STANDARD_AUTHORIZER
from tests.e2e.procs import free_base_port, write_single_node
from wire.error_codes import ErrorCode

pytestmark = pytest.mark.e2e


def _pages(admin, topics, limit):
    """Every page of a describe, following next_cursor: [[(topic, [partition indexes])...]...]."""
    pages, cursor = [], None
    while True:
        answer = admin.describe_topic_partitions(topics, response_partition_limit=limit, cursor=cursor)
        pages.append([(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in answer["topics"]])
        cursor = answer["next_cursor"]
        if cursor is None or len(pages) > 10:
            return pages


def test_paged_describe_with_elr_and_unauthorized_topics_never_revealed(processes, tmp_path):
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    base = free_base_port()
    bootstrap = f"127.0.0.1:{base}"
    config = write_single_node(str(tmp_path / "data"), base, ("authorizer.class.name", STANDARD_AUTHORIZER),
                               ("allow.everyone.if.no.acl.found", "true"))
    processes.node(config).wait_line(rf"serving Kafka clients on PLAINTEXT://127.0.0.1:{base}", 60)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic("alpha", 3, 1), NewTopic("beta", 2, 1), NewTopic("secret", 1, 1)])
        acl = processes.start("acls", "--bootstrap-server", bootstrap, "--add", "--deny-principal", "User:*",
                              "--operation", "Describe", "--topic", "secret", "--topic", "ghost")
        assert acl.wait(60) == 0, acl.output()

        # Every topic, two partitions a page: the cursor walks through alpha and beta; secret is left out.
        assert _pages(admin, [], 2) == [[("alpha", [0, 1])], [("alpha", [2]), ("beta", [0])], [("beta", [1])]]
        assert _pages(admin, [], 5) == [[("alpha", [0, 1, 2]), ("beta", [0, 1])]]
        assert _pages(admin, [], 3) == [[("alpha", [0, 1, 2])], [("beta", [0, 1])]]  # a full page: next topic

        answer = admin.describe_topic_partitions(["secret", "nosuch", "ghost", "alpha", "bad/name"])
        by_name = {t["name"]: t for t in answer["topics"]}
        assert answer["next_cursor"] is None
        for hidden in ("secret", "ghost"):  # existing or not: the same answer
            assert by_name[hidden]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
            assert by_name[hidden]["topic_id"] is None and by_name[hidden]["partitions"] == []  # the zero id
        assert by_name["nosuch"]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert by_name["bad/name"]["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION
        alpha = by_name["alpha"]
        assert alpha["error_code"] == 0 and alpha["topic_id"] is not None
        assert alpha["topic_authorized_operations"] > 0  # allowed everything: a bit field, not "not asked"
        for number, p in enumerate(alpha["partitions"]):
            assert (p["partition_index"], p["leader_id"], p["replica_nodes"], p["isr_nodes"]) == (number, 1, [1], [1])
            assert p["leader_epoch"] >= 0 and p["offline_replicas"] == []
            assert (p["eligible_leader_replicas"], p["last_known_elr"]) == (None, None)  # kafka-python: empty is None

        # A page from a cursor; a cursor outside the named topics is refused.
        answer = admin.describe_topic_partitions(["alpha", "beta"], cursor={"topic_name": "alpha", "partition_index": 2})
        assert [(t["name"], len(t["partitions"])) for t in answer["topics"]] == [("alpha", 1), ("beta", 2)]
        answer = admin.describe_topic_partitions(["alpha"], cursor={"topic_name": "beta", "partition_index": 0})
        assert [(t["name"], t["error_code"]) for t in answer["topics"]] == [("alpha", ErrorCode.INVALID_REQUEST)]
    finally:
        admin.close()

    # kafka-topics' describe layout with the ELR columns, asked by DescribeTopicPartitions.
    describe = processes.start("topics", "--bootstrap-server", bootstrap, "--describe")
    assert describe.wait(60) == 0, describe.output()
    lines = [line for line in describe.output().splitlines() if line.startswith("\tTopic: ")]
    assert [line.split("\t")[1:3] for line in lines] == [
        ["Topic: alpha", "Partition: 0"], ["Topic: alpha", "Partition: 1"], ["Topic: alpha", "Partition: 2"],
        ["Topic: beta", "Partition: 0"], ["Topic: beta", "Partition: 1"]]  # secret: not described to us
    assert all(line.endswith("\tIsr: 1\tElr: \tLastKnownElr: ") for line in lines), lines
