"""Classic consumer groups: coordinator lookup, membership, offsets."""
from __future__ import annotations

from wire.protocol.message import request, response
from wire.protocol.schema import ArrayOf, F, BOOL, BYTES, INT16, INT32, INT64, INT8, STRING

__all__ = [
    "OffsetCommitRequest", "OffsetCommitResponse", "OffsetFetchRequest", "OffsetFetchResponse",
    "FindCoordinatorRequest", "FindCoordinatorResponse", "JoinGroupRequest",
    "JoinGroupResponse", "HeartbeatRequest", "HeartbeatResponse", "LeaveGroupRequest",
    "LeaveGroupResponse", "SyncGroupRequest", "SyncGroupResponse", "DescribeGroupsRequest",
    "DescribeGroupsResponse", "ListGroupsRequest", "ListGroupsResponse", "DeleteGroupsRequest",
    "DeleteGroupsResponse", "OffsetDeleteRequest", "OffsetDeleteResponse",
]

OffsetCommitRequest = request(8, "OffsetCommit", "2-7", flexible="8+", fields=[
    F("group_id", STRING),
    F("generation_id", INT32, "1+", default=-1),
    F("member_id", STRING, "1+"),
    F("group_instance_id", STRING, "7+", nullable="7+", default=None),  # KIP-345 static member
    F("retention_time_ms", INT64, "2-4", default=-1),  # v5+: the broker's offsets.retention.minutes
    F("topics", ArrayOf("OffsetCommitRequestTopic",
        F("name", STRING),
        F("partitions", ArrayOf("OffsetCommitRequestPartition",
            F("partition_index", INT32),
            F("committed_offset", INT64),
            F("committed_leader_epoch", INT32, "6+", default=-1),  # KIP-320
            F("committed_metadata", STRING, nullable="0+"),
        )),
    )),
])

OffsetCommitResponse = response(8, "OffsetCommit", "2-7", flexible="8+", fields=[
    F("throttle_time_ms", INT32, "3+"),
    F("topics", ArrayOf("OffsetCommitResponseTopic",
        F("name", STRING),
        F("partitions", ArrayOf("OffsetCommitResponsePartition",
            F("partition_index", INT32),
            F("error_code", INT16),
        )),
    )),
])

# v7 (KIP-447): require_stable asks for UNSTABLE_OFFSET_COMMIT while a transaction's offsets
# for the partition are pending, so that a consumer starts after them, not before.
OffsetFetchRequest = request(9, "OffsetFetch", "1-7", flexible="6+", fields=[
    F("group_id", STRING),
    F("topics", ArrayOf("OffsetFetchRequestTopic",
        F("name", STRING),
        F("partition_indexes", ArrayOf(INT32)),
    ), nullable="2+"),
    F("require_stable", BOOL, "7+", default=False),
])

OffsetFetchResponse = response(9, "OffsetFetch", "1-7", flexible="6+", fields=[
    F("throttle_time_ms", INT32, "3+"),
    F("topics", ArrayOf("OffsetFetchResponseTopic",
        F("name", STRING),
        F("partitions", ArrayOf("OffsetFetchResponsePartition",
            F("partition_index", INT32),
            F("committed_offset", INT64),
            F("committed_leader_epoch", INT32, "5+", default=-1),
            F("metadata", STRING, nullable="0+"),
            F("error_code", INT16),
        )),
    )),
    F("error_code", INT16, "2+", default=0),
])

FindCoordinatorRequest = request(10, "FindCoordinator", "0-1", flexible="3+", fields=[
    F("key", STRING),
    F("key_type", INT8, "1+", default=0),
])

FindCoordinatorResponse = response(10, "FindCoordinator", "0-1", flexible="3+", fields=[
    F("throttle_time_ms", INT32, "1+"),
    F("error_code", INT16),
    F("error_message", STRING, "1+", nullable="1+"),
    F("node_id", INT32),
    F("host", STRING),
    F("port", INT32),
])

JoinGroupRequest = request(11, "JoinGroup", "0-5", flexible="6+", fields=[
    F("group_id", STRING),
    F("session_timeout_ms", INT32),
    F("rebalance_timeout_ms", INT32, "1+", default=-1),
    F("member_id", STRING),
    F("group_instance_id", STRING, "5+", nullable="5+", default=None),
    F("protocol_type", STRING),
    F("protocols", ArrayOf("JoinGroupRequestProtocol",
        F("name", STRING),
        F("metadata", BYTES),
    )),
])

JoinGroupResponse = response(11, "JoinGroup", "0-5", flexible="6+", fields=[
    F("throttle_time_ms", INT32, "2+"),
    F("error_code", INT16),
    F("generation_id", INT32, default=-1),
    F("protocol_name", STRING),
    F("leader", STRING),
    F("member_id", STRING),
    F("members", ArrayOf("JoinGroupResponseMember",
        F("member_id", STRING),
        F("group_instance_id", STRING, "5+", nullable="5+", default=None),
        F("metadata", BYTES),
    )),
])

