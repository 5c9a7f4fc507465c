"""Partition leader election and the PartitionChange builder (Kafka's PartitionChangeBuilder).

Given a partition, a target ISR/replica set and which brokers may lead, `build_change`
chooses the leader and returns the PartitionChange that gets there (or None if nothing
changes). Election order, as in Kafka with KIP-966:

1. the current leader, if it is still a valid leader (ONLINE elections keep it);
   PREFERRED elections try the first replica before that;
2. the first acceptable replica (in replica order) in the target ISR;
3. if the ISR is empty and ELR is enabled: the first acceptable eligible leader replica,
   which then becomes the sole ISR member;
4. UNCLEAN elections only (the topic allows it): any acceptable replica, ISR = [it],
   leader_recovery_state = RECOVERING.

A reassignment in progress (adding/removing replicas, KIP-455) completes in any change whose
target ISR holds every adding replica (Kafka's maybeCompleteReassignment) and, without the
removed replicas, still min(min.insync.replicas, target size) members — stricter than Kafka's
KRaft controller, so that dropping in-sync replicas never leaves a target replica that fell
behind as the only hope of the partition. The replicas become the target, removed replicas
leave the ISR, and a leader that was removed gives way to the election above. Any change
that removes a replica from the assignment bumps the leader epoch, as in Kafka.

ELR maintenance (only when enabled): with |ISR| >= min.insync.replicas, ELR and
last-known-ELR are cleared; below it, replicas leaving the ISR join the ELR unless they
shut down uncleanly.
"""
from __future__ import annotations

import enum
import uuid
from typing import AbstractSet, Callable

from metadata.partition import RECOVERING, PartitionRegistration
from metadata.records import NO_LEADER, NO_LEADER_CHANGE, PartitionChange

__all__ = ["Election", "build_change"]


class Election(enum.Enum):
    ONLINE = "online"  # keep a valid leader, else elect a clean one
    PREFERRED = "preferred"  # move to the preferred (first) replica if it is valid
    UNCLEAN = "unclean"  # as ONLINE, then fall back to any live replica


def build_change(
    topic_id: uuid.UUID, partition_id: int, part: PartitionRegistration, *,
    is_acceptable: Callable[[int], bool], min_isr: int = 1, elr_enabled: bool = False,
    election: Election = Election.ONLINE, target_isr: tuple[int, ...] | None = None,
    target_replicas: tuple[int, ...] | None = None,
    unclean_shutdown: AbstractSet[int] = frozenset(),
    recovery_state: int | None = None,
    target_adding: tuple[int, ...] | None = None,
    target_removing: tuple[int, ...] | None = None,
) -> PartitionChange | None:
    replicas = part.replicas if target_replicas is None else target_replicas
    isr = part.isr if target_isr is None else target_isr
    adding = part.adding_replicas if target_adding is None else target_adding
    removing = part.removing_replicas if target_removing is None else target_removing
    if adding or removing:
        replicas, isr, adding, removing = _maybe_complete_reassignment(replicas, isr, adding, removing,
                                                                       min_isr)
    elr = tuple(r for r in part.eligible_leader_replicas
                if r in replicas and r not in isr and r not in unclean_shutdown)
    if not elr_enabled:
        elr = ()

    def valid(r: int) -> bool:
        if r == NO_LEADER or r not in replicas or not is_acceptable(r):
            return False
        return r in isr if isr or not elr_enabled else r in elr

    leader, unclean = _elect(part, replicas, election, valid, is_acceptable)
    new_recovery = part.leader_recovery_state if recovery_state is None else recovery_state
    if leader != NO_LEADER and leader not in isr:
        # Elected from the ELR, or uncleanly: it becomes the whole ISR.
        isr = (leader,)
        elr = tuple(r for r in elr if r != leader)
        if unclean:
            new_recovery = RECOVERING
    if leader == NO_LEADER and not elr_enabled and not isr and part.isr:
        # Without ELR the ISR never empties: the last member stays so that only it can
        # come back as a clean leader (Kafka keeps it too).
        isr = tuple(r for r in part.isr if r in replicas)[:1]
    last_known = part.last_known_elr if elr_enabled else ()
    if elr_enabled:
        elr, last_known = _maintain_elr(part, replicas, isr, elr, last_known, min_isr, unclean_shutdown)

    return _diff(topic_id, partition_id, part, leader=leader, isr=isr, replicas=replicas,
                 elr=elr, last_known=last_known, recovery=new_recovery, adding=adding,
                 removing=removing)


def _maybe_complete_reassignment(replicas, isr, adding, removing, min_isr):
    target = tuple(r for r in replicas if r not in removing)
    new_isr = tuple(r for r in isr if r not in removing)
    if (not new_isr or any(r not in new_isr for r in adding)
            or len(new_isr) < min(min_isr, len(target))):
        return replicas, isr, adding, removing
    return target, new_isr, (), ()


def _elect(part, replicas, election, valid, is_acceptable) -> tuple[int, bool]:
    if election == Election.PREFERRED and replicas and valid(replicas[0]):
        return replicas[0], False
    if valid(part.leader):
        return part.leader, False
    for r in replicas:
        if valid(r):
            return r, False
    if election == Election.UNCLEAN:
        for r in replicas:
            if is_acceptable(r):
                return r, True
    return NO_LEADER, False


def _maintain_elr(part, replicas, isr, elr, last_known, min_isr, unclean_shutdown):
    if len(isr) >= min_isr:
        return (), ()
    candidates = sorted(set(elr) | set(part.isr))
    new_elr = tuple(r for r in candidates
                    if r not in isr and r not in unclean_shutdown and r in replicas)
    # last-known-ELR remembers former members (even unclean ones) that are no longer ELR.
    known = sorted(set(last_known) | set(part.isr))
    new_last = tuple(r for r in known if r not in isr and r not in new_elr)
    return new_elr, new_last


def _diff(topic_id, partition_id, part, *, leader, isr, replicas, elr, last_known,
          recovery, adding, removing) -> PartitionChange | None:
    fields = {}
    if tuple(adding) != part.adding_replicas:
        fields["adding_replicas"] = tuple(adding)
    if tuple(removing) != part.removing_replicas:
        fields["removing_replicas"] = tuple(removing)
    if tuple(isr) != part.isr:
        fields["isr"] = tuple(isr)
    if tuple(replicas) != part.replicas:
        fields["replicas"] = tuple(replicas)
    if tuple(elr) != part.eligible_leader_replicas:
        fields["eligible_leader_replicas"] = tuple(elr)
    if tuple(last_known) != part.last_known_elr:
        fields["last_known_elr"] = tuple(last_known)
    if recovery != part.leader_recovery_state:
        fields["leader_recovery_state"] = recovery
    if leader != part.leader:
        fields["leader"] = leader
    elif any(r not in replicas for r in part.replicas):
        # A replica left the assignment: the same leader takes a new epoch (Kafka's
        # triggerLeaderEpochBumpIfNeeded), which fences the removed replica's fetches. Else a
        # replica removed and added back, still fetching with its old log before it learns of
        # the removal (and deletes that log), counts as in sync for records it is about to lose.
        fields["leader"] = leader
    if not fields:
        return None
    return PartitionChange(partition_id=partition_id, topic_id=topic_id,
                           leader=fields.pop("leader", NO_LEADER_CHANGE), **fields)

