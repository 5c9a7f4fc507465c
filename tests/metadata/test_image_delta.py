import uuid

import pytest

from metadata.delta import MetadataDelta, TopicPartition
from metadata.errors import InvalidRecordError
from metadata.image import EMPTY_IMAGE, TOPIC_RESOURCE
from metadata.records import (
    AccessControlEntry, BrokerRegistrationChange, ClientQuota, Config, EntityPart, FeatureLevel,
    Partition, PartitionChange, ProducerIds, RegisterBroker, RemoveAccessControlEntry,
    RemoveTopic, Topic, UnregisterBroker, UserScramCredential,
)
from metadata.snapshot import image_from_records, image_to_records

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def replay(image, records, offset=None):
    delta = MetadataDelta(image)
    for r in records:
        delta.replay(r)
    if offset is not None:
        delta.set_provenance(offset, 1)
    return delta, delta.apply()


def base_records():
    recs = [FeatureLevel("metadata.version", 1)]
    recs += [RegisterBroker(b, uuid.UUID(int=100 + b), 10 + b, rack=f"r{b % 2}", fenced=False)
             for b in (1, 2, 3)]
    recs += [Topic("a", T1), Partition(0, T1, (1, 2, 3), (1, 2, 3), leader=1),
             Partition(1, T1, (2, 3, 1), (2, 3, 1), leader=2),
             Topic("b", T2), Partition(0, T2, (3, 1), (3, 1), leader=3),
             Config(TOPIC_RESOURCE, "a", "retention.ms", "1000"),
             ProducerIds(1, 11, 2000),
             ClientQuota((EntityPart("user", None),), "producer_byte_rate", 1e6),
             AccessControlEntry(uuid.UUID(int=9), 2, "a", 3, "User:x", "*", 3, 3),
             UserScramCredential("alice", 1, b"s", b"k", b"v", 4096)]
    return recs


def test_replay_builds_image_and_leaves_old_image_untouched():
    _, img = replay(EMPTY_IMAGE, base_records(), offset=20)
    assert img.offset == 20
    assert sorted(img.topics_by_name) == ["a", "b"]
    assert img.partition(T1, 1).leader == 2
    assert img.topic_config("a") == {"retention.ms": "1000"}
    assert img.next_producer_id == 2000
    assert EMPTY_IMAGE.topics_by_id == {} and EMPTY_IMAGE.offset == -1


def test_partition_change_bumps_epochs_and_shares_untouched_topics():
    _, img = replay(EMPTY_IMAGE, base_records())
    _, img2 = replay(img, [PartitionChange(0, T1, isr=(1, 2))])
    p = img2.partition(T1, 0)
    assert (p.isr, p.leader, p.leader_epoch, p.partition_epoch) == ((1, 2), 1, 0, 1)
    assert img2.topics_by_id[T2] is img.topics_by_id[T2]  # structural sharing
    assert img2.topics_by_id[T1].partitions[1] is img.topics_by_id[T1].partitions[1]
    assert img.partition(T1, 0).isr == (1, 2, 3)
    _, img3 = replay(img2, [PartitionChange(0, T1, leader=2), PartitionChange(0, T1, isr=(2,))])
    p = img3.partition(T1, 0)
    assert (p.leader, p.leader_epoch, p.partition_epoch, p.isr) == (2, 1, 3, (2,))


def test_broker_changes_and_unregister():
    _, img = replay(EMPTY_IMAGE, base_records())
    _, img2 = replay(img, [BrokerRegistrationChange(2, 12, fenced=True),
                           BrokerRegistrationChange(3, 13, in_controlled_shutdown=True)])
    assert img2.brokers[2].fenced and not img2.brokers[3].fenced
    assert img2.active_brokers() == [1] and img2.unfenced_brokers() == [1, 3]
    with pytest.raises(InvalidRecordError):
        replay(img2, [BrokerRegistrationChange(2, 99, fenced=False)])  # stale epoch
    _, img3 = replay(img2, [UnregisterBroker(2, 12)])
    assert sorted(img3.brokers) == [1, 3]


def test_remove_topic_drops_partitions_and_configs_and_allows_recreate():
    _, img = replay(EMPTY_IMAGE, base_records())
    t3 = uuid.UUID(int=3)
    delta, img2 = replay(img, [RemoveTopic(T1), Topic("a", t3), Partition(0, t3, (1,), (1,),
                                                                        leader=1)])
    assert img2.topic("a").topic_id == t3 and T1 not in img2.topics_by_id
    assert img2.topic_config("a") == {}
    assert list(delta.deleted_topics()) == [T1] and delta.created_topic_ids() == [t3]
    with pytest.raises(InvalidRecordError):
        replay(img2, [Topic("a", uuid.UUID(int=4))])
    with pytest.raises(InvalidRecordError):
        replay(img2, [PartitionChange(0, T1, isr=(1,))])


def test_local_changes_classify_leaders_followers_and_deletes():
    _, img = replay(EMPTY_IMAGE, base_records())
    delta, _ = replay(img, [
        PartitionChange(0, T1, leader=2, isr=(2, 3)),       # 2 elected, 1 now follower
        PartitionChange(1, T1, isr=(2, 3)),                 # 2 still leader, epoch same
        PartitionChange(0, T2, replicas=(3, 2), isr=(3,)),  # 1 removed from replicas
    ])
    two = delta.local_changes(2)
    assert set(two.elected_leaders) == {TopicPartition("a", 0)}
    assert set(two.leaders) == {TopicPartition("a", 1)}
    assert set(two.followers) == {TopicPartition("b", 0)}
    one = delta.local_changes(1)
    assert set(one.followers) == {TopicPartition("a", 0), TopicPartition("a", 1)}
    assert one.deletes == {TopicPartition("b", 0)}
    delta2, _ = replay(img, [RemoveTopic(T2)])
    assert delta2.local_changes(3).deletes == {TopicPartition("b", 0)}


def test_snapshot_then_replay_gives_the_same_image():
    _, img = replay(EMPTY_IMAGE, base_records())
    _, img = replay(img, [PartitionChange(0, T1, leader=3, isr=(3,)),
                          RemoveAccessControlEntry(uuid.UUID(int=9)),
                          BrokerRegistrationChange(1, 11, fenced=True)], offset=42)
    loaded = image_from_records(image_to_records(img), offset=42, epoch=1)
    assert loaded == img
    assert list(image_to_records(loaded)) == list(image_to_records(img))
