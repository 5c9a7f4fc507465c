"""Our client against the real broker (tests/broker/harness.py: two brokers on 127.0.0.1 with
the real controller logic in-process). Groups are not served by the broker yet, so the
consumer runs in assign mode here; group tests use the mini cluster."""
from __future__ import annotations

import trio

from raftkafka.client.admin import RESOURCE_TOPIC, Admin
from raftkafka.client.consumer import Consumer
from raftkafka.client.partitioner import murmur2_partition
from raftkafka.client.producer import Producer
from tests.broker.harness import running_cluster

PARTITIONS = 4


async def test_admin_produce_consume_against_real_brokers():
    async with running_cluster(2) as cluster:
        bootstrap = cluster.bootstrap
        async with Admin(cluster.env, bootstrap) as admin:
            await admin.create_topic("events", PARTITIONS, configs={"retention.ms": "3600000"})
            described = await admin.describe_topics(["events"])
            leaders = {p.leader for p in described["events"].partitions.values()}
            assert leaders <= {1, 2} and len(described["events"].partitions) == PARTITIONS
            description = await admin.describe_cluster()
            assert sorted(b.node_id for b in description.brokers) == [1, 2]
            configs = await admin.describe_configs([(RESOURCE_TOPIC, "events")], keys=["retention.ms"])
            assert configs[(RESOURCE_TOPIC, "events")]["retention.ms"].value == "3600000"
        keys = [b"k%d" % i for i in range(100)]
        async with Producer(cluster.env, bootstrap, compression="zstd", linger_ms=2) as producer:
            futures = [await producer.send("events", b"v-" + k, key=k) for k in keys]
            results = [await f for f in futures]
        assert all(r.partition == murmur2_partition(k, PARTITIONS) for k, r in zip(keys, results))
        async with Consumer(cluster.env, bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100) as consumer:
            consumer.assign([("events", p) for p in range(PARTITIONS)])
            records = []
            with trio.fail_after(20):
                while len(records) < len(keys):
                    records += await consumer.poll(0.5)
            ends = await consumer.end_offsets([("events", p) for p in range(PARTITIONS)])
        assert sorted(r.key for r in records) == sorted(keys)
        for r in records:
            assert r.value == b"v-" + r.key and r.partition == murmur2_partition(r.key, PARTITIONS)
        assert sum(ends.values()) == len(keys)
        by_partition = {}
        for r in records:
            by_partition.setdefault(r.partition, []).append(r.offset)
        assert all(offsets == list(range(len(offsets))) for offsets in by_partition.values())


async def test_the_consumer_fetches_by_topic_id_and_follows_a_fetch_answers_new_leader():
    # KIP-951: a Fetch v16 answered NOT_LEADER_OR_FOLLOWER names the new leader; the consumer
    # fetches from it next without a Metadata round.
    from broker.controller_channel import CreatableTopic

    async with running_cluster(2) as cluster:
        reply = await cluster.controller.create_topics([CreatableTopic("moving", assignments={0: (1, 2)})])
        assert not reply.results[0].error
        await cluster.settle()
        async with Producer(cluster.env, cluster.bootstrap) as producer:
            for i in range(10):
                await (await producer.send("moving", b"before-%d" % i, partition=0))
            async with Consumer(cluster.env, cluster.bootstrap, auto_offset_reset="earliest",
                                fetch_max_wait_ms=100) as consumer:
                consumer.assign([("moving", 0)])
                values = []
                with trio.fail_after(20):
                    while len(values) < 10:
                        values += [r.value for r in await consumer.poll(0.5)]
                assert consumer.cluster.topic_id("moving") is not None and consumer.cluster.leader("moving", 0) == 1
                refreshed = consumer.cluster.last_refresh
                cluster.controller.fence(1)  # leadership moves to 2; broker 1 still answers
                await cluster.settle()
                for i in range(10):
                    await (await producer.send("moving", b"after-%d" % i, partition=0))
                with trio.fail_after(20):
                    while len(values) < 20:
                        values += [r.value for r in await consumer.poll(0.5)]
                assert values == [b"before-%d" % i for i in range(10)] + [b"after-%d" % i for i in range(10)]
                assert consumer.cluster.leader("moving", 0) == 2
                assert consumer.cluster.last_refresh == refreshed  # learnt from the Fetch answer
