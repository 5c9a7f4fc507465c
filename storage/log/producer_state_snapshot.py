"""Producer-state snapshots kept alongside a partition's segments.

The idempotent producer's state (owned by broker/) is rebuilt on restart from
the newest snapshot at or below the log end, plus a replay of the log after
it, exactly like Kafka's `<offset>.snapshot` files. Storage treats the state
as an opaque blob: this module names, checksums, lists and prunes the files.

File layout: magic "RKPS" | version int16 | crc32c uint32 of the blob | blob.
A snapshot that fails its checksum is treated as absent (and removed).
"""
from __future__ import annotations

import posixpath
import struct

from crc32c import crc32c

from storage.env import FileSystem, write_file_atomic

__all__ = ["ProducerSnapshots", "SNAPSHOT_SUFFIX", "snapshot_file_name"]

SNAPSHOT_SUFFIX = ".snapshot"
_HEADER = struct.Struct(">4shI")
_MAGIC = b"RKPS"
_VERSION = 1


def snapshot_file_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def _offset_of(name: str) -> int | None:
    if not name.endswith(SNAPSHOT_SUFFIX):
        return None
    stem = name[: -len(SNAPSHOT_SUFFIX)]
    return int(stem) if stem.isdigit() else None


class ProducerSnapshots:
    def __init__(self, fs: FileSystem, log_dir: str):
        self.fs = fs
        self.dir = log_dir

    def offsets(self) -> list[int]:
        """Offsets of the snapshots on disk, ascending."""
        found = (_offset_of(n) for n in self.fs.listdir(self.dir))
        return sorted(o for o in found if o is not None)

    def path(self, offset: int) -> str:
        return posixpath.join(self.dir, snapshot_file_name(offset))

    async def save(self, offset: int, blob: bytes) -> None:
        """Write (atomically and durably) the state as of `offset` (the next offset to append)."""
        await write_file_atomic(self.fs, self.path(offset), _HEADER.pack(_MAGIC, _VERSION, crc32c(blob)) + blob)

    def load(self, offset: int) -> bytes | None:
        path = self.path(offset)
        if not self.fs.exists(path):
            return None
        f = self.fs.open(path)
        try:
            raw = f.read(0, f.size())
        finally:
            f.close()
        if len(raw) < _HEADER.size:
            return None
        magic, version, crc = _HEADER.unpack_from(raw)
        blob = raw[_HEADER.size :]
        if magic != _MAGIC or version != _VERSION or crc32c(blob) != crc:
            return None
        return blob

    def latest(self, up_to: int | None = None) -> tuple[int, bytes] | None:
        """The newest readable snapshot with offset <= `up_to`; unreadable ones are removed."""
        for offset in reversed(self.offsets()):
            if up_to is not None and offset > up_to:
                continue
            blob = self.load(offset)
            if blob is not None:
                return offset, blob
            self.fs.remove(self.path(offset))
        return None

    def truncate_after(self, end_offset: int) -> None:
        """The log was truncated to `end_offset`: snapshots beyond it describe lost records."""
        for offset in self.offsets():
            if offset > end_offset:
                self.fs.remove(self.path(offset))

    def delete_before(self, start_offset: int) -> None:
        """Drop snapshots below the log start: the records to replay after them are gone."""
        for offset in self.offsets():
            if offset < start_offset:
                self.fs.remove(self.path(offset))

    def delete_all(self) -> None:
        for offset in self.offsets():
            self.fs.remove(self.path(offset))
