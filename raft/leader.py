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

    def record_fetch(self, replica_id: int, fetch_offset: int, now: float, *, voter: bool = True) -> None:
        """`voter` False: the fetch carries a voter's id but another directory (KIP-853)."""
        if voter and replica_id in self.progress:
            p = self.progress[replica_id]
            self.begin_unacked.discard(replica_id)
        else:
            p = self.observers.setdefault(replica_id, ReplicaProgress())
        p.end_offset = fetch_offset
        p.last_fetch = now

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
        offsets = {v: p.end_offset for v, p in self.progress.items()}
        return next_high_watermark(offsets, self.epoch_start_offset, current)

    # --------------------------------------------------------- check-quorum

    def check_quorum_deadline(self) -> float:
        """When the leader must resign unless more voters fetch (KAFKA-15489).

        The leader counts itself; a majority needs quorum-1 others, so the deadline runs
        from the (quorum-1)-th most recent fetch among them. Voters that never fetched
        count from the moment of election (a grace period).
        """
        needed = quorum_size(len(self.voters)) - 1
        if needed == 0:
            return float("inf")
        times = sorted(
            (p.last_fetch if p.last_fetch is not None else self.became_leader_at)
            for v, p in self.progress.items()
            if v != self.node_id
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
