"""3 controllers + 3 brokers as real `python -m raftkafka node` processes on loopback.

Create 200 topics x 3 partitions (RF 3) and kill -9 the active controller in the middle:
every acknowledged topic exists exactly once, on the new controller and in every live
broker's metadata (read back from its data dir). Then kill -9 a broker: once its session
lapses its partitions have new leaders from their ISR, with leader epochs moved up by one.
"""
from __future__ import annotations

import os

import pytest
import trio

from metadata.controller.client import (
    ControllerClient, ControllerConnection, ControllerUnavailableError,
)
from metadata.controller.topics import CreatableTopic
from metadata.metadata_follower import MetadataFollower
from raft.entry import Entry
from raft.node_storage import METADATA_DIR
from raftkafka.bench.metadata_cluster import BROKERS, CONTROLLERS, MetadataProcesses
from storage.env import RealEnv, RealFileSystem
from storage.raft_log import RaftLogStore
from storage.raft_snapshots import SnapshotStore
from wire.error_codes import ErrorCode

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

async def broker_image(data_dir: str):
    """What a broker's loader holds: its snapshot + every entry after it on disk, replayed.

    Reads the files directly (not NodeStorage.load) so that entries the log cleaner has
    not yet removed from below the snapshot are simply skipped.
    """
    fs = RealFileSystem()
    directory = os.path.join(data_dir, METADATA_DIR)
    latest = SnapshotStore(fs, directory).latest()
    snapshot_id, snapshot = (tuple(latest[0]), latest[1]) if latest else ((0, 0), None)
    store, records = await RaftLogStore.open(fs, directory, start_offset=snapshot_id[0])
    store.close()
    follower = MetadataFollower()
    follower.restore(snapshot_id, snapshot)
    entries = [Entry(r.offset, r.epoch, r.payload, r.control) for r in records
               if r.offset >= snapshot_id[0]]
    end = entries[-1].offset + 1 if entries else snapshot_id[0]
    follower.observe_leader_high_watermark(end)
    if entries:
        follower.apply(entries, end)
    return follower.image


async def test_topics_survive_controller_kill_and_a_dead_broker_loses_leadership(tmp_path):
    procs = MetadataProcesses(str(tmp_path))
    try:
        cluster_id = procs.format()
        for i in CONTROLLERS + BROKERS:
            procs.start(i)
        env = RealEnv()
        conn = ControllerConnection(env, {i: ("127.0.0.1", p) for i, p in procs.ports.items()},
                                    cluster_id=cluster_id)
        client = ControllerClient(conn)
        async with trio.open_nursery() as nursery:
            await nursery.start(conn.run)

            async def describe():
                return await client.describe_cluster(timeout_s=30)

            with trio.fail_after(60):
                while True:
                    view = await describe()
                    if [b.broker_id for b in view.brokers if not b.fenced] == list(BROKERS):
                        break
                    await trio.sleep(0.1)
            # Admin requests reach the controller only as forwarded by a registered broker.
            forwarder = view.brokers[0]
            client.forwarder = lambda: (forwarder.broker_id, forwarder.broker_epoch)

            acked: list[str] = []
            names = iter(f"topic-{i:03d}" for i in range(200))

            async def worker():
                for name in names:
                    while True:
                        try:
                            reply = await client.create_topics([CreatableTopic(name, 3, 3)],
                                                               timeout_s=30)
                        except ControllerUnavailableError:
                            continue
                        code = reply.results[0].error
                        if code in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                            acked.append(name)
                            break

            with trio.fail_after(120):
                async with trio.open_nursery() as workers:
                    for _ in range(8):
                        workers.start_soon(worker)
                    while len(acked) < 60:
                        await trio.sleep(0.01)
                    killed = conn.leader
                    procs.kill(killed)
            assert len(acked) == 200
            # The new controller saw its predecessor die, so it fences a broker that does not
            # heartbeat within the close grace (500 ms; metadata.controller.connection_grace): on
            # a loaded host one may be fenced meanwhile, its partitions led elsewhere or, if all
            # their replicas were, by none. It heartbeats again and is unfenced: wait for that.
            with trio.move_on_after(60):
                while True:
                    view = await describe()
                    if not any(b.fenced for b in view.brokers) and all(p.leader in BROKERS for p in view.partitions):
                        break
                    await trio.sleep(0.2)
            assert [b.broker_id for b in view.brokers if b.fenced] == []
            assert [(p.topic, p.partition, p.leader) for p in view.partitions if p.leader not in BROKERS] == []
            assert conn.leader != killed
            by_topic: dict[str, list] = {}
            for p in view.partitions:
                by_topic.setdefault(p.topic, []).append(p)
            assert set(acked) <= set(by_topic)
            assert all(sorted(p.partition for p in by_topic[t]) == [0, 1, 2] for t in acked)
            assert [p for p in view.partitions if len(p.replicas) != 3] == []

            # kill -9 a broker: after its session its partitions get leaders from the ISR.
            victim = 5
            before = {(p.topic, p.partition): p for p in view.partitions}
            led = [k for k, p in before.items() if p.leader == victim]
            assert led
            procs.kill(victim)
            with trio.fail_after(60):
                while True:
                    view = await describe()
                    if next(b for b in view.brokers if b.broker_id == victim).fenced:
                        break
                    await trio.sleep(0.2)
            after = {(p.topic, p.partition): p for p in view.partitions}
            for key in led:
                assert after[key].leader in before[key].isr and after[key].leader != victim
                assert after[key].leader_epoch == before[key].leader_epoch + 1
            # The live brokers caught up with that; read their metadata back from disk.
            with trio.fail_after(30):
                while True:
                    view = await describe()
                    offsets = {b.broker_id: b.metadata_offset for b in view.brokers}
                    if all(offsets[b] >= view.offset for b in (4, 6)):
                        break
                    await trio.sleep(0.2)
            nursery.cancel_scope.cancel()
        procs.stop_all()
        for b in (4, 6):
            image = await broker_image(procs.data_dir(b))
            names = [t.name for t in image.topics_by_id.values()]
            assert len(names) == len(set(names))
            assert set(acked) <= set(names)
            for key in led:
                part = image.topic(key[0]).partitions[key[1]]
                assert part.leader == after[key].leader
                assert part.leader_epoch == after[key].leader_epoch
    finally:
        procs.stop_all()
