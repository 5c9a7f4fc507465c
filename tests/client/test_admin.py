import pytest

from raftkafka.client.admin import RESOURCE_TOPIC, Admin, NewTopic
from raftkafka.client.consumer import Consumer
from raftkafka.client.errors import BrokerResponseError
from raftkafka.client.producer import Producer
from tests.client.memnet import MemEnv
from tests.client.mini_broker import MiniCluster
from wire.error_codes import ErrorCode


async def start(nursery, nodes=(1, 2)):
    env = MemEnv()
    mini = MiniCluster(env, nodes)
    await mini.serve_all(nursery)
    return env, mini


async def test_create_describe_delete_topics(nursery, autojump_clock):
    env, mini = await start(nursery)
    async with Admin(env, "b2:9092") as admin:
        results = await admin.create_topics([NewTopic("a", 3, 1, {"cleanup.policy": "compact"}), NewTopic("b", 0)])
        assert results["a"] is None
        assert results["b"].code == ErrorCode.INVALID_PARTITIONS
        with pytest.raises(BrokerResponseError) as info:
            await admin.create_topic("a")
        assert info.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
        assert sorted((await admin.describe_topics(["a"]))["a"].partitions) == [0, 1, 2]
        assert list(await admin.list_topics()) == ["a"]
        assert (await admin.create_partitions({"a": 5}))["a"] is None
        assert len((await admin.describe_topics(["a"]))["a"].partitions) == 5
        deleted = await admin.delete_topics(["a", "nope"])
        assert deleted["a"] is None
        assert deleted["nope"].code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        with pytest.raises(BrokerResponseError):
            await admin.describe_topics(["a"])
    # the controller (node 1) got the topic requests even though we bootstrapped from node 2
    assert {node for node, key, _ in mini.requests if key == 19} == {1}


async def test_configs_roundtrip(nursery, autojump_clock):
    env, mini = await start(nursery)
    mini.create_topic("t", 1, configs={"retention.ms": "1000"})
    async with Admin(env, "b1:9092") as admin:
        await admin.alter_configs((RESOURCE_TOPIC, "t"), {"retention.ms": None, "segment.bytes": "1024"})
        configs = await admin.describe_configs([(RESOURCE_TOPIC, "t")])
        assert {k: e.value for k, e in configs[(RESOURCE_TOPIC, "t")].items()} == {"segment.bytes": "1024"}
        with pytest.raises(BrokerResponseError):
            await admin.describe_configs([(RESOURCE_TOPIC, "missing")])


async def test_cluster_groups_and_offsets(nursery, autojump_clock):
    env, mini = await start(nursery)
    mini.create_topic("t", 2)
    async with Producer(env, "b1:9092") as producer:
        for i in range(4):
            await producer.send("t", b"x", partition=i % 2)
    async with Consumer(env, "b1:9092", group_id="g", auto_offset_reset="earliest") as consumer:
        consumer.subscribe(["t"])
        got = 0
        while got < 4:
            got += len(await consumer.poll(0.5))
        async with Admin(env, "b1:9092") as admin:
            description = await admin.describe_cluster()
            assert [b.node_id for b in description.brokers] == [1, 2] and description.controller_id == 1
            assert await admin.list_groups() == [("g", "consumer")]
            group = (await admin.describe_groups(["g"]))["g"]
            assert group.state == "Stable"
            assert group.members[0].assignment == (("t", 0), ("t", 1))
            offsets = await admin.list_offsets({("t", 0): "earliest", ("t", 1): "latest"})
            assert offsets == {("t", 0): (0, -1), ("t", 1): (2, -1)}
    async with Admin(env, "b1:9092") as admin:
        assert await admin.list_consumer_group_offsets("g") == {("t", 0): 2, ("t", 1): 2}
