"""Snapshots: an image as a stream of records, and back.

Loading a snapshot is replaying its records into a delta over the empty image, so the one
replay path serves both the log and snapshots (as in Kafka). Order matters only where one
record refers to another: features first (metadata.version opens every snapshot), brokers,
then each topic followed by its partitions.
"""
from __future__ import annotations

from typing import Iterable, Iterator

from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE, TOPIC_RESOURCE, MetadataImage
from metadata.records import (
    ClientQuota, Config, FeatureLevel, Partition, ProducerIds, Record, RegisterBroker,
    RemoveAccessControlEntry, RemoveTopic, RemoveUserScramCredential, Topic, UnregisterBroker,
)

__all__ = ["image_to_records", "image_from_records", "delta_between"]


def image_to_records(image: MetadataImage) -> Iterator[Record]:
    for name in sorted(image.features):
        yield FeatureLevel(name, image.features[name])
    for bid in sorted(image.brokers):
        b = image.brokers[bid]
        yield RegisterBroker(
            broker_id=b.broker_id, incarnation_id=b.incarnation_id, broker_epoch=b.epoch,
            endpoints=b.endpoints, rack=b.rack, fenced=b.fenced,
            in_controlled_shutdown=b.in_controlled_shutdown, log_dirs=b.log_dirs)
    for name in sorted(image.topics_by_name):
        topic = image.topics_by_name[name]
        yield Topic(name, topic.topic_id)
        for pid in sorted(topic.partitions):
            yield topic.partitions[pid].to_record(topic.topic_id, pid)
    for resource in sorted(image.configs):
        entries = image.configs[resource]
        for key in sorted(entries):
            yield Config(resource[0], resource[1], key, entries[key])
    if image.next_producer_id:
        yield ProducerIds(broker_id=-1, broker_epoch=-1, next_producer_id=image.next_producer_id)
    for entity in sorted(image.client_quotas, key=_entity_key):
        quotas = image.client_quotas[entity]
        for key in sorted(quotas):
            yield ClientQuota(entity, key, quotas[key])
    for acl_id in sorted(image.acls):
        yield image.acls[acl_id]
    for key in sorted(image.scram):
        yield image.scram[key]


def image_from_records(records: Iterable[Record], *, offset: int = -1,
                       epoch: int = 0) -> MetadataImage:
    """Load a snapshot taken at (offset, epoch)."""
    delta = MetadataDelta(EMPTY_IMAGE)
    for rec in records:
        delta.replay(rec)
    delta.set_provenance(offset, epoch)
    return delta.apply()


def _entity_key(entity):
    return [(p.entity_type, "" if p.entity_name is None else p.entity_name,
             p.entity_name is None) for p in entity]




def delta_between(old: MetadataImage, new: MetadataImage) -> MetadataDelta:
    """A delta over `old` whose apply() equals `new`: how a snapshot load is presented to
    publishers (topics missing from the snapshot show up as deleted, and so on)."""
    delta = MetadataDelta(old)
    for name in sorted(old.features):
        if name not in new.features:
            delta.replay(FeatureLevel(name, 0))
    for bid in sorted(old.brokers):
        if bid not in new.brokers:
            delta.replay(UnregisterBroker(bid, old.brokers[bid].epoch))
    removed_names = set()
    for topic_id in sorted(old.topics_by_id):
        new_topic = new.topics_by_id.get(topic_id)
        if new_topic is None or new_topic.name != old.topics_by_id[topic_id].name:
            delta.replay(RemoveTopic(topic_id))
            removed_names.add(old.topics_by_id[topic_id].name)
    kept = {tid for tid, t in old.topics_by_id.items() if t.name not in removed_names}
    for rec in image_to_records(new):
        if isinstance(rec, Config):
            continue  # handled below, as a diff
        if isinstance(rec, Topic) and rec.topic_id in kept:
            continue
        if isinstance(rec, Partition) and rec.topic_id in kept:
            old_part = old.partition(rec.topic_id, rec.partition_id)
            if old_part is not None and old_part.to_record(rec.topic_id, rec.partition_id) == rec:
                continue
        if isinstance(rec, RegisterBroker) and _same_broker(old, rec):
            continue
        delta.replay(rec)
    for resource in sorted(set(old.configs) | set(new.configs)):
        before = old.configs.get(resource, {})
        if resource[0] == TOPIC_RESOURCE and resource[1] in removed_names:
            before = {}  # RemoveTopic already dropped them
        after = new.configs.get(resource, {})
        for key in sorted(set(before) | set(after)):
            if before.get(key) != after.get(key):
                delta.replay(Config(resource[0], resource[1], key, after.get(key)))
    if new.next_producer_id != old.next_producer_id and not new.next_producer_id:
        delta.replay(ProducerIds(-1, -1, 0))
    for entity in sorted(old.client_quotas, key=_entity_key):
        for key in sorted(old.client_quotas[entity]):
            if key not in new.client_quotas.get(entity, {}):
                delta.replay(ClientQuota(entity, key, 0.0, remove=True))
    for acl_id in sorted(old.acls):
        if acl_id not in new.acls:
            delta.replay(RemoveAccessControlEntry(acl_id))
    for name, mechanism in sorted(old.scram):
        if (name, mechanism) not in new.scram:
            delta.replay(RemoveUserScramCredential(name, mechanism))
    delta.set_provenance(new.offset, new.epoch)
    return delta


def _same_broker(old: MetadataImage, rec: RegisterBroker) -> bool:
    b = old.brokers.get(rec.broker_id)
    return b is not None and (b.incarnation_id, b.epoch, b.endpoints, b.rack, b.fenced,
                              b.in_controlled_shutdown, b.log_dirs) == (
        rec.incarnation_id, rec.broker_epoch, rec.endpoints, rec.rack, rec.fenced,
        rec.in_controlled_shutdown, rec.log_dirs)
