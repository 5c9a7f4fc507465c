"""KRaft-style Raft: a sans-IO quorum core (this package) driven by a trio driver.

Public surface of the core (the driver, transport and node assembly build on these):
"""
from raft.actions import Actions
from raft.config import RaftConfig
from raft.core import RaftCore
from raft.entry import Entry, LeaderChange, decode_leader_change
from raft.errors import NotLeaderError, RaftError
from raft.log import RaftLog
from raft.quorum_state import Role
from raft.state import ElectionState
from raft.status import QuorumStatus, ReplicaStatus

__all__ = [
    "Actions",
    "ElectionState",
    "Entry",
    "LeaderChange",
    "NotLeaderError",
    "QuorumStatus",
    "RaftConfig",
    "RaftCore",
    "RaftError",
    "RaftLog",
    "ReplicaStatus",
    "Role",
    "decode_leader_change",
]
