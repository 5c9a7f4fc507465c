"""Error codes carried in Raft responses, and the exceptions the core raises.

Codes reuse Apache Kafka's numbers so logs and tools read the same way.
"""
from __future__ import annotations

__all__ = [
    "NONE",
    "NOT_LEADER",
    "BROKER_NOT_AVAILABLE",
    "INVALID_REQUEST",
    "FENCED_LEADER_EPOCH",
    "UNKNOWN_LEADER_EPOCH",
    "SNAPSHOT_NOT_FOUND",
    "POSITION_OUT_OF_RANGE",
    "INCONSISTENT_CLUSTER_ID",
    "INCONSISTENT_VOTER_SET",
    "error_name",
    "RaftError",
    "NotLeaderError",
    "InvalidTransitionError",
    "LogInvariantError",
]

NONE = 0
NOT_LEADER = 6  # Kafka's NOT_LEADER_OR_FOLLOWER: how observers discover the leader
BROKER_NOT_AVAILABLE = 8
INVALID_REQUEST = 42
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
SNAPSHOT_NOT_FOUND = 98
POSITION_OUT_OF_RANGE = 99
INCONSISTENT_CLUSTER_ID = 104
INCONSISTENT_VOTER_SET = 78

_NAMES = {
    value: name
    for name, value in dict(globals()).items()
    if name.isupper() and isinstance(value, int)
}


def error_name(code: int) -> str:
    return _NAMES.get(code, f"UNKNOWN_ERROR_{code}")


class RaftError(Exception):
    """Base of the exceptions raised by the Raft core to its caller."""


class NotLeaderError(RaftError):
    """append()/resign() called on a replica that is not the leader."""

    def __init__(self, leader_id: int | None, epoch: int):
        super().__init__(f"not the leader (epoch {epoch}, leader {leader_id})")
        self.leader_id = leader_id
        self.epoch = epoch


class InvalidTransitionError(RaftError):
    """A role transition outside the table in raft/quorum_state.py: a bug, never input."""


class LogInvariantError(RaftError):
    """A log mutation that would break offset/epoch ordering: a bug, never input."""
