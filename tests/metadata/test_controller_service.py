"""The active controller end to end, in one process: 3 controllers + 3 broker observers over
TCP on 127.0.0.1 with in-memory disks."""
from __future__ import annotations

import pytest

from metadata.controller import rpc
from metadata.controller.topics import CreatableTopic
from metadata.image import TOPIC_RESOURCE
from metadata.snapshot import image_to_records

from tests.metadata.metadata_cluster import CLUSTER, MetadataCluster, open_client
from wire.error_codes import ErrorCode

BROKERS = (101, 102, 103)


@pytest.fixture
async def cluster(nursery):
    c = MetadataCluster(nursery, controllers=3, brokers=BROKERS)
    await c.start_all()
    await c.wait_active()
    yield c
    nursery.cancel_scope.cancel()


async def unfenced(cluster, ids=BROKERS, timeout=20):
    def check():
        active = cluster.active_controller()
        if active is None:
            return False
        image = cluster.committed_image(active)
        return all(b in image.brokers and not image.brokers[b].fenced for b in ids)

    await cluster.wait_for(check, timeout)


async def test_create_topics_commit_answer_and_reach_every_broker(cluster, nursery):
    await unfenced(cluster)
    client = await open_client(cluster, nursery)
    reply = await client.create_topics([CreatableTopic(f"t{i}", 3, 3) for i in range(10)])
    assert [r.error for r in reply.results] == [ErrorCode.NONE] * 10
    assert reply.offset > 0
    active = cluster.active_controller()
    # Answered at commit: the committed image already holds every topic.
    committed = cluster.committed_image(active)
    assert sorted(committed.topics_by_name) == sorted(f"t{i}" for i in range(10))
    for name in committed.topics_by_name:
        part = committed.topics_by_name[name].partitions[0]
        assert len(part.replicas) == 3 and part.leader in BROKERS
    # Every broker's published image reaches the same state.
    await cluster.wait_for(lambda: all(cluster.broker_image(b).offset >= reply.offset
                                       for b in BROKERS))
    want = list(image_to_records(committed))
    for b in BROKERS:
        got = list(image_to_records(cluster.broker_image(b)))
        assert [r for r in got if type(r).__name__ in ("Topic", "Partition")] == \
               [r for r in want if type(r).__name__ in ("Topic", "Partition")]


async def test_bad_requests_get_kafka_errors(cluster, nursery):
    await unfenced(cluster)
    client = await open_client(cluster, nursery)
    reply = await client.create_topics([
        CreatableTopic("bad name!", 1, 1),
        CreatableTopic("too-many-replicas", 1, 4),
        CreatableTopic("dup", 1, 1), CreatableTopic("dup", 1, 1),
        CreatableTopic("bad-config", 1, 1, configs={"cleanup.policy": "sometimes"}),
        CreatableTopic("unknown-config", 1, 1, configs={"no.such.config": "1"}),
        CreatableTopic("fine", 2, 2, configs={"cleanup.policy": "compact"}),
    ])
    codes = {r.name: r.error for r in reply.results}
    assert codes["bad name!"] == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert codes["too-many-replicas"] == ErrorCode.INVALID_REPLICATION_FACTOR
    assert codes["dup"] == ErrorCode.INVALID_REQUEST
    assert codes["bad-config"] == ErrorCode.INVALID_CONFIG
    assert codes["unknown-config"] == ErrorCode.INVALID_CONFIG
    assert codes["fine"] == ErrorCode.NONE
    assert all(r.message for r in reply.results if r.error != ErrorCode.NONE)
    again = await client.create_topics([CreatableTopic("fine", 1, 1)])
    assert again.results[0].error == ErrorCode.TOPIC_ALREADY_EXISTS
    # validate-only writes nothing.
    dry = await client.create_topics([CreatableTopic("dry", 1, 1)], validate_only=True)
    assert dry.results[0].error == ErrorCode.NONE and dry.offset == -1
    image = cluster.committed_image(cluster.active_controller())
    assert "dry" not in image.topics_by_name
    assert image.topic_config("fine") == {"cleanup.policy": "compact"}


