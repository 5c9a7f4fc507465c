"""Our own client (raftkafka.client) in consumer groups on real brokers: three members split
six partitions and each record reaches exactly one of them; commits survive the members;
the idempotent producer gets its id from the broker."""
from __future__ import annotations

import trio

from raftkafka.client.admin import Admin
from raftkafka.client.consumer import Consumer
from raftkafka.client.producer import Producer
from tests.broker.harness import running_cluster

PARTITIONS = 6
STATIC = {
    "offsets.topic.num.partitions": "4", "offsets.topic.replication.factor": "1",
    "group.initial.rebalance.delay.ms": "100", "group.min.session.timeout.ms": "500",
}


async def test_our_consumer_group_splits_partitions_and_commits_on_real_brokers():
    async with running_cluster(2, static=STATIC) as cluster:
        env, bootstrap = cluster.env, cluster.bootstrap
        async with Admin(env, bootstrap) as admin:
            await admin.create_topic("events", PARTITIONS)
        stop = trio.Event()
        got: list[list] = [[], [], []]
        owned: list[set] = [set(), set(), set()]

        async def member(i, task_status=trio.TASK_STATUS_IGNORED):
            async with Consumer(env, bootstrap, group_id="ours", auto_offset_reset="earliest",
                                enable_auto_commit=False, session_timeout_ms=3000, heartbeat_interval_ms=100,
                                fetch_max_wait_ms=100) as consumer:
                consumer.subscribe(["events"])
                task_status.started()
                while not stop.is_set():
                    records = await consumer.poll(0.1)
                    owned[i] = {tp[1] for tp in consumer.assignment()}
                    got[i].extend(records)
                    if records:
                        await consumer.commit()

        async with trio.open_nursery() as nursery:
            for i in range(3):
                await nursery.start(member, i)
            with trio.fail_after(30):
                while sorted(len(o) for o in owned) != [2, 2, 2]:
                    await trio.sleep(0.05)
            async with Producer(env, bootstrap, enable_idempotence=True, linger_ms=2) as producer:
                futures = [await producer.send("events", b"v%d" % i, partition=i % PARTITIONS) for i in range(120)]
                for f in futures:
                    await f
            assert producer_ids_handed_out(cluster) >= 1
            with trio.fail_after(30):
                while sum(map(len, got)) < 120:
                    await trio.sleep(0.05)
            stop.set()
        assert sorted(p for o in owned for p in o) == list(range(PARTITIONS))
        values = [r.value for rs in got for r in rs]
        assert sorted(values) == sorted(b"v%d" % i for i in range(120)) and len(set(values)) == 120
        async with Consumer(env, bootstrap, group_id="ours", enable_auto_commit=False) as probe:
            committed = await probe.committed([("events", p) for p in range(PARTITIONS)])
        assert sum(committed.values()) == 120


def producer_ids_handed_out(cluster) -> int:
    return cluster.controller.calls.count("allocate_producer_ids")
