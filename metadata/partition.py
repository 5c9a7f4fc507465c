"""One partition's replication state in the image, and how a PartitionChange merges into it."""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from metadata.records import NO_LEADER, NO_LEADER_CHANGE, Partition, PartitionChange

__all__ = ["PartitionRegistration", "RECOVERED", "RECOVERING"]

RECOVERED = 0
RECOVERING = 1  # leader was elected uncleanly and has not yet confirmed its log


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int = NO_LEADER
    leader_epoch: int = 0
    partition_epoch: int = 0
    leader_recovery_state: int = RECOVERED
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    eligible_leader_replicas: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()

    @classmethod
    def from_record(cls, rec: Partition) -> PartitionRegistration:
        return cls(
            replicas=rec.replicas, isr=rec.isr, leader=rec.leader, leader_epoch=rec.leader_epoch,
            partition_epoch=rec.partition_epoch, leader_recovery_state=rec.leader_recovery_state,
            removing_replicas=rec.removing_replicas, adding_replicas=rec.adding_replicas,
            eligible_leader_replicas=rec.eligible_leader_replicas,
            last_known_elr=rec.last_known_elr,
        )

    def to_record(self, topic_id: uuid.UUID, partition_id: int) -> Partition:
        return Partition(
            partition_id=partition_id, topic_id=topic_id, replicas=self.replicas, isr=self.isr,
            removing_replicas=self.removing_replicas, adding_replicas=self.adding_replicas,
            leader=self.leader, leader_recovery_state=self.leader_recovery_state,
            leader_epoch=self.leader_epoch, partition_epoch=self.partition_epoch,
            eligible_leader_replicas=self.eligible_leader_replicas,
            last_known_elr=self.last_known_elr,
        )

    @property
    def preferred_leader(self) -> int:
        return self.replicas[0] if self.replicas else NO_LEADER

    def has_leader(self) -> bool:
        return self.leader != NO_LEADER

    def merge(self, change: PartitionChange) -> PartitionRegistration:
        """Apply a change record, like Kafka's PartitionRegistration.merge: a leader field
        (even naming the same broker) bumps leader_epoch; every change bumps partition_epoch."""
        leader, leader_epoch = self.leader, self.leader_epoch
        if change.leader != NO_LEADER_CHANGE:
            leader, leader_epoch = change.leader, self.leader_epoch + 1
        return PartitionRegistration(
            replicas=_pick(change.replicas, self.replicas),
            isr=_pick(change.isr, self.isr),
            leader=leader,
            leader_epoch=leader_epoch,
            partition_epoch=self.partition_epoch + 1,
            leader_recovery_state=_pick(change.leader_recovery_state, self.leader_recovery_state),
            removing_replicas=_pick(change.removing_replicas, self.removing_replicas),
            adding_replicas=_pick(change.adding_replicas, self.adding_replicas),
            eligible_leader_replicas=_pick(
                change.eligible_leader_replicas, self.eligible_leader_replicas),
            last_known_elr=_pick(change.last_known_elr, self.last_known_elr),
        )


def _pick(new, old):
    return old if new is None else new
