"""Consumer-group coordinator (DESIGN §8): a sans-IO core plus its record formats.

Public surface:

    GroupCoordinator      join / sync / heartbeat / leave / commit_offsets / fetch_offsets /
                          delete_offsets / describe / list_groups / delete_groups;
                          begin_loading / load_partition / unload_partition;
                          append_done; next_deadline / tick
    GroupConfig           Kafka-named settings (session bounds, initial delay, retention, ...)
    Output, Completion, PendingAppend and the *Result types the calls return
    GroupState, ClassicGroup, Member, OffsetAndMetadata
    partition_for_group, java_string_hash
    records: offset_commit_record, group_metadata_record, decode_key, decode_*_value
"""
from broker.groups.config import GroupConfig
from broker.groups.coordinator import GroupCoordinator, PartitionStatus
from broker.groups.group import ClassicGroup, GroupState, OffsetAndMetadata
from broker.groups.hashing import java_string_hash, partition_for_group
from broker.groups.member import Member
from broker.groups.results import (
    CommitResult, Completion, DeleteGroupsResult, DeleteOffsetsResult, DescribedGroup, DescribedMember,
    FetchedOffset, FetchOffsetsResult, HeartbeatResult, JoinedMember, JoinResult, LeaveResult, ListedGroup,
    ListGroupsResult, MemberLeaveResult, Output, PartitionError, PendingAppend, SyncResult,
)

__all__ = [
    "ClassicGroup", "CommitResult", "Completion", "DeleteGroupsResult", "DeleteOffsetsResult",
    "DescribedGroup", "DescribedMember", "FetchedOffset", "FetchOffsetsResult", "GroupConfig",
    "GroupCoordinator", "GroupState", "HeartbeatResult", "JoinedMember", "JoinResult", "LeaveResult",
    "ListedGroup", "ListGroupsResult", "Member", "MemberLeaveResult", "OffsetAndMetadata", "Output",
    "PartitionError", "PartitionStatus", "PendingAppend", "SyncResult", "java_string_hash",
    "partition_for_group",
]
