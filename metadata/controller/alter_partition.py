"""AlterPartition: a partition leader asks the controller to change its ISR.

Fenced like Kafka: the sender's broker epoch must be current (STALE_BROKER_EPOCH), its
leader epoch must match (FENCED_LEADER_EPOCH) and the partition epoch must match
(INVALID_UPDATE_VERSION) — so an ISR change computed from stale state never lands. New ISR
members must be live replicas whose broker epoch matches the one the leader saw
(INELIGIBLE_REPLICA).
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Mapping, Sequence

from metadata.controller.election import Election, build_change
from metadata.controller.replication import topic_policy
from metadata.image import MetadataImage
from metadata.partition import RECOVERED, RECOVERING
from metadata.records import NO_LEADER, PartitionChange
from wire.error_codes import ErrorCode

__all__ = ["AlterPartitionItem", "AlterPartitionResult", "alter_partition"]


@dataclass(frozen=True, slots=True)
class AlterPartitionItem:
    topic_id: uuid.UUID
    partition_id: int
    leader_epoch: int
    partition_epoch: int
    new_isr: Sequence[int]
    new_isr_broker_epochs: Sequence[int] | None = None  # -1 entries = not checked
    leader_recovery_state: int = RECOVERED


@dataclass(frozen=True, slots=True)
class AlterPartitionResult:
    topic_id: uuid.UUID
    partition_id: int
    error: ErrorCode
    leader: int = NO_LEADER
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1
    leader_recovery_state: int = RECOVERED


def alter_partition(image: MetadataImage, broker_id: int, broker_epoch: int,
                    items: Sequence[AlterPartitionItem], *,
                    static: Mapping[str, str] | None = None,
                    ) -> tuple[list[PartitionChange], ErrorCode, list[AlterPartitionResult]]:
    """Returns (records, top-level error, per-partition results)."""
    reg = image.brokers.get(broker_id)
    if reg is None or reg.epoch != broker_epoch:
        return [], ErrorCode.STALE_BROKER_EPOCH, []
    records: list[PartitionChange] = []
    results = []
    for item in items:
        change, result = _alter_one(image, broker_id, item, static)
        if change is not None:
            records.append(change)
        results.append(result)
    return records, ErrorCode.NONE, results


def _alter_one(image, broker_id, item: AlterPartitionItem, static):
    def fail(code: ErrorCode):
        return None, AlterPartitionResult(item.topic_id, item.partition_id, code)

    topic = image.topics_by_id.get(item.topic_id)
    if topic is None:
        return fail(ErrorCode.UNKNOWN_TOPIC_ID)
    part = topic.partitions.get(item.partition_id)
    if part is None:
        return fail(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if item.leader_epoch != part.leader_epoch:
        return fail(ErrorCode.FENCED_LEADER_EPOCH)
    if broker_id != part.leader:
        return fail(ErrorCode.INVALID_REQUEST)  # only the leader changes the ISR
    if item.partition_epoch != part.partition_epoch:
        return fail(ErrorCode.INVALID_UPDATE_VERSION)
    new_isr = tuple(item.new_isr)
    if (len(set(new_isr)) != len(new_isr) or any(r not in part.replicas for r in new_isr)
            or broker_id not in new_isr):
        return fail(ErrorCode.INVALID_REQUEST)
    if item.leader_recovery_state not in (RECOVERED, RECOVERING) or (
            part.leader_recovery_state == RECOVERED
            and item.leader_recovery_state == RECOVERING):
        return fail(ErrorCode.INVALID_REQUEST)  # RECOVERED never goes back to RECOVERING
    if item.leader_recovery_state == RECOVERING and len(new_isr) > 1:
        return fail(ErrorCode.INVALID_REQUEST)  # a recovering leader cannot grow its ISR
    epochs = list(item.new_isr_broker_epochs or [-1] * len(new_isr))
    if len(epochs) != len(new_isr):
        return fail(ErrorCode.INVALID_REQUEST)
    for replica, epoch in zip(new_isr, epochs):
        reg = image.brokers.get(replica)
        if replica in part.isr:
            continue  # already a member: only additions must be live
        if reg is None or not reg.active or (epoch != -1 and epoch != reg.epoch):
            return fail(ErrorCode.INELIGIBLE_REPLICA)
    min_isr, _ = topic_policy(image, topic.name, static)
    change = build_change(
        item.topic_id, item.partition_id, part, is_acceptable=image.is_active,
        min_isr=min_isr, elr_enabled=image.elr_enabled(), election=Election.ONLINE,
        target_isr=new_isr, recovery_state=item.leader_recovery_state)
    new = part if change is None else part.merge(change)
    error = ErrorCode.NONE
    if change is not None and change.leader not in (-2, broker_id):
        error = ErrorCode.NEW_LEADER_ELECTED  # the requester is no longer a valid leader
    return change, AlterPartitionResult(
        item.topic_id, item.partition_id, error, leader=new.leader,
        leader_epoch=new.leader_epoch, isr=new.isr, partition_epoch=new.partition_epoch,
        leader_recovery_state=new.leader_recovery_state)
