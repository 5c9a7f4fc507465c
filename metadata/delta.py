"""MetadataDelta: records replayed on top of an image; `apply()` builds the next image.

The delta also answers publishers' questions — what changed, and for one broker which
partitions it now leads, follows or must stop replicating (Kafka's LocalReplicaChanges).
Replaying a record that does not fit the image (a partition of an unknown topic, say) raises
InvalidRecordError: the committed log is authoritative, so that is a controller bug.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import NamedTuple

from metadata.errors import InvalidRecordError
from metadata.image import (
    TOPIC_RESOURCE, BrokerRegistration, ConfigResource, MetadataImage,
    TopicImage,
)
from metadata.partition import PartitionRegistration
from metadata.records import (
    AccessControlEntry, BrokerRegistrationChange, ClientQuota, Config, FeatureLevel, NoOp,
    Partition, PartitionChange, ProducerIds, Record, RegisterBroker, RemoveAccessControlEntry,
    RemoveTopic, RemoveUserScramCredential, Topic, UnregisterBroker, UserScramCredential,
)

__all__ = ["MetadataDelta", "TopicPartition", "LocalReplicaChanges"]


class TopicPartition(NamedTuple):
    topic: str
    partition: int


@dataclass(slots=True)
class LocalReplicaChanges:
    """What one broker must do after a delta (Kafka's LocalReplicaChanges)."""

    deletes: set[TopicPartition] = field(default_factory=set)  # stop replicating, delete
    elected_leaders: dict[TopicPartition, PartitionRegistration] = field(default_factory=dict)
    leaders: dict[TopicPartition, PartitionRegistration] = field(default_factory=dict)
    followers: dict[TopicPartition, PartitionRegistration] = field(default_factory=dict)
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)


@dataclass(slots=True)
class _TopicChange:
    name: str
    created: bool
    partitions: dict[int, PartitionRegistration] = field(default_factory=dict)


_REMOVED = object()  # marks a deleted entry in a change map


