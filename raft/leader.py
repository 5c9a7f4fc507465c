"""Leader soft state: replica progress, the HW, parked long-poll fetches, check-quorum.

A voter's progress is the offset of its latest Fetch: voters fetch offset N only
after [0, N) is fsynced, so a fetch is also a durable ack. The leader's own
progress is its fsynced end offset (`on_flushed`), never the unflushed one.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from raft.commit import next_high_watermark, quorum_size
from raft.config import CHECK_QUORUM_FACTOR, RaftConfig
from raft.messages import FetchRequest
from raft.quorum_state import Role
from raft.roles import RoleState

if TYPE_CHECKING:
    from raft.core import RaftCore

__all__ = ["LeaderState", "ReplicaProgress", "ParkedFetch"]


@dataclass(slots=True)
class ReplicaProgress:
    end_offset: int = -1  # -1 until it fetches in this epoch
    last_fetch: float | None = None
    directory_id: str = ""  # the directory its last fetch named (KIP-853)
    # Kafka's ReplicaState: when its fetch last reached the leader's end (as of then or of its
    # previous fetch); decides whether an observer may be added as a voter.
    caught_up_at: float | None = None
    leader_end_at_last_fetch: int = -1


@dataclass(slots=True)
class ParkedFetch:
    request: FetchRequest
    deadline: float


class LeaderState(RoleState):
    """The leader's role: replica progress, the HW, parked fetches, check-quorum."""

    role: ClassVar[Role] = Role.LEADER

    def __init__(
        self,
        *,
        node_id: int,
        voters: list[int],
        epoch_start_offset: int,
        granting_voters: list[int],
        now: float,
        config: RaftConfig,
    ):
        self.node_id = node_id
        self.voters = sorted(voters)
        self.epoch_start_offset = epoch_start_offset
        self.granting_voters = sorted(granting_voters)
        self.config = config
        self.became_leader_at = now
        self.progress = {v: ReplicaProgress() for v in self.voters}
        self.progress[node_id] = ReplicaProgress(end_offset=-1, last_fetch=now)
        self.observers: dict[int, ReplicaProgress] = {}
        self.parked: dict[int, ParkedFetch] = {}
        self.sent_hw: dict[int, int] = {}  # the HW each replica last heard from us
        # Voters that have not acknowledged BeginQuorumEpoch nor fetched yet.
        self.begin_unacked = {v for v in self.voters if v != node_id}
        self.begin_resend_at = now
        self.begin_interval = config.fetch_timeout / 2
        # Set while the leader is not in the (uncommitted) voter set: resign once HW passes it.
        self.resign_after: int | None = None

    # ------------------------------------------------------------------ role

    def deadline(self) -> float:
        return min(self.check_quorum_deadline(), self.begin_resend_at, self.next_parked_deadline())

    def tick(self, core: "RaftCore", now: float) -> None:
        if now >= self.check_quorum_deadline():
            core._become_resigned(now, self.preferred_successors())  # lost touch with a majority
            return
        for replica, request in self.take_parked(self.expired_parked(now)):
            core._reply_fetch(replica, request)
        if now >= self.begin_resend_at:
            core._send_begin_quorum_epoch(self, now)

    def left(self, core: "RaftCore") -> None:
        # Parked long-polls learn the news instead of waiting out their timeout.
        for replica, request in self.take_parked(self.parked_ids()):
            core._send(replica, core._fetch_error_response(request))

    # -------------------------------------------------------------- progress

    def record_fetch(self, replica_id: int, fetch_offset: int, now: float, *, voter: bool = True,
                     directory_id: str = "", leader_end: int = 0) -> None:
        """`voter` False: the fetch carries a voter's id but another directory (KIP-853)."""
        if voter and replica_id in self.progress:
            p = self.progress[replica_id]
            self.begin_unacked.discard(replica_id)
        else:
            p = self.observers.setdefault(replica_id, ReplicaProgress())
            if p.directory_id != directory_id:  # another incarnation of that id: start over
                p = self.observers[replica_id] = ReplicaProgress()
        if fetch_offset >= leader_end:
            p.caught_up_at = now
        elif 0 < p.leader_end_at_last_fetch <= fetch_offset and p.last_fetch is not None:
            p.caught_up_at = p.last_fetch if p.caught_up_at is None else max(p.caught_up_at, p.last_fetch)
        p.end_offset = fetch_offset
        p.last_fetch = now
        p.directory_id = directory_id
        p.leader_end_at_last_fetch = leader_end

    def caught_up(self, p: ReplicaProgress, now: float) -> bool:
        """Reached the leader's end within the last fetch timeout (Kafka's lastCaughtUpTimestamp)."""
        return p.caught_up_at is not None and now - p.caught_up_at <= self.config.fetch_timeout

    def directory_of(self, replica_id: int) -> str:
        p = self.progress.get(replica_id)
        return p.directory_id if p is not None else ""

    def set_voters(self, voters: list[int], now: float) -> None:
        """The voter set changed: voters' progress moves in from the observers and back out."""
        self.voters = sorted(voters)
        for v in self.voters:
            if v not in self.progress:
                self.progress[v] = self.observers.pop(v, None) or ReplicaProgress()
                self.begin_unacked.add(v)
        for v in list(self.progress):
            if v not in self.voters and v != self.node_id:
                self.observers[v] = self.progress.pop(v)
                self.begin_unacked.discard(v)

    def record_fetch_time(self, replica_id: int, now: float) -> None:
        """A fetch that proves liveness but not progress (diverging, snapshot download)."""
        if replica_id in self.progress:
            self.progress[replica_id].last_fetch = now
            self.begin_unacked.discard(replica_id)
        elif replica_id in self.observers:
            self.observers[replica_id].last_fetch = now

    def begin_quorum_targets(self, now: float) -> list[int]:
        """Voters to (re)send BeginQuorumEpoch to: unacknowledged, or silent for a while.

        A voter that stops fetching may have moved to a higher epoch (e.g. it campaigned
        while we were cut off, lost, and restarted): its pre-votes are refused while we
        lead, and our pull-based replication never tells us its epoch. Its answer to
        BeginQuorumEpoch does (FENCED_LEADER_EPOCH at the newer epoch), so we step down
        and the quorum elects at an epoch everyone accepts. Kafka's LeaderState does the
        same for voters whose last fetch is older than fetch timeout / 2.
        """
        stale = now - self.begin_interval
        return sorted(
            v
            for v, p in self.progress.items()
            if v != self.node_id
            and (v in self.begin_unacked or p.last_fetch is None or p.last_fetch <= stale)
        )

    def record_flushed(self, end_offset: int, now: float) -> None:
        me = self.progress[self.node_id]
        me.end_offset = max(me.end_offset, end_offset)
        me.last_fetch = now

    def high_watermark(self, current: int) -> int:
        offsets = {v: self.progress[v].end_offset for v in self.voters}
        return next_high_watermark(offsets, self.epoch_start_offset, current)

    # --------------------------------------------------------- check-quorum

    def check_quorum_deadline(self) -> float:
        """When the leader must resign unless more voters fetch (KAFKA-15489).

        The leader counts itself; a majority needs quorum-1 others, so the deadline runs
        from the (quorum-1)-th most recent fetch among them. Voters that never fetched
        count from the moment of election (a grace period).
        """
        needed = quorum_size(len(self.voters)) - (1 if self.node_id in self.voters else 0)
        if needed == 0:
            return float("inf")
        times = sorted(
            (p.last_fetch if p.last_fetch is not None else self.became_leader_at)
            for v, p in self.progress.items()
            if v != self.node_id and v in self.voters
        )
        times.reverse()
        return times[needed - 1] + CHECK_QUORUM_FACTOR * self.config.fetch_timeout

    # ------------------------------------------------------------ long poll

    def park(self, replica_id: int, request: FetchRequest, now: float) -> None:
        self.parked[replica_id] = ParkedFetch(request, now + request.max_wait_ms / 1000.0)

    def take_parked(self, replica_ids: list[int]) -> list[tuple[int, FetchRequest]]:
        return [(r, self.parked.pop(r).request) for r in replica_ids if r in self.parked]

    def expired_parked(self, now: float) -> list[int]:
        return sorted(r for r, p in self.parked.items() if p.deadline <= now)

    def parked_ids(self) -> list[int]:
        return sorted(self.parked)

    def next_parked_deadline(self) -> float:
        return min((p.deadline for p in self.parked.values()), default=float("inf"))

    # ----------------------------------------------------------- resigning

    def preferred_successors(self) -> list[int]:
        """Other voters, longest log first (ties by id, for determinism)."""
        others = [v for v in self.voters if v != self.node_id]
        return sorted(others, key=lambda v: (-self.progress[v].end_offset, v))