async def test_followers_answer_not_controller_with_a_leader_hint(cluster, nursery):
    active = await cluster.wait_active()
    follower = next(i for i in cluster.controller_ids if i != active)
    from raft.node_client import open_client as raw_client
    async with raw_client(cluster.env, "127.0.0.1", cluster.ports[follower]) as c:
        reply = await c.call(rpc.CreateTopicsRequest(CLUSTER, [rpc.CreatableTopicInfo("x", 1, 1)],
                                                     forwarded_by=(101, 0)))
    assert reply.error == ErrorCode.NOT_CONTROLLER and reply.leader_id == active


async def test_delete_partitions_configs_and_producer_ids(cluster, nursery):
    await unfenced(cluster)
    client = await open_client(cluster, nursery)
    await client.create_topics([CreatableTopic("a", 1, 3), CreatableTopic("b", 1, 1)])
    grown = await client.create_partitions([__import__("metadata.controller.topics", fromlist=["x"])
                                            .NewPartitions("a", 4)])
    assert grown.results["a"][0] == ErrorCode.NONE
    changed = await client.incremental_alter_configs(
        {(TOPIC_RESOURCE, "a"): [("retention.ms", 0, "1000")],
         (TOPIC_RESOURCE, "nope"): [("retention.ms", 0, "1000")]})
    assert changed.results[(TOPIC_RESOURCE, "a")].code == ErrorCode.NONE
    assert changed.results[(TOPIC_RESOURCE, "nope")].code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    deleted = await client.delete_topics(["b", "missing"])
    assert [r.error for r in deleted.results] == [ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    image = cluster.committed_image(cluster.active_controller())
    assert len(image.topic("a").partitions) == 4 and image.topic("b") is None
    assert image.topic_config("a")["retention.ms"] == "1000"
    b = cluster.nodes[101].app.broker.lifecycle
    e1, first1, n1 = await client.allocate_producer_ids(101, b.broker_epoch)
    e2, first2, _ = await client.allocate_producer_ids(101, b.broker_epoch)
    assert e1 == e2 == ErrorCode.NONE and first2 == first1 + n1
    stale, _, _ = await client.allocate_producer_ids(101, b.broker_epoch + 12345)
    assert stale == ErrorCode.STALE_BROKER_EPOCH


async def test_unknown_config_operation_fails_only_its_resource(cluster, nursery):
    await unfenced(cluster)
    client = await open_client(cluster, nursery)
    await client.create_topics([CreatableTopic("c1", 1, 1), CreatableTopic("c2", 1, 1)])
    reply = await client.incremental_alter_configs(
        {(TOPIC_RESOURCE, "c1"): [("retention.ms", 9, "5")],
         (TOPIC_RESOURCE, "c2"): [("retention.ms", 0, "5")]})
    assert reply.results[(TOPIC_RESOURCE, "c1")].code == ErrorCode.INVALID_REQUEST
    assert reply.results[(TOPIC_RESOURCE, "c2")].code == ErrorCode.NONE


async def test_operations_over_the_bounds_or_past_their_deadline_write_nothing(cluster, nursery):
    from metadata.controller.service import MAX_RECORD_BYTES, MAX_RECORDS_PER_USER_OP
    from metadata.errors import ApiError
    from metadata.records import Config, NoOp

    active = await cluster.wait_active()
    service = cluster.nodes[active].app.controller.service

    async def refused(fn, **kw):
        with pytest.raises(ApiError) as e:
            await service.submit("test", fn, **kw)
        return e.value.code

    huge = Config(4, "", "ssl.keystore.password", "x" * (MAX_RECORD_BYTES + 1))
    assert await refused(lambda image, off, now: ([[huge]], None)) == ErrorCode.RECORD_LIST_TOO_LARGE
    many = [NoOp() for _ in range(MAX_RECORDS_PER_USER_OP + 1)]
    assert await refused(lambda image, off, now: ([many], None), admin=True) == ErrorCode.POLICY_VIOLATION
    late = service.env.now() - 1
    assert await refused(lambda image, off, now: ([[NoOp()]], None), deadline=late) == ErrorCode.REQUEST_TIMED_OUT
    assert service.active and "ssl.keystore.password" not in service.image.configs.get((4, ""), {})
    _, offset = await service.submit("fine", lambda image, off, now: ([[NoOp()]], None), admin=True)
    assert offset >= 0 and service.active  # still in charge, and writing
