"""What the coordinator core hands back: responses (plain data) and effects.

Requests that may be held (JoinGroup, SyncGroup) or must wait for their
records to be durable (OffsetCommit, OffsetDelete, DeleteGroups, LeaveGroup)
are given a caller-chosen token; their answer arrives later as a
`Completion(token, response)` in some `Output`. The driver carries out an
`Output` in order: append each `PendingAppend` to its `__consumer_offsets`
partition and, once the append is committed (or has failed), call
`coordinator.append_done(append_id, error, now)`; and answer each completion.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Hashable

from wire.error_codes import ErrorCode

__all__ = [
    "Output", "Completion", "PendingAppend",
    "JoinResult", "JoinedMember", "SyncResult", "HeartbeatResult", "LeaveResult", "MemberLeaveResult",
    "CommitResult", "FetchedOffset", "FetchOffsetsResult", "DeleteOffsetsResult",
    "DescribedMember", "DescribedGroup", "ListedGroup", "ListGroupsResult", "DeleteGroupsResult",
    "PartitionError",
]

Record = tuple[bytes, bytes | None]  # (key, value); value None = tombstone


@dataclass(frozen=True, slots=True)
class PendingAppend:
    append_id: int
    partition: int  # of the coordinator's internal topic
    records: list[Record]
    producer_id: int = -1  # >= 0: a transactional batch of this producer (TxnOffsetCommit)
    producer_epoch: int = -1


@dataclass(frozen=True, slots=True)
class Completion:
    token: Hashable
    response: object


@dataclass(slots=True)
class Output:
    completions: list[Completion] = field(default_factory=list)
    appends: list[PendingAppend] = field(default_factory=list)

    def complete(self, token: Hashable, response: object) -> None:
        self.completions.append(Completion(token, response))

    def extend(self, other: "Output") -> None:
        self.completions.extend(other.completions)
        self.appends.extend(other.appends)

    def response_for(self, token: Hashable) -> object | None:
        """The answer to `token` in this output, if any (a convenience for callers and tests)."""
        for completion in self.completions:
            if completion.token == token:
                return completion.response
        return None


@dataclass(frozen=True, slots=True)
class JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: ErrorCode
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: tuple[JoinedMember, ...] = ()  # only the leader gets them


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class MemberLeaveResult:
    member_id: str
    group_instance_id: str | None
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class LeaveResult:
    error: ErrorCode
    members: tuple[MemberLeaveResult, ...] = ()


@dataclass(frozen=True, slots=True)
class PartitionError:
    topic: str
    partition: int
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class CommitResult:
    partitions: tuple[PartitionError, ...]


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    topic: str
    partition: int
    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class FetchOffsetsResult:
    error: ErrorCode
    offsets: tuple[FetchedOffset, ...] = ()


@dataclass(frozen=True, slots=True)
class DeleteOffsetsResult:
    error: ErrorCode
    partitions: tuple[PartitionError, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    group_id: str
    error: ErrorCode
    state: str = ""
    protocol_type: str = ""
    protocol: str = ""
    members: tuple[DescribedMember, ...] = ()


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str


@dataclass(frozen=True, slots=True)
class ListGroupsResult:
    error: ErrorCode
    groups: tuple[ListedGroup, ...] = ()


@dataclass(frozen=True, slots=True)
class DeleteGroupsResult:
    results: tuple[tuple[str, ErrorCode], ...]
