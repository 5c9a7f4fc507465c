"""The Raft roles: one class per role, holding its soft state and its timer behaviour.

The role identity is `Role` (raft/quorum_state.py); the epoch, the leader and the vote live in
QuorumState; these objects hold what dies with the role, and answer what differs by role
(Kafka's EpochState, etcd's per-role tick functions):

- `deadline()`: when `tick` must run next (monotonic seconds);
- `tick(core, now)`: what the role does when that time comes (elect, resend, give up);
- `left(core)`: called once the replica has moved to its next role;
- `retries`: elections tried in a row (for the backoff), carried into the next campaign;
- `has_fetched_from_leader`: whether a leader of this epoch is known to be alive (decides
  pre-vote grants).
Leader state is in raft/leader.py. Message handling stays in RaftCore and Replication, which
check the role they are in (`core.role is Role.LEADER`) as Kafka's KafkaRaftClient does.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from raft.election import VoteTally
from raft.messages import MAX_EPOCH
from raft.quorum_state import Role

if TYPE_CHECKING:
    from raft.core import RaftCore

__all__ = [
    "RoleState",
    "UnattachedState",
    "ProspectiveState",
    "CandidateState",
    "FollowerState",
    "SnapshotDownload",
    "ResignedState",
]


class RoleState:
    """What every role answers; the subclasses are the roles."""

    __slots__ = ()
    role: ClassVar[Role]
    retries = 0
    has_fetched_from_leader = False

    def deadline(self) -> float:
        raise NotImplementedError

    def tick(self, core: "RaftCore", now: float) -> None:
        raise NotImplementedError

    def left(self, core: "RaftCore") -> None:
        pass


@dataclass(slots=True)
class UnattachedState(RoleState):
    """No leader known in this epoch. A voter elects when its timeout passes; an observer asks a
    random voter who leads."""

    role: ClassVar[Role] = Role.UNATTACHED
    voter: bool
    election_deadline: float  # voters: start a pre-vote then
    discover_at: float = 0.0  # observers: ask a random voter who leads
    retries: int = 0

    def deadline(self) -> float:
        return self.election_deadline if self.voter else self.discover_at

    def tick(self, core: "RaftCore", now: float) -> None:
        if self.voter:
            if now >= self.election_deadline:
                core._become_prospective(now)
        elif now >= self.discover_at:
            # Observers find the leader by asking any voter (it answers NOT_LEADER + leader id).
            self.discover_at = now + core.config.request_timeout
            core._send_discovery_fetch(now)


@dataclass(slots=True)
class ProspectiveState(RoleState):
    """Pre-vote (KIP-996): asks "would you vote for me?" without bumping the epoch."""

    role: ClassVar[Role] = Role.PROSPECTIVE
    tally: VoteTally
    election_deadline: float
    resend_at: float
    last_known_leader: int | None
    retries: int

    def deadline(self) -> float:
        return min(self.election_deadline, self.resend_at)

    def tick(self, core: "RaftCore", now: float) -> None:
        if now >= self.election_deadline:
            core._prospective_lost(now)
        elif now >= self.resend_at:
            core._send_vote_requests(now, pre_vote=True)


@dataclass(slots=True)
class CandidateState(RoleState):
    """Asks for votes at a bumped epoch; once the election is lost, waits out a backoff."""

    role: ClassVar[Role] = Role.CANDIDATE
    tally: VoteTally
    election_deadline: float
    resend_at: float
    retries: int
    backoff_until: float | None = None  # set once the election is lost

    def deadline(self) -> float:
        if self.backoff_until is not None:
            return self.backoff_until
        return min(self.election_deadline, self.resend_at)

    def tick(self, core: "RaftCore", now: float) -> None:
        if self.backoff_until is not None:
            if now >= self.backoff_until:
                core._become_prospective(now)
        elif now >= self.election_deadline:
            core._become_prospective(now)
        elif now >= self.resend_at:
            core._send_vote_requests(now, pre_vote=False)


@dataclass(slots=True)
class SnapshotDownload:
    snapshot_id: tuple[int, int]
    data: bytearray = field(default_factory=bytearray)


@dataclass(slots=True)
class FollowerState(RoleState):
    """Fetches from the leader; elects (or, as an observer, looks for a leader) when the leader
    has not answered within the fetch timeout."""

    role: ClassVar[Role] = Role.FOLLOWER
    leader_id: int
    fetch_deadline: float  # no good answer from the leader by then: elect
    has_fetched: bool = False  # since becoming follower (decides pre-vote grants)
    in_flight: tuple[int, int] | None = None  # (end_offset, last_epoch) the fetch was sent at
    resend_at: float = 0.0
    download: SnapshotDownload | None = None

    @property
    def has_fetched_from_leader(self) -> bool:
        return self.has_fetched

    def deadline(self) -> float:
        return min(self.fetch_deadline, self.resend_at)

    def tick(self, core: "RaftCore", now: float) -> None:
        if now >= self.fetch_deadline:
            if core.may_campaign:
                core._become_prospective(now)
            else:
                core._become_unattached(core.quorum.epoch, now)
        elif now >= self.resend_at:
            # The fetch (or its answer) was lost: ask again.
            if self.download is not None:
                core._send_snapshot_fetch(self, now)
            else:
                core._send_fetch(self, now)


@dataclass(slots=True)
class ResignedState(RoleState):
    """A leader that gave up (resign, check-quorum, restart): tells the voters with
    EndQuorumEpoch until each acknowledges, and leaves the epoch when its timeout passes."""

    role: ClassVar[Role] = Role.RESIGNED
    election_deadline: float
    unacked: set[int]
    preferred_successors: list[int]
    resend_at: float

    def deadline(self) -> float:
        return min(self.election_deadline, self.resend_at if self.unacked else float("inf"))

    def tick(self, core: "RaftCore", now: float) -> None:
        if now >= self.election_deadline:  # never the same leader twice in an epoch
            core._become_unattached(min(core.quorum.epoch + 1, MAX_EPOCH), now)
        elif self.unacked and now >= self.resend_at:
            core._send_end_quorum_epoch(now)
