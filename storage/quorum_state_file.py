"""The `quorum-state` file: the durable Raft election state (epoch, leader, vote).

JSON in the shape of Kafka's QuorumStateData v1, so an operator who knows
Kafka can read it: `{"leaderId", "leaderEpoch", "votedId", "data_version"}`
(-1 = none). Written with fsync + rename (`write_file_atomic`): a crash leaves
the previous or the new state, never a mixture.
"""
from __future__ import annotations

import json
import posixpath
from typing import NamedTuple

from storage.env import FileSystem, write_file_atomic

__all__ = ["QuorumStateFile", "StoredElection", "CorruptQuorumStateError", "FILE_NAME"]

FILE_NAME = "quorum-state"
DATA_VERSION = 1


class StoredElection(NamedTuple):
    epoch: int
    leader_id: int | None
    voted_id: int | None


class CorruptQuorumStateError(ValueError):
    """The quorum-state file exists but cannot be read."""


class QuorumStateFile:
    def __init__(self, fs: FileSystem, directory: str):
        self.fs = fs
        self.path = posixpath.join(directory, FILE_NAME)

    def read(self) -> StoredElection | None:
        """The stored state, or None when the node has never persisted one."""
        if not self.fs.exists(self.path):
            return None
        f = self.fs.open(self.path)
        try:
            raw = f.read(0, f.size())
        finally:
            f.close()
        try:
            doc = json.loads(raw)
            epoch, leader, voted = doc["leaderEpoch"], doc["leaderId"], doc["votedId"]
            version = doc.get("data_version", DATA_VERSION)
        except (ValueError, KeyError, TypeError) as e:
            raise CorruptQuorumStateError(f"{self.path}: unreadable quorum state ({e})") from None
        if version != DATA_VERSION:
            raise CorruptQuorumStateError(f"{self.path}: unsupported data_version {version}")
        if not all(type(v) is int for v in (epoch, leader, voted)) or epoch < 0:
            raise CorruptQuorumStateError(f"{self.path}: bad field types or negative epoch")
        return StoredElection(epoch, None if leader < 0 else leader, None if voted < 0 else voted)

    async def write(self, epoch: int, leader_id: int | None, voted_id: int | None) -> None:
        doc = {
            "leaderId": -1 if leader_id is None else leader_id,
            "leaderEpoch": epoch,
            "votedId": -1 if voted_id is None else voted_id,
            "data_version": DATA_VERSION,
        }
        self.fs.makedirs(posixpath.dirname(self.path))
        await write_file_atomic(self.fs, self.path, json.dumps(doc, sort_keys=True).encode())
