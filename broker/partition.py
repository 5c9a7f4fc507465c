"""One partition replica hosted by this broker: its log, role, leader epoch, ISR and HW.

The replica manager creates a `Partition` when metadata makes this broker a
replica and updates it on every change of its registration. As leader it
tracks each follower (broker.isr.FollowerState, fed by follower Fetches),
derives the high watermark from them (HW = min end offset over the maximal
ISR) and proposes ISR changes to the controller through the
AlterPartitionManager — one at a time, keeping the committed ISR for
min.insync.replicas until the controller answers. As follower it only takes
appends from the replica fetcher and the leader's HW.

Registrations are ordered by partition_epoch: an older one (metadata lagging
behind an AlterPartition answer we already applied) is ignored.
"""
from __future__ import annotations

import dataclasses
import enum
import logging
import uuid
from dataclasses import dataclass
from typing import Callable

from broker.isr import (DEFAULT_LAG_TIME_S, FollowerState, IsrState, high_watermark, may_join_isr,
                        out_of_sync_replicas)
from metadata.controller.alter_partition import AlterPartitionItem, AlterPartitionResult
from metadata.partition import RECOVERED, RECOVERING, PartitionRegistration
from storage.log import AppendInfo, FetchData, PartitionLog
from wire.error_codes import ErrorCode

__all__ = ["Partition", "Role", "ReplicationSettings"]

log = logging.getLogger(__name__)


class Role(enum.Enum):
    LEADER = "leader"
    FOLLOWER = "follower"


@dataclass
class ReplicationSettings:
    """What every partition of a broker shares: the clock, the lag limit, the ISR channel."""
    clock: Callable[[], float] = lambda: 0.0
    lag_time_s: float = DEFAULT_LAG_TIME_S  # replica.lag.time.max.ms
    alter_partitions: object | None = None  # broker.alter_partition_manager.AlterPartitionManager
    # May this broker join an ISR (registered, unfenced, not shutting down)? Kafka's
    # isReplicaIsrEligible; without it a fenced follower would be proposed on every fetch.
    is_isr_eligible: Callable[[int], bool] = lambda broker_id: True
    on_isr_change: Callable[[str], None] | None = None  # "shrink" / "expand" (metrics)
    # Where a leader's open transactions begin (broker.producer_state_hooks), None if none.
    first_unstable_offset: Callable[["Partition"], int | None] = lambda partition: None


# AlterPartition answers that say the request was not applied, checked against the current
# partition epoch (Kafka: OPERATION_NOT_ATTEMPTED, INELIGIBLE_REPLICA; ours also INVALID_REQUEST).
_NOT_APPLIED = frozenset({ErrorCode.OPERATION_NOT_ATTEMPTED, ErrorCode.INELIGIBLE_REPLICA, ErrorCode.INVALID_REQUEST})


