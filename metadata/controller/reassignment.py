"""Partition reassignment (KIP-455), decided on the active controller.

AlterPartitionReassignments sets a partition's target replicas: the controller writes the
replicas as target + the replicas being removed (in that order, so the target's first replica
is the preferred leader), with `adding_replicas` = target - current and `removing_replicas` =
current - target. Brokers open the adding replicas as followers; once the leader has taken
them into the ISR, the AlterPartition that does so completes the reassignment
(election.build_change): replicas = target, removed replicas leave the ISR and drop their
logs, and a removed leader is replaced. A target already covered by the ISR completes at
once (shrinking the replication factor).

A new target for a partition already being reassigned replaces the old one (KIP-455): it
starts from the replicas that hold the data (the original ones and adding ones already in
the ISR); adding replicas still catching up are dropped. Null replicas cancel: the adding replicas are dropped and the original
replicas restored (Kafka's PartitionReassignmentRevert); with no reassignment in progress
that is NO_REASSIGNMENT_IN_PROGRESS.

ListPartitionReassignments answers from an image: every partition with adding or removing
replicas.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from metadata.controller.election import Election, build_change
from metadata.controller.replication import topic_policy
from metadata.image import MetadataImage
from metadata.partition import PartitionRegistration
from metadata.records import PartitionChange
from wire.error_codes import ErrorCode

__all__ = ["ReassignmentResult", "OngoingReassignment", "alter_partition_reassignments",
           "list_partition_reassignments"]

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class ReassignmentResult:
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None


@dataclass(frozen=True, slots=True)
class OngoingReassignment:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


def alter_partition_reassignments(
    image: MetadataImage, wanted: Sequence[tuple[str, int, Sequence[int] | None]], *,
    static: Mapping[str, str] | None = None,
) -> tuple[list[PartitionChange], dict[TopicPartition, ReassignmentResult]]:
    """One change per partition whose reassignment starts, changes or is cancelled; a result
    for every (topic, partition, target replicas or None to cancel) asked for."""
    records: list[PartitionChange] = []
    results: dict[TopicPartition, ReassignmentResult] = {}
    for name, pid, target in wanted:
        topic = image.topic(name)
        part = None if topic is None else topic.partitions.get(pid)
        if part is None:
            results[(name, pid)] = ReassignmentResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                      "Unable to find partition")
            continue
        min_isr = topic_policy(image, name, static)[0]
        if target is None:
            error, change = _cancel(image, topic.topic_id, pid, part, min_isr, name, static)
        else:
            error, change = _reassign(image, topic.topic_id, pid, part, tuple(target), min_isr)
        results[(name, pid)] = error
        if change is not None:
            records.append(change)
    return records, results


def _reassign(image, topic_id, pid, part: PartitionRegistration, target: tuple[int, ...], min_isr):
    problem = _invalid_target(image, target)
    if problem is not None:
        return ReassignmentResult(ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem), None
    # Adding replicas of an earlier target that have not caught up are simply dropped; the
    # others hold the data and are removed like any current replica if the new target lacks them.
    current = tuple(r for r in part.replicas if r not in part.adding_replicas or r in part.isr)
    removing = tuple(r for r in current if r not in target)
    adding = tuple(r for r in target if r not in current)
    change = build_change(topic_id, pid, part, is_acceptable=image.is_active, min_isr=min_isr,
                          elr_enabled=image.elr_enabled(), election=Election.ONLINE,
                          target_replicas=target + removing, target_adding=adding,
                          target_removing=removing)
    return ReassignmentResult(), change


def _invalid_target(image: MetadataImage, target: tuple[int, ...]) -> str | None:
    if not target:
        return "The manual partition assignment includes an empty replica list."
    if len(set(target)) != len(target):
        return f"The manual partition assignment includes the replica more than once: {list(target)}."
    for r in target:
        if r < 0:
            return f"The manual partition assignment includes an invalid replica id {r}."
        if r not in image.brokers:
            return f"The manual partition assignment includes broker {r}, but no such broker is registered."
    return None


def _cancel(image, topic_id, pid, part: PartitionRegistration, min_isr, name, static):
    if not part.adding_replicas and not part.removing_replicas:
        return ReassignmentResult(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                                  "No ongoing reassignment for this partition."), None
    original = tuple(r for r in part.replicas if r not in part.adding_replicas)
    isr = tuple(r for r in part.isr if r not in part.adding_replicas)
    election = Election.ONLINE
    if not isr:  # only adding replicas were in sync: restoring the original needs an unclean leader
        if not topic_policy(image, name, static)[1]:
            return ReassignmentResult(ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                                      "Unable to revert partition assignment because it would "
                                      "require an unclean leader election."), None
        election = Election.UNCLEAN
    change = build_change(topic_id, pid, part, is_acceptable=image.is_active, min_isr=min_isr,
                          elr_enabled=image.elr_enabled(), election=election,
                          target_replicas=original, target_isr=isr, target_adding=(),
                          target_removing=())
    return ReassignmentResult(), change


def list_partition_reassignments(
    image: MetadataImage, wanted: Sequence[tuple[str, Sequence[int]]] | None = None,
) -> list[OngoingReassignment]:
    """Ongoing reassignments of the given topics' partitions, or of every partition."""
    out = []
    if wanted is None:
        keys = [(t.name, pid) for t, pid, _ in image.iter_partitions()]
    else:
        keys = [(name, pid) for name, pids in wanted for pid in pids]
    for name, pid in keys:
        topic = image.topic(name)
        part = None if topic is None else topic.partitions.get(pid)
        if part is not None and (part.adding_replicas or part.removing_replicas):
            out.append(OngoingReassignment(name, pid, part.replicas, part.adding_replicas,
                                           part.removing_replicas))
    return out
