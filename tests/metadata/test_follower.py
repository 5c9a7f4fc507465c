"""The broker's metadata follower: whole batches only, nothing published before the leader's
high watermark is reached, snapshots (also mid-batch) round-trip, and a broker restarted
after 10k metadata records loads from a snapshot and converges on the controller's image."""
from __future__ import annotations

import uuid

import pytest
import trio

from metadata.controller.client import ControllerUnavailableError
from metadata.controller.topics import CreatableTopic
from metadata.log_format import encode_batch
from metadata.metadata_follower import LeaderHighWatermarkTap, MetadataFollower
from metadata.records import FeatureLevel, Partition, Topic
from metadata.snapshot import image_to_records
from raft.entry import Entry, LeaderChange, encode_leader_change
from raft.messages import FetchResponse
from wire.error_codes import ErrorCode

from tests.metadata.metadata_cluster import MetadataCluster, open_client


class Recorder:
    name = "recorder"

    def __init__(self):
        self.updates = []

    def publish(self, delta, image):
        self.updates.append(image)


def log_of(batches, epoch=1):
    """Raft entries for a LeaderChange followed by the given record batches."""
    entries = [Entry(0, epoch, encode_leader_change(LeaderChange(1, [1], [1])), control=True)]
    for batch in batches:
        for payload in encode_batch(batch):
            entries.append(Entry(len(entries), epoch, payload))
    return entries


def topic_batch(name, n):
    tid = uuid.UUID(int=hash(name) & (2**64 - 1) | 1)
    return [Topic(name, tid)] + [Partition(p, tid, (1,), (1,), leader=1) for p in range(n)]


def test_nothing_is_published_before_the_leaders_high_watermark():
    follower = MetadataFollower()
    rec = Recorder()
    follower.add_publisher(rec)
    entries = log_of([[FeatureLevel("metadata.version", 1)], topic_batch("a", 3),
                      topic_batch("b", 2)])
    follower.observe_leader_high_watermark(len(entries))
    follower.apply(entries[:4], 4)  # the leader knows more: hold back
    assert rec.updates == [] and not follower.caught_up
    follower.apply(entries[4:], len(entries))
    assert follower.caught_up and len(rec.updates) == 1
    assert sorted(rec.updates[-1].topics_by_name) == ["a", "b"]
    assert follower.metadata_offset == len(entries) - 1
    # Once caught up, every committed batch is one update, in order.
    more = [Entry(len(entries) + i, 1, p) for i, p in enumerate(encode_batch(topic_batch("c", 1)))]
    follower.apply(more[:1], more[0].offset + 1)  # half a batch: nothing yet
    assert len(rec.updates) == 1
    follower.apply(more[1:], more[-1].offset + 1)
    assert len(rec.updates) == 2 and "c" in rec.updates[-1].topics_by_name


def test_snapshot_taken_mid_batch_restores_the_open_batch():
    entries = log_of([topic_batch("a", 2), topic_batch("b", 3)])
    follower = MetadataFollower()
    follower.observe_leader_high_watermark(len(entries))
    cut = 5  # inside topic b's batch
    follower.apply(entries[:cut], cut)
    data = follower.snapshot()
    restored = MetadataFollower()
    rec = Recorder()
    restored.add_publisher(rec)
    restored.restore((cut, 1), data)
    restored.observe_leader_high_watermark(len(entries))
    restored.apply(entries[cut:], len(entries))
    assert sorted(restored.image.topics_by_name) == ["a", "b"]
    assert len(restored.image.topic("b").partitions) == 3


def test_tap_notes_the_leaders_high_watermark_and_passes_everything_on():
    send, receive = trio.open_memory_channel(10)
    follower = MetadataFollower()
    tap = LeaderHighWatermarkTap(send, follower)
    ok = FetchResponse("c", 0, 3, 1, 42, 0)
    bad = FetchResponse("c", 6, 3, 1, 99, 0)
    tap.send_nowait((1, ok))
    tap.send_nowait((1, bad))
    assert follower.leader_high_watermark == 42
    assert receive.receive_nowait() == (1, ok) and receive.receive_nowait() == (1, bad)


@pytest.fixture
async def cluster(nursery):
    c = MetadataCluster(nursery, controllers=3, brokers=(101,), settings={
        "metadata.log.max.records.between.snapshots": 3000,
    })
    await c.start_all()
    await c.wait_active()
    yield c
    nursery.cancel_scope.cancel()


