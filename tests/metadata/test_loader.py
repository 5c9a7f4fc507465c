import uuid

from metadata.image import EMPTY_IMAGE
from metadata.loader import MetadataLoader
from metadata.records import (
    Config, FeatureLevel, Partition, PartitionChange, RegisterBroker, RemoveTopic, Topic,
)
from metadata.snapshot import delta_between, image_to_records
from tests.metadata.helpers import apply, cluster, with_topic

T1 = uuid.UUID(int=1)


class Recorder:
    def __init__(self, name="r"):
        self.name = name
        self.updates = []

    def publish(self, delta, image):
        self.updates.append((delta, image))


def test_nothing_published_until_caught_up_then_in_order():
    loader = MetadataLoader()
    pub = Recorder()
    loader.install(pub)
    loader.handle_commit(0, 1, [FeatureLevel("metadata.version", 1)])
    loader.handle_commit(2, 1, [RegisterBroker(1, uuid.UUID(int=9), 1, fenced=False),
                                Topic("a", T1)])
    assert pub.updates == []  # HW unknown: still catching up
    loader.set_high_watermark(5)
    assert pub.updates == [] and not loader.caught_up
    loader.handle_commit(4, 1, [Partition(0, T1, (1,), (1,), leader=1)])
    assert loader.caught_up and len(pub.updates) == 1
    delta, image = pub.updates[0]
    assert image.offset == 4 and image.partition(T1, 0).leader == 1
    assert delta.created_topic_ids() == [T1]  # full state, from empty
    loader.handle_commit(5, 2, [PartitionChange(0, T1, isr=(1,), leader=1)])
    loader.handle_commit(5, 2, [PartitionChange(0, T1, isr=(1,), leader=1)])  # re-delivery
    assert len(pub.updates) == 2
    delta, image = pub.updates[1]
    assert delta.changed_topic_ids() == [T1] and image.partition(T1, 0).leader_epoch == 1
    assert (image.offset, image.epoch) == (5, 2)


def test_late_publisher_gets_full_state_and_bad_records_are_skipped():
    loader = MetadataLoader()
    loader.set_high_watermark(1)
    loader.handle_commit(0, 1, [Topic("a", T1), PartitionChange(0, uuid.UUID(int=5), isr=())])
    assert len(loader.replay_errors) == 1 and loader.replay_errors[0][0] == 0
    late = Recorder()
    loader.install(late)
    assert len(late.updates) == 1 and late.updates[0][0].created_topic_ids() == [T1]


def test_snapshot_load_presents_a_delta_with_deletions():
    img = with_topic(with_topic(cluster(2), "keep", 2, 2), "gone", 1, 1)
    loader = MetadataLoader()
    pub = Recorder()
    loader.install(pub)
    loader.set_high_watermark(10)
    loader.handle_commit(10, 1, list(image_to_records(img)))
    assert len(pub.updates) == 1
    later = apply(img, [Config(2, "keep", "retention.ms", "5")])
    target = with_topic(later, "new", 1, 1)
    target = apply(target, [RemoveTopic(img.topic("gone").topic_id)])
    loader.load_snapshot(50, 3, list(image_to_records(target)))
    delta, image = pub.updates[-1]
    assert sorted(image.topics_by_name) == ["keep", "new"] and image.offset == 49
    assert [t.name for t in delta.deleted_topics().values()] == ["gone"]
    assert delta.changed_partitions(img.topic("keep").topic_id) == {}  # unchanged: not listed
    assert delta.changed_config_resources() == [(2, "keep")]


def test_delta_between_reconstructs_the_target_image():
    a = with_topic(with_topic(cluster(3), "x", 3, 2), "y", 1, 1)
    b = with_topic(cluster(2), "x", 2, 1, seed=9)  # same name, new id; broker 3 gone
    d = delta_between(a, b)
    assert d.apply() == b
    assert delta_between(EMPTY_IMAGE, b).apply() == b
    assert delta_between(b, EMPTY_IMAGE).apply() == EMPTY_IMAGE
