"""Read-only view of a replica's quorum state (for DescribeQuorum, tools and tests)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from raft.quorum_state import Role

__all__ = ["QuorumStatus", "ReplicaStatus", "RoleSummary"]


class RoleSummary(NamedTuple):
    """The few QuorumStatus fields a frequent poller reads (a simulation's checker polls every
    node 50 times a simulated second): a plain tuple, no per-replica lists."""

    role: Role
    epoch: int
    leader_id: int | None
    high_watermark: int
    log_end_offset: int


@dataclass(slots=True, frozen=True)
class ReplicaStatus:
    replica_id: int
    log_end_offset: int  # -1 when unknown (only the leader knows the others')
    last_fetch_time: float | None  # monotonic seconds, as passed to the core
    directory_id: str = ""  # KIP-853 (raft/membership.py voter_directories_seen); "" when unknown


@dataclass(slots=True, frozen=True)
class QuorumStatus:
    node_id: int
    role: Role
    epoch: int
    leader_id: int | None
    voted_id: int | None
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    last_epoch: int
    snapshot_id: tuple[int, int]
    observer: bool
    voters: list[ReplicaStatus] = field(default_factory=list)
    observers: list[ReplicaStatus] = field(default_factory=list)
    # The leader this replica followed until its link to it broke, once a new connection to
    # it was refused and nothing has come from it since (RaftCore.departed_leader): its
    # process is gone.
    departed_leader: int | None = None
