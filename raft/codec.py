"""Raft messages ⇄ wire.rpc frames, plus the controller listener's client RPCs.

Every Raft message dataclass (raft/messages.py) is registered with the shared
`wire.rpc` registry under a stable name, version 1. The fields go on the wire in
declaration order; `Entry` travels as a nested array.

Besides Raft's own traffic the controller listener answers a few client RPCs,
defined here because they are about the quorum:

- `DiagAppendRequest` → `DiagAppendResponse`: an internal diagnostic that
  appends opaque entries through the leader (followers forward it) and answers
  once they are committed. It exists for the multi-process tests and the
  benchmark; the metadata controller is the real writer of the log.
- `ErrorResponse`: the answer to a frame that could not be decoded.

DescribeQuorum uses the Raft messages' own Request/Response pair.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from raft import messages as m
from wire.rpc import DEFAULT_REGISTRY, Registry

__all__ = [
    "DiagAppendRequest",
    "DiagAppendResponse",
    "ErrorResponse",
    "ForwardedDescribeQuorum",
    "AddVoterRequest",
    "RemoveVoterRequest",
    "UpdateVoterRequest",
    "VoterChangeResponse",
    "VOTER_CHANGE_REQUESTS",
    "REGISTRY",
    "sender_of",
    "is_response",
    "error_response_for",
]

REGISTRY: Registry = DEFAULT_REGISTRY


@dataclass(slots=True)
class DiagAppendRequest:
    """Diagnostic only: append `payloads` as one batch through the leader."""

    cluster_id: str
    payloads: list[bytes] = field(default_factory=list)
    forwarded: bool = False  # set by a follower relaying it: never relay twice


@dataclass(slots=True)
class DiagAppendResponse:
    cluster_id: str
    error: int
    epoch: int
    leader_id: int | None
    last_offset: int = -1  # offset of the last appended entry, committed when this is sent
    message: str = ""


@dataclass(slots=True)
class ForwardedDescribeQuorum:
    """A DescribeQuorum a follower relays to its leader; answered where it lands, never relayed again."""

    cluster_id: str


@dataclass(slots=True)
class AddVoterRequest:
    """KIP-853 AddRaftVoter, as the controllers' leader serves it (a follower relays it once)."""

    cluster_id: str
    timeout_ms: int
    voter_id: int
    directory_id: str
    host: str
    port: int
    forwarded: bool = False


@dataclass(slots=True)
class RemoveVoterRequest:
    cluster_id: str
    voter_id: int
    directory_id: str
    forwarded: bool = False


@dataclass(slots=True)
class UpdateVoterRequest:
    """A voter's own (new) controller endpoint, sent by that voter to the leader."""

    cluster_id: str
    epoch: int
    voter_id: int
    directory_id: str
    host: str
    port: int
    forwarded: bool = False


@dataclass(slots=True)
class VoterChangeResponse:
    """The answer to each voter change, sent once the change committed (or failed)."""

    cluster_id: str
    error: int
    epoch: int
    leader_id: int | None
    message: str = ""


VOTER_CHANGE_REQUESTS = (AddVoterRequest, RemoveVoterRequest, UpdateVoterRequest)


@dataclass(slots=True)
class ErrorResponse:
    """Answer to a frame this node could not decode (the request type may be unknown)."""

    error: int
    message: str


