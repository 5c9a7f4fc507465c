"""A member of a classic group (Kafka's ClassicGroupMember)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Hashable

__all__ = ["Member", "Protocol"]

Protocol = tuple[str, bytes]  # (name, metadata): one entry of JoinGroup's protocol list


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[Protocol]
    assignment: bytes = b""
    # Held requests: the token of a JoinGroup / SyncGroup waiting for the rebalance.
    join_waiter: Hashable | None = None
    sync_waiter: Hashable | None = None
    # Joined during this rebalance and never completed one: may expire while awaiting join.
    is_new: bool = False
    protocol_names: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        self.protocol_names = tuple(name for name, _ in self.protocols)

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def awaiting_join(self) -> bool:
        return self.join_waiter is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_waiter is not None

    def has_satisfied_heartbeat(self) -> bool:
        """Members parked in a rebalance need no heartbeats — unless they are new (KIP-394)."""
        if self.is_new:
            return False
        return self.awaiting_join or self.awaiting_sync

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[Protocol]) -> bool:
        """Same protocols with the same metadata, in the same order."""
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.protocols]

    def vote(self, candidates: set[str]) -> str:
        """This member's most preferred protocol among those every member supports."""
        for name in self.protocol_names:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def update(self, protocols: list[Protocol], rebalance_timeout_ms: int, session_timeout_ms: int) -> None:
        self.protocols = [(n, bytes(m)) for n, m in protocols]
        self.protocol_names = tuple(name for name, _ in protocols)
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
