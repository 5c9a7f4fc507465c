"""The voter set and its history in the log (KIP-853 dynamic quorum membership).

A voter is a node id *and* a directory id, with the controller endpoint peers reach it on.
A node starts from the static set (`controller.quorum.voters` or the format-time
bootstrap voters: kraft.version 0 semantics), then a snapshot may carry the set in force at
its end, and every `Voters` control entry in the log replaces the set from its offset on.
The set a node uses is the latest one in its log, committed or not; truncating the log
rolls back the changes it held (Kafka's VoterSetHistory).

Snapshots carry the set in an envelope around the state machine's bytes, written only once
the set is dynamic (a snapshot of a static quorum stays the state machine's bytes alone).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import msgpack

__all__ = [
    "Voter",
    "VoterHistory",
    "encode_voters",
    "decode_voters",
    "wrap_snapshot",
    "unwrap_snapshot",
    "MAX_VOTERS",
]

MAX_VOTERS = 255  # bounds a decoded record; Kafka's quorums are a handful of controllers
_SNAPSHOT_MAGIC = b"RKVS"  # never the first bytes of a msgpack map (the state machines' format)
_LEN = struct.Struct(">I")


@dataclass(slots=True, frozen=True)
class Voter:
    node_id: int
    directory_id: str = ""  # empty: a static voter known by id alone
    host: str = ""
    port: int = 0

    def to_dict(self) -> dict:
        return {"id": self.node_id, "directory_id": self.directory_id, "host": self.host, "port": self.port}

    def key_matches(self, node_id: int, directory_id: str) -> bool:
        """This voter is replica (node_id, directory_id): an empty directory on either side matches."""
        return node_id == self.node_id and (not self.directory_id or not directory_id
                                            or directory_id == self.directory_id)


def _voter_from(doc) -> Voter:
    node_id, port = doc["id"], doc.get("port", 0)
    directory_id, host = doc.get("directory_id", ""), doc.get("host", "")
    if not (isinstance(node_id, int) and isinstance(port, int) and 0 <= node_id < 2**31 and 0 <= port < 65536):
        raise ValueError("bad voter id or port")
    if not (isinstance(directory_id, str) and isinstance(host, str) and len(directory_id) < 64 and len(host) < 256):
        raise ValueError("bad voter directory or host")
    return Voter(node_id, directory_id, host, port)


def _voters_from(items) -> tuple[Voter, ...]:
    if not isinstance(items, list) or not 0 < len(items) <= MAX_VOTERS:
        raise ValueError("bad voter list")
    voters = tuple(sorted((_voter_from(d) for d in items), key=lambda v: v.node_id))
    if len({v.node_id for v in voters}) != len(voters):
        raise ValueError("a voter id twice")
    return voters


def encode_voters(voters) -> bytes:
    """The `Voters` control record (Kafka's VotersRecord) naming the whole set."""
    return msgpack.packb({"type": "Voters", "version": 0,
                          "voters": [v.to_dict() for v in sorted(voters, key=lambda v: v.node_id)]})


def decode_voters(payload: bytes) -> tuple[Voter, ...] | None:
    """The voter set of a control payload, or None if it is another (or a malformed) record."""
    try:
        body = msgpack.unpackb(payload)
        if not isinstance(body, dict) or body.get("type") != "Voters":
            return None
        return _voters_from(body["voters"])
    except Exception:  # msgpack raises several unrelated types on garbage
        return None


def wrap_snapshot(voters, data: bytes) -> bytes:
    header = encode_voters(voters)
    return _SNAPSHOT_MAGIC + _LEN.pack(len(header)) + header + data


def unwrap_snapshot(data: bytes | None) -> tuple[tuple[Voter, ...] | None, bytes | None]:
    """(voter set, state machine bytes) of a snapshot; (None, data) for one without the envelope."""
    if data is None or not data.startswith(_SNAPSHOT_MAGIC) or len(data) < 8:
        return None, data
    (size,) = _LEN.unpack_from(data, 4)
    voters = decode_voters(bytes(data[8:8 + size]))
    if voters is None:
        return None, data
    return voters, bytes(data[8 + size:])


class VoterHistory:
    """The static set, the snapshot's set, and the changes in the log after it."""

    def __init__(self, static) -> None:
        self.static: tuple[Voter, ...] = tuple(sorted(static, key=lambda v: v.node_id))
        self.base: tuple[Voter, ...] | None = None  # from the snapshot, if it carried one
        self.changes: list[tuple[int, tuple[Voter, ...]]] = []  # (offset, set), offsets ascending

    @property
    def dynamic(self) -> bool:
        """The set has been recorded in the log or a snapshot (kraft.version 1)."""
        return self.base is not None or bool(self.changes)

    def latest(self) -> tuple[Voter, ...]:
        if self.changes:
            return self.changes[-1][1]
        return self.base if self.base is not None else self.static

    def last_change_offset(self) -> int:
        return self.changes[-1][0] if self.changes else -1

    def at(self, end_offset: int) -> tuple[Voter, ...]:
        """The set in force for a snapshot of everything below end_offset."""
        for offset, voters in reversed(self.changes):
            if offset < end_offset:
                return voters
        return self.base if self.base is not None else self.static

    def record(self, offset: int, voters: tuple[Voter, ...]) -> None:
        if self.changes and offset <= self.changes[-1][0]:
            self.truncate_to(offset)
        self.changes.append((offset, voters))

    def truncate_to(self, end_offset: int) -> bool:
        """Forget changes at or beyond end_offset; True if any went."""
        kept = [c for c in self.changes if c[0] < end_offset]
        dropped = len(kept) != len(self.changes)
        self.changes = kept
        return dropped

    def compact(self, snapshot_end: int) -> None:
        """A snapshot now covers everything below snapshot_end: fold older changes into the base."""
        if any(offset < snapshot_end for offset, _ in self.changes):
            self.base = self.at(snapshot_end)
            self.changes = [c for c in self.changes if c[0] >= snapshot_end]

    def reset(self, base: tuple[Voter, ...] | None) -> None:
        """The log was replaced by a snapshot carrying `base` (None: the static set)."""
        self.base = base
        self.changes = []
