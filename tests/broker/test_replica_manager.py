"""Partitions open, change role and close as metadata changes; leader epochs stamp batches."""
import uuid

import trio

from broker import Broker, BrokerConfig, Role
from broker.controller_channel import CreatableTopic
from metadata.records import PartitionChange
from tests.broker import builders as B
from tests.broker.harness import InProcessController, RawClient, mem_env, running_cluster
from wire.batch_header import iter_batches
from wire.error_codes import ErrorCode as E


async def test_leadership_moves_between_brokers_with_epochs():
    async with running_cluster(2) as c:
        b1, b2 = c.brokers
        client1, client2 = await RawClient.connect(b1.port), await RawClient.connect(b2.port)
        await client1.call(B.create_topic("t", assignments=[(1, 2)]), 4)
        await c.settle()
        p1, p2 = b1.replicas.get("t", 0), b2.replicas.get("t", 0)
        assert (p1.role, p2.role) == (Role.LEADER, Role.FOLLOWER)
        # Shrink the ISR to the leader so its HW can advance (replication is not there yet).
        c.controller.commit([PartitionChange(0, c.controller.image.topic("t").topic_id, isr=(1,))])
        await c.settle()
        assert B.one_partition(await client1.call(B.produce("t", 0, B.batch(2)), 8)).base_offset == 0
        assert B.one_partition(await client2.call(B.produce("t", 0, B.batch(1)), 8)).error_code == \
            E.NOT_LEADER_OR_FOLLOWER

        topic_id = c.controller.image.topic("t").topic_id
        c.controller.commit([PartitionChange(0, topic_id, isr=(2,), leader=2)])
        await c.settle()
        assert (p1.role, p2.role) == (Role.FOLLOWER, Role.LEADER)
        assert p2.leader_epoch == 1
        assert B.one_partition(await client1.call(B.produce("t", 0, B.batch(1)), 8)).error_code == \
            E.NOT_LEADER_OR_FOLLOWER
        # Broker 2 may or may not have replicated epoch 0's two records before it took over
        # (it was a follower outside the ISR); its own log end is where epoch 1 starts.
        start = p2.log_end_offset
        assert start in (0, 2)
        r = B.one_partition(await client2.call(B.produce("t", 0, B.batch(3)), 8))
        assert (r.error_code, r.base_offset) == (0, start)
        fetched = B.one_partition(await client2.call(B.fetch([("t", 0, start)], epoch=1), 11))
        assert [h.partition_leader_epoch for _, h in iter_batches(bytes(fetched.records))] == [1]
        assert B.one_partition(await client2.call(B.fetch([("t", 0, 0)], epoch=0), 11)).error_code == \
            E.FENCED_LEADER_EPOCH
        # Epoch 1 is the latest: it ends at the log end.
        resp = await client2.call(B.offset_for_epoch("t", 0, 1), 3)
        assert resp.topics[0].partitions[0].end_offset == start + 3


async def test_a_parked_fetch_is_released_when_leadership_moves_away():
    async with running_cluster(2) as c:
        b1 = c.brokers[0]
        client = await RawClient.connect(b1.port)
        await client.call(B.create_topic("t", assignments=[(1, 2)]), 4)
        topic_id = c.controller.image.topic("t").topic_id
        c.controller.commit([PartitionChange(0, topic_id, isr=(1,))])
        await c.settle()
        result = {}

        async def long_poll():
            result["resp"] = await client.call(B.fetch([("t", 0, 0)], max_wait_ms=60000, min_bytes=1), 11)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(long_poll)
            with trio.fail_after(10):
                while b1.purgatory.waiting == 0:
                    await trio.sleep(0.01)
            c.controller.commit([PartitionChange(0, topic_id, isr=(2,), leader=2)])
        assert B.one_partition(result["resp"]).error_code == E.NOT_LEADER_OR_FOLLOWER


