"""A classic consumer group's data and state machine (Kafka's ClassicGroup).

    Empty ──join──▶ PreparingRebalance ──all joined / timeout──▶ CompletingRebalance
      ▲                 ▲        │ (no members left)                  │ leader's SyncGroup
      └─────────────────┼────────┘                                    ▼ stored
                        └──────── member joins / leaves / expires ── Stable
    any state ──▶ Dead (deleted, expired or unloaded)

The group also carries its committed offsets: Kafka keeps both in one object
because both live in the same `__consumer_offsets` partition and expire together.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

from broker.groups.member import Member
from broker.groups.records import GroupMetadataValue
from wire.error_codes import ErrorCode
from wire.errors import DecodeError
from wire.protocol.consumer_protocol import decode_subscription

__all__ = ["GroupState", "ClassicGroup", "OffsetAndMetadata", "IllegalTransition", "CONSUMER_PROTOCOL_TYPE"]

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_S = GroupState
_VALID_PREVIOUS = {
    _S.EMPTY: {_S.PREPARING_REBALANCE},
    _S.PREPARING_REBALANCE: {_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY},
    _S.COMPLETING_REBALANCE: {_S.PREPARING_REBALANCE},
    _S.STABLE: {_S.COMPLETING_REBALANCE},
    _S.DEAD: {_S.STABLE, _S.PREPARING_REBALANCE, _S.COMPLETING_REBALANCE, _S.EMPTY, _S.DEAD},
}


class IllegalTransition(RuntimeError):
    """A bug: the coordinator asked for a transition the state machine forbids."""


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1  # only set by OffsetCommit v2-4 with an explicit retention


class ClassicGroup:
    def __init__(self, group_id: str, wall_ms: int, state: GroupState = GroupState.EMPTY):
        self.group_id = group_id
        self.state = state
        self.state_timestamp = wall_ms  # when the current state was entered (drives offset expiry)
        self.generation = 0
        self.protocol_type = ""
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}  # insertion order = join order (leader fallback)
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: set[str] = set()  # got MEMBER_ID_REQUIRED, not joined yet
        self.pending_sync: set[str] = set()  # joined this generation, no SyncGroup yet
        self.new_member_added = False  # during the initial delayed join
        # Set while the first rebalance of an empty group waits for more members (None otherwise).
        self.initial_join_remaining_ms: int | None = None
        self.offsets: dict[tuple[str, int], OffsetAndMetadata] = {}

    # ------------------------------------------------------------------ state

    def transition(self, target: GroupState, wall_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[target]:
            raise IllegalTransition(f"group {self.group_id}: {self.state.value} -> {target.value}")
        self.state = target
        self.state_timestamp = wall_ms

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    # ------------------------------------------------------------------ members

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """A static member came back with a fresh member id: same member, new id."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def validate_member(self, member_id: str, instance_id: str | None) -> ErrorCode:
        """Kafka's validateMember: is (member id, group.instance.id) a current member?

        A static member's requests carry its instance id (KIP-345): an instance id now
        registered to another member id means a newer incarnation took over, so this
        one is FENCED_INSTANCE_ID; an instance id the group does not know is UNKNOWN_MEMBER_ID.
        """
        if instance_id is not None:
            known = self.static_members.get(instance_id)
            if known is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if known != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE

    def all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # ------------------------------------------------------------------ protocols

    def supports(self, protocol_type: str, protocol_names: list[str]) -> bool:
        if self.state == GroupState.EMPTY and not self.members:
            return bool(protocol_type) and bool(protocol_names)
        return protocol_type == self.protocol_type and bool(self.candidate_protocols() & set(protocol_names))

    def candidate_protocols(self) -> set[str]:
        members = list(self.members.values())
        if not members:
            return set()
        common = set(members[0].protocol_names)
        for member in members[1:]:
            common &= set(member.protocol_names)
        return common

    def select_protocol(self) -> str:
        """Every member votes for its favourite common protocol; most votes wins, then earliest member's order."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        first = next(iter(self.members.values()))
        return max(votes, key=lambda name: (votes[name], -first.protocol_names.index(name)))

    def init_next_generation(self, wall_ms: int) -> None:
        self.generation += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.pending_sync = set(self.members)
            self.transition(GroupState.COMPLETING_REBALANCE, wall_ms)
        else:
            self.protocol_name = None
            self.pending_sync = set()
            self.transition(GroupState.EMPTY, wall_ms)

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to, if this is a consumer group whose subscriptions parse."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                _, subscription = decode_subscription(member.metadata(self.protocol_name))
                topics.update(subscription.topics)
        except (DecodeError, KeyError):
            return None
        return topics

    # ------------------------------------------------------------------ persistence

    def to_record_value(self, assignments: dict[str, bytes] | None = None) -> GroupMetadataValue:
        """The GroupMetadataValue to store, with `assignments` (default: the current ones)."""
        members = []
        for member in self.members.values():
            assignment = member.assignment if assignments is None else assignments.get(member.member_id, b"")
            subscription = member.metadata(self.protocol_name) if self.protocol_name else b""
            members.append(GroupMetadataValue.MemberMetadata(
                member_id=member.member_id, group_instance_id=member.group_instance_id,
                client_id=member.client_id, client_host=member.client_host,
                rebalance_timeout=member.rebalance_timeout_ms, session_timeout=member.session_timeout_ms,
                subscription=bytes(subscription), assignment=bytes(assignment)))
        return GroupMetadataValue(
            protocol_type=self.protocol_type, generation=self.generation, protocol=self.protocol_name,
            leader=self.leader_id, current_state_timestamp=self.state_timestamp, members=members)

    @classmethod
    def from_record_value(cls, group_id: str, value: GroupMetadataValue, wall_ms: int) -> "ClassicGroup":
        """A group as loaded from its record: Stable with its members, or Empty."""
        group = cls(group_id, wall_ms, GroupState.STABLE if value.members else GroupState.EMPTY)
        if value.current_state_timestamp >= 0:
            group.state_timestamp = value.current_state_timestamp
        group.generation = value.generation
        group.protocol_type = value.protocol_type
        group.protocol_name = value.protocol
        for m in value.members:
            protocols = [(value.protocol or "", bytes(m.subscription))]
            group.add(Member(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                             m.rebalance_timeout if m.rebalance_timeout >= 0 else m.session_timeout,
                             m.session_timeout, value.protocol_type, protocols, bytes(m.assignment)))
        group.protocol_type = value.protocol_type
        group.leader_id = value.leader
        return group