HeartbeatRequest = request(12, "Heartbeat", "0-3", flexible="4+", fields=[
    F("group_id", STRING),
    F("generation_id", INT32),
    F("member_id", STRING),
    F("group_instance_id", STRING, "3+", nullable="3+", default=None),
])

HeartbeatResponse = response(12, "Heartbeat", "0-3", flexible="4+", fields=[
    F("throttle_time_ms", INT32, "1+"),
    F("error_code", INT16),
])

# v0-2 name one member; v3+ (KIP-345) a batch, by member id and/or group.instance.id
# (an admin removes a static member by instance id alone, member id "").
LeaveGroupRequest = request(13, "LeaveGroup", "0-3", flexible="4+", fields=[
    F("group_id", STRING),
    F("member_id", STRING, "0-2"),
    F("members", ArrayOf("MemberIdentity",
        F("member_id", STRING),
        F("group_instance_id", STRING, nullable="0+", default=None),
    ), "3+"),
])

LeaveGroupResponse = response(13, "LeaveGroup", "0-3", flexible="4+", fields=[
    F("throttle_time_ms", INT32, "1+"),
    F("error_code", INT16),
    F("members", ArrayOf("MemberResponse",
        F("member_id", STRING),
        F("group_instance_id", STRING, nullable="0+", default=None),
        F("error_code", INT16),
    ), "3+"),
])

SyncGroupRequest = request(14, "SyncGroup", "0-3", flexible="4+", fields=[
    F("group_id", STRING),
    F("generation_id", INT32),
    F("member_id", STRING),
    F("group_instance_id", STRING, "3+", nullable="3+", default=None),
    F("assignments", ArrayOf("SyncGroupRequestAssignment",
        F("member_id", STRING),
        F("assignment", BYTES),
    )),
])

SyncGroupResponse = response(14, "SyncGroup", "0-3", flexible="4+", fields=[
    F("throttle_time_ms", INT32, "1+"),
    F("error_code", INT16),
    F("assignment", BYTES),
])

DescribeGroupsRequest = request(15, "DescribeGroups", "0-4", flexible="5+", fields=[
    F("groups", ArrayOf(STRING)),
    F("include_authorized_operations", BOOL, "3+"),
])

DescribeGroupsResponse = response(15, "DescribeGroups", "0-4", flexible="5+", fields=[
    F("throttle_time_ms", INT32, "1+"),
    F("groups", ArrayOf("DescribedGroup",
        F("error_code", INT16),
        F("group_id", STRING),
        F("group_state", STRING),
        F("protocol_type", STRING),
        F("protocol_data", STRING),
        F("members", ArrayOf("DescribedGroupMember",
            F("member_id", STRING),
            F("group_instance_id", STRING, "4+", nullable="4+", default=None),
            F("client_id", STRING),
            F("client_host", STRING),
            F("member_metadata", BYTES),
            F("member_assignment", BYTES),
        )),
        F("authorized_operations", INT32, "3+", default=-2147483648),
    )),
])

ListGroupsRequest = request(16, "ListGroups", "0-5", flexible="3+", fields=[
    F("states_filter", ArrayOf(STRING), "4+", default=[]),  # KIP-518
    F("types_filter", ArrayOf(STRING), "5+", default=[]),  # KIP-848
])

ListGroupsResponse = response(16, "ListGroups", "0-5", flexible="3+", fields=[
    F("throttle_time_ms", INT32, "1+"),
    F("error_code", INT16),
    F("groups", ArrayOf("ListedGroup",
        F("group_id", STRING),
        F("protocol_type", STRING),
        F("group_state", STRING, "4+", default=""),
        F("group_type", STRING, "5+", default=""),
    )),
])

DeleteGroupsRequest = request(42, "DeleteGroups", "0-1", flexible="2+", fields=[
    F("group_names", ArrayOf(STRING)),
])

DeleteGroupsResponse = response(42, "DeleteGroups", "0-1", flexible="2+", fields=[
    F("throttle_time_ms", INT32),
    F("results", ArrayOf("DeletableGroupResult",
        F("group_id", STRING),
        F("error_code", INT16),
    )),
])

OffsetDeleteRequest = request(47, "OffsetDelete", "0-0", fields=[
    F("group_id", STRING),
    F("topics", ArrayOf("OffsetDeleteRequestTopic",
        F("name", STRING),
        F("partitions", ArrayOf("OffsetDeleteRequestPartition",
            F("partition_index", INT32),
        )),
    )),
])

OffsetDeleteResponse = response(47, "OffsetDelete", "0-0", fields=[
    F("error_code", INT16),
    F("throttle_time_ms", INT32),
    F("topics", ArrayOf("OffsetDeleteResponseTopic",
        F("name", STRING),
        F("partitions", ArrayOf("OffsetDeleteResponsePartition",
            F("partition_index", INT32),
            F("error_code", INT16),
        )),
    )),
])
