"""The group API versions that carry static membership (KIP-345): Heartbeat v2-3, LeaveGroup v2-3,
OffsetCommit v4-7, OffsetFetch v4-5, DescribeGroups v4.

Byte layouts are checked against kafka-python's own encoder (an independent implementation
built from Kafka's schemas) and against hand-written bytes; version gating is checked field by
field (what a version carries, what it drops, what it refuses).
"""
from __future__ import annotations

import struct

import pytest

from wire.errors import DecodeError, UnsupportedVersionError
from wire.protocol import (
    API_VERSIONS, ApiKey, DescribeGroupsResponse, HeartbeatRequest, HeartbeatResponse, LeaveGroupRequest,
    LeaveGroupResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
    decode_request, encode_request, lookup,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # kafka-python's schema loading


def s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


NULL_STRING = struct.pack(">h", -1)


def kp():
    """kafka-python's message classes (imported lazily: they load JSON schemas)."""
    from kafka.protocol.admin.groups import DescribeGroupsResponse as KDescribe
    from kafka.protocol.consumer import group as k
    return k, KDescribe


# -- advertised ------------------------------------------------------------------------------

def test_the_static_membership_versions_are_advertised():
    assert API_VERSIONS[ApiKey.HEARTBEAT] == (0, 3)
    assert API_VERSIONS[ApiKey.LEAVE_GROUP] == (0, 3)
    assert API_VERSIONS[ApiKey.OFFSET_COMMIT] == (2, 7)
    assert API_VERSIONS[ApiKey.OFFSET_FETCH] == (1, 7)  # v6 flexible, v7 require_stable (KIP-447)
    assert API_VERSIONS[ApiKey.DESCRIBE_GROUPS] == (0, 4)
    assert API_VERSIONS[ApiKey.JOIN_GROUP][1] == 5 and API_VERSIONS[ApiKey.SYNC_GROUP][1] == 3


# Versions past the ones served (OffsetFetch v8 batches groups, KIP-709).
@pytest.mark.parametrize(("api_key", "version"), [(ApiKey.HEARTBEAT, 4), (ApiKey.LEAVE_GROUP, 4),
                                                  (ApiKey.OFFSET_COMMIT, 8), (ApiKey.OFFSET_FETCH, 8)])
def test_flexible_versions_are_refused(api_key, version):
    with pytest.raises(UnsupportedVersionError):
        lookup(api_key, version)


# -- Heartbeat -------------------------------------------------------------------------------

def test_heartbeat_v3_carries_the_instance_id_and_v2_does_not():
    hb = HeartbeatRequest(group_id="g", generation_id=7, member_id="m", group_instance_id="pod-1")
    base = s("g") + struct.pack(">i", 7) + s("m")
    assert hb.encode(3) == base + s("pod-1")
    assert hb.encode(2) == base  # not in v2: dropped, and read back as None
    assert HeartbeatRequest.decode(base, 2).group_instance_id is None
    assert HeartbeatRequest.decode(base + NULL_STRING, 3).group_instance_id is None
    assert HeartbeatRequest.decode(base + s("pod-1"), 3) == hb


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_heartbeat_matches_kafka_python(version):
    k, _ = kp()
    instance = "i-1" if version >= 3 else None
    theirs = k.HeartbeatRequest(group_id="grp", generation_id=3, member_id="mem", group_instance_id=instance,
                                version=version).encode(version=version)
    ours = HeartbeatRequest(group_id="grp", generation_id=3, member_id="mem", group_instance_id=instance)
    assert ours.encode(version) == bytes(theirs)
    answer = HeartbeatResponse(throttle_time_ms=5, error_code=82).encode(version)
    decoded = k.HeartbeatResponse.decode(answer, version=version)
    assert decoded.error_code == 82 and (version == 0 or decoded.throttle_time_ms == 5)


# -- LeaveGroup ------------------------------------------------------------------------------

def test_leave_group_v3_is_a_batch_by_member_id_or_instance_id():
    req = LeaveGroupRequest(group_id="g", members=[
        LeaveGroupRequest.MemberIdentity(member_id="m-1", group_instance_id=None),
        LeaveGroupRequest.MemberIdentity(member_id="", group_instance_id="pod-2"),  # admin removal
    ])
    wire = s("g") + struct.pack(">i", 2) + s("m-1") + NULL_STRING + s("") + s("pod-2")
    assert req.encode(3) == wire
    assert LeaveGroupRequest.decode(wire, 3) == req
    # v0-2 name one member and have no batch; v3 has no top-level member id.
    assert LeaveGroupRequest(group_id="g", member_id="m-1", members=req.members).encode(2) == s("g") + s("m-1")
    assert LeaveGroupRequest.decode(wire, 3).member_id == ""


def test_leave_group_v3_response_answers_each_member():
    resp = LeaveGroupResponse(throttle_time_ms=0, error_code=0, members=[
        LeaveGroupResponse.MemberResponse(member_id="m-1", group_instance_id=None, error_code=0),
        LeaveGroupResponse.MemberResponse(member_id="", group_instance_id="pod-2", error_code=25),
    ])
    wire = (struct.pack(">ih", 0, 0) + struct.pack(">i", 2) + s("m-1") + NULL_STRING + struct.pack(">h", 0)
            + s("") + s("pod-2") + struct.pack(">h", 25))
    assert resp.encode(3) == wire
    assert LeaveGroupResponse.decode(wire, 3) == resp
    assert resp.encode(2) == struct.pack(">ih", 0, 0)  # v1-2: throttle and one error code only


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_leave_group_matches_kafka_python(version):
    k, _ = kp()
    K = k.LeaveGroupRequest
    if version >= 3:
        theirs = K(group_id="g", members=[K.MemberIdentity(member_id="", group_instance_id="static-1"),
                                          K.MemberIdentity(member_id="dyn", group_instance_id=None)],
                   version=version)
        ours = LeaveGroupRequest(group_id="g", members=[
            LeaveGroupRequest.MemberIdentity(member_id="", group_instance_id="static-1"),
            LeaveGroupRequest.MemberIdentity(member_id="dyn", group_instance_id=None)])
    else:
        theirs = K(group_id="g", member_id="dyn", version=version)
        ours = LeaveGroupRequest(group_id="g", member_id="dyn")
    their_bytes = bytes(theirs.encode(version=version))
    assert ours.encode(version) == their_bytes
    assert LeaveGroupRequest.decode(their_bytes, version).encode(version) == their_bytes
    R = LeaveGroupResponse
    answer = R(throttle_time_ms=1, error_code=0, members=[
        R.MemberResponse(member_id="x", group_instance_id="static-1", error_code=82)]).encode(version)
    decoded = k.LeaveGroupResponse.decode(answer, version=version)
    if version >= 3:
        (m,) = decoded.members
        assert (m.member_id, m.group_instance_id, m.error_code) == ("x", "static-1", 82)


# -- OffsetCommit ----------------------------------------------------------------------------

def _commit(**top) -> OffsetCommitRequest:
    C = OffsetCommitRequest
    return C(group_id="g", generation_id=4, member_id="m", topics=[C.OffsetCommitRequestTopic(name="t", partitions=[
        C.OffsetCommitRequestPartition(partition_index=1, committed_offset=100, committed_leader_epoch=9,
                                       committed_metadata="md")])], **top)


def test_offset_commit_fields_by_version():
    req = _commit(group_instance_id="pod-1", retention_time_ms=60_000)
    head = s("g") + struct.pack(">i", 4) + s("m")
    topics = s("t") + struct.pack(">i", 1)
    part = struct.pack(">iq", 1, 100)
    retention = struct.pack(">q", 60_000)
    assert req.encode(4) == head + retention + struct.pack(">i", 1) + topics + part + s("md")
    assert req.encode(5) == head + struct.pack(">i", 1) + topics + part + s("md")  # v5 drops retention
    assert req.encode(6) == head + struct.pack(">i", 1) + topics + part + struct.pack(">i", 9) + s("md")
    assert req.encode(7) == head + s("pod-1") + struct.pack(">i", 1) + topics + part + struct.pack(">i", 9) + s("md")
    # Absent fields read back as their defaults.
    v5 = OffsetCommitRequest.decode(req.encode(5), 5)
    assert (v5.retention_time_ms, v5.group_instance_id) == (-1, None)
    assert v5.topics[0].partitions[0].committed_leader_epoch == -1
    v7 = OffsetCommitRequest.decode(req.encode(7), 7)
    assert v7.group_instance_id == "pod-1" and v7.topics[0].partitions[0].committed_leader_epoch == 9


@pytest.mark.parametrize("version", [2, 3, 4, 5, 6, 7])
def test_offset_commit_matches_kafka_python(version):
    k, _ = kp()
    K = k.OffsetCommitRequest
    T = K.OffsetCommitRequestTopic
    kwargs = {"group_id": "grp", "generation_id_or_member_epoch": 12, "member_id": "mem",
              "topics": [T(name="topic", partitions=[
                  T.OffsetCommitRequestPartition(partition_index=p, committed_offset=10 * p,
                                                 committed_leader_epoch=3, committed_metadata=None)
                  for p in (0, 2)])]}
    if version <= 4:
        kwargs["retention_time_ms"] = 1234
    if version >= 7:
        kwargs["group_instance_id"] = "static"
    theirs = bytes(K(**kwargs, version=version).encode(version=version))
    ours = OffsetCommitRequest.decode(theirs, version)
    assert ours.encode(version) == theirs
    assert ours.group_id == "grp" and ours.generation_id == 12 and ours.member_id == "mem"
    assert ours.group_instance_id == ("static" if version >= 7 else None)
    assert ours.retention_time_ms == (1234 if version <= 4 else -1)
    parts = ours.topics[0].partitions
    assert [(p.partition_index, p.committed_offset, p.committed_metadata) for p in parts] == [(0, 0, None), (2, 20, None)]
    assert {p.committed_leader_epoch for p in parts} == {3 if version >= 6 else -1}
    R = OffsetCommitResponse
    answer = R(throttle_time_ms=0, topics=[R.OffsetCommitResponseTopic(name="topic", partitions=[
        R.OffsetCommitResponsePartition(partition_index=0, error_code=82)])]).encode(version)
    decoded = k.OffsetCommitResponse.decode(answer, version=version)
    assert decoded.topics[0].partitions[0].error_code == 82


def test_offset_commit_request_in_a_frame_and_truncated_bodies():
    req = _commit(group_instance_id="pod-1")
    frame = encode_request(req, 7, 42, "c")
    header, decoded = decode_request(frame[4:])
    assert (header.api_key, header.api_version) == (ApiKey.OFFSET_COMMIT, 7) and decoded == req
    body = req.encode(7)
    for cut in range(len(body)):
        with pytest.raises(DecodeError):
            OffsetCommitRequest.decode(body[:cut], 7)


# -- OffsetFetch / DescribeGroups --------------------------------------------------------------

def test_offset_fetch_v5_returns_the_committed_leader_epoch():
    R = OffsetFetchResponse
    resp = R(throttle_time_ms=0, error_code=0, topics=[R.OffsetFetchResponseTopic(name="t", partitions=[
        R.OffsetFetchResponsePartition(partition_index=0, committed_offset=5, committed_leader_epoch=3,
                                       metadata="", error_code=0)])])
    k, _ = kp()
    assert k.OffsetFetchResponse.decode(resp.encode(5), version=5).topics[0].partitions[0].committed_leader_epoch == 3
    assert len(resp.encode(5)) == len(resp.encode(4)) + 4
    assert R.decode(resp.encode(4), 4).topics[0].partitions[0].committed_leader_epoch == -1
    req = OffsetFetchRequest(group_id="g", topics=None)
    assert OffsetFetchRequest.decode(req.encode(5), 5) == req


def test_describe_groups_v4_names_static_members():
    R = DescribeGroupsResponse
    member = R.DescribedGroupMember(member_id="m", group_instance_id="pod-1", client_id="c", client_host="/h",
                                    member_metadata=b"", member_assignment=b"")
    resp = R(throttle_time_ms=0, groups=[R.DescribedGroup(error_code=0, group_id="g", group_state="Stable",
                                                          protocol_type="consumer", protocol_data="range",
                                                          members=[member], authorized_operations=-1)])
    _, K = kp()
    decoded = K.decode(resp.encode(4), version=4)
    assert decoded.groups[0].members[0].group_instance_id == "pod-1"
    assert len(resp.encode(4)) == len(resp.encode(3)) + len(s("pod-1"))
    assert R.decode(resp.encode(3), 3).groups[0].members[0].group_instance_id is None
