"""The durable Raft log: `<data-dir>/__cluster_metadata-0/<20-digit base offset>.log`.

The metadata log holds opaque entries `(offset, epoch, payload, control)`. Each
entry is one self-checking frame:

    length u32 | crc32c u32 | offset i64 | epoch i32 | flags u8 | flushed i64 | payload
    `length` counts the bytes after itself; the CRC-32C covers offset..payload.
    `flushed` is the log's end offset as of the last completed flush when the frame was
    written (frames of older logs lack it: flag 0x02 clear).

Why not RecordBatch v2 as Kafka does: the Raft core ships single opaque entries,
never client batches, so a flat frame keeps recovery to one loop and needs no
record codec. Every frame is checked on open.

Bad bytes at offset h are a torn tail, and are cut, unless a valid frame after them
says that h had been flushed (its `flushed` > h). A power loss in the middle of
writeback keeps any subset of the unsynced sectors, so a torn tail can have whole
valid frames after the hole; but each of those was written after the last flush
that completed, and no flush completed past h, so none of them says so. Bad bytes
that a later frame proves flushed are damage to entries that were durable and may
be committed: the store refuses to open (DataDirError, one line naming the file
and offset) unless the caller allows cutting there (`cut_damage`, for an observer,
which re-fetches what it lost from the leader and has no vote to give on the
strength of it). A frame without `flushed` (an older log) after the bad bytes
counts as proof. Damage in the last flushed batch, with nothing written after it,
cannot be told from a torn tail and is cut.

Segments roll at `segment_bytes`; a new segment file is made durable with a
directory fsync at the next `flush()`. Appends are buffered in the page cache
until `flush()`, which the Raft driver awaits before acknowledging anything.
Segments must be contiguous: recovery drops a segment that does not start where
its predecessor ends (left over from a truncation interrupted by a crash).
"""
from __future__ import annotations

import itertools
import logging
import posixpath
import struct
from dataclasses import dataclass, field
from typing import Iterable, NamedTuple, Sequence

from crc32c import crc32c

from storage.env import File, FileSystem
from storage.meta_properties import DataDirError

__all__ = ["LogRecord", "RaftLogStore", "segment_name", "DEFAULT_SEGMENT_BYTES", "MAX_ENTRY_BYTES"]

log = logging.getLogger(__name__)

DEFAULT_SEGMENT_BYTES = 16 * 1024 * 1024
MAX_ENTRY_BYTES = 32 * 1024 * 1024
SUFFIX = ".log"

_PREFIX = struct.Struct(">II")  # length, crc
_BODY = struct.Struct(">qiB")  # offset, epoch, flags
_FLUSHED = struct.Struct(">q")  # the log's flushed end offset when the frame was written
HEADER_SIZE = _PREFIX.size + _BODY.size + _FLUSHED.size  # of the frames written now
_FLAG_CONTROL = 0x01
_FLAG_FLUSHED = 0x02
_FLAGS = _FLAG_CONTROL | _FLAG_FLUSHED
_UNKNOWN_FLUSHED = 1 << 63  # an older frame's: taken as proof that what precedes it was flushed
_MIN_FRAME = _PREFIX.size + _BODY.size  # an older frame's header


class LogRecord(NamedTuple):
    offset: int
    epoch: int
    payload: bytes
    control: bool = False


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}{SUFFIX}"


def encode_frame(offset: int, epoch: int, payload: bytes, control: bool, flushed: int) -> bytes:
    flags = _FLAG_FLUSHED | (_FLAG_CONTROL if control else 0)
    body = _BODY.pack(offset, epoch, flags) + _FLUSHED.pack(flushed) + payload
    return _PREFIX.pack(len(body) + 4, crc32c(body)) + body