class MetadataDelta:
    def __init__(self, image: MetadataImage):
        self.image = image
        self._offset = image.offset
        self._epoch = image.epoch
        self._features: dict[str, int] = {}
        self._brokers: dict[int, BrokerRegistration | None] = {}
        self._topics: dict[uuid.UUID, _TopicChange] = {}
        self._deleted_topics: dict[uuid.UUID, TopicImage] = {}
        self._configs: dict[ConfigResource, dict[str, str | None]] = {}
        self._next_producer_id: int | None = None
        self._quotas: dict[tuple, dict[str, float | None]] = {}
        self._acls: dict[uuid.UUID, object] = {}
        self._scram: dict[tuple[str, int], object] = {}

    # --- replay ------------------------------------------------------------------------
    def set_provenance(self, offset: int, epoch: int) -> None:
        self._offset, self._epoch = offset, epoch

    def replay(self, rec: Record) -> None:
        handler = _HANDLERS.get(type(rec))
        if handler is None:
            raise InvalidRecordError(f"no replay rule for {type(rec).__name__}")
        handler(self, rec)

    def _feature(self, rec: FeatureLevel) -> None:
        self._features[rec.name] = rec.feature_level

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        if broker_id in self._brokers:
            return self._brokers[broker_id]
        return self.image.brokers.get(broker_id)

    def _register(self, rec: RegisterBroker) -> None:
        self._brokers[rec.broker_id] = BrokerRegistration(
            broker_id=rec.broker_id, incarnation_id=rec.incarnation_id, epoch=rec.broker_epoch,
            endpoints=rec.endpoints, rack=rec.rack, fenced=rec.fenced,
            in_controlled_shutdown=rec.in_controlled_shutdown, log_dirs=rec.log_dirs)

    def _unregister(self, rec: UnregisterBroker) -> None:
        current = self.broker(rec.broker_id)
        if current is None or current.epoch != rec.broker_epoch:
            raise InvalidRecordError(f"unregister of unknown broker {rec.broker_id} epoch "
                                     f"{rec.broker_epoch}")
        self._brokers[rec.broker_id] = None

    def _broker_change(self, rec: BrokerRegistrationChange) -> None:
        current = self.broker(rec.broker_id)
        if current is None or current.epoch != rec.broker_epoch:
            raise InvalidRecordError(f"change for unknown broker {rec.broker_id} epoch "
                                     f"{rec.broker_epoch}")
        fenced = current.fenced if rec.fenced is None else rec.fenced
        shutdown = (current.in_controlled_shutdown if rec.in_controlled_shutdown is None
                    else rec.in_controlled_shutdown)
        log_dirs = current.log_dirs if rec.log_dirs is None else rec.log_dirs
        self._brokers[rec.broker_id] = BrokerRegistration(
            current.broker_id, current.incarnation_id, current.epoch, current.endpoints,
            current.rack, fenced, shutdown, log_dirs)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        change = self._topics.get(topic_id)
        if change is not None:
            return change.name
        if topic_id in self._deleted_topics:
            return None
        topic = self.image.topics_by_id.get(topic_id)
        return None if topic is None else topic.name

    def _topic(self, rec: Topic) -> None:
        if self.topic_name(rec.topic_id) is not None or self._name_taken(rec.name):
            raise InvalidRecordError(f"topic {rec.name} ({rec.topic_id}) already exists")
        self._topics[rec.topic_id] = _TopicChange(rec.name, created=True)

    def _name_taken(self, name: str) -> bool:
        existing = self.image.topics_by_name.get(name)
        if existing is not None and existing.topic_id not in self._deleted_topics:
            return True
        return any(c.name == name for c in self._topics.values())

    def _topic_change(self, topic_id: uuid.UUID) -> _TopicChange:
        change = self._topics.get(topic_id)
        if change is None:
            topic = self.image.topics_by_id.get(topic_id)
            if topic is None or topic_id in self._deleted_topics:
                raise InvalidRecordError(f"unknown topic id {topic_id}")
            change = self._topics[topic_id] = _TopicChange(topic.name, created=False)
        return change

    def partition(self, topic_id: uuid.UUID, pid: int) -> PartitionRegistration | None:
        change = self._topics.get(topic_id)
        if change is not None and pid in change.partitions:
            return change.partitions[pid]
        if change is not None and change.created:
            return None
        return self.image.partition(topic_id, pid)

    def _partition(self, rec: Partition) -> None:
        self._topic_change(rec.topic_id).partitions[rec.partition_id] = (
            PartitionRegistration.from_record(rec))

    def _partition_change(self, rec: PartitionChange) -> None:
        current = self.partition(rec.topic_id, rec.partition_id)
        if current is None:
            raise InvalidRecordError(f"change for unknown partition {rec.topic_id}-"
                                     f"{rec.partition_id}")
        self._topic_change(rec.topic_id).partitions[rec.partition_id] = current.merge(rec)

    def _remove_topic(self, rec: RemoveTopic) -> None:
        name = self.topic_name(rec.topic_id)
        if name is None:
            raise InvalidRecordError(f"remove of unknown topic id {rec.topic_id}")
        change = self._topics.pop(rec.topic_id, None)
        if change is None or not change.created:
            self._deleted_topics[rec.topic_id] = self.image.topics_by_id[rec.topic_id]
        # A topic's configs go with it, as in Kafka's ConfigurationsDelta.
        res = (TOPIC_RESOURCE, name)
        current = dict(self.image.configs.get(res, {}))
        current.update(self._configs.get(res, {}))
        if current:
            self._configs[res] = {k: None for k in current}

    def _config(self, rec: Config) -> None:
        self._configs.setdefault((rec.resource_type, rec.resource_name), {})[rec.name] = rec.value

    def _producer_ids(self, rec: ProducerIds) -> None:
        self._next_producer_id = rec.next_producer_id

    def _quota(self, rec: ClientQuota) -> None:
        self._quotas.setdefault(rec.entity, {})[rec.key] = None if rec.remove else rec.value

    def _acl(self, rec: AccessControlEntry) -> None:
        self._acls[rec.id] = rec

    def _remove_acl(self, rec: RemoveAccessControlEntry) -> None:
        self._acls[rec.id] = _REMOVED

    def _scram_cred(self, rec: UserScramCredential) -> None:
        self._scram[(rec.name, rec.mechanism)] = rec

    def _remove_scram(self, rec: RemoveUserScramCredential) -> None:
        self._scram[(rec.name, rec.mechanism)] = _REMOVED

    def _noop(self, rec: NoOp) -> None:
        pass

    # --- what changed --------------------------------------------------------------------
    def features_changed(self) -> bool:
        return bool(self._features)

    def changed_brokers(self) -> list[int]:
        return sorted(self._brokers)

    def topics_changed(self) -> bool:
        return bool(self._topics or self._deleted_topics)

    def created_topic_ids(self) -> list[uuid.UUID]:
        return sorted(t for t, c in self._topics.items() if c.created)

    def changed_topic_ids(self) -> list[uuid.UUID]:
        """Topics created or with changed partitions (not deleted ones)."""
        return sorted(self._topics)

    def deleted_topics(self) -> dict[uuid.UUID, TopicImage]:
        return dict(self._deleted_topics)

    def changed_partitions(self, topic_id: uuid.UUID) -> dict[int, PartitionRegistration]:
        change = self._topics.get(topic_id)
        return {} if change is None else dict(change.partitions)

    def changed_config_resources(self) -> list[ConfigResource]:
        return sorted(self._configs)

    def producer_ids_changed(self) -> bool:
        return self._next_producer_id is not None

    def local_changes(self, broker_id: int) -> LocalReplicaChanges:
        out = LocalReplicaChanges()
        for topic_id, old in sorted(self._deleted_topics.items()):
            for pid, part in old.partitions.items():
                if broker_id in part.replicas:
                    out.deletes.add(TopicPartition(old.name, pid))
        for topic_id in sorted(self._topics):
            change = self._topics[topic_id]
            old_topic = None if change.created else self.image.topics_by_id.get(topic_id)
            for pid in sorted(change.partitions):
                new = change.partitions[pid]
                prev = None if old_topic is None else old_topic.partitions.get(pid)
                tp = TopicPartition(change.name, pid)
                if broker_id not in new.replicas:
                    if prev is not None and broker_id in prev.replicas:
                        out.deletes.add(tp)
                    continue
                out.topic_ids[change.name] = topic_id
                if prev is not None and prev.partition_epoch == new.partition_epoch:
                    continue
                if new.leader == broker_id:
                    if prev is None or prev.leader_epoch != new.leader_epoch:
                        out.elected_leaders[tp] = new
                    else:
                        out.leaders[tp] = new
                else:
                    out.followers[tp] = new
        return out

    # --- apply -----------------------------------------------------------------------------
    def apply(self) -> MetadataImage:
        img = self.image
        features = img.features
        if self._features:
            features = dict(features)
            for name, level in self._features.items():
                if level == 0:
                    features.pop(name, None)
                else:
                    features[name] = level
        brokers = img.brokers
        if self._brokers:
            brokers = dict(brokers)
            for bid, reg in self._brokers.items():
                if reg is None:
                    brokers.pop(bid, None)
                else:
                    brokers[bid] = reg
        by_id, by_name = img.topics_by_id, img.topics_by_name
        if self._topics or self._deleted_topics:
            by_id, by_name = dict(by_id), dict(by_name)
            for topic_id, old in self._deleted_topics.items():
                del by_id[topic_id]
                if by_name.get(old.name) is old:
                    del by_name[old.name]
            for topic_id, change in self._topics.items():
                old = None if change.created else img.topics_by_id[topic_id]
                parts = dict(change.partitions) if old is None else {
                    **old.partitions, **change.partitions}
                topic = TopicImage(change.name, topic_id, parts)
                by_id[topic_id] = topic
                by_name[change.name] = topic
        return MetadataImage(
            offset=self._offset, epoch=self._epoch, features=features, brokers=brokers,
            topics_by_id=by_id, topics_by_name=by_name,
            configs=_merge_nested(img.configs, self._configs),
            next_producer_id=(img.next_producer_id if self._next_producer_id is None
                              else self._next_producer_id),
            client_quotas=_merge_nested(img.client_quotas, self._quotas),
            acls=_merge_flat(img.acls, self._acls),
            scram=_merge_flat(img.scram, self._scram),
        )


