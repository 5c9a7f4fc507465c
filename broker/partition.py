"""One partition replica hosted by this broker: its log, role and leader epoch.

The replica manager creates a `Partition` when metadata makes this broker a
replica and updates it on every leadership change. The high watermark lives
here because replication will compute it (HW = min end offset over the ISR);
with only the leader in the ISR it is the log end after each append, which is
what `maybe_advance_high_watermark` does until follower tracking arrives.
"""
from __future__ import annotations

import enum
import uuid
from typing import Callable

from metadata.partition import PartitionRegistration
from storage.log import AppendInfo, FetchData, PartitionLog

__all__ = ["Partition", "Role"]


class Role(enum.Enum):
    LEADER = "leader"
    FOLLOWER = "follower"


class Partition:
    def __init__(self, topic: str, index: int, topic_id: uuid.UUID, log: PartitionLog,
                 registration: PartitionRegistration, local_id: int,
                 on_change: Callable[[tuple[str, int]], None] | None = None):
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.local_id = local_id
        self.registration = registration
        self._on_change = on_change
        self.role = Role.FOLLOWER
        self._set_role(registration)

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.index)

    @property
    def leader_epoch(self) -> int:
        return self.registration.leader_epoch

    @property
    def leader_id(self) -> int:
        return self.registration.leader

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

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
        # No transactions yet: nothing is ever open, so the LSO is the HW.
        return self.high_watermark

    # -- role changes (from metadata) --------------------------------------------
    def update(self, registration: PartitionRegistration) -> None:
        self.registration = registration
        self._set_role(registration)
        self._notify()

    def _set_role(self, registration: PartitionRegistration) -> None:
        if registration.leader == self.local_id:
            self.role = Role.LEADER
            # Kafka's makeLeader: the new epoch starts at the current log end, so
            # OffsetForLeaderEpoch answers followers even before the first append.
            self.log.epoch_cache.assign(registration.leader_epoch, self.log.log_end_offset)
            self.maybe_advance_high_watermark()
        else:
            self.role = Role.FOLLOWER

    # -- leader data path ----------------------------------------------------------
    def append_as_leader(self, batch, now_ms: int) -> AppendInfo:
        """Assign offsets and the leader epoch; the log validates CRC and sizes."""
        info = self.log.append_as_leader(batch, self.leader_epoch, now_ms=now_ms)
        self.maybe_advance_high_watermark()
        self._notify()
        return info

    def maybe_advance_high_watermark(self) -> bool:
        """HW = min log end over the ISR. Only the leader's own end is tracked so far, so the
        HW may advance only when the ISR is just this broker (RF=1 or shrunk to the leader)."""
        if self.registration.isr and tuple(self.registration.isr) != (self.local_id,):
            return False
        before = self.log.high_watermark
        return self.log.update_high_watermark(self.log.log_end_offset) > before

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None, min_one_batch: bool) -> FetchData:
        return self.log.read(offset, max_bytes, max_offset=max_offset, min_one_batch=min_one_batch)

    def _notify(self) -> None:
        if self._on_change is not None:
            self._on_change(self.key)

    def __repr__(self) -> str:
        return (f"Partition({self.topic}-{self.index}, {self.role.value}, epoch={self.leader_epoch}, "
                f"hw={self.high_watermark}, leo={self.log_end_offset})")
