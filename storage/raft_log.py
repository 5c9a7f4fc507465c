"""The durable Raft log: `<data-dir>/__cluster_metadata-0/<20-digit base offset>.log`.

The metadata log holds opaque entries `(offset, epoch, payload, control)`. Each
entry is one self-checking frame:

    length u32 | crc32c u32 | offset i64 | epoch i32 | flags u8 | payload
    `length` counts the bytes after itself; the CRC-32C covers offset..payload.

Why not RecordBatch v2 as Kafka does: the Raft core ships single opaque entries,
never client batches, so a flat frame keeps recovery to one loop and needs no
record codec. Every frame is checked on open.

The recovery point (file `recovery-point`: an offset) is where the last segment
starts once every earlier segment is fsynced whole; it is written at the first
flush after a segment rolls, so once per segment. Damage at or past it is a torn
tail and is cut: a power loss in the middle of writeback keeps any subset of the
unsynced sectors, so bad bytes there may have whole valid frames after them, and
none of it was flushed, so none of it was acknowledged (Kafka's recovery of its
active segment cuts there too). Damage before it, with a valid frame somewhere
after it, is damage to entries that were durable and may be committed: the store
refuses to open (DataDirError, one line naming the file and offset) unless the
caller allows cutting there (`cut_damage`, for an observer, which re-fetches what
it lost from the leader and has no vote to give on the strength of it).

Segments roll at `segment_bytes`; a new segment file is made durable with a
directory fsync at the next `flush()`. Appends are buffered in the page cache
until `flush()`, which the Raft driver awaits before acknowledging anything.
Segments must be contiguous: recovery drops a segment that does not start where
its predecessor ends (left over from a truncation interrupted by a crash).
"""
from __future__ import annotations

import logging
import posixpath
import struct
from dataclasses import dataclass, field
from typing import Iterable, NamedTuple, Sequence

from crc32c import crc32c

from storage.env import File, FileSystem, write_file_atomic
from storage.meta_properties import DataDirError

__all__ = ["LogRecord", "RaftLogStore", "segment_name", "DEFAULT_SEGMENT_BYTES", "MAX_ENTRY_BYTES",
           "RECOVERY_POINT_FILE"]

RECOVERY_POINT_FILE = "recovery-point"

log = logging.getLogger(__name__)

DEFAULT_SEGMENT_BYTES = 16 * 1024 * 1024
MAX_ENTRY_BYTES = 32 * 1024 * 1024
SUFFIX = ".log"

_PREFIX = struct.Struct(">II")  # length, crc
_BODY = struct.Struct(">qiB")  # offset, epoch, flags
HEADER_SIZE = _PREFIX.size + _BODY.size
_FLAG_CONTROL = 0x01


class LogRecord(NamedTuple):
    offset: int
    epoch: int
    payload: bytes
    control: bool = False


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}{SUFFIX}"


def encode_frame(offset: int, epoch: int, payload: bytes, control: bool) -> bytes:
    body = _BODY.pack(offset, epoch, _FLAG_CONTROL if control else 0) + payload
    return _PREFIX.pack(len(body) + 4, crc32c(body)) + body


@dataclass
class _Segment:
    base_offset: int
    file: File
    # positions[i] = file position of the frame of offset base_offset + i.
    positions: list[int] = field(default_factory=list)

    @property
    def end_offset(self) -> int:
        return self.base_offset + len(self.positions)


