"""ElectLeaders (preferred / unclean) and the periodic preferred-leader rebalance."""
from __future__ import annotations

import enum
import uuid
from typing import Mapping, Sequence

from metadata.controller.election import Election, build_change
from metadata.controller.replication import MAX_PARTITION_CHANGES_PER_BATCH, TopicPolicy
from metadata.image import MetadataImage
from metadata.records import NO_LEADER_CHANGE, PartitionChange
from wire.error_codes import ErrorCode

__all__ = ["ElectionType", "elect_leaders", "rebalance_preferred_leaders"]


class ElectionType(enum.IntEnum):  # ElectLeaders request ids
    PREFERRED = 0
    UNCLEAN = 1


def elect_leaders(image: MetadataImage, election_type: ElectionType,
                  partitions: Sequence[tuple[str, int]] | None = None, *,
                  static: Mapping[str, str] | None = None,
                  ) -> tuple[list[PartitionChange], dict[tuple[str, int], ErrorCode]]:
    """ElectLeaders for the given (topic, partition)s, or all partitions if None (in which
    case partitions needing no election are left out of the results, as in Kafka)."""
    explicit = partitions is not None
    if partitions is None:
        partitions = [(t.name, pid) for t, pid, _ in image.iter_partitions()]
    records: list[PartitionChange] = []
    results: dict[tuple[str, int], ErrorCode] = {}
    policy = TopicPolicy(image, static)
    for name, pid in partitions:
        topic = image.topic(name)
        part = None if topic is None else topic.partitions.get(pid)
        if part is None:
            results[(name, pid)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            continue
        error, change = _elect_one(image, topic.topic_id, pid, part, election_type,
                                   policy(name)[0])
        if change is not None:
            records.append(change)
        if explicit or error != ErrorCode.ELECTION_NOT_NEEDED:
            results[(name, pid)] = error
    return records, results


def _elect_one(image, topic_id: uuid.UUID, pid, part, election_type, min_isr: int):
    if election_type == ElectionType.PREFERRED:
        if part.leader == part.preferred_leader:
            return ErrorCode.ELECTION_NOT_NEEDED, None
        election = Election.PREFERRED
    else:
        if part.leader != -1 and image.is_active(part.leader):
            return ErrorCode.ELECTION_NOT_NEEDED, None
        election = Election.UNCLEAN  # explicitly requested: allowed whatever the topic says
    change = build_change(topic_id, pid, part, is_acceptable=image.is_active, min_isr=min_isr,
                          elr_enabled=image.elr_enabled(), election=election)
    if election_type == ElectionType.PREFERRED:
        if change is None or change.leader != part.preferred_leader:
            return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, None
        return ErrorCode.NONE, change
    if change is None or change.leader in (NO_LEADER_CHANGE, -1):
        return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, None
    return ErrorCode.NONE, change


def rebalance_preferred_leaders(image: MetadataImage, *,
                                limit: int = MAX_PARTITION_CHANGES_PER_BATCH,
                                static: Mapping[str, str] | None = None,
                                ) -> tuple[list[PartitionChange], bool]:
    """Move leadership back to preferred replicas, at most `limit` moves per call.
    Returns (records, more_to_do) — reschedule soon if more_to_do, as Kafka does."""
    out: list[PartitionChange] = []
    policy = TopicPolicy(image, static)
    for topic, pid, part in image.iter_partitions():
        if part.leader == part.preferred_leader or not image.is_active(part.preferred_leader):
            continue
        if part.preferred_leader not in part.isr:
            continue
        change = build_change(topic.topic_id, pid, part, is_acceptable=image.is_active,
                              min_isr=policy(topic.name)[0], elr_enabled=image.elr_enabled(),
                              election=Election.PREFERRED)
        if change is not None and change.leader == part.preferred_leader:
            if len(out) == limit:
                return out, True
            out.append(change)
    return out, False
