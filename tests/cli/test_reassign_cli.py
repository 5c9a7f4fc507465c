"""reassign-partitions / leader-election: their JSON formats and throttle plans (no cluster)."""
import json

import pytest

from raftkafka.cli.common import CommandError
from raftkafka.cli.leader_election import parse_partitions_json
from raftkafka.cli.reassign_partitions import assignment_json, move_throttles, parse_reassignment


def test_an_assignment_round_trips_in_kafkas_format():
    text = assignment_json({("t", 1): (3, 1), ("t", 0): [1, 2]})
    assert text == ('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any","any"]},'
                    '{"topic":"t","partition":1,"replicas":[3,1],"log_dirs":["any","any"]}]}')
    assert parse_reassignment(json.loads(text)) == {("t", 0): [1, 2], ("t", 1): [3, 1]}


@pytest.mark.parametrize("data,complaint", [
    ({"version": 1, "partitions": []}, "cannot be empty"),
    ({"version": 2, "partitions": [{"topic": "t", "partition": 0, "replicas": [1]}]}, "version"),
    ({"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1]}]}, "duplicate entries"),
    ({"partitions": [{"topic": "t", "partition": 0, "replicas": [1]}] * 2}, "Duplicate replica assignment"),
    ({"partitions": [{"topic": "t", "partition": "0", "replicas": [1]}]}, "need"),
    ({"partitions": [{"topic": "t", "partition": 0, "replicas": [1], "log_dirs": ["/d"]}]}, "log dirs"),
    ({"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["any"]}]}, "different"),
])
def test_bad_assignments_are_one_clear_error(data, complaint):
    with pytest.raises(CommandError, match=complaint):
        parse_reassignment(data)


def test_throttles_name_the_sources_and_the_new_replicas_of_moving_partitions():
    current = {("t", 0): (1, 2), ("t", 1): (2, 3), ("u", 0): (1,)}
    proposed = {("t", 0): [2, 3], ("t", 1): [2, 3], ("u", 0): [1, 4]}
    leader, follower, brokers = move_throttles(current, proposed)
    assert leader == {"t": "0:1,0:2", "u": "0:1"}  # t-1 does not move
    assert follower == {"t": "0:3", "u": "0:4"}
    assert brokers == [1, 2, 3, 4]


def test_leader_election_json():
    assert parse_partitions_json('{"partitions": [{"topic": "t", "partition": 1}]}', "f") == [("t", 1)]
    with pytest.raises(CommandError, match="duplicate"):
        parse_partitions_json('{"partitions": [{"topic": "t", "partition": 1}, {"topic": "t", "partition": 1}]}', "f")
    with pytest.raises(CommandError, match="not valid JSON"):
        parse_partitions_json("{", "f")


def test_topics_describe_shows_a_reassignment_in_progress_as_kafka_topics_does():
    from raftkafka.cli.topics import format_describe
    from raftkafka.client.cluster import PartitionInfo, TopicInfo
    info = TopicInfo("t", partitions={0: PartitionInfo(0, 1, (3, 4, 1, 2), (1, 2)),
                                      1: PartitionInfo(1, 2, (2, 1), (1, 2))})
    text = format_describe({"t": info}, {}, reassignments={("t", 0): ([3, 4, 1, 2], [3, 4], [1, 2])})
    assert text.splitlines() == [
        "Topic: t\tPartitionCount: 2\tReplicationFactor: 2\tConfigs: ",
        "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 3,4,1,2\tIsr: 1,2\tAdding Replicas: 3,4\tRemoving Replicas: 1,2"
        "\tElr: N/A\tLastKnownElr: N/A",
        "\tTopic: t\tPartition: 1\tLeader: 2\tReplicas: 2,1\tIsr: 1,2\tElr: N/A\tLastKnownElr: N/A",
    ]
