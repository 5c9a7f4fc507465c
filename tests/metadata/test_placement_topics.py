import random
import uuid
from collections import Counter

import pytest

from metadata.controller.placement import place_replicas
from metadata.controller.topics import (
    CreatableTopic, NewPartitions, create_partitions, create_topics, delete_topics,
)
from metadata.errors import ApiError
from tests.metadata.helpers import apply, cluster, with_topic
from wire.error_codes import ErrorCode


@pytest.mark.parametrize("n,rf", [(3, 3), (5, 2), (6, 3), (7, 1)])
def test_leaders_and_replicas_spread_evenly(n, rf):
    parts = place_replicas({b: None for b in range(n)}, n * 40, rf)
    leaders = Counter(p[0] for p in parts)
    assert set(leaders.values()) == {40}
    replicas = Counter(r for p in parts for r in p)
    assert set(replicas.values()) == {40 * rf}
    assert all(len(set(p)) == rf for p in parts)


def test_racks_are_honoured():
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    parts = place_replicas(racks, 60, 3)
    assert all(len({racks[r] for r in p}) == 3 for p in parts)
    assert set(Counter(p[0] for p in parts).values()) == {10}
    # rf larger than the rack count: every rack used, no broker twice
    parts = place_replicas({1: "a", 2: "b", 3: "b", 4: "b"}, 8, 3)
    assert all(1 in p for p in parts)  # broker 1 is rack "a"'s only broker
    assert all(len(set(p)) == 3 for p in parts)


def test_placement_is_deterministic_and_validates():
    racks = {b: None for b in range(4)}
    assert place_replicas(racks, 9, 2, rng=random.Random(5)) == \
        place_replicas(racks, 9, 2, rng=random.Random(5))
    with pytest.raises(ApiError) as e:
        place_replicas(racks, 3, 5)
    assert e.value.code == ErrorCode.INVALID_REPLICATION_FACTOR


def test_successive_single_partition_topics_rotate_leaders():
    img = cluster(4)
    for i in range(8):
        img = with_topic(img, f"t{i}", 1, 2)
    leaders = Counter(t.partitions[0].leader for t in img.topics_by_id.values())
    assert set(leaders.values()) == {2}


def create(img, *topics, **kw):
    return create_topics(img, list(topics), rng=random.Random(1), **kw)


@pytest.mark.parametrize("name,code", [
    ("", ErrorCode.INVALID_TOPIC_EXCEPTION), (".", ErrorCode.INVALID_TOPIC_EXCEPTION),
    ("..", ErrorCode.INVALID_TOPIC_EXCEPTION), ("a" * 250, ErrorCode.INVALID_TOPIC_EXCEPTION),
    ("bad name", ErrorCode.INVALID_TOPIC_EXCEPTION), ("ünï", ErrorCode.INVALID_TOPIC_EXCEPTION),
    ("__cluster_metadata", ErrorCode.INVALID_REQUEST),  # the Raft log's own directory name
    ("a" * 249, ErrorCode.NONE), ("ok.name_-1", ErrorCode.NONE),
])
def test_topic_name_rules(name, code):
    _, [res] = create(cluster(3), CreatableTopic(name, 1, 1))
    assert res.error == code