def _merge_nested(base, changes):
    """Two-level maps where a None leaf deletes the key and an emptied entry disappears."""
    if not changes:
        return base
    out = dict(base)
    for outer, leaves in changes.items():
        inner = dict(out.get(outer, {}))
        for key, value in leaves.items():
            if value is None:
                inner.pop(key, None)
            else:
                inner[key] = value
        if inner:
            out[outer] = inner
        else:
            out.pop(outer, None)
    return out


def _merge_flat(base, changes):
    if not changes:
        return base
    out = dict(base)
    for key, value in changes.items():
        if value is _REMOVED:
            out.pop(key, None)
        else:
            out[key] = value
    return out


_HANDLERS = {
    FeatureLevel: MetadataDelta._feature,
    RegisterBroker: MetadataDelta._register,
    UnregisterBroker: MetadataDelta._unregister,
    BrokerRegistrationChange: MetadataDelta._broker_change,
    Topic: MetadataDelta._topic,
    Partition: MetadataDelta._partition,
    PartitionChange: MetadataDelta._partition_change,
    RemoveTopic: MetadataDelta._remove_topic,
    Config: MetadataDelta._config,
    ProducerIds: MetadataDelta._producer_ids,
    ClientQuota: MetadataDelta._quota,
    AccessControlEntry: MetadataDelta._acl,
    RemoveAccessControlEntry: MetadataDelta._remove_acl,
    UserScramCredential: MetadataDelta._scram_cred,
    RemoveUserScramCredential: MetadataDelta._remove_scram,
    NoOp: MetadataDelta._noop,
}
