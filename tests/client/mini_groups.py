"""An eager (classic) group coordinator for the mini cluster: just enough of Kafka's
GroupCoordinator to exercise a client's join/sync/heartbeat/commit logic.

A rebalance completes when every current member has re-joined, or when the
first joiner's rebalance timeout passes (members that did not re-join are
dropped). Session expiry is not modelled.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import trio

from wire.error_codes import ErrorCode as E
from wire.protocol import *  # noqa: F403


@dataclass
class Group:
    state: str = "Empty"
    generation: int = 0
    protocol_type: str = ""
    protocol: str | None = None
    leader: str | None = None
    members: dict = field(default_factory=dict)  # member id -> protocols [(name, metadata)]
    joined: dict = field(default_factory=dict)  # this round: member id -> protocols
    allowed: set = field(default_factory=set)  # ids handed out by MEMBER_ID_REQUIRED
    round_done: trio.Event = field(default_factory=trio.Event)
    assignments: dict = field(default_factory=dict)
    synced: trio.Event = field(default_factory=trio.Event)


class MiniGroups:
    def __init__(self, env, max_rebalance_wait: float = 1.0):
        self.env = env
        self.groups: dict[str, Group] = {}
        self.offsets: dict[str, dict[tuple[str, int], tuple[int, str | None]]] = {}
        self.max_rebalance_wait = max_rebalance_wait
        self._ids = 0

    def _start_round(self, g: Group) -> None:
        if g.state != "PreparingRebalance":
            g.state = "PreparingRebalance"
            g.joined = {}
            g.round_done = trio.Event()

    def _complete_round(self, g: Group) -> None:
        if g.state != "PreparingRebalance":
            return
        g.members = dict(g.joined)
        g.generation += 1
        if g.leader not in g.members:
            g.leader = next(iter(g.members), None)
        leader_protocols = [name for name, _ in g.members.get(g.leader, [])]
        common = [p for p in leader_protocols if all(p in [n for n, _ in ps] for ps in g.members.values())]
        g.protocol = common[0] if common else None
        g.state = "CompletingRebalance" if g.members else "Empty"
        g.assignments = {}
        g.synced = trio.Event()
        g.round_done.set()

    async def on_join_group(self, node, req, v):
        g = self.groups.setdefault(req.group_id, Group())

        def answer(err, member_id="", members=()):
            return JoinGroupResponse(throttle_time_ms=0, error_code=err, generation_id=g.generation,
                                     protocol_name=g.protocol or "", leader=g.leader or "",
                                     member_id=member_id, members=list(members))

        if not req.member_id:
            self._ids += 1
            member_id = f"member-{self._ids}"
            if v >= 4:
                g.allowed.add(member_id)
                return answer(E.MEMBER_ID_REQUIRED, member_id)
        else:
            member_id = req.member_id
            if member_id not in g.members and member_id not in g.allowed:
                return answer(E.UNKNOWN_MEMBER_ID, member_id)
        g.allowed.discard(member_id)
        g.protocol_type = req.protocol_type
        self._start_round(g)
        g.joined[member_id] = [(p.name, bytes(p.metadata)) for p in req.protocols]
        done = g.round_done
        if set(g.members) <= set(g.joined):
            self._complete_round(g)
        else:
            wait = min(self.max_rebalance_wait, max(req.rebalance_timeout_ms, 0) / 1000 or self.max_rebalance_wait)
            with trio.move_on_after(wait):
                await done.wait()
            self._complete_round(g)
        if member_id not in g.members:
            return answer(E.UNKNOWN_MEMBER_ID, member_id)
        members = []
        if member_id == g.leader:
            members = [JoinGroupResponse.JoinGroupResponseMember(
                member_id=m, metadata=dict(ps)[g.protocol]) for m, ps in g.members.items()]
        return answer(0, member_id, members)

    def _check(self, group_id, generation, member_id):
        g = self.groups.get(group_id)
        if g is None or member_id not in g.members:
            return g, E.UNKNOWN_MEMBER_ID
        if g.state == "PreparingRebalance":
            return g, E.REBALANCE_IN_PROGRESS
        if generation != g.generation:
            return g, E.ILLEGAL_GENERATION
        return g, 0

    async def on_sync_group(self, node, req, v):
        g, err = self._check(req.group_id, req.generation_id, req.member_id)
        if not err and req.member_id == g.leader:
            g.assignments = {a.member_id: bytes(a.assignment) for a in req.assignments}
            g.state = "Stable"
            g.synced.set()
        elif not err:
            synced = g.synced
            with trio.move_on_after(self.max_rebalance_wait * 5):
                await synced.wait()
            g, err = self._check(req.group_id, req.generation_id, req.member_id)
        assignment = g.assignments.get(req.member_id, b"") if not err else b""
        return SyncGroupResponse(throttle_time_ms=0, error_code=err, assignment=assignment)

    async def on_heartbeat(self, node, req, v):
        _, err = self._check(req.group_id, req.generation_id, req.member_id)
        return HeartbeatResponse(throttle_time_ms=0, error_code=err)

    async def on_leave_group(self, node, req, v):
        g = self.groups.get(req.group_id)
        member_id = req.members[0].member_id if v >= 3 and req.members else req.member_id  # v3+: a batch
        if g is None or member_id not in g.members:
            return LeaveGroupResponse(throttle_time_ms=0, error_code=E.UNKNOWN_MEMBER_ID)
        del g.members[member_id]
        g.joined.pop(member_id, None)
        if g.members:
            self._start_round(g)
        else:
            g.state = "Empty"
            g.leader = None
        return LeaveGroupResponse(throttle_time_ms=0, error_code=0)

    async def on_offset_commit(self, node, req, v):
        err = 0
        if req.generation_id >= 0:
            g, err = self._check(req.group_id, req.generation_id, req.member_id)
        elif self.groups.get(req.group_id, Group()).members:
            err = E.UNKNOWN_MEMBER_ID  # a simple (generation -1) commit into an active group
        store = self.offsets.setdefault(req.group_id, {})
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                if not err:
                    store[(t.name, p.partition_index)] = (p.committed_offset, p.committed_metadata)
                parts.append(OffsetCommitResponse.OffsetCommitResponsePartition(
                    partition_index=p.partition_index, error_code=err))
            topics.append(OffsetCommitResponse.OffsetCommitResponseTopic(name=t.name, partitions=parts))
        return OffsetCommitResponse(throttle_time_ms=0, topics=topics)

    async def on_offset_fetch(self, node, req, v):
        store = self.offsets.get(req.group_id, {})
        wanted = {}
        if req.topics is None:
            for (topic, p) in sorted(store):
                wanted.setdefault(topic, []).append(p)
        else:
            wanted = {t.name: list(t.partition_indexes) for t in req.topics}
        topics = []
        for topic, parts in wanted.items():
            out = []
            for p in parts:
                offset, meta = store.get((topic, p), (-1, ""))
                out.append(OffsetFetchResponse.OffsetFetchResponsePartition(
                    partition_index=p, committed_offset=offset, metadata=meta, error_code=0))
            topics.append(OffsetFetchResponse.OffsetFetchResponseTopic(name=topic, partitions=out))
        return OffsetFetchResponse(throttle_time_ms=0, topics=topics, error_code=0)

    async def on_list_groups(self, node, req, v):
        groups = [ListGroupsResponse.ListedGroup(group_id=name, protocol_type=g.protocol_type)
                  for name, g in sorted(self.groups.items())]
        return ListGroupsResponse(throttle_time_ms=0, error_code=0, groups=groups)

    async def on_describe_groups(self, node, req, v):
        out = []
        for name in req.groups:
            g = self.groups.get(name)
            if g is None:
                out.append(DescribeGroupsResponse.DescribedGroup(
                    error_code=0, group_id=name, group_state="Dead", protocol_type="", protocol_data=""))
                continue
            members = [DescribeGroupsResponse.DescribedGroupMember(
                member_id=m, client_id="", client_host="", member_metadata=dict(ps).get(g.protocol, b""),
                member_assignment=g.assignments.get(m, b"")) for m, ps in g.members.items()]
            out.append(DescribeGroupsResponse.DescribedGroup(
                error_code=0, group_id=name, group_state=g.state, protocol_type=g.protocol_type,
                protocol_data=g.protocol or "", members=members))
        return DescribeGroupsResponse(throttle_time_ms=0, groups=out)
