"""The exceptions the Raft core raises to its caller.

Error codes in Raft responses are Kafka's, from the one table every layer uses
(wire.error_codes.ErrorCode): NOT_LEADER_OR_FOLLOWER is how observers find the
leader, FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH order epochs, and so on.
"""
from __future__ import annotations

__all__ = ["RaftError", "NotLeaderError", "InvalidTransitionError", "LogInvariantError"]


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
