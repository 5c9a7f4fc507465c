"""JoinGroup, SyncGroup, Heartbeat, LeaveGroup and the rebalance they drive.

Follows Kafka's classic protocol (GroupMetadataManager / ClassicGroup):
held JoinGroups complete when every known member has rejoined or the
rebalance timeout fires; the first rebalance of an empty group waits
group.initial.rebalance.delay.ms (extended while members keep arriving);
SyncGroups are held until the leader's assignment is stored. A mixin of
GroupCoordinator: it uses the coordinator's groups, timers, config and appends.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable

from broker.groups.append_errors import store_group_error
from broker.groups.group import ClassicGroup, GroupState
from broker.groups.member import Member, Protocol
from broker.groups.records import group_metadata_record
from broker.groups.results import JoinedMember, JoinResult, Output, SyncResult
from broker.groups.timers import Now
from wire.error_codes import ErrorCode

__all__ = ["MembershipOps"]

S = GroupState
E = ErrorCode
MEMBER_ID_PREFIX_MAX = 1000  # characters of the client (or instance) id a member id starts with


@dataclass(frozen=True, slots=True)
class _Join:
    token: Hashable
    member_id: str
    instance_id: str | None
    protocol_type: str
    protocols: list[Protocol]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str
    client_host: str
    require_known_member_id: bool


class MembershipOps:
    # ------------------------------------------------------------------ JoinGroup

    def join(self, token: Hashable, group_id: str, *, member_id: str, protocol_type: str,
             protocols: list[Protocol], session_timeout_ms: int, rebalance_timeout_ms: int = -1,
             group_instance_id: str | None = None, client_id: str = "", client_host: str = "",
             require_known_member_id: bool = True, now: Now) -> Output:
        """JoinGroup. `require_known_member_id` is true for request v4+ (KIP-394)."""
        out = Output()
        error = self.route_error(group_id)
        if error == E.NONE:
            if rebalance_timeout_ms < 0:  # JoinGroup v0 has none: Kafka uses the session timeout
                rebalance_timeout_ms = session_timeout_ms
            req = _Join(token, member_id, group_instance_id, protocol_type,
                        [(name, bytes(meta)) for name, meta in protocols], session_timeout_ms,
                        rebalance_timeout_ms, client_id, client_host, require_known_member_id)
            error = self._validate_join(group_id, req)
        if error != E.NONE:
            out.complete(token, JoinResult(error, member_id=member_id))
            return out
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ClassicGroup(group_id, now.wall_ms)
        if req.member_id == "":
            self._join_new_member(group, req, out, now)
        else:
            self._join_existing_member(group, req, out, now)
        return out

    def _validate_join(self, group_id: str, req: _Join) -> ErrorCode:
        cfg = self.config
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            return E.INVALID_SESSION_TIMEOUT
        if not req.protocol_type or not req.protocols:
            return E.INCONSISTENT_GROUP_PROTOCOL
        group = self.groups.get(group_id)
        if group is None:
            return E.UNKNOWN_MEMBER_ID if req.member_id else E.NONE
        if group.state == S.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE  # deleted concurrently; the client finds it again
        if not group.supports(req.protocol_type, [name for name, _ in req.protocols]):
            return E.INCONSISTENT_GROUP_PROTOCOL
        known = req.member_id in group.members or (
            req.instance_id is not None and req.instance_id in group.static_members)
        if not known and len(group.members) >= cfg.max_group_size:
            return E.GROUP_MAX_SIZE_REACHED
        return E.NONE

    def _join_new_member(self, group: ClassicGroup, req: _Join, out: Output, now: Now) -> None:
        prefix = req.instance_id if req.instance_id is not None else req.client_id
        # Member ids go back in int16-length strings: a 32 KB client id must not make them unsendable.
        new_id = f"{prefix[:MEMBER_ID_PREFIX_MAX]}-{self.new_uuid()}"
        if req.instance_id is not None:
            old_id = group.static_members.get(req.instance_id)
            if old_id is not None:
                self._replace_static_member(group, req, old_id, new_id, out, now)
            else:
                self._add_member_and_rebalance(group, req, new_id, out, now)
        elif req.require_known_member_id:
            # Hand out the id first; the member joins for real with it (KIP-394).
            group.pending_members.add(new_id)
            self.timers.schedule(("pending", group.group_id, new_id), now, req.session_timeout_ms)
            out.complete(req.token, JoinResult(E.MEMBER_ID_REQUIRED, member_id=new_id))
        else:
            self._add_member_and_rebalance(group, req, new_id, out, now)

    def _join_existing_member(self, group: ClassicGroup, req: _Join, out: Output, now: Now) -> None:
        mid = req.member_id
        if mid in group.pending_members and req.instance_id is None:  # pending ids are never static
            self.timers.cancel(("pending", group.group_id, mid))
            self._add_member_and_rebalance(group, req, mid, out, now)
            return
        error = group.validate_member(mid, req.instance_id)
        if error == E.NONE and group.is_in(S.EMPTY, S.DEAD):
            error = E.UNKNOWN_MEMBER_ID
        if error != E.NONE:
            out.complete(req.token, JoinResult(error, member_id=mid))
            return
        member = group.members[mid]
        unchanged = member.matches(req.protocols)
        if group.state == S.COMPLETING_REBALANCE and unchanged:
            # A retry of a join already answered: answer it again.
            out.complete(req.token, self._join_response(group, member))
        elif group.state == S.STABLE and unchanged and mid != group.leader_id:
            out.complete(req.token, self._join_response(group, member))
        else:
            # Changed metadata, or the leader asking for a new assignment: rebalance.
            self._update_member_and_rebalance(group, member, req, out, now)

    def _add_member_and_rebalance(self, group: ClassicGroup, req: _Join, member_id: str,
                                  out: Output, now: Now) -> None:
        member = Member(member_id, req.instance_id, req.client_id, req.client_host, req.rebalance_timeout_ms,
                        req.session_timeout_ms, req.protocol_type, req.protocols, join_waiter=req.token, is_new=True)
        if group.state == S.PREPARING_REBALANCE and group.generation == 0:
            group.new_member_added = True  # extends the initial delayed join
        group.add(member)
        # A new member that never completes the join expires on its own timer (KIP-394).
        self.timers.schedule(("heartbeat", group.group_id, member_id), now, self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance(group, out, now)
        self._maybe_complete_join(group, out, now)

    def _update_member_and_rebalance(self, group: ClassicGroup, member: Member, req: _Join,
                                     out: Output, now: Now) -> None:
        if member.join_waiter is not None:
            out.complete(member.join_waiter, JoinResult(E.REBALANCE_IN_PROGRESS, member_id=member.member_id))
        member.update(req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms)
        member.join_waiter = req.token
        self._maybe_prepare_rebalance(group, out, now)
        self._maybe_complete_join(group, out, now)

    def _replace_static_member(self, group: ClassicGroup, req: _Join, old_id: str, new_id: str,
                               out: Output, now: Now) -> None:
        """A known group.instance.id rejoined without its member id: it takes over under a new id."""
        old_leader = group.leader_id
        member = group.members[old_id]
        for waiter, result in ((member.join_waiter, JoinResult(E.FENCED_INSTANCE_ID, member_id=old_id)),
                               (member.sync_waiter, SyncResult(E.FENCED_INSTANCE_ID))):
            if waiter is not None:
                out.complete(waiter, result)
        member.join_waiter = member.sync_waiter = None
        old_protocols, old_timeouts = member.protocols, (member.rebalance_timeout_ms, member.session_timeout_ms)
        group.replace_static_member(req.instance_id, old_id, new_id)
        self.timers.cancel(("heartbeat", group.group_id, old_id))
        self._schedule_heartbeat(group, member, now)
        member.update(req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms)
        member.join_waiter = req.token
        if group.state == S.STABLE and group.select_protocol() == group.protocol_name:
            # Nothing changes for the others: persist the new member id, no rebalance.
            generation = group.generation

            def stored(error: ErrorCode, out: Output, now: Now) -> None:
                if group.generation != generation or group.members.get(new_id) is not member:
                    return
                token, member.join_waiter = member.join_waiter, None
                if error != E.NONE:
                    member.update(old_protocols, *old_timeouts)
                    group.replace_static_member(req.instance_id, new_id, old_id)
                    self.timers.cancel(("heartbeat", group.group_id, new_id))
                    self._schedule_heartbeat(group, member, now)
                    out.complete(token, JoinResult(store_group_error(error), generation, group.protocol_type,
                                                   group.protocol_name, old_leader or "", ""))
                else:
                    # The old leader id is returned so the rejoined member never runs an assignment
                    # a Stable group would not distribute.
                    out.complete(token, JoinResult(E.NONE, generation, group.protocol_type, group.protocol_name,
                                                   old_leader or "", new_id))

            record = group_metadata_record(group.group_id, group.to_record_value())
            self._append(self.partition_for(group.group_id), [record], stored, out)
        elif group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, out, now)
        else:
            self._maybe_complete_join(group, out, now)

    def _join_response(self, group: ClassicGroup, member: Member) -> JoinResult:
        members: tuple[JoinedMember, ...] = ()
        if member.member_id == group.leader_id:
            members = tuple(JoinedMember(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                            for m in group.members.values())
        return JoinResult(E.NONE, group.generation, group.protocol_type, group.protocol_name,
                          group.leader_id or "", member.member_id, members)

    # ------------------------------------------------------------------ rebalance

    def _maybe_prepare_rebalance(self, group: ClassicGroup, out: Output, now: Now) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, out, now)

    def _prepare_rebalance(self, group: ClassicGroup, out: Output, now: Now) -> None:
        if group.state == S.COMPLETING_REBALANCE:
            self._fail_sync_waiters(group, E.REBALANCE_IN_PROGRESS, out)
        self.timers.cancel(("sync", group.group_id))
        group.pending_sync.clear()
        if group.state == S.EMPTY:
            delay = self.config.initial_rebalance_delay_ms
            group.initial_join_remaining_ms = max(group.rebalance_timeout_ms() - delay, 0)
            group.new_member_added = False
            self.timers.schedule(("join", group.group_id), now, delay)
        else:
            group.initial_join_remaining_ms = None
            self.timers.schedule(("join", group.group_id), now, group.rebalance_timeout_ms())
        group.transition(S.PREPARING_REBALANCE, now.wall_ms)

    def _maybe_complete_join(self, group: ClassicGroup, out: Output, now: Now) -> None:
        if (group.state == S.PREPARING_REBALANCE and group.initial_join_remaining_ms is None
                and group.all_members_joined()):
            self._complete_join(group, out, now)

    def _on_join_timer(self, group_id: str, out: Output, now: Now) -> None:
        group = self.groups.get(group_id)
        if group is None or group.state != S.PREPARING_REBALANCE:
            return
        remaining = group.initial_join_remaining_ms
        if remaining is not None and group.new_member_added and remaining > 0:
            group.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, remaining)
            group.initial_join_remaining_ms = max(remaining - delay, 0)
            self.timers.schedule(("join", group_id), now, delay)
            return
        self._complete_join(group, out, now)

    def _complete_join(self, group: ClassicGroup, out: Output, now: Now) -> None:
        self.timers.cancel(("join", group.group_id))
        group.initial_join_remaining_ms = None
        group.new_member_added = False
        for member_id, member in list(group.members.items()):
            if not member.awaiting_join and not member.is_static:
                self._remove_member(group, member_id, out)
        leader = group.members.get(group.leader_id or "")
        if leader is None or not leader.awaiting_join:
            joined = [m for m in group.members.values() if m.awaiting_join]
            if joined:
                group.leader_id = joined[0].member_id
        group.init_next_generation(now.wall_ms)
        if group.state == S.EMPTY:
            record = group_metadata_record(group.group_id, group.to_record_value())
            self._append(self.partition_for(group.group_id), [record], lambda error, out, now: None, out)
            return
        for member in group.members.values():
            if member.join_waiter is not None:
                out.complete(member.join_waiter, self._join_response(group, member))
                member.join_waiter = None
            member.is_new = False
            self._schedule_heartbeat(group, member, now)
        self.timers.schedule(("sync", group.group_id), now, group.rebalance_timeout_ms())

    def _on_sync_timer(self, group_id: str, out: Output, now: Now) -> None:
        """Members that joined but never synced within the rebalance timeout are dropped."""
        group = self.groups.get(group_id)
        if group is None or group.state not in (S.COMPLETING_REBALANCE, S.STABLE):
            return
        for member_id in [m for m in group.members if m in group.pending_sync]:
            self._remove_member_and_update(group, member_id, out, now)

    def _fail_sync_waiters(self, group: ClassicGroup, error: ErrorCode, out: Output) -> None:
        for member in group.members.values():
            member.assignment = b""
            if member.sync_waiter is not None:
                out.complete(member.sync_waiter, SyncResult(error))
                member.sync_waiter = None

    def _schedule_heartbeat(self, group: ClassicGroup, member: Member, now: Now) -> None:
        self.timers.schedule(("heartbeat", group.group_id, member.member_id), now, member.session_timeout_ms)

    def _remove_member(self, group: ClassicGroup, member_id: str, out: Output) -> None:
        member = group.remove(member_id)
        self.timers.cancel(("heartbeat", group.group_id, member_id))
        if member is not None:
            if member.join_waiter is not None:
                out.complete(member.join_waiter, JoinResult(E.UNKNOWN_MEMBER_ID, member_id=member_id))
            if member.sync_waiter is not None:
                out.complete(member.sync_waiter, SyncResult(E.UNKNOWN_MEMBER_ID))

    def _remove_member_and_update(self, group: ClassicGroup, member_id: str, out: Output, now: Now) -> None:
        self._remove_member(group, member_id, out)
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, out, now)
        self._maybe_complete_join(group, out, now)

    def _on_heartbeat_expired(self, group_id: str, member_id: str, out: Output, now: Now) -> None:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if member is not None and not member.has_satisfied_heartbeat():
            self._remove_member_and_update(group, member_id, out, now)

    def _on_pending_member_expired(self, group_id: str, member_id: str, out: Output, now: Now) -> None:
        group = self.groups.get(group_id)
        if group is not None and member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._maybe_complete_join(group, out, now)
