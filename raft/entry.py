"""One record of the Raft log.

An entry is identified by (offset, epoch): offsets are dense from the log start,
epochs never decrease along the log. Control entries carry the quorum's own
records (LeaderChange) and are handed to the state machine flagged as such.
"""
from __future__ import annotations

from dataclasses import dataclass

import msgpack

__all__ = ["Entry", "LeaderChange", "encode_leader_change", "decode_leader_change"]


@dataclass(slots=True, frozen=True)
class Entry:
    offset: int
    epoch: int
    payload: bytes
    control: bool = False

    def size(self) -> int:
        """Approximate wire size, for max_bytes accounting."""
        return len(self.payload) + 24


@dataclass(slots=True, frozen=True)
class LeaderChange:
    """Appended by every new leader at its epoch start (Raft §5.4.2: commit one own-epoch entry)."""

    leader_id: int
    voters: list[int]
    granting_voters: list[int]


def encode_leader_change(record: LeaderChange) -> bytes:
    return msgpack.packb(
        {
            "type": "LeaderChange",
            "version": 0,
            "leader_id": record.leader_id,
            "voters": list(record.voters),
            "granting_voters": list(record.granting_voters),
        }
    )


def decode_leader_change(payload: bytes) -> LeaderChange | None:
    """The LeaderChange in a control payload, or None if it is another (or a malformed) record."""
    try:
        body = msgpack.unpackb(payload)
    except Exception:  # msgpack raises several unrelated types on garbage
        return None
    if not isinstance(body, dict) or body.get("type") != "LeaderChange":
        return None
    try:
        return LeaderChange(
            int(body["leader_id"]),
            [int(v) for v in body["voters"]],
            [int(v) for v in body["granting_voters"]],
        )
    except (KeyError, TypeError, ValueError):
        return None
