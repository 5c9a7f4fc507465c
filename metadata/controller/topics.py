"""CreateTopics, DeleteTopics and CreatePartitions as pure functions of the image.

Every function returns ``(records, results)``; the records of one call form one atomic
batch (a topic appears with all of its partitions or not at all). Topics in one request
succeed or fail independently, with Kafka's error codes.
"""
from __future__ import annotations

import collections
import random
import re
import uuid
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from metadata.config_definitions import validate_topic_config
from metadata.controller.dynamic_configs import effective_broker_value
from metadata.controller.placement import place_replicas
from metadata.controller.mutation_quota import THROTTLING_MESSAGE, RequestQuota
from metadata.errors import ApiError
from metadata.image import TOPIC_RESOURCE, MetadataImage
from metadata.records import NO_LEADER, Config, Partition, Record, RemoveTopic, Topic
from storage.env import uuid_from_rng
from storage.log.log_manager import RESERVED_TOPICS
from wire.error_codes import ErrorCode

__all__ = [
    "CreatableTopic", "CreateTopicResult", "create_topics", "validate_topic_name",
    "delete_topics", "DeleteTopicResult", "NewPartitions", "create_partitions",
    "MAX_TOPIC_NAME_LENGTH", "MAX_PARTITIONS_PER_REQUEST",
]

MAX_TOPIC_NAME_LENGTH = 249
# Kafka's ReplicationControlManager.MAX_PARTITIONS_PER_BATCH: one request never creates more
# partitions than this, so its records stay one bounded batch and it is answered at once.
MAX_PARTITIONS_PER_REQUEST = 10_000
_TOO_MANY_PARTITIONS = "Excessively large number of partitions per request."
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(name: str) -> None:
    """Kafka's Topic.validate: raises ApiError(INVALID_TOPIC_EXCEPTION)."""
    if not name:
        raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                       "Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                       f"Topic name is illegal, it can't be longer than "
                       f"{MAX_TOPIC_NAME_LENGTH} characters, topic name: {name}")
    if not _LEGAL.fullmatch(name):
        raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                       f"Topic name \"{name}\" is illegal, it contains a character other "
                       f"than ASCII alphanumerics, '.', '_' and '-'")


def _collision_key(name: str) -> str:
    return name.replace(".", "_")  # '.' and '_' collide in metric names


@dataclass(frozen=True, slots=True)
class CreatableTopic:
    name: str
    num_partitions: int = -1  # -1 = num.partitions
    replication_factor: int = -1  # -1 = default.replication.factor
    assignments: Mapping[int, Sequence[int]] | None = None  # partition -> replicas
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CreateTopicResult:
    name: str
    error: ErrorCode
    message: str | None = None
    topic_id: uuid.UUID | None = None
    num_partitions: int = -1
    replication_factor: int = -1


def create_topics(image: MetadataImage, topics: Sequence[CreatableTopic], *,
                  rng: random.Random, validate_only: bool = False,
                  static: Mapping[str, str] | None = None, quota: RequestQuota | None = None,
                  ) -> tuple[list[Record], list[CreateTopicResult]]:
    """`quota`: the requester's controller_mutation_rate, charged per valid topic (validate_only
    too, as Kafka's controller does)."""
    static = static or {}
    if _requested_partitions(image, topics, static) > MAX_PARTITIONS_PER_REQUEST:
        return [], [CreateTopicResult(t.name, ErrorCode.POLICY_VIOLATION, _TOO_MANY_PARTITIONS) for t in topics]
    names = [t.name for t in topics]
    duplicates = {n for n, count in collections.Counter(names).items() if count > 1}
    taken = {_collision_key(n): n for n in image.topics_by_name}
    racks = {b: image.brokers[b].rack for b in image.active_brokers()}
    start = image.partition_count()  # rotates first leaders across successive creations
    records: list[Record] = []
    results = []
    for t in topics:
        if t.name in duplicates:
            results.append(CreateTopicResult(t.name, ErrorCode.INVALID_REQUEST,
                                             "Duplicate topic name."))
            continue
        if t.name in RESERVED_TOPICS:  # Kafka's ControllerApis refuses it before validation
            results.append(CreateTopicResult(t.name, ErrorCode.INVALID_REQUEST,
                                             f"Creation of internal topic {t.name} is prohibited."))
            continue
        try:
            recs, result = _create_one(image, t, taken, racks, start, rng, static)
        except ApiError as e:
            results.append(CreateTopicResult(t.name, e.code, e.message))
            continue
        if _throttled(quota, result.num_partitions):
            results.append(CreateTopicResult(t.name, ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLING_MESSAGE))
            continue
        taken[_collision_key(t.name)] = t.name
        start += result.num_partitions
        results.append(result)
        if not validate_only:
            records += recs
    return records, results


