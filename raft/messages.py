"""The Raft RPCs (KIP-595, KIP-630, KIP-996) as plain dataclasses.

Fields are msgpack-friendly (int, str, bytes, bool, None, lists, nested
dataclasses) so raft/codec.py can frame them. Every message carries the
cluster id; every response carries the sender's (epoch, leader_id) so stale
replicas learn the current leader from any answer. Offsets are exclusive ends
where they name an "end" (Kafka's convention). Pairs such as `diverging_epoch`
and `snapshot_id` are tuples here; a codec may hand back lists, the core
accepts both.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from raft.entry import Entry

__all__ = [
    "VoteRequest",
    "VoteResponse",
    "BeginQuorumEpochRequest",
    "BeginQuorumEpochResponse",
    "EndQuorumEpochRequest",
    "EndQuorumEpochResponse",
    "FetchRequest",
    "FetchResponse",
    "FetchSnapshotRequest",
    "FetchSnapshotResponse",
    "DescribeQuorumRequest",
    "DescribeQuorumResponse",
    "ReplicaState",
    "Message",
    "REQUEST_TYPES",
    "RESPONSE_TYPES",
    "well_formed",
    "MAX_EPOCH",
]


@dataclass(slots=True)
class VoteRequest:
    cluster_id: str
    epoch: int  # the candidate's epoch (its current one for a pre-vote)
    candidate_id: int
    last_offset: int  # the candidate's log end offset
    last_epoch: int  # epoch of the candidate's last entry
    pre_vote: bool = False
    # KIP-853: the replica the candidate asks, by the candidate's voter set (-1: not named). A
    # replica so named votes even before it has fetched the change that made it a voter.
    voter_id: int = -1
    voter_directory_id: str = ""


@dataclass(slots=True)
class VoteResponse:
    cluster_id: str
    error: int
    epoch: int
    leader_id: int | None
    granted: bool
    pre_vote: bool = False
    leader_host: str = ""  # the named leader's controller endpoint (Kafka's NodeEndpoints)
    leader_port: int = 0


@dataclass(slots=True)
class BeginQuorumEpochRequest:
    """Pull replication means followers would not hear of a new leader: it tells them."""

    cluster_id: str
    epoch: int
    leader_id: int
    # The leader's controller endpoint (Kafka's LeaderEndpoints): a voter that has not yet
    # fetched the change adding this leader can still reach it (KIP-853).
    leader_host: str = ""
    leader_port: int = 0


@dataclass(slots=True)
class BeginQuorumEpochResponse:
    cluster_id: str
    error: int
    epoch: int
    leader_id: int | None


@dataclass(slots=True)
class EndQuorumEpochRequest:
    """Graceful resignation; the successors are ordered best first (longest log)."""

    cluster_id: str
    epoch: int
    leader_id: int
    preferred_successors: list[int] = field(default_factory=list)


@dataclass(slots=True)
class EndQuorumEpochResponse:
    cluster_id: str
    error: int
    epoch: int
    leader_id: int | None


@dataclass(slots=True)
class FetchRequest:
    """Also the follower's durable ack: a voter fetches offset N only once [0, N) is fsynced."""

    cluster_id: str
    replica_id: int
    epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    max_wait_ms: int
    max_bytes: int
    # KIP-853: a voter is (id, directory id); a fetch from the id of a voter with another
    # directory (its disk was wiped and formatted again) is an observer's.
    replica_directory_id: str = ""


@dataclass(slots=True)
class FetchResponse:
    cluster_id: str
    error: int
    epoch: int
    leader_id: int | None
    high_watermark: int
    log_start_offset: int
    entries: list[Entry] = field(default_factory=list)
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end_offset): truncate, then refetch
    snapshot_id: tuple[int, int] | None = None  # (end_offset, epoch): fetch this snapshot
    # The named leader's controller endpoint (Kafka's NodeEndpoints): how a replica that has
    # not yet fetched the voter set naming a new leader reaches it (KIP-853).
    leader_host: str = ""
    leader_port: int = 0


@dataclass(slots=True)
class FetchSnapshotRequest:
    cluster_id: str
    replica_id: int
    epoch: int
    snapshot_id: tuple[int, int]  # (end_offset, epoch)
    position: int
    max_bytes: int


