"""DescribeGroups, ListGroups, DeleteGroups. A mixin of GroupCoordinator."""
from __future__ import annotations

from typing import Hashable, Iterable

from broker.groups.append_errors import commit_error
from broker.groups.group import GroupState
from broker.groups.records import group_metadata_record, offset_commit_record
from broker.groups.results import (
    DeleteGroupsResult, DescribedGroup, DescribedMember, ListedGroup, ListGroupsResult, Output,
)
from broker.groups.timers import Now
from wire.error_codes import ErrorCode

__all__ = ["GroupAdminOps"]

S = GroupState
E = ErrorCode


class GroupAdminOps:
    def describe(self, group_ids: Iterable[str]) -> list[DescribedGroup]:
        """DescribeGroups. An unknown group is described as Dead, as Kafka does."""
        described = []
        for group_id in group_ids:
            error = self.route_error(group_id, allow_empty_id=True)
            group = self.groups.get(group_id)
            if error != E.NONE:
                described.append(DescribedGroup(group_id, error))
            elif group is None:
                described.append(DescribedGroup(group_id, E.NONE, S.DEAD.value))
            else:
                # Member metadata and assignments are only meaningful once the group is Stable.
                stable = group.state == S.STABLE
                members = tuple(DescribedMember(
                    m.member_id, m.group_instance_id, m.client_id, m.client_host,
                    m.metadata(group.protocol_name) if stable and group.protocol_name in m.protocol_names else b"",
                    m.assignment if stable else b"") for m in group.members.values())
                described.append(DescribedGroup(group_id, E.NONE, group.state.value, group.protocol_type,
                                                (group.protocol_name or "") if stable else "", members))
        return described

    def list_groups(self, states: Iterable[str] | None = None) -> ListGroupsResult:
        """ListGroups over every partition this broker leads; LOAD_IN_PROGRESS if one is still loading."""
        wanted = {s.lower() for s in states} if states else None
        error = E.NONE
        for status in self.partitions.values():
            if status.value == "loading":
                error = E.COORDINATOR_LOAD_IN_PROGRESS
        listed = tuple(ListedGroup(gid, g.protocol_type, g.state.value)
                       for gid, g in sorted(self.groups.items())
                       if g.state != S.DEAD and (wanted is None or g.state.value.lower() in wanted))
        return ListGroupsResult(error, listed)

    def delete_groups(self, token: Hashable, group_ids: Iterable[str], *, now: Now) -> Output:
        """DeleteGroups: only empty groups; their offsets and metadata get tombstones."""
        out = Output()
        results: dict[str, ErrorCode] = {}
        order: list[str] = []
        records_by_partition: dict[int, list] = {}
        groups_by_partition: dict[int, list[str]] = {}
        for group_id in group_ids:
            order.append(group_id)
            error = self.route_error(group_id)
            group = self.groups.get(group_id)
            if error == E.NONE and (group is None or group.state == S.DEAD):
                error = E.GROUP_ID_NOT_FOUND
            if error == E.NONE and group.state != S.EMPTY:
                error = E.NON_EMPTY_GROUP
            results[group_id] = error
            if error != E.NONE:
                continue
            partition = self.partition_for(group_id)
            records = records_by_partition.setdefault(partition, [])
            records.extend(offset_commit_record(group_id, t, p, None) for t, p in sorted(group.offsets))
            records.append(group_metadata_record(group_id, None))
            groups_by_partition.setdefault(partition, []).append(group_id)
            # Gone at once: a join racing the tombstones must not revive a half-deleted group.
            group.transition(S.DEAD, now.wall_ms)
            del self.groups[group_id]
        waiting = set(records_by_partition)

        def finish(out: Output) -> None:
            out.complete(token, DeleteGroupsResult(tuple((gid, results[gid]) for gid in order)))

        def appended(partition: int):
            def done(error: ErrorCode, out: Output, now: Now) -> None:
                for gid in groups_by_partition[partition]:
                    results[gid] = commit_error(error)
                waiting.discard(partition)
                if not waiting:
                    finish(out)
            return done

        for partition in sorted(records_by_partition):
            self._append(partition, records_by_partition[partition], appended(partition), out)
        if not waiting:
            finish(out)
        return out
