"""MetadataImage: the immutable view of cluster metadata at one committed log offset.

Images are never mutated. A new image shares everything unchanged with the old one: a
change to one partition copies that topic's partition map and the two topic maps (shallow,
one pointer per topic), never the other topics or their partitions. All maps are plain
dicts by convention only — treat them as read-only.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Iterator, Mapping

from metadata.partition import PartitionRegistration
from metadata.records import (
    AccessControlEntry, Endpoint, EntityPart, NO_LEADER, UserScramCredential,
)

__all__ = [
    "BrokerRegistration", "TopicImage", "MetadataImage", "EMPTY_IMAGE",
    "TOPIC_RESOURCE", "BROKER_RESOURCE", "ConfigResource", "ELR_FEATURE", "METADATA_VERSION",
]

TOPIC_RESOURCE = 2  # Kafka's ConfigResource.Type ids
BROKER_RESOURCE = 4
ConfigResource = tuple[int, str]  # (resource_type, resource_name); broker "" = cluster default

METADATA_VERSION = "metadata.version"
ELR_FEATURE = "eligible.leader.replicas.version"


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: int
    incarnation_id: uuid.UUID
    epoch: int
    endpoints: tuple[Endpoint, ...] = ()
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False
    log_dirs: tuple[uuid.UUID, ...] = ()

    @property
    def active(self) -> bool:
        """May lead and join ISRs: unfenced and not shutting down."""
        return not self.fenced and not self.in_controlled_shutdown


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionRegistration]


@dataclass(frozen=True, slots=True)
class MetadataImage:
    offset: int = -1  # last log offset reflected (-1 = empty)
    epoch: int = 0  # Raft epoch of that offset
    features: Mapping[str, int] = field(default_factory=dict)
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=dict)
    topics_by_id: Mapping[uuid.UUID, TopicImage] = field(default_factory=dict)
    topics_by_name: Mapping[str, TopicImage] = field(default_factory=dict)
    configs: Mapping[ConfigResource, Mapping[str, str]] = field(default_factory=dict)
    next_producer_id: int = 0
    client_quotas: Mapping[tuple[EntityPart, ...], Mapping[str, float]] = field(
        default_factory=dict)
    acls: Mapping[uuid.UUID, AccessControlEntry] = field(default_factory=dict)
    scram: Mapping[tuple[str, int], UserScramCredential] = field(default_factory=dict)

    # --- lookups -------------------------------------------------------------------
    def topic(self, name: str) -> TopicImage | None:
        return self.topics_by_name.get(name)

    def partition(self, topic_id: uuid.UUID, partition_id: int) -> PartitionRegistration | None:
        topic = self.topics_by_id.get(topic_id)
        return None if topic is None else topic.partitions.get(partition_id)

    def feature(self, name: str) -> int:
        return self.features.get(name, 0)

    def elr_enabled(self) -> bool:
        return self.feature(ELR_FEATURE) >= 1

    def topic_config(self, topic_name: str) -> Mapping[str, str]:
        return self.configs.get((TOPIC_RESOURCE, topic_name), {})

    def broker_config(self, broker_id: int | None) -> Mapping[str, str]:
        """Dynamic overrides for one broker, or the cluster default (broker_id None)."""
        name = "" if broker_id is None else str(broker_id)
        return self.configs.get((BROKER_RESOURCE, name), {})

    def active_brokers(self) -> list[int]:
        """Broker ids that may take new replicas and leadership, sorted."""
        return sorted(b for b, reg in self.brokers.items() if reg.active)

    def unfenced_brokers(self) -> list[int]:
        return sorted(b for b, reg in self.brokers.items() if not reg.fenced)

    def is_active(self, broker_id: int) -> bool:
        reg = self.brokers.get(broker_id)
        return reg is not None and reg.active

    def partition_count(self) -> int:
        return sum(len(t.partitions) for t in self.topics_by_id.values())

    def iter_partitions(self) -> Iterator[tuple[TopicImage, int, PartitionRegistration]]:
        """Every partition, in a deterministic order (topic name, partition id)."""
        for name in sorted(self.topics_by_name):
            topic = self.topics_by_name[name]
            for pid in sorted(topic.partitions):
                yield topic, pid, topic.partitions[pid]

    def partitions_led_by(self, broker_id: int) -> int:
        return sum(1 for t in self.topics_by_id.values()
                   for p in t.partitions.values() if p.leader == broker_id)

    def leaderless_partitions(self) -> int:
        return sum(1 for t in self.topics_by_id.values()
                   for p in t.partitions.values() if p.leader == NO_LEADER)


EMPTY_IMAGE = MetadataImage()