def _throttled(quota: RequestQuota | None, partitions: int) -> bool:
    return quota is not None and quota.admit(partitions) is not None


def _requested_partitions(image, topics: Sequence[CreatableTopic], static) -> int:
    """How many partitions a CreateTopics asks for in all (Kafka's count, before validation)."""
    default = None
    total = 0
    for t in topics:
        if t.assignments:
            total += len(t.assignments)
        elif t.num_partitions == -1:
            if default is None:
                default = effective_broker_value(image, "num.partitions", static)
            total += default
        elif t.num_partitions > 0:
            total += t.num_partitions
    return total


def _create_one(image, t: CreatableTopic, taken, racks, start, rng, static):
    validate_topic_name(t.name)
    if t.name in image.topics_by_name:
        raise ApiError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.")
    other = taken.get(_collision_key(t.name))
    if other is not None:
        raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                       f"Topic '{t.name}' collides with existing topic: {other}")
    for key in sorted(t.configs):
        if t.configs[key] is None:
            raise ApiError(ErrorCode.INVALID_CONFIG, f"Null value not supported for {key}")
        validate_topic_config(key, t.configs[key])
    if t.assignments:
        if t.num_partitions != -1 or t.replication_factor != -1:
            raise ApiError(ErrorCode.INVALID_REQUEST, "A manual partition assignment was given, "
                           "so numPartitions and replicationFactor must both be -1.")
        assignment = _manual_assignment(image, t.assignments)
    else:
        partitions = t.num_partitions
        if partitions == -1:
            partitions = effective_broker_value(image, "num.partitions", static)
        if partitions <= 0:
            raise ApiError(ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an "
                           "invalid non-positive value.")
        rf = t.replication_factor
        if rf == -1:
            rf = effective_broker_value(image, "default.replication.factor", static)
        if rf <= 0:
            raise ApiError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be "
                           "larger than 0, or -1 to use the default value.")
        n = len(racks)
        assignment = place_replicas(racks, partitions, rf,
                                    start_index=(start % n) if n else 0)
    topic_id = uuid_from_rng(rng)
    while topic_id in image.topics_by_id or topic_id.int == 0:
        topic_id = uuid_from_rng(rng)
    records: list[Record] = [Topic(t.name, topic_id)]
    for key in sorted(t.configs):
        records.append(Config(TOPIC_RESOURCE, t.name, key, t.configs[key]))
    active = set(racks)
    for pid, replicas in enumerate(assignment):
        isr = tuple(r for r in replicas if r in active)
        records.append(Partition(partition_id=pid, topic_id=topic_id, replicas=tuple(replicas),
                                 isr=isr, leader=isr[0] if isr else NO_LEADER))
    return records, CreateTopicResult(t.name, ErrorCode.NONE, None, topic_id, len(assignment),
                                      len(assignment[0]))


def _manual_assignment(image, assignments, *, first_partition: int = 0,
                       expected_rf: int | None = None) -> list[tuple[int, ...]]:
    ids = sorted(assignments)
    if ids != list(range(first_partition, first_partition + len(ids))):
        raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       "Partitions must be numbered consecutively from "
                       f"{first_partition}, got {ids}")
    out = []
    for pid in ids:
        replicas = tuple(assignments[pid])
        if not replicas:
            raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           f"The manual partition assignment for partition {pid} is empty.")
        if len(set(replicas)) != len(replicas):
            raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment "
                           f"for partition {pid} contains duplicate replicas: {list(replicas)}")
        if expected_rf is None:
            expected_rf = len(replicas)
        if len(replicas) != expected_rf:
            raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment "
                           f"includes a partition with {len(replicas)} replica(s), but this is "
                           f"not consistent with other partitions, which have {expected_rf}.")
        unknown = [r for r in replicas if r not in image.brokers]
        if unknown:
            raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment "
                           f"includes broker(s) {unknown}, but no such broker is registered.")
        if not any(image.is_active(r) for r in replicas):
            raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "All brokers specified in the "
                           f"manual partition assignment for partition {pid} are fenced or "
                           "in controlled shutdown.")
        out.append(replicas)
    return out