@dataclass(slots=True)
class FetchSnapshotResponse:
    cluster_id: str
    error: int
    epoch: int
    leader_id: int | None
    snapshot_id: tuple[int, int] | None
    position: int
    size: int  # total size of the snapshot
    chunk: bytes = b""


@dataclass(slots=True)
class DescribeQuorumRequest:
    cluster_id: str


@dataclass(slots=True)
class ReplicaState:
    replica_id: int
    log_end_offset: int  # -1 when unknown
    last_fetch_age_ms: int  # ms since its last fetch reached the leader; -1 when never
    directory_id: str = ""  # KIP-853: a voter's recorded directory, an observer's from its fetches


@dataclass(slots=True)
class DescribeQuorumResponse:
    cluster_id: str
    error: int
    epoch: int
    leader_id: int | None
    high_watermark: int
    voters: list[ReplicaState] = field(default_factory=list)
    observers: list[ReplicaState] = field(default_factory=list)


REQUEST_TYPES = (
    VoteRequest,
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
    DescribeQuorumRequest,
)
RESPONSE_TYPES = (
    VoteResponse,
    BeginQuorumEpochResponse,
    EndQuorumEpochResponse,
    FetchResponse,
    FetchSnapshotResponse,
    DescribeQuorumResponse,
)

Message = (
    VoteRequest
    | VoteResponse
    | BeginQuorumEpochRequest
    | BeginQuorumEpochResponse
    | EndQuorumEpochRequest
    | EndQuorumEpochResponse
    | FetchRequest
    | FetchResponse
    | FetchSnapshotRequest
    | FetchSnapshotResponse
    | DescribeQuorumRequest
    | DescribeQuorumResponse
)


# --------------------------------------------------------------------------- #
# Shape checks: a codec may hand the core anything that decodes; the core drops
# (or answers INVALID_REQUEST to) messages whose fields have the wrong types.
# --------------------------------------------------------------------------- #


INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1
# Epochs are int32 in Kafka's messages and in our log's entries: a node at this epoch can
# follow a leader of it but never start an election (its epoch would not fit).
MAX_EPOCH = INT32_MAX


def _is_int(v: object) -> bool:
    """An int64, as every number in Kafka's Raft messages is at most."""
    return isinstance(v, int) and not isinstance(v, bool) and -INT64_MAX - 1 <= v <= INT64_MAX


def _is_id_or_epoch(v: object) -> bool:
    """Node ids and epochs are int32 in Kafka (-1 = none): a larger one is never adopted."""
    return isinstance(v, int) and not isinstance(v, bool) and -1 <= v <= INT32_MAX


# Fields whose ints are ids or epochs (int32); every other int is an int64.
_INT32_FIELDS = frozenset({"epoch", "last_epoch", "last_fetched_epoch", "candidate_id", "leader_id", "replica_id",
                           "voter_id"})


def _is_pair(v: object) -> bool:
    return isinstance(v, (tuple, list)) and len(v) == 2 and all(_is_int(x) for x in v)


def _is_entry(v: object) -> bool:
    return (
        isinstance(v, Entry)
        and _is_int(v.offset)
        and _is_int(v.epoch)
        and isinstance(v.payload, bytes)
        and isinstance(v.control, bool)
    )


_CHECKS = {
    "int": _is_int,
    "int | None": lambda v: v is None or _is_int(v),
    "bool": lambda v: isinstance(v, bool),
    "str": lambda v: isinstance(v, str),
    "bytes": lambda v: isinstance(v, bytes),
    "list[int]": lambda v: isinstance(v, list) and all(_is_id_or_epoch(x) for x in v),
    "list[Entry]": lambda v: isinstance(v, list) and all(_is_entry(x) for x in v),
    "tuple[int, int]": _is_pair,
    "tuple[int, int] | None": lambda v: v is None or _is_pair(v),
    "list[ReplicaState]": lambda v: isinstance(v, list)
    and all(isinstance(x, ReplicaState) and well_formed(x) for x in v),
}


def well_formed(msg: object) -> bool:
    """True when every field of a message dataclass holds a value of its declared type."""
    fields = getattr(type(msg), "__dataclass_fields__", None)
    if fields is None:
        return False
    for name, f in fields.items():
        value = getattr(msg, name, None)
        check = _CHECKS.get(f.type)
        if check is None or not check(value):
            return False
        if name in _INT32_FIELDS and value is not None and not _is_id_or_epoch(value):
            return False
    return True