class RaftLogStore:
    """Segmented, CRC-framed, fsync-on-flush log of Raft entries. Open with `await RaftLogStore.open(...)`."""

    def __init__(self, fs: FileSystem, directory: str, segment_bytes: int):
        self.fs = fs
        self.directory = directory
        self.segment_bytes = segment_bytes
        self._segments: list[_Segment] = []
        self._last_epoch = -1
        self._dir_dirty = False  # a segment was created/removed since the last directory fsync
        self._unsynced: list[File] = []  # files written since their last fsync, in order
        self.recovered_bytes_cut = 0  # how many bytes recovery dropped (for logging)
        self.recovery_point = 0  # entries before it are durable (the module docstring says how)

    # ------------------------------------------------------------------ open
    @classmethod
    async def open(
        cls,
        fs: FileSystem,
        directory: str,
        *,
        start_offset: int = 0,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        cut_damage: bool = False,
    ) -> tuple["RaftLogStore", list[LogRecord]]:
        """Open (creating if needed) and recover the log; return it and every entry it holds.

        `start_offset` is where an empty log starts (the latest snapshot's end offset).
        Raises DataDirError for damage that is not a torn tail, unless `cut_damage`.
        """
        fs.makedirs(directory)
        store = cls(fs, directory, segment_bytes)
        store.recovery_point = store._read_recovery_point()
        records = store._recover(cut_damage)
        if not store._segments:
            store._new_segment(start_offset)
        await store.flush()
        return store, records

    def _recover(self, cut_damage: bool) -> list[LogRecord]:
        records: list[LogRecord] = []
        bases = sorted(
            int(name[: -len(SUFFIX)])
            for name in self.fs.listdir(self.directory)
            if name.endswith(SUFFIX) and name[: -len(SUFFIX)].isdigit()
        )
        for i, base in enumerate(bases):
            path = self._path(base)
            if self._segments and base != self._segments[-1].end_offset:
                # Not contiguous: a leftover of an interrupted truncation. It and all later go.
                for later in bases[i:]:
                    self.recovered_bytes_cut += self.fs.file_size(self._path(later))
                    self.fs.remove(self._path(later))
                self._dir_dirty = True
                break
            seg = _Segment(base, self.fs.open(path))
            self._segments.append(seg)
            good = self._scan(seg, records)
            if good < seg.file.size():
                later = bases[i + 1:]
                durable = seg.end_offset < self.recovery_point
                if durable and (self._frame_after(seg.file, good, seg.end_offset) or any(
                        self._starts_with_frame(b) for b in later)):
                    where = f"{path} at byte {good} (offset {seg.end_offset})"
                    if not cut_damage:
                        raise DataDirError(f"metadata log segment {where} is damaged and valid entries follow: "
                                           "refusing to start rather than drop entries that may be committed")
                    log.warning("metadata log segment %s is damaged; cutting the log there, the entries "
                                "after it are fetched again from the leader", where)
                self.recovered_bytes_cut += seg.file.size() - good
                seg.file.truncate(good)
                self._mark(seg.file)
        return records

    def _recovery_point_path(self) -> str:
        return posixpath.join(self.directory, RECOVERY_POINT_FILE)

    def _read_recovery_point(self) -> int:
        """The stored recovery point; 0 (nothing known durable) without a readable one."""
        path = self._recovery_point_path()
        if not self.fs.exists(path):
            return 0
        f = self.fs.open(path)
        try:
            text = f.read(0, min(f.size(), 32))
        finally:
            f.close()
        try:
            return max(0, int(text.decode("ascii").strip()))
        except (UnicodeDecodeError, ValueError):
            log.warning("%s is unreadable: recovering the whole metadata log as possibly torn", path)
            return 0

    async def _set_recovery_point(self, offset: int) -> None:
        await write_file_atomic(self.fs, self._recovery_point_path(), b"%d\n" % offset)
        self.recovery_point = offset

    def _scan(self, seg: _Segment, out: list[LogRecord]) -> int:
        """Read the frames of one segment into `out`; return the position of the first bad byte."""
        f = seg.file
        size = f.size()
        pos = 0
        # Read in large chunks: a frame-at-a-time pread would dominate start-up time.
        buf = b""
        buf_start = 0
        expected = seg.base_offset
        while pos + HEADER_SIZE <= size:
            if pos + HEADER_SIZE > buf_start + len(buf):
                buf_start, buf = pos, f.read(pos, max(1 << 20, HEADER_SIZE))
            length, crc = _PREFIX.unpack_from(buf, pos - buf_start)
            end = pos + 4 + length
            if length < _BODY.size + 4 or length > MAX_ENTRY_BYTES + _BODY.size + 4 or end > size:
                break
            if end > buf_start + len(buf):
                buf_start, buf = pos, f.read(pos, max(1 << 20, end - pos))
            body = buf[pos - buf_start + _PREFIX.size : end - buf_start]
            if crc32c(body) != crc:
                break
            offset, epoch, flags = _BODY.unpack_from(body)
            if offset != expected or epoch < self._last_epoch or flags & ~_FLAG_CONTROL:
                break
            out.append(LogRecord(offset, epoch, bytes(body[_BODY.size :]), bool(flags & _FLAG_CONTROL)))
            seg.positions.append(pos)
            self._last_epoch = epoch
            expected += 1
            pos = end
        return pos

    def _starts_with_frame(self, base: int) -> bool:
        f = self.fs.open(self._path(base))
        try:
            return self._frame_at(f.read(0, min(f.size(), MAX_ENTRY_BYTES + HEADER_SIZE)), 0, base)
        finally:
            f.close()

    def _frame_after(self, f: File, bad: int, offset: int) -> bool:
        """Whether a valid frame (of `offset` or later) starts anywhere after position `bad`."""
        data = f.read(bad, f.size() - bad)
        return any(self._frame_at(data, pos, offset, exact=False) for pos in range(1, len(data) - HEADER_SIZE + 1))

    @staticmethod
    def _frame_at(data: bytes, pos: int, offset: int, *, exact: bool = True) -> bool:
        """Whether a frame with a good CRC for `offset` (or, not `exact`, a plausible later
        one) starts at `pos` in `data`."""
        if pos + HEADER_SIZE > len(data):
            return False
        length, crc = _PREFIX.unpack_from(data, pos)
        if length < _BODY.size + 4 or pos + 4 + length > len(data):
            return False
        found, _, _ = _BODY.unpack_from(data, pos + _PREFIX.size)
        if found != offset if exact else not offset <= found < offset + len(data):
            return False
        return crc32c(data[pos + _PREFIX.size: pos + 4 + length]) == crc

    # ------------------------------------------------------------ accessors
    @property
    def start_offset(self) -> int:
        return self._segments[0].base_offset

    @property
    def end_offset(self) -> int:
        return self._segments[-1].end_offset

    @property
    def last_epoch(self) -> int:
        """Epoch of the last entry, -1 if the log is empty."""
        return self._last_epoch

    def segment_bases(self) -> list[int]:
        return [s.base_offset for s in self._segments]

    def read(self, start: int, end: int | None = None) -> list[LogRecord]:
        """Entries in [start, end) read back from the files (used by tests and tools)."""
        end = self.end_offset if end is None else min(end, self.end_offset)
        out: list[LogRecord] = []
        for seg in self._segments:
            if seg.end_offset <= start or seg.base_offset >= end:
                continue
            first = max(start, seg.base_offset)
            last = min(end, seg.end_offset)
            lo = seg.positions[first - seg.base_offset]
            hi = seg.positions[last - seg.base_offset] if last < seg.end_offset else seg.file.size()
            data = seg.file.read(lo, hi - lo)
            pos = 0
            while pos < len(data):
                (length,) = struct.unpack_from(">I", data, pos)
                offset, epoch, flags = _BODY.unpack_from(data, pos + _PREFIX.size)
                payload = data[pos + HEADER_SIZE : pos + 4 + length]
                out.append(LogRecord(offset, epoch, payload, bool(flags & _FLAG_CONTROL)))
                pos += 4 + length
        return out

    # ---------------------------------------------------------------- writes
    def append(self, records: Iterable) -> None:
        """Write entries (anything with offset/epoch/payload/control) at the end; durable after `flush()`."""
        seg = self._segments[-1]
        chunks: list[bytes] = []
        pos = seg.file.size()
        for r in records:
            if r.offset != seg.end_offset:
                raise ValueError(f"append of offset {r.offset} at log end {seg.end_offset}")
            if r.epoch < self._last_epoch:
                raise ValueError(f"append of epoch {r.epoch} after epoch {self._last_epoch}")
            if len(r.payload) > MAX_ENTRY_BYTES:
                raise ValueError(f"entry of {len(r.payload)} bytes exceeds {MAX_ENTRY_BYTES}")
            if pos >= self.segment_bytes and seg.positions:
                self._write(seg, chunks)
                chunks = []
                seg = self._new_segment(seg.end_offset)
                pos = 0
            frame = encode_frame(r.offset, r.epoch, bytes(r.payload), bool(r.control))
            chunks.append(frame)
            seg.positions.append(pos)
            pos += len(frame)
            self._last_epoch = r.epoch
        self._write(seg, chunks)

    def _write(self, seg: _Segment, chunks: list[bytes]) -> None:
        if chunks:
            seg.file.append(b"".join(chunks))
            self._mark(seg.file)

    def _mark(self, f: File) -> None:
        if not self._unsynced or self._unsynced[-1] is not f:
            self._unsynced.append(f)

    async def flush(self) -> None:
        """fsync: after it returns every appended entry survives a crash."""
        while self._unsynced:
            # A segment that rolled since the last flush is synced here too.
            await self._unsynced[0].sync()
            self._unsynced.pop(0)
        if self._dir_dirty:
            await self.fs.sync_dir(self.directory)
            self._dir_dirty = False
        if self._segments[-1].base_offset > self.recovery_point:  # every earlier segment is synced whole
            await self._set_recovery_point(self._segments[-1].base_offset)

    async def truncate_to(self, end_offset: int) -> None:
        """Drop every entry at or after `end_offset`; afterwards the whole log is durable."""
        if end_offset >= self.end_offset:
            await self.flush()
            return
        if end_offset < self.start_offset:
            raise ValueError(f"truncate to {end_offset} below log start {self.start_offset}")
        if end_offset < self.recovery_point:  # entries rewritten below it are not durable yet
            await self._set_recovery_point(max(self.start_offset, self._base_of(end_offset)))
        # Later segments go first (the directory is synced before the cut), so a crash
        # in between leaves a contiguous log that still ends at or after the cut.
        while len(self._segments) > 1 and self._segments[-1].base_offset >= end_offset:
            seg = self._segments.pop()
            self._unsynced = [f for f in self._unsynced if f is not seg.file]
            seg.file.close()
            self.fs.remove(self._path(seg.base_offset))
            self._dir_dirty = True
        await self.flush()
        seg = self._segments[-1]
        keep = end_offset - seg.base_offset
        if keep < len(seg.positions):
            seg.file.truncate(seg.positions[keep])
            del seg.positions[keep:]
            self._mark(seg.file)
        await self.flush()
        self._last_epoch = self._epoch_before(end_offset)

    def _base_of(self, offset: int) -> int:
        """The base offset of the segment holding `offset` (the last one if past the end)."""
        return max((s.base_offset for s in self._segments if s.base_offset <= offset), default=self.start_offset)

    def _epoch_before(self, end_offset: int) -> int:
        if end_offset <= self.start_offset:
            return -1
        return self.read(end_offset - 1, end_offset)[0].epoch

    async def reset(self, start_offset: int) -> None:
        """Drop the whole log and start empty at `start_offset` (after installing a snapshot)."""
        await self._set_recovery_point(start_offset)  # first: nothing past it is durable from now on
        for seg in self._segments:
            seg.file.close()
            self.fs.remove(self._path(seg.base_offset))
        self._segments = []
        self._unsynced = []
        self._new_segment(start_offset)
        self._last_epoch = -1
        await self.fs.sync_dir(self.directory)
        self._dir_dirty = False

    async def delete_before(self, offset: int) -> int:
        """Remove whole segments that end at or before `offset`; return the new start offset."""
        removed = False
        while len(self._segments) > 1 and self._segments[1].base_offset <= offset:
            seg = self._segments.pop(0)
            self._unsynced = [f for f in self._unsynced if f is not seg.file]
            seg.file.close()
            self.fs.remove(self._path(seg.base_offset))
            removed = True
        if removed:
            await self.fs.sync_dir(self.directory)
        return self.start_offset

    def close(self) -> None:
        for seg in self._segments:
            seg.file.close()

    # --------------------------------------------------------------- helpers
    def _path(self, base_offset: int) -> str:
        return posixpath.join(self.directory, segment_name(base_offset))

    def _new_segment(self, base_offset: int) -> _Segment:
        path = self._path(base_offset)
        f = self.fs.open(path, create=True)
        f.truncate(0)
        seg = _Segment(base_offset, f)
        self._segments.append(seg)
        self._dir_dirty = True
        return seg


def records_from(entries: Sequence) -> list[LogRecord]:
    """Convert any entry objects (offset/epoch/payload/control) to LogRecords."""
    return [LogRecord(e.offset, e.epoch, bytes(e.payload), bool(e.control)) for e in entries]