class Partition:
    def __init__(self, topic: str, index: int, topic_id: uuid.UUID, log: PartitionLog,
                 registration: PartitionRegistration, local_id: int,
                 on_change: Callable[[tuple[str, int]], None] | None = None,
                 replication: ReplicationSettings | None = None, hw_min_isr: int = 1):
        self.topic = topic
        self.index = index
        self.key = (topic, index)  # what the purgatory and the replica manager file it under
        self.topic_id = topic_id
        self.log = log
        self.local_id = local_id
        self.registration = registration
        self._on_change = on_change
        self.replication = replication or ReplicationSettings()
        self.role = Role.FOLLOWER
        self.followers: dict[int, FollowerState] = {}
        self.isr_state = IsrState(registration.isr)
        self.leader_epoch_start = 0
        self.isr_shrinks = 0
        self.isr_expands = 0
        # With eligible leader replicas (KIP-966) the HW does not move while the committed ISR
        # is below min(min.insync.replicas, RF): a replica that left the ISR then (it joins the
        # ELR and may be elected) holds everything below the HW. Kept by the replica manager.
        self.hw_min_isr = hw_min_isr
        self._set_role(registration, previous=None)

    @property
    def registration(self) -> PartitionRegistration:
        return self._registration

    @registration.setter
    def registration(self, registration: PartitionRegistration) -> None:
        self._registration = registration
        # Plain attributes: read on every fetch, re-read and change notification.
        self.leader_epoch = registration.leader_epoch
        self.leader_id = registration.leader

    @property
    def role(self) -> Role:
        return self._role

    @role.setter
    def role(self, role: Role) -> None:
        self._role = role
        self.is_leader = role is Role.LEADER  # a plain attribute: read on every fetch and change

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """The HW, or below it the first offset of a transaction still open (read_committed's bound)."""
        hw = self.log.high_watermark
        if not self.is_leader:
            return hw
        first = self.replication.first_unstable_offset(self)
        return hw if first is None else min(hw, first)

    @property
    def isr(self) -> tuple[int, ...]:
        """The committed ISR (what min.insync.replicas counts)."""
        return self.isr_state.isr

    @property
    def under_replicated(self) -> bool:
        return self.is_leader and len(self.isr) < len(self.registration.replicas)

    # -- role changes (from metadata) --------------------------------------------
    def update(self, registration: PartitionRegistration) -> None:
        if registration.partition_epoch < self.registration.partition_epoch:
            return  # older than an AlterPartition answer already applied
        if registration == self.registration:
            return  # the metadata confirming an answer we applied: keep any newer proposal
        previous = self.registration
        self.registration = registration
        self._set_role(registration, previous=previous)
        self._notify()

    def _set_role(self, registration: PartitionRegistration, previous) -> None:
        now = self.replication.clock()
        self.isr_state = IsrState(registration.isr)  # a pending change is superseded
        if registration.leader != self.local_id:
            if previous is None or (previous.leader, previous.leader_epoch) != (registration.leader,
                                                                              registration.leader_epoch):
                leader = "no leader" if registration.leader < 0 else f"following {registration.leader}"
                log.info("%s-%d: %s at leader epoch %d", self.topic, self.index, leader, registration.leader_epoch)
            self.role = Role.FOLLOWER
            self.followers = {}
            return
        new_epoch = (self.role is not Role.LEADER or previous is None
                     or previous.leader_epoch != registration.leader_epoch)
        self.role = Role.LEADER
        if new_epoch:
            # Kafka's makeLeader: the new epoch starts at the current log end, so
            # OffsetForLeaderEpoch answers followers even before the first append;
            # followers start unknown (they block the HW until they fetch) and ISR
            # members get a full lag period to do so.
            self.log.epoch_cache.assign(registration.leader_epoch, self.log.log_end_offset)
            self.leader_epoch_start = self.log.log_end_offset
            self.followers = {r: FollowerState.fresh(r, in_isr=r in registration.isr, now=now)
                              for r in registration.replicas if r != self.local_id}
            log.info("%s-%d: leading at leader epoch %d from offset %d, ISR %s", self.topic, self.index,
                     registration.leader_epoch, self.leader_epoch_start, list(registration.isr))
        else:
            for r in registration.replicas:  # a reassignment may add replicas
                if r != self.local_id and r not in self.followers:
                    self.followers[r] = FollowerState.fresh(r, in_isr=False, now=now)
            for r in [r for r in self.followers if r not in registration.replicas]:
                del self.followers[r]
        if registration.leader_recovery_state == RECOVERING:
            # KIP-704: elected uncleanly; our log is now the truth, say so to the controller.
            self._propose(self.isr_state.shrink(()), recovery=RECOVERED)
        self.maybe_advance_high_watermark()

    # -- leader data path ----------------------------------------------------------
    def append_as_leader(self, batch, now_ms: int) -> AppendInfo:
        """Assign offsets and the leader epoch; the log validates CRC and sizes."""
        info = self.log.append_as_leader(batch, self.leader_epoch, now_ms=now_ms)
        self.maybe_advance_high_watermark()
        self._notify()
        return info

    def on_follower_fetch(self, replica_id: int, fetch_offset: int, *, record: bool = True,
                          log_start_offset: int = -1) -> bool:
        """A follower fetched at `fetch_offset` with its log starting at `log_start_offset`;
        False if it is not a replica of ours.

        Only a fetch's first read is recorded (`record`): a parked fetch re-read after an
        append says nothing new about the follower, which may have stopped since it sent it."""
        state = self.followers.get(replica_id)
        if not self.is_leader or state is None:
            return False
        if not record:
            return True
        if log_start_offset >= 0 and log_start_offset != state.log_start_offset:
            state.log_start_offset = log_start_offset
            self._notify()  # a DeleteRecords may be waiting for the low watermark
        state.on_fetch(fetch_offset, self.log.log_end_offset, self.replication.clock())
        self._maybe_expand_isr(replica_id, state)
        self.maybe_advance_high_watermark()
        return True

    def on_follower_connection_closed(self, replica_id: int) -> list[int]:
        """The follower's fetch connection closed (its process is likely gone): drop it from
        the ISR now rather than after the lag time; a fetch from it undoes this."""
        state = self.followers.get(replica_id)
        if not self.is_leader or state is None:
            return []
        state.connection_closed = True
        return self.maybe_shrink_isr()

    def maybe_advance_high_watermark(self) -> bool:
        log = self.log
        before = log.high_watermark
        if before >= log.log_end_offset:
            return False  # at the log end already (an idle partition's every follower fetch)
        if not self.is_leader or len(self.isr_state.isr) < self.hw_min_isr:
            return False
        eligible = self.replication.is_isr_eligible
        waiting = [r for r in self._registration.replicas
                   if r not in self.isr_state.maximal_isr and r != self.local_id and eligible(r)]
        target = high_watermark(before, self.log.log_end_offset, self.followers,
                                self.isr_state.maximal_isr, self.replication.clock(),
                                self.replication.lag_time_s, waiting)
        if self.log.update_high_watermark(target) > before:
            self._notify()
            return True
        return False

    def low_watermark(self) -> int:
        """Kafka's lowWatermarkIfLeader: the lowest log start offset of this leader and of
        its followers on live brokers (-1 for one that has not said yet)."""
        eligible = self.replication.is_isr_eligible
        return min([self.log.log_start_offset] + [f.log_start_offset for r, f in self.followers.items()
                                                  if eligible(r)])

    def check_enough_replicas(self, required_offset: int, min_isr: int) -> tuple[bool, int]:
        """acks=all (Kafka's checkEnoughReplicasReachOffset): (done, error code)."""
        if not self.is_leader:
            return True, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.high_watermark < required_offset:
            return False, ErrorCode.NONE
        if len(self.isr_state.maximal_isr) < min_isr:
            return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return True, ErrorCode.NONE

    # -- ISR changes -----------------------------------------------------------------
    def maybe_shrink_isr(self) -> list[int]:
        """Drop ISR members that fell behind for longer than the lag time (Kafka's
        isr-expiration task); returns the replicas proposed for removal."""
        if not self.is_leader or self.isr_state.inflight:
            return []
        if self.registration.leader_recovery_state == RECOVERING:
            self._propose(self.isr_state.shrink(()), recovery=RECOVERED)  # the first attempt failed
            return []
        leaving = out_of_sync_replicas(self.isr_state.isr, self.local_id, self.followers,
                                       self.log.log_end_offset, self.replication.clock(),
                                       self.replication.lag_time_s)
        if leaving and self._propose(self.isr_state.shrink(leaving)):
            log.info("%s-%d: shrinking ISR %s, out of sync %s (leo %d, hw %d)", self.topic, self.index,
                     list(self.isr), leaving, self.log_end_offset, self.high_watermark)
            self.isr_shrinks += 1
            self._count("shrink")
            return leaving
        return []

    def _maybe_expand_isr(self, replica_id: int, state: FollowerState) -> None:
        if self.isr_state.inflight or replica_id in self.isr_state.isr:
            return
        if self.registration.leader_recovery_state == RECOVERING:
            return  # a recovering leader cannot grow its ISR
        if not self.replication.is_isr_eligible(replica_id):
            return
        if may_join_isr(state, self.high_watermark, self.leader_epoch_start):
            if self._propose(self.isr_state.expand(replica_id)):
                log.info("%s-%d: expanding ISR %s with %d", self.topic, self.index, list(self.isr), replica_id)
                self.isr_expands += 1
                self._count("expand")

    def _count(self, kind: str) -> None:
        if self.replication.on_isr_change is not None:
            self.replication.on_isr_change(kind)

    def _propose(self, pending: IsrState, recovery: int = RECOVERED) -> bool:
        manager = self.replication.alter_partitions
        if manager is None:
            return False
        reg = self.registration
        item = AlterPartitionItem(self.topic_id, self.index, reg.leader_epoch, reg.partition_epoch,
                                  pending.proposed, None, recovery)
        if not manager.submit(item, lambda result: self._on_alter_result(pending, result)):
            return False
        self.isr_state = pending
        return True

    def _on_alter_result(self, sent: IsrState, result: AlterPartitionResult) -> None:
        if self.isr_state is not sent:
            return  # metadata superseded it meanwhile
        reg = self.registration
        if result.error in _NOT_APPLIED:
            # The controller checked our partition epoch and refused: no controller, past or
            # future, applies this request, so the committed ISR is safe to fall back to.
            log.info("%s-%d: ISR change %s refused: %s", self.topic, self.index, list(sent.proposed),
                     ErrorCode(result.error).name)
            self.isr_state = IsrState(reg.isr)
        elif (result.error != ErrorCode.NONE or result.leader_epoch != reg.leader_epoch
                or result.partition_epoch < reg.partition_epoch):
            # Outcome unknown (FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, ...): an earlier
            # attempt may have committed it before leadership moved on. Keep the pending state —
            # its maximal ISR still bounds the HW — until the metadata says what is true (Kafka's
            # handleAlterPartitionError). Reverting to a stale committed ISR let an isolated old
            # leader acknowledge acks=all writes without a member the controller had added
            # (simulation seed 115, 30 s: a lost write).
            log.info("%s-%d: ISR change %s not confirmed: %s; waiting for metadata", self.topic, self.index,
                     list(sent.proposed), ErrorCode(result.error).name)
            return
        else:
            self.registration = dataclasses.replace(
                reg, isr=tuple(result.isr), partition_epoch=result.partition_epoch,
                leader_recovery_state=result.leader_recovery_state)
            self.isr_state = IsrState(tuple(result.isr))
        self.maybe_advance_high_watermark()
        self._notify()

    # -- follower data path --------------------------------------------------------
    def append_as_follower(self, records) -> AppendInfo:
        info = self.log.append_as_follower(records)
        self._notify()
        return info

    def update_follower_high_watermark(self, leader_hw: int) -> None:
        """A follower's HW: the leader's, bounded by what we hold; never backward."""
        if leader_hw > self.log.high_watermark:
            self.log.update_high_watermark(min(leader_hw, self.log.log_end_offset))

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None, min_one_batch: bool) -> FetchData:
        return self.log.read(offset, max_bytes, max_offset=max_offset, min_one_batch=min_one_batch)

    def _notify(self) -> None:
        if self._on_change is not None:
            self._on_change(self.key)

    def __repr__(self) -> str:
        return (f"Partition({self.topic}-{self.index}, {self.role.value}, epoch={self.leader_epoch}, "
                f"isr={list(self.isr)}, hw={self.high_watermark}, leo={self.log_end_offset})")