_NAMES = [
    (m.VoteRequest, "raft.Vote"),
    (m.VoteResponse, "raft.VoteResponse"),
    (m.BeginQuorumEpochRequest, "raft.BeginQuorumEpoch"),
    (m.BeginQuorumEpochResponse, "raft.BeginQuorumEpochResponse"),
    (m.EndQuorumEpochRequest, "raft.EndQuorumEpoch"),
    (m.EndQuorumEpochResponse, "raft.EndQuorumEpochResponse"),
    (m.FetchRequest, "raft.Fetch"),
    (m.FetchResponse, "raft.FetchResponse"),
    (m.FetchSnapshotRequest, "raft.FetchSnapshot"),
    (m.FetchSnapshotResponse, "raft.FetchSnapshotResponse"),
    (m.DescribeQuorumRequest, "raft.DescribeQuorum"),
    (m.DescribeQuorumResponse, "raft.DescribeQuorumResponse"),
    (DiagAppendRequest, "raft.DiagAppend"),
    (DiagAppendResponse, "raft.DiagAppendResponse"),
    (ForwardedDescribeQuorum, "raft.ForwardedDescribeQuorum"),
    (AddVoterRequest, "raft.AddVoter"),
    (RemoveVoterRequest, "raft.RemoveVoter"),
    (UpdateVoterRequest, "raft.UpdateVoter"),
    (VoterChangeResponse, "raft.VoterChangeResponse"),
    (ErrorResponse, "rpc.Error"),
]
for _cls, _name in _NAMES:
    if _name not in REGISTRY.names():
        REGISTRY.register(_name, 1, _cls)

# Which field of a peer request names its sender.
_SENDER_FIELD = {
    m.VoteRequest: "candidate_id",
    m.BeginQuorumEpochRequest: "leader_id",
    m.EndQuorumEpochRequest: "leader_id",
    m.FetchRequest: "replica_id",
    m.FetchSnapshotRequest: "replica_id",
}

# Requests a Raft core handles, and the response type it answers each with.
PEER_RESPONSE_TYPE = {
    m.VoteRequest: m.VoteResponse,
    m.BeginQuorumEpochRequest: m.BeginQuorumEpochResponse,
    m.EndQuorumEpochRequest: m.EndQuorumEpochResponse,
    m.FetchRequest: m.FetchResponse,
    m.FetchSnapshotRequest: m.FetchSnapshotResponse,
}


def sender_of(msg) -> int | None:
    """The node id a peer request comes from (None for client requests)."""
    name = _SENDER_FIELD.get(type(msg))
    if name is None:
        return None
    value = getattr(msg, name)
    return value if type(value) is int else None


def is_response(msg) -> bool:
    return isinstance(msg, m.RESPONSE_TYPES) or isinstance(msg, (DiagAppendResponse, VoterChangeResponse, ErrorResponse))


def error_response_for(request, error: int, *, cluster_id: str, epoch: int, leader_id: int | None):
    """A well-formed error answer to `request` (e.g. a foreign cluster id)."""
    t = type(request)
    if t is m.VoteRequest:
        return m.VoteResponse(cluster_id, error, epoch, leader_id, False, request.pre_vote)
    if t is m.BeginQuorumEpochRequest:
        return m.BeginQuorumEpochResponse(cluster_id, error, epoch, leader_id)
    if t is m.EndQuorumEpochRequest:
        return m.EndQuorumEpochResponse(cluster_id, error, epoch, leader_id)
    if t is m.FetchRequest:
        return m.FetchResponse(cluster_id, error, epoch, leader_id, -1, -1)
    if t is m.FetchSnapshotRequest:
        return m.FetchSnapshotResponse(cluster_id, error, epoch, leader_id, None, 0, 0)
    if t is m.DescribeQuorumRequest or t is ForwardedDescribeQuorum:
        return m.DescribeQuorumResponse(cluster_id, error, epoch, leader_id, -1)
    if t is DiagAppendRequest:
        return DiagAppendResponse(cluster_id, error, epoch, leader_id)
    if t in VOTER_CHANGE_REQUESTS:
        return VoterChangeResponse(cluster_id, error, epoch, leader_id)
    return ErrorResponse(error, f"cannot answer {t.__name__}")


def foreign_cluster(request, cluster_id: str) -> bool:
    """True when a request names another cluster (Kafka answers INCONSISTENT_CLUSTER_ID).

    An empty cluster id means "not known yet" (a tool's first request), as Kafka's null does.
    """
    theirs = getattr(request, "cluster_id", None)
    return bool(theirs) and theirs != cluster_id

