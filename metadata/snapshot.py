"""Snapshots: an image as a stream of records, and back.

Loading a snapshot is replaying its records into a delta over the empty image, so the one
replay path serves both the log and snapshots (as in Kafka). Order matters only where one
record refers to another: features first (metadata.version opens every snapshot), brokers,
then each topic followed by its partitions.
"""
from __future__ import annotations

from typing import Iterable, Iterator

from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE, MetadataImage
from metadata.records import (
    ClientQuota, Config, FeatureLevel, ProducerIds, Record,
    RegisterBroker, Topic,
)

__all__ = ["image_to_records", "image_from_records"]


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


