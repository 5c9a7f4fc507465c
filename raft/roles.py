"""Per-role soft state: the timers and bookkeeping each role keeps in memory.

The role itself, the epoch, the leader and the vote live in QuorumState; these
objects hold only what dies with the role. Leader state is in raft/leader.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from raft.election import VoteTally

__all__ = [
    "UnattachedState",
    "ProspectiveState",
    "CandidateState",
    "FollowerState",
    "SnapshotDownload",
    "ResignedState",
]


@dataclass(slots=True)
class UnattachedState:
    election_deadline: float  # voters: start a pre-vote then
    discover_at: float = 0.0  # observers: ask a random voter who leads
    retries: int = 0


@dataclass(slots=True)
class ProspectiveState:
    """Pre-vote (KIP-996): asks "would you vote for me?" without bumping the epoch."""

    tally: VoteTally
    election_deadline: float
    resend_at: float
    last_known_leader: int | None
    retries: int


@dataclass(slots=True)
class CandidateState:
    tally: VoteTally
    election_deadline: float
    resend_at: float
    retries: int
    backoff_until: float | None = None  # set once the election is lost


@dataclass(slots=True)
class SnapshotDownload:
    snapshot_id: tuple[int, int]
    data: bytearray = field(default_factory=bytearray)


@dataclass(slots=True)
class FollowerState:
    leader_id: int
    fetch_deadline: float  # no good answer from the leader by then: elect
    has_fetched: bool = False  # since becoming follower (decides pre-vote grants)
    in_flight: tuple[int, int] | None = None  # (end_offset, last_epoch) the fetch was sent at
    resend_at: float = 0.0
    download: SnapshotDownload | None = None


@dataclass(slots=True)
class ResignedState:
    election_deadline: float
    unacked: set[int]
    preferred_successors: list[int]
    resend_at: float
