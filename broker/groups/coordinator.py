"""The group coordinator core: sans-IO, one instance per broker.

It owns the groups of the `__consumer_offsets` partitions this broker leads.
Every call takes `now` (timers.Now: session, rebalance and check timers on its
monotonic clock, commit and state timestamps on its wall clock, as Kafka) and
returns results and effects (see results.py). The driver:

    on becoming leader of offsets partition p:  begin_loading(p); read the log;
                                                load_partition(p, records, now)
    on losing it:                               carry out unload_partition(p, now)
    per request:                                carry out coordinator.<api>(...)
    when an append is committed or failed:      carry out append_done(append_id, error, now)
    at next_deadline():                         carry out tick(now)

Membership (join/sync/heartbeat/leave) lives in membership.py, offsets in
offset_ops.py, transactional offsets in txn_offsets.py, DescribeGroups/ListGroups/DeleteGroups in group_admin.py.
"""
from __future__ import annotations

import enum
from typing import Callable, Iterable

from broker.groups.config import GroupConfig
from broker.groups.group import ClassicGroup, GroupState
from broker.groups.group_admin import GroupAdminOps
from broker.groups.hashing import partition_for_group
from broker.groups.loader import replay
from broker.groups.member_requests import MemberRequestOps
from broker.groups.membership import MembershipOps
from broker.groups.offset_ops import OffsetOps
from broker.groups.results import JoinResult, Output, PendingAppend, Record, SyncResult
from broker.groups.timers import KeyedTimers, Now
from broker.groups.txn_offsets import TxnOffsetOps
from wire.error_codes import ErrorCode

__all__ = ["GroupCoordinator", "PartitionStatus"]

AppendCallback = Callable[[ErrorCode, Output, Now], None]
_EXPIRY_TIMER = ("expire_offsets",)


class PartitionStatus(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"


class GroupCoordinator(MembershipOps, MemberRequestOps, OffsetOps, TxnOffsetOps, GroupAdminOps):
    def __init__(self, config: GroupConfig | None = None, *, new_uuid: Callable[[], object]):
        self.config = config or GroupConfig()
        self.new_uuid = new_uuid  # env.uuid: member ids are "<client or instance id>-<uuid>"
        self.groups: dict[str, ClassicGroup] = {}
        self.partitions: dict[int, PartitionStatus] = {}
        self.timers = KeyedTimers()
        self._appends: dict[int, tuple[int, AppendCallback]] = {}
        self._next_append_id = 1
        self.txn_offsets = {}  # TxnOffsetCommit offsets waiting for their transaction's marker

    # ------------------------------------------------------------------ routing

    def partition_for(self, group_id: str) -> int:
        return partition_for_group(group_id, self.config.num_partitions)

    def route_error(self, group_id: str, *, allow_empty_id: bool = False) -> ErrorCode:
        """Why this broker cannot serve `group_id` now (NONE if it can)."""
        if not group_id and not allow_empty_id:
            return ErrorCode.INVALID_GROUP_ID
        status = self.partitions.get(self.partition_for(group_id))
        if status is None:
            return ErrorCode.NOT_COORDINATOR
        if status is PartitionStatus.LOADING:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE

    # ------------------------------------------------------------------ appends

    def _append(self, partition: int, records: list[Record], callback: AppendCallback, out: Output, *,
                producer_id: int = -1, producer_epoch: int = -1) -> None:
        append_id = self._next_append_id
        self._next_append_id += 1
        self._appends[append_id] = (partition, callback)
        out.appends.append(PendingAppend(append_id, partition, records, producer_id, producer_epoch))

    def append_done(self, append_id: int, error: ErrorCode, now: Now) -> Output:
        """The driver's append `append_id` is committed (error NONE) or failed."""
        out = Output()
        entry = self._appends.pop(append_id, None)
        if entry is not None:
            entry[1](ErrorCode(error), out, now)
        return out

    @property
    def pending_appends(self) -> list[int]:
        return sorted(self._appends)

    # ------------------------------------------------------------------ loading

    def begin_loading(self, partition: int) -> None:
        """This broker now leads `partition`; requests for its groups wait for the load."""
        self.partitions[partition] = PartitionStatus.LOADING

    def load_partition(self, partition: int, records: Iterable[Record], now: Now,
                       on_skip: Callable[[int, str], None] | None = None) -> None:
        """Rebuild the partition's groups and offsets from its records (key, value), oldest first.

        A record that does not decode is left out and reported to `on_skip(position, reason)`.
        """
        self.partitions[partition] = PartitionStatus.LOADING
        loaded = replay(records, now.wall_ms, on_skip)
        for group_id in sorted(loaded):
            if self.partition_for(group_id) != partition:
                continue  # a record in the wrong partition: not ours to serve
            group = loaded[group_id]
            self.groups[group_id] = group
            for member_id, member in group.members.items():
                self.timers.schedule(("heartbeat", group_id, member_id), now, member.session_timeout_ms)
        self.partitions[partition] = PartitionStatus.ACTIVE
        if _EXPIRY_TIMER not in self.timers:
            self.timers.schedule(_EXPIRY_TIMER, now, self.config.offsets_retention_check_interval_ms)

    def unload_partition(self, partition: int, now: Now) -> Output:
        """Leadership of `partition` moved away: drop its groups, fail what they hold."""
        out = Output()
        self.partitions.pop(partition, None)
        self.drop_pending_transactions(partition)
        for group_id in sorted(self.groups):
            if self.partition_for(group_id) != partition:
                continue
            group = self.groups.pop(group_id)
            for member in group.members.values():
                if member.join_waiter is not None:
                    out.complete(member.join_waiter, JoinResult(ErrorCode.NOT_COORDINATOR, member_id=member.member_id))
                if member.sync_waiter is not None:
                    out.complete(member.sync_waiter, SyncResult(ErrorCode.NOT_COORDINATOR))
                member.join_waiter = member.sync_waiter = None
                self.timers.cancel(("heartbeat", group_id, member.member_id))
            for member_id in group.pending_members:
                self.timers.cancel(("pending", group_id, member_id))
            self.timers.cancel(("join", group_id))
            self.timers.cancel(("sync", group_id))
            group.state = GroupState.DEAD
        for append_id in sorted(self._appends):
            if self._appends[append_id][0] == partition:
                out.extend(self.append_done(append_id, ErrorCode.NOT_LEADER_OR_FOLLOWER, now))
        if not self.partitions:
            self.timers.cancel(_EXPIRY_TIMER)
        return out

    # ------------------------------------------------------------------ time

    def next_deadline(self) -> int | None:
        """The earliest timer (monotonic ms), or None."""
        return self.timers.next_deadline()

    def tick(self, now: Now) -> Output:
        out = Output()
        while (key := self.timers.pop_due(now)) is not None:
            kind = key[0]
            if kind == "heartbeat":
                self._on_heartbeat_expired(key[1], key[2], out, now)
            elif kind == "pending":
                self._on_pending_member_expired(key[1], key[2], out, now)
            elif kind == "join":
                self._on_join_timer(key[1], out, now)
            elif kind == "sync":
                self._on_sync_timer(key[1], out, now)
            elif kind == "expire_offsets":
                self.expire_offsets(out, now)
                self.timers.schedule(_EXPIRY_TIMER, now, self.config.offsets_retention_check_interval_ms)
        return out