def test_create_topic_errors():
    img = with_topic(cluster(3), "a.b", 1, 1)
    records, res = create(
        img,
        CreatableTopic("a.b", 1, 1),                     # exists
        CreatableTopic("a_b", 1, 1),                     # collides with a.b
        CreatableTopic("dup", 1, 1), CreatableTopic("dup", 1, 1),
        CreatableTopic("rf", 1, 4),                      # only 3 brokers
        CreatableTopic("zero", 0, 1),
        CreatableTopic("cfg", 1, 1, configs={"retention.ms": "soon"}),
        CreatableTopic("cfg2", 1, 1, configs={"no.such.config": "1"}),
        CreatableTopic("both", 2, 1, assignments={0: [1]}),
        CreatableTopic("gap", assignments={0: [1], 2: [2]}),
        CreatableTopic("fine", 2, 3, configs={"cleanup.policy": "compact"}),
    )
    codes = [r.error for r in res]
    assert codes == [ErrorCode.TOPIC_ALREADY_EXISTS, ErrorCode.INVALID_TOPIC_EXCEPTION,
                     ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST,
                     ErrorCode.INVALID_REPLICATION_FACTOR, ErrorCode.INVALID_PARTITIONS,
                     ErrorCode.INVALID_CONFIG, ErrorCode.INVALID_CONFIG, ErrorCode.INVALID_REQUEST,
                     ErrorCode.INVALID_REPLICA_ASSIGNMENT, ErrorCode.NONE]
    new = apply(img, records)
    assert sorted(new.topics_by_name) == ["a.b", "fine"]
    assert new.topic_config("fine") == {"cleanup.policy": "compact"}


def test_rf_counts_only_unfenced_brokers_and_defaults_come_from_config():
    img = cluster(3, fenced=(3,))
    _, [res] = create(img, CreatableTopic("t", 1, 3))
    assert res.error == ErrorCode.INVALID_REPLICATION_FACTOR
    records, [res] = create(img, CreatableTopic("t"), static={"num.partitions": "4",
                                                             "default.replication.factor": "2"})
    assert (res.num_partitions, res.replication_factor) == (4, 2)
    new = apply(img, records)
    assert all(3 not in p.replicas for p in new.topic("t").partitions.values())


def test_validate_only_and_manual_assignment():
    img = cluster(3, fenced=(2,))
    records, [res] = create(img, CreatableTopic("t", 3, 2), validate_only=True)
    assert res.error == ErrorCode.NONE and records == []
    records, [res] = create(img, CreatableTopic("m", assignments={0: [2, 3], 1: [1, 2]}))
    assert res.error == ErrorCode.NONE
    t = apply(img, records).topic("m")
    assert t.partitions[0].replicas == (2, 3) and t.partitions[0].isr == (3,)
    assert t.partitions[0].leader == 3 and t.partitions[1].leader == 1
    for bad in ({0: [1, 1]}, {0: [9]}, {0: []}, {0: [2]}, {0: [1], 1: [1, 3]}):
        _, [res] = create(img, CreatableTopic("m2", assignments=bad))
        assert res.error == ErrorCode.INVALID_REPLICA_ASSIGNMENT, bad


def test_delete_topics_by_name_and_id():
    img = with_topic(with_topic(cluster(3), "a", 2, 1), "b", 1, 1)
    tid = img.topic("b").topic_id
    records, res = delete_topics(img, names=["a", "nope"], topic_ids=[tid, uuid.UUID(int=7)])
    assert [r.error for r in res] == [ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                      ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_ID]
    assert apply(img, records).topics_by_name == {}
    _, res = delete_topics(img, names=["a"], static={"delete.topic.enable": "false"})
    assert res[0].error == ErrorCode.TOPIC_DELETION_DISABLED


def test_create_partitions_only_increases():
    img = with_topic(cluster(3), "t", 2, 2)
    records, res = create_partitions(img, [NewPartitions("t", 5), NewPartitions("x", 3)])
    assert res == {"t": (ErrorCode.NONE, None), "x": (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, res["x"][1])}
    t = apply(img, records).topic("t")
    assert sorted(t.partitions) == [0, 1, 2, 3, 4]
    assert all(len(p.replicas) == 2 for p in t.partitions.values())
    _, res = create_partitions(img, [NewPartitions("t", 2), NewPartitions("t", 1)])
    assert res["t"][0] == ErrorCode.INVALID_PARTITIONS
    _, res = create_partitions(img, [NewPartitions("t", 4, [[1, 2]])])
    assert res["t"][0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    _, res = create_partitions(img, [NewPartitions("t", 3, [[1]])])
    assert res["t"][0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    records, res = create_partitions(img, [NewPartitions("t", 3, [[3, 1]])])
    assert apply(img, records).topic("t").partitions[2].replicas == (3, 1)
