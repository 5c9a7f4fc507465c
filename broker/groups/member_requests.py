"""SyncGroup, Heartbeat and LeaveGroup: what a joined member sends.

Checks run in Kafka's order: dead group, fenced static member, unknown
member, wrong generation, then the state. A mixin of GroupCoordinator.
"""
from __future__ import annotations

from typing import Hashable, Iterable

from broker.groups.append_errors import store_group_error
from broker.groups.group import ClassicGroup, GroupState
from broker.groups.records import group_metadata_record
from broker.groups.results import HeartbeatResult, LeaveResult, MemberLeaveResult, Output, SyncResult
from broker.groups.timers import Now
from wire.error_codes import ErrorCode

__all__ = ["MemberRequestOps"]

S = GroupState
E = ErrorCode


class MemberRequestOps:
    def _member_error(self, group: ClassicGroup | None, member_id: str, instance_id: str | None,
                      generation_id: int) -> ErrorCode:
        if group is None:
            return E.UNKNOWN_MEMBER_ID
        if group.state == S.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        error = group.validate_member(member_id, instance_id)
        if error != E.NONE:
            return error
        if generation_id != group.generation:
            return E.ILLEGAL_GENERATION
        return E.NONE

    # ------------------------------------------------------------------ SyncGroup

    def sync(self, token: Hashable, group_id: str, *, generation_id: int, member_id: str,
             assignments: dict[str, bytes] | Iterable[tuple[str, bytes]] = (),
             group_instance_id: str | None = None, now: Now) -> Output:
        """SyncGroup. The leader passes every member's assignment; the answer is held until stored."""
        out = Output()
        group = self.groups.get(group_id)
        error = self.route_error(group_id)
        if error == E.NONE:
            error = self._member_error(group, member_id, group_instance_id, generation_id)
        if error == E.NONE and group.state == S.PREPARING_REBALANCE:
            error = E.REBALANCE_IN_PROGRESS
        if error != E.NONE:
            out.complete(token, SyncResult(error))
            return out
        member = group.members[member_id]
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self.timers.cancel(("sync", group_id))
        if group.state == S.STABLE:
            self._schedule_heartbeat(group, member, now)
            out.complete(token, SyncResult(E.NONE, member.assignment, group.protocol_type, group.protocol_name))
            return out
        # CompletingRebalance: hold the answer until the leader's assignment is stored.
        if member.sync_waiter is not None:
            out.complete(member.sync_waiter, SyncResult(E.REBALANCE_IN_PROGRESS))
        member.sync_waiter = token
        if member_id == group.leader_id:
            given = dict((mid, bytes(a)) for mid, a in (assignments.items() if isinstance(assignments, dict)
                                                       else assignments))
            assignment = {mid: given.get(mid, b"") for mid in group.members}
            generation = group.generation

            def stored(error: ErrorCode, out: Output, now: Now) -> None:
                if group.state != S.COMPLETING_REBALANCE or group.generation != generation \
                        or self.groups.get(group_id) is not group:
                    return  # a newer rebalance took over and already answered the waiters
                if error != E.NONE:
                    self._fail_sync_waiters(group, store_group_error(error), out)
                    self._prepare_rebalance(group, out, now)
                    return
                for m in group.members.values():
                    m.assignment = assignment.get(m.member_id, b"")
                    if m.sync_waiter is not None:
                        out.complete(m.sync_waiter, SyncResult(E.NONE, m.assignment, group.protocol_type,
                                                               group.protocol_name))
                        m.sync_waiter = None
                group.transition(S.STABLE, now.wall_ms)

            record = group_metadata_record(group_id, group.to_record_value(assignment))
            self._append(self.partition_for(group_id), [record], stored, out)
        return out

    # ------------------------------------------------------------------ Heartbeat

    def heartbeat(self, group_id: str, *, generation_id: int, member_id: str,
                  group_instance_id: str | None = None, now: Now) -> HeartbeatResult:
        group = self.groups.get(group_id)
        error = self.route_error(group_id)
        if error == E.NONE:
            error = self._member_error(group, member_id, group_instance_id, generation_id)
        if error != E.NONE:
            return HeartbeatResult(error)
        self._schedule_heartbeat(group, group.members[member_id], now)
        if group.state == S.PREPARING_REBALANCE:
            return HeartbeatResult(E.REBALANCE_IN_PROGRESS)  # rejoin now
        return HeartbeatResult(E.NONE)

    # ------------------------------------------------------------------ LeaveGroup

    def leave(self, token: Hashable, group_id: str, members: Iterable[tuple[str, str | None]], *,
              now: Now) -> Output:
        """LeaveGroup for (member_id, group_instance_id) pairs, each answered on its own (Kafka's
        handleLeaveGroup). v0-2 send one pair without an instance id; v3+ a batch, where member
        id "" with an instance id is an admin removing that static member, whatever its member id.
        """
        out = Output()
        members = list(members)
        error = self.route_error(group_id)
        group = self.groups.get(group_id)
        if error == E.NONE and group is not None and group.state == S.DEAD:
            error = E.COORDINATOR_NOT_AVAILABLE
        if error != E.NONE:
            out.complete(token, LeaveResult(error))
            return out
        results = []
        for member_id, instance_id in members:
            member_error = E.UNKNOWN_MEMBER_ID if group is None else \
                self._leave_one(group, member_id, instance_id, out, now)
            results.append(MemberLeaveResult(member_id, instance_id, member_error))
        out.complete(token, LeaveResult(E.NONE, tuple(results)))
        return out

    def _leave_one(self, group: ClassicGroup, member_id: str, instance_id: str | None,
                   out: Output, now: Now) -> ErrorCode:
        if member_id == "":
            # Removal by instance id alone (KIP-345 admin removal): whoever holds it now.
            known = group.static_members.get(instance_id) if instance_id is not None else None
            if known is None:
                return E.UNKNOWN_MEMBER_ID
            member_id = known
        elif member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self.timers.cancel(("pending", group.group_id, member_id))
            self._maybe_complete_join(group, out, now)
            return E.NONE
        else:
            error = group.validate_member(member_id, instance_id)
            if error != E.NONE:
                return error
        self._remove_member_and_update(group, member_id, out, now)
        return E.NONE