async def test_stray_logs_are_set_aside_on_the_first_metadata_update():
    """Logs the image does not place here, or that belong to an older topic of the same name
    (deleted and re-created while this broker was away), are renamed `...-stray` and kept;
    the new topic's replica starts empty. A log without a recorded id adopts the image's."""
    env = mem_env()
    cfg = BrokerConfig(node_id=1, data_dirs=("/data",), port=0, cluster_id="c")
    controller = InProcessController()
    async with trio.open_nursery() as nursery:
        broker = Broker(env, cfg, controller)
        logs = broker.log_manager
        await logs.startup()
        await logs.get_or_create_log("gone", 0)  # a topic deleted while we were down
        old = await logs.get_or_create_log("recreated", 0, topic_id=uuid.UUID(int=99))
        old.append_as_leader(B.batch(3), leader_epoch=0)
        legacy = await logs.get_or_create_log("legacy", 0)  # written before partition.metadata
        legacy.append_as_leader(B.batch(2), leader_epoch=0)
        controller.register(1, "127.0.0.1", 9)
        await controller.create_topics([CreatableTopic(name, 1, 1) for name in ("kept", "recreated", "legacy")])
        await nursery.start(broker.run)
        controller.attach(broker)  # its first metadata holds every topic, as after a restart
        await broker.replicas.wait_applied(controller.image.offset, trio.current_time() + 10)
        assert logs.get_log("gone", 0) is None
        assert logs.get_log("kept", 0) is not None
        assert logs.get_log("recreated", 0).log_end_offset == 0
        assert logs.topic_id_of("recreated", 0) == controller.image.topic("recreated").topic_id
        assert logs.get_log("legacy", 0).log_end_offset == 2
        assert logs.topic_id_of("legacy", 0) == controller.image.topic("legacy").topic_id
        strays = sorted(n.split(".")[0] for n in env.fs.listdir("/data") if n.endswith("-stray"))
        assert strays == ["gone-0", "recreated-0"]
        nursery.cancel_scope.cancel()


async def test_logs_survive_a_broker_restart():
    env = mem_env()
    controller = InProcessController()
    cfg = BrokerConfig(node_id=1, data_dirs=("/data",), port=0, cluster_id="c")
    async with trio.open_nursery() as nursery:
        broker = Broker(env, cfg, controller)
        await nursery.start(broker.run)
        controller.attach(broker)
        controller.register(1, "127.0.0.1", broker.port)
        client = await RawClient.connect(broker.port)
        await client.call(B.create_topic("t", 1), 4)
        await client.call(B.produce("t", 0, B.batch(4)), 8)
        nursery.cancel_scope.cancel()
    controller.brokers.clear()
    async with trio.open_nursery() as nursery:
        again = Broker(env, cfg, controller)
        await nursery.start(again.run)
        controller.attach(again)
        await again.replicas.wait_applied(controller.image.offset, trio.current_time() + 10)
        client = await RawClient.connect(again.port)
        part = B.one_partition(await client.call(B.fetch([("t", 0, 0)]), 11))
        assert part.high_watermark == 4 and len(list(iter_batches(bytes(part.records)))) == 1
        nursery.cancel_scope.cancel()


async def test_logs_opened_at_a_restart_take_their_topic_configs():
    """Found by the simulation (a compacted topic led after a restart as cleanup.policy=delete):
    the logs opened from disk start with the broker defaults, and the first metadata after
    the start must give them their topics' configs, though no config record changes."""
    env = mem_env()
    controller = InProcessController()
    cfg = BrokerConfig(node_id=1, data_dirs=("/data",), port=0, cluster_id="c")
    async with trio.open_nursery() as nursery:
        broker = Broker(env, cfg, controller)
        await nursery.start(broker.run)
        controller.attach(broker)
        controller.register(1, "127.0.0.1", broker.port)
        client = await RawClient.connect(broker.port)
        await client.call(B.create_topic("t", 1, configs={"cleanup.policy": "compact", "retention.bytes": "5000"}), 4)
        await broker.replicas.wait_applied(controller.image.offset, trio.current_time() + 10)
        assert broker.log_manager.get_log("t", 0).config.compact
        nursery.cancel_scope.cancel()
    controller.brokers.clear()
    async with trio.open_nursery() as nursery:
        again = Broker(env, cfg, controller)
        await nursery.start(again.run)
        controller.attach(again)
        await again.replicas.wait_applied(controller.image.offset, trio.current_time() + 10)
        config = again.log_manager.get_log("t", 0).config
        assert config.compact and config.retention_bytes == 5000
        nursery.cancel_scope.cancel()