@dataclass(frozen=True, slots=True)
class DeleteTopicResult:
    name: str | None
    topic_id: uuid.UUID | None
    error: ErrorCode
    message: str | None = None


def delete_topics(image: MetadataImage, *, names: Sequence[str] = (),
                  topic_ids: Sequence[uuid.UUID] = (),
                  static: Mapping[str, str] | None = None, quota: RequestQuota | None = None,
                  ) -> tuple[list[Record], list[DeleteTopicResult]]:
    enabled = effective_broker_value(image, "delete.topic.enable", static)
    records: list[Record] = []
    results = []
    removed: set[uuid.UUID] = set()
    wanted = [(n, None, image.topic(n), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) for n in names]
    wanted += [(None, i, image.topics_by_id.get(i), ErrorCode.UNKNOWN_TOPIC_ID) for i in topic_ids]
    for name, tid, topic, missing in wanted:
        if topic is None:
            results.append(DeleteTopicResult(name, tid, missing,
                                             "This server does not host this topic."))
        elif not enabled:
            results.append(DeleteTopicResult(topic.name, topic.topic_id,
                                             ErrorCode.TOPIC_DELETION_DISABLED))
        elif topic.topic_id not in removed and _throttled(quota, len(topic.partitions)):
            results.append(DeleteTopicResult(topic.name, topic.topic_id, ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                                             THROTTLING_MESSAGE))
        else:
            results.append(DeleteTopicResult(topic.name, topic.topic_id, ErrorCode.NONE))
            if topic.topic_id not in removed:
                removed.add(topic.topic_id)
                records.append(RemoveTopic(topic.topic_id))
    return records, results


@dataclass(frozen=True, slots=True)
class NewPartitions:
    name: str
    count: int  # the new total
    assignments: Sequence[Sequence[int]] | None = None  # one replica list per NEW partition


def create_partitions(image: MetadataImage, requests: Sequence[NewPartitions], *,
                      validate_only: bool = False, quota: RequestQuota | None = None,
                      ) -> tuple[list[Record], dict[str, tuple[ErrorCode, str | None]]]:
    """CreatePartitions: only ever increases a topic's partition count."""
    racks = {b: image.brokers[b].rack for b in image.active_brokers()}
    active = set(racks)
    records: list[Record] = []
    results: dict[str, tuple[ErrorCode, str | None]] = {}
    if sum(_added_partitions(image, req) for req in requests) > MAX_PARTITIONS_PER_REQUEST:
        return [], {req.name: (ErrorCode.POLICY_VIOLATION, _TOO_MANY_PARTITIONS) for req in requests}
    for req in requests:
        try:
            recs = _grow_topic(image, req, racks, active)
        except ApiError as e:
            results[req.name] = (e.code, e.message)
            continue
        if _throttled(quota, _added_partitions(image, req)):
            results[req.name] = (ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLING_MESSAGE)
            continue
        results[req.name] = (ErrorCode.NONE, None)
        if not validate_only:
            records += recs
    return records, results


def _added_partitions(image, req: NewPartitions) -> int:
    topic = image.topic(req.name)
    return 0 if topic is None else max(0, req.count - len(topic.partitions))


def _grow_topic(image, req: NewPartitions, racks, active) -> list[Record]:
    topic = image.topic(req.name)
    if topic is None:
        raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{req.name}' does not exist.")
    current = len(topic.partitions)
    if req.count < current:
        raise ApiError(ErrorCode.INVALID_PARTITIONS, f"The topic {req.name} currently has "
                       f"{current} partition(s); {req.count} would not be an increase.")
    if req.count == current:
        raise ApiError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
    rf = len(topic.partitions[0].replicas) if topic.partitions else 1
    extra = req.count - current
    if req.assignments is not None:
        if len(req.assignments) != extra:
            raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Attempted to add {extra} "
                           f"additional partition(s), but only {len(req.assignments)} "
                           "assignment(s) were specified.")
        assignment = _manual_assignment(
            image, {current + i: a for i, a in enumerate(req.assignments)},
            first_partition=current, expected_rf=rf)
    else:
        assignment = place_replicas(racks, extra, rf, start_partition=current,
                                    start_index=image.partition_count() % max(1, len(racks)))
    out: list[Record] = []
    for i, replicas in enumerate(assignment):
        isr = tuple(r for r in replicas if r in active)
        out.append(Partition(partition_id=current + i, topic_id=topic.topic_id,
                             replicas=tuple(replicas), isr=isr,
                             leader=isr[0] if isr else NO_LEADER))
    return out
