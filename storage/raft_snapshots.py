"""Raft snapshots: `<20-digit end offset>-<10-digit epoch>.checkpoint` files (KIP-630 naming).

A snapshot holds the state machine at a committed offset: the `end_offset` is
the first offset it does NOT contain, `epoch` the epoch of the entry before it.
Files are written atomically (temp file, fsync, rename, directory fsync), so a
crash leaves the old set or the new file, never half of one. The content is
framed so that a damaged file is detected rather than loaded:

    magic b"RKSN" | version u8 | length u64 | crc32c u32 | data
"""
from __future__ import annotations

import posixpath
import re
import struct
from typing import NamedTuple

from crc32c import crc32c

from storage.env import FileSystem, write_file_atomic

__all__ = ["SnapshotId", "SnapshotStore", "snapshot_name", "CorruptSnapshotError"]

SUFFIX = ".checkpoint"
_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
_HEADER = struct.Struct(">4sBQI")
_MAGIC = b"RKSN"
_VERSION = 1


class SnapshotId(NamedTuple):
    end_offset: int
    epoch: int


class CorruptSnapshotError(ValueError):
    """A snapshot file failed its length or CRC check."""


def snapshot_name(snapshot_id: tuple[int, int]) -> str:
    end_offset, epoch = snapshot_id
    return f"{end_offset:020d}-{epoch:010d}{SUFFIX}"


def encode_snapshot(data: bytes) -> bytes:
    return _HEADER.pack(_MAGIC, _VERSION, len(data), crc32c(data)) + data


def decode_snapshot(raw: bytes) -> bytes:
    if len(raw) < _HEADER.size:
        raise CorruptSnapshotError("snapshot shorter than its header")
    magic, version, length, crc = _HEADER.unpack_from(raw)
    if magic != _MAGIC or version != _VERSION:
        raise CorruptSnapshotError(f"not a snapshot file (magic {magic!r}, version {version})")
    data = raw[_HEADER.size :]
    if len(data) != length:
        raise CorruptSnapshotError(f"snapshot holds {len(data)} bytes, header says {length}")
    if crc32c(data) != crc:
        raise CorruptSnapshotError("snapshot CRC mismatch")
    return data


class SnapshotStore:
    """The snapshot files of one Raft log directory."""

    def __init__(self, fs: FileSystem, directory: str):
        self.fs = fs
        self.directory = directory

    def ids(self) -> list[SnapshotId]:
        """Snapshot ids present, oldest first."""
        if not self.fs.is_dir(self.directory):
            return []
        out = []
        for name in self.fs.listdir(self.directory):
            m = _NAME.match(name)
            if m:
                out.append(SnapshotId(int(m.group(1)), int(m.group(2))))
        return sorted(out)

    def read(self, snapshot_id: tuple[int, int]) -> bytes:
        f = self.fs.open(self.path(snapshot_id))
        try:
            return decode_snapshot(f.read(0, f.size()))
        finally:
            f.close()

    def latest(self) -> tuple[SnapshotId, bytes] | None:
        """The newest snapshot that passes its checks (damaged newer ones are skipped)."""
        for sid in reversed(self.ids()):
            try:
                return sid, self.read(sid)
            except CorruptSnapshotError:
                continue
        return None

    async def write(self, snapshot_id: tuple[int, int], data: bytes) -> SnapshotId:
        self.fs.makedirs(self.directory)
        sid = SnapshotId(*snapshot_id)
        await write_file_atomic(self.fs, self.path(sid), encode_snapshot(bytes(data)))
        return sid

    async def delete_older_than(self, snapshot_id: tuple[int, int]) -> None:
        """Keep `snapshot_id` and newer; remove older snapshots and leftover temp files."""
        removed = False
        for name in self.fs.listdir(self.directory) if self.fs.is_dir(self.directory) else []:
            m = _NAME.match(name)
            stale_tmp = name.endswith(SUFFIX + ".tmp")
            if stale_tmp or (m and (int(m.group(1)), int(m.group(2))) < tuple(snapshot_id)):
                self.fs.remove(posixpath.join(self.directory, name))
                removed = True
        if removed:
            await self.fs.sync_dir(self.directory)

    def path(self, snapshot_id: tuple[int, int]) -> str:
        return posixpath.join(self.directory, snapshot_name(snapshot_id))