def _payload_start(flags: int) -> int:
    """Where a frame body's payload starts."""
    return _BODY.size + (_FLUSHED.size if flags & _FLAG_FLUSHED else 0)


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
        self._flushed_end = 0  # the end offset as of the last completed flush: each new frame says it

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
                if self._proven_flushed(seg.file, good, seg.end_offset, bases[i + 1:]):
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

    def _scan(self, seg: _Segment, out: list[LogRecord]) -> int:
        """Read the frames of one segment into `out`; return the position of the first bad byte."""
        f = seg.file
        size = f.size()
        pos = 0
        # Read in large chunks: a frame-at-a-time pread would dominate start-up time.
        buf = b""
        buf_start = 0
        expected = seg.base_offset
        while pos + _MIN_FRAME <= size:
            if pos + _MIN_FRAME > buf_start + len(buf):
                buf_start, buf = pos, f.read(pos, max(1 << 20, HEADER_SIZE))
            length, crc = _PREFIX.unpack_from(buf, pos - buf_start)
            end = pos + 4 + length
            if length < _BODY.size + 4 or length > MAX_ENTRY_BYTES + HEADER_SIZE - 4 or end > size:
                break
            if end > buf_start + len(buf):
                buf_start, buf = pos, f.read(pos, max(1 << 20, end - pos))
            body = buf[pos - buf_start + _PREFIX.size : end - buf_start]
            if crc32c(body) != crc:
                break
            offset, epoch, flags = _BODY.unpack_from(body)
            start = _payload_start(flags)
            if offset != expected or epoch < self._last_epoch or flags & ~_FLAGS or len(body) < start:
                break
            out.append(LogRecord(offset, epoch, bytes(body[start:]), bool(flags & _FLAG_CONTROL)))
            seg.positions.append(pos)
            self._last_epoch = epoch
            expected += 1
            pos = end
        return pos

    def _proven_flushed(self, f: File, bad: int, offset: int, later: list[int]) -> bool:
        """Whether a valid frame (of `offset` or later) after position `bad` of `f`, or in one of
        the `later` segments, says a flush had passed `offset`. Reads a later segment only
        while no frame has said so."""
        regions = itertools.chain([(f.read(bad, f.size() - bad), 1)], ((self._read_all(b), 0) for b in later))
        for data, pos in regions:
            while pos <= len(data) - _MIN_FRAME:
                flushed = self._frame_at(data, pos, offset)
                if flushed is None:
                    pos += 1  # look for the next frame a byte further
                elif flushed > offset:
                    return True
                else:
                    pos += 4 + _PREFIX.unpack_from(data, pos)[0]  # frames follow one another
        return False

    def _read_all(self, base: int) -> bytes:
        f = self.fs.open(self._path(base))
        try:
            return f.read(0, f.size())
        finally:
            f.close()

    @staticmethod
    def _frame_at(data: bytes, pos: int, offset: int) -> int | None:
        """The `flushed` of a frame with a good CRC and a plausible offset (`offset` or later)
        starting at `pos` in `data` (_UNKNOWN_FLUSHED for an older frame); None if none does."""
        if pos + _MIN_FRAME > len(data):
            return None
        length, crc = _PREFIX.unpack_from(data, pos)
        if length < _BODY.size + 4 or pos + 4 + length > len(data):
            return None
        found, _, flags = _BODY.unpack_from(data, pos + _PREFIX.size)
        if not offset <= found < offset + len(data) or length + 4 < _PREFIX.size + _payload_start(flags):
            return None  # not a later entry, or too short to hold its own header
        if crc32c(data[pos + _PREFIX.size: pos + 4 + length]) != crc:
            return None
        if not flags & _FLAG_FLUSHED:
            return _UNKNOWN_FLUSHED
        return _FLUSHED.unpack_from(data, pos + _MIN_FRAME)[0]

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
                payload = data[pos + _PREFIX.size + _payload_start(flags) : pos + 4 + length]
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
            frame = encode_frame(r.offset, r.epoch, bytes(r.payload), bool(r.control), self._flushed_end)
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
        self._flushed_end = self.end_offset

    async def truncate_to(self, end_offset: int) -> None:
        """Drop every entry at or after `end_offset`; afterwards the whole log is durable."""
        if end_offset >= self.end_offset:
            await self.flush()
            return
        if end_offset < self.start_offset:
            raise ValueError(f"truncate to {end_offset} below log start {self.start_offset}")
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

    def _epoch_before(self, end_offset: int) -> int:
        if end_offset <= self.start_offset:
            return -1
        return self.read(end_offset - 1, end_offset)[0].epoch

    async def reset(self, start_offset: int) -> None:
        """Drop the whole log and start empty at `start_offset` (after installing a snapshot)."""
        for seg in self._segments:
            seg.file.close()
            self.fs.remove(self._path(seg.base_offset))
        self._segments = []
        self._unsynced = []
        self._new_segment(start_offset)
        self._last_epoch = -1
        await self.fs.sync_dir(self.directory)
        self._dir_dirty = False
        self._flushed_end = start_offset

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
