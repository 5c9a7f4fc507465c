"""Broker lifecycle through the real controller: fencing after the session lapses (leaders
move within the ISR, leader epochs +1), unfencing once caught up, AlterPartition fenced by
broker and partition epochs, controlled shutdown, and controller failover."""
from __future__ import annotations

import pytest
import trio

from metadata.controller import rpc
from metadata.controller.topics import CreatableTopic
from raft.node_client import open_client as raw_client

from tests.metadata.metadata_cluster import CLUSTER, MetadataCluster, open_client
from wire.error_codes import ErrorCode

BROKERS = (101, 102, 103)


@pytest.fixture
async def cluster(nursery):
    c = MetadataCluster(nursery, controllers=3, brokers=BROKERS)
    await c.start_all()
    await c.wait_active()
    await c.wait_for(lambda: all(c.nodes[b].app.broker.lifecycle is not None
                                 and c.nodes[b].app.broker.lifecycle.unfenced.is_set()
                                 for b in BROKERS))
    yield c
    nursery.cancel_scope.cancel()


def image(cluster):
    return cluster.committed_image(cluster.active_controller())


async def call_active(cluster, request):
    active = await cluster.wait_active()
    async with raw_client(cluster.env, "127.0.0.1", cluster.ports[active]) as c:
        return await c.call(request)


async def test_dead_broker_is_fenced_and_its_partitions_move_within_the_isr(cluster, nursery):
    client = await open_client(cluster, nursery)
    await client.create_topics([CreatableTopic(f"t{i}", 3, 3) for i in range(4)])
    before = {(t.name, p): part for t, p, part in image(cluster).iter_partitions()}
    victim = 102
    led = [k for k, part in before.items() if part.leader == victim]
    assert led
    await cluster.crash(victim)
    await cluster.wait_for(lambda: image(cluster).brokers[victim].fenced, timeout=20)
    after = {(t.name, p): part for t, p, part in image(cluster).iter_partitions()}
    for key in led:
        old, new = before[key], after[key]
        assert new.leader in old.isr and new.leader != victim
        assert new.leader_epoch == old.leader_epoch + 1
    assert all(victim not in part.isr for part in after.values())
    # Every live broker's metadata shows the same leaders.
    offset = image(cluster).offset
    await cluster.wait_for(lambda: all(cluster.broker_image(b).offset >= offset
                                       for b in BROKERS if b != victim))
    for b in (101, 103):
        mine = {(t.name, p): part.leader for t, p, part in cluster.broker_image(b).iter_partitions()}
        assert mine == {k: part.leader for k, part in after.items()}


async def test_restarted_broker_registers_anew_and_is_unfenced_once_caught_up(cluster):
    old_epoch = image(cluster).brokers[103].epoch
    await cluster.crash(103)
    await cluster.start(103)
    lifecycle = cluster.nodes[103].app.broker.lifecycle
    await cluster.wait_for(lambda: lifecycle is not None and lifecycle.unfenced.is_set())
    reg = image(cluster).brokers[103]
    assert reg.epoch > old_epoch and not reg.fenced
    # Unfenced only after it reported a metadata offset at or past its registration.
    assert cluster.nodes[103].app.broker.follower.metadata_offset >= reg.epoch


async def test_alter_partition_is_fenced_by_broker_and_partition_epochs(cluster, nursery):
    client = await open_client(cluster, nursery)
    await client.create_topics([CreatableTopic("ap", 1, 3)])
    topic = image(cluster).topic("ap")
    part = topic.partitions[0]
    leader = part.leader
    epoch = image(cluster).brokers[leader].epoch
    shrunk = [r for r in part.isr if r != part.isr[-1] or r == leader][:2]
    item = rpc.AlterPartitionItemInfo(topic.topic_id, 0, part.leader_epoch, part.partition_epoch,
                                      shrunk)
    stale_broker = await call_active(cluster, rpc.AlterPartitionRequest(CLUSTER, leader, epoch - 1, [item]))
    assert stale_broker.error == ErrorCode.STALE_BROKER_EPOCH
    stale_part = rpc.AlterPartitionItemInfo(topic.topic_id, 0, part.leader_epoch,
                                            part.partition_epoch - 1, shrunk)
    reply = await call_active(cluster, rpc.AlterPartitionRequest(CLUSTER, leader, epoch, [stale_part]))
    assert reply.error == ErrorCode.NONE and reply.results[0].error == ErrorCode.INVALID_UPDATE_VERSION
    reply = await call_active(cluster, rpc.AlterPartitionRequest(CLUSTER, leader, epoch, [item]))
    assert reply.results[0].error == ErrorCode.NONE
    assert reply.results[0].partition_epoch == part.partition_epoch + 1
    assert reply.results[0].isr == shrunk and reply.offset >= 0
    assert image(cluster).topic("ap").partitions[0].isr == tuple(shrunk)
    # The same (now stale) request again is refused.
    again = await call_active(cluster, rpc.AlterPartitionRequest(CLUSTER, leader, epoch, [item]))
    assert again.results[0].error == ErrorCode.INVALID_UPDATE_VERSION


async def test_controlled_shutdown_moves_leadership_first(cluster, nursery):
    client = await open_client(cluster, nursery)
    await client.create_topics([CreatableTopic(f"cs{i}", 3, 3) for i in range(3)])
    lifecycle = cluster.nodes[101].app.broker.lifecycle
    assert image(cluster).partitions_led_by(101) > 0
    assert await lifecycle.controlled_shutdown(timeout=20)
    img = image(cluster)
    assert img.partitions_led_by(101) == 0
    assert all(101 not in part.isr for _, _, part in img.iter_partitions())


async def test_killing_the_active_controller_keeps_every_acknowledged_topic(cluster, nursery):
    client = await open_client(cluster, nursery)
    acked: list[str] = []

    async def creator():
        for i in range(60):
            name = f"f{i:03d}"
            try:
                reply = await client.create_topics([CreatableTopic(name, 3, 3)], timeout_s=30)
            except Exception:
                continue
            if reply.results[0].error in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                acked.append(name)

    async with trio.open_nursery() as inner:
        inner.start_soon(creator)
        await cluster.wait_for(lambda: len(acked) >= 15)
        old = cluster.active_controller()
        await cluster.crash(old)
    new = await cluster.wait_active()
    assert new != old and len(acked) >= 50
    final = cluster.committed_image(new)
    assert set(acked) <= set(final.topics_by_name)
    offset = final.offset
    await cluster.wait_for(lambda: all(cluster.broker_image(b).offset >= offset for b in BROKERS))
    for b in BROKERS:
        names = [t.name for t in cluster.broker_image(b).topics_by_id.values()]
        assert len(names) == len(set(names))
        assert set(acked) <= set(names)
