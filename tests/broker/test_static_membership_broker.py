"""Static membership through a real (in-process) broker on the raw protocol: the handlers read
group_instance_id from Heartbeat v3 / OffsetCommit v7 / LeaveGroup v3, store OffsetCommit v6+'s
leader epoch and return it from OffsetFetch v5, answer LeaveGroup v3 per member and v0-2 with
one code, and DescribeGroups v4 names each member's instance id."""
from __future__ import annotations

from tests.broker.harness import RawClient, running_cluster
from tests.broker.test_groups_broker import GROUPS, coordinator_of, make_topic
from wire.error_codes import ErrorCode as E
from wire.protocol import (
    DescribeGroupsRequest, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, OffsetCommitRequest,
    OffsetFetchRequest, SyncGroupRequest,
)


def join(group, instance, member_id=""):
    return JoinGroupRequest(group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                            member_id=member_id, group_instance_id=instance, protocol_type="consumer",
                            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"m")])


def sync(group, generation, member_id, instance, assignments=()):
    S = SyncGroupRequest
    return S(group_id=group, generation_id=generation, member_id=member_id, group_instance_id=instance,
             assignments=[S.SyncGroupRequestAssignment(member_id=m, assignment=a) for m, a in assignments])


def heartbeat(group, generation, member_id, instance):
    return HeartbeatRequest(group_id=group, generation_id=generation, member_id=member_id, group_instance_id=instance)


def commit(group, generation, member_id, instance, offset=5, leader_epoch=3):
    C = OffsetCommitRequest
    return C(group_id=group, generation_id=generation, member_id=member_id, group_instance_id=instance,
             topics=[C.OffsetCommitRequestTopic(name="t", partitions=[C.OffsetCommitRequestPartition(
                 partition_index=0, committed_offset=offset, committed_leader_epoch=leader_epoch,
                 committed_metadata="md")])])


def leave(group, *members):
    L = LeaveGroupRequest
    return L(group_id=group, members=[L.MemberIdentity(member_id=m, group_instance_id=i) for m, i in members])


def fetch(group):
    return OffsetFetchRequest(group_id=group, topics=[OffsetFetchRequest.OffsetFetchRequestTopic(
        name="t", partition_indexes=[0])])


async def static_member(coord, group, instance):
    """One static member joined (no MEMBER_ID_REQUIRED round for static members) and synced."""
    joined = await coord.call(join(group, instance), 5)
    assert joined.error_code == E.NONE and joined.member_id.startswith(instance + "-")
    me = joined.member_id
    synced = await coord.call(sync(group, joined.generation_id, me, instance, [(me, b"A")]), 3)
    assert (synced.error_code, synced.assignment) == (E.NONE, b"A")
    return me, joined.generation_id


async def test_static_member_requests_are_fenced_by_instance_id_on_the_wire():
    async with running_cluster(1, static=GROUPS) as c:
        await make_topic(c, "t", 1)
        coord, _ = await coordinator_of(c, "g")
        old, gen = await static_member(coord, "g", "pod-1")
        restarted = await coord.call(join("g", "pod-1"), 5)  # same instance, fresh process
        assert restarted.error_code == E.NONE and restarted.generation_id == gen and restarted.member_id != old
        new = restarted.member_id

        assert (await coord.call(heartbeat("g", gen, old, "pod-1"), 3)).error_code == E.FENCED_INSTANCE_ID
        assert (await coord.call(heartbeat("g", gen, new, "pod-1"), 3)).error_code == E.NONE
        # v2 carries no instance id: the old member id is merely unknown.
        assert (await coord.call(heartbeat("g", gen, old, "pod-1"), 2)).error_code == E.UNKNOWN_MEMBER_ID
        assert (await coord.call(sync("g", gen, old, "pod-1"), 3)).error_code == E.FENCED_INSTANCE_ID
        fenced = await coord.call(commit("g", gen, old, "pod-1"), 7)
        assert fenced.topics[0].partitions[0].error_code == E.FENCED_INSTANCE_ID

        ok = await coord.call(commit("g", gen, new, "pod-1", offset=42, leader_epoch=6), 7)
        assert ok.topics[0].partitions[0].error_code == E.NONE
        v5 = (await coord.call(fetch("g"), 5)).topics[0].partitions[0]
        assert (v5.committed_offset, v5.committed_leader_epoch, v5.metadata) == (42, 6, "md")
        v3 = (await coord.call(fetch("g"), 3)).topics[0].partitions[0]
        assert (v3.committed_offset, v3.committed_leader_epoch) == (42, -1)  # not in v3: the default
        # Before v6 a commit has no leader epoch: it is stored as unknown (-1).
        assert (await coord.call(commit("g", gen, new, None, offset=43), 5)).topics[0].partitions[0].error_code == 0
        v5 = (await coord.call(fetch("g"), 5)).topics[0].partitions[0]
        assert (v5.committed_offset, v5.committed_leader_epoch) == (43, -1)

        described = (await coord.call(DescribeGroupsRequest(groups=["g"]), 4)).groups[0]
        assert [(m.member_id, m.group_instance_id) for m in described.members] == [(new, "pod-1")]


async def test_leave_group_v3_answers_each_member_and_v1_one_code():
    async with running_cluster(1, static=GROUPS) as c:
        coord, _ = await coordinator_of(c, "g")
        a, gen = await static_member(coord, "g", "pod-a")
        answer = await coord.call(leave("g", ("", "pod-a"), ("", "pod-x"), ("stale", "pod-a")), 3)
        assert answer.error_code == E.NONE
        assert [(m.member_id, m.group_instance_id, m.error_code) for m in answer.members] == [
            ("", "pod-a", E.NONE), ("", "pod-x", E.UNKNOWN_MEMBER_ID),
            ("stale", "pod-a", E.UNKNOWN_MEMBER_ID)]  # pod-a was removed by the first entry
        assert (await coord.call(heartbeat("g", gen, a, "pod-a"), 3)).error_code == E.UNKNOWN_MEMBER_ID
        # v1: one member, its error is the answer; v3 for a group nobody knows: per member.
        assert (await coord.call(LeaveGroupRequest(group_id="g", member_id="nobody"), 1)).error_code \
            == E.UNKNOWN_MEMBER_ID
        unknown = await coord.call(leave("no-such-group", ("m", None)), 3)
        assert unknown.error_code == E.NONE and [m.error_code for m in unknown.members] == [E.UNKNOWN_MEMBER_ID]
        # A group-level error has no per-member answers.
        assert (await coord.call(leave("", ("m", None)), 3)).error_code == E.INVALID_GROUP_ID