async def create_all(client, topics) -> None:
    """Create the topics, retrying those a controller change or a slow machine left undone."""
    for _ in range(10):
        try:
            reply = await client.create_topics(topics)
        except ControllerUnavailableError:
            await trio.sleep(0.5)
            continue
        codes = {r.name: r.error for r in reply.results}
        assert set(codes.values()) <= RETRIABLE_OR_DONE, codes
        topics = [t for t in topics if codes[t.name] not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS)]
        if not topics:
            return
        await trio.sleep(0.5)
    raise AssertionError(f"topics still not created: {[t.name for t in topics]}")


RETRIABLE_OR_DONE = {ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS, ErrorCode.NOT_CONTROLLER,
                     ErrorCode.REQUEST_TIMED_OUT}


async def test_restarted_broker_loads_a_snapshot_and_converges(cluster, nursery):
    await cluster.wait_for(lambda: cluster.nodes[101].app.broker.lifecycle is not None
                           and cluster.nodes[101].app.broker.lifecycle.unfenced.is_set())
    client = await open_client(cluster, nursery)
    for i in range(20):  # 2000 topics x (1 topic + 4 partitions) = 10k records
        await create_all(client, [CreatableTopic(f"s{i:02d}-{j:03d}", 4, 1) for j in range(100)])
    created = cluster.committed_image(await cluster.wait_active()).offset
    assert created > 10_000
    follower = cluster.nodes[101].app.broker.follower
    await cluster.wait_for(lambda: follower.metadata_offset >= created, timeout=60.0)
    snapshot_id = cluster.nodes[101].driver.core.log.snapshot_id
    assert snapshot_id[0] > 0  # the broker snapshotted its own metadata
    await cluster.crash(101)
    await cluster.start(101)
    follower = cluster.nodes[101].app.broker.follower
    assert follower.loaded_snapshot is not None and follower.loaded_snapshot[0] >= snapshot_id[0]

    def converged_with_active_controller():
        # Leadership may move while the machine is loaded: compare against whoever is active now.
        active = cluster.active_controller()
        if active is None or not follower.caught_up:
            return None
        target = cluster.committed_image(active)
        return target if follower.image.offset == target.offset else None

    target = await cluster.wait_for(converged_with_active_controller, timeout=60.0)
    assert list(image_to_records(follower.image)) == list(image_to_records(target))


async def test_a_broker_whose_snapshot_is_damaged_fetches_the_metadata_again(nursery, caplog):
    """Broker-only nodes have no vote: a damaged newest snapshot the trimmed metadata log no
    longer covers is fetched again from the leader (never an empty image published)."""
    cluster = MetadataCluster(nursery, controllers=1, brokers=(101,), settings={
        "metadata.log.max.records.between.snapshots": 100, "metadata.log.segment.bytes": 2048})
    await cluster.start_all()
    await cluster.wait_active()
    await cluster.wait_for(lambda: cluster.nodes[101].app.broker.lifecycle is not None
                           and cluster.nodes[101].app.broker.lifecycle.unfenced.is_set())
    client = await open_client(cluster, nursery)
    for i in range(4):
        reply = await client.create_topics([CreatableTopic(f"d{i}-{j:02d}", 2, 1) for j in range(40)])
        assert all(r.error == 0 for r in reply.results)
    storage_dir = "/data/__cluster_metadata-0"
    fs = cluster.fs[101]

    def trimmed():
        names = fs.listdir(storage_dir)
        return any(n.endswith(".checkpoint") for n in names) and min(n for n in names if n.endswith(".log")) > "0" * 20
    await cluster.wait_for(trimmed)
    await cluster.crash(101)
    newest = max(n for n in fs.listdir(storage_dir) if n.endswith(".checkpoint"))
    f = fs.open(f"{storage_dir}/{newest}")
    f.write_at(f.size() - 2, bytes([f.read(f.size() - 2, 1)[0] ^ 1]))
    published = []
    await cluster.start(101)
    follower = cluster.nodes[101].app.broker.follower
    follower.add_publisher(type("Seen", (), {"name": "seen", "publish": lambda self, d, image: published.append(image)})())
    target = cluster.committed_image(cluster.active_controller())
    await cluster.wait_for(lambda: follower.caught_up and follower.image.offset >= target.offset)
    assert f"{storage_dir}/{newest} is damaged" in caplog.text and "again from the leader" in caplog.text
    assert set(follower.image.topics_by_name) == set(target.topics_by_name) and len(target.topics_by_name) == 160
    assert published and all(set(image.topics_by_name) >= set(target.topics_by_name) for image in published)
