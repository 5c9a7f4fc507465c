"""The sparse offset index of a segment: offset -> file position.

Like Kafka's OffsetIndex, an entry is 8 bytes (offset relative to the segment's
base offset as int32, position as int32) and maps a batch's *last* offset to
the position where that batch starts; entries are added every
`index.interval.bytes` of log data. A lookup gives the last entry at or below
the target, from which the caller scans batch headers forward.

Entries live in memory as two parallel lists (bisect on offsets) and the file
is append-only; the file is only trusted after a clean shutdown (see
`sanity_check`) and otherwise rebuilt from the log by recovery.
"""
from __future__ import annotations

import bisect
import struct

from storage.env import File

__all__ = ["OffsetIndex", "CorruptIndexError"]

_ENTRY = struct.Struct(">ii")


class CorruptIndexError(Exception):
    """An index file does not match its log and must be rebuilt."""


class OffsetIndex:
    ENTRY_SIZE = _ENTRY.size

    def __init__(self, file: File, base_offset: int, max_bytes: int):
        self.file = file
        self.base_offset = base_offset
        self.max_entries = max(1, max_bytes // self.ENTRY_SIZE)
        self._offsets: list[int] = []
        self._positions: list[int] = []

    @classmethod
    def load(cls, file: File, base_offset: int, max_bytes: int) -> "OffsetIndex":
        index = cls(file, base_offset, max_bytes)
        data = file.read(0, file.size())
        if len(data) % cls.ENTRY_SIZE:
            raise CorruptIndexError(f"{file.path}: size {len(data)} is not a multiple of {cls.ENTRY_SIZE}")
        last_offset, last_position = -1, -1
        for rel, position in _ENTRY.iter_unpack(data):
            offset = base_offset + rel
            if rel < 0 or offset <= last_offset or position <= last_position:
                raise CorruptIndexError(f"{file.path}: entries out of order at offset {offset}")
            index._offsets.append(offset)
            index._positions.append(position)
            last_offset, last_position = offset, position
        return index

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def is_full(self) -> bool:
        return len(self._offsets) >= self.max_entries

    @property
    def last_offset(self) -> int:
        return self._offsets[-1] if self._offsets else self.base_offset

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._offsets, self._positions))

    def append(self, offset: int, position: int) -> None:
        if self._offsets and (offset <= self._offsets[-1] or position <= self._positions[-1]):
            raise ValueError(f"index entry ({offset}, {position}) not after the last one")
        self.file.append(_ENTRY.pack(offset - self.base_offset, position))
        self._offsets.append(offset)
        self._positions.append(position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """The last entry whose offset <= `offset`, or (base_offset, 0)."""
        i = bisect.bisect_right(self._offsets, offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self._offsets[i], self._positions[i]

    def batch_start_at_or_before(self, position: int) -> int:
        """The position of the last indexed batch starting at or before `position` (0 if none)."""
        i = bisect.bisect_right(self._positions, position) - 1
        return self._positions[i] if i >= 0 else 0

    def truncate_to_position(self, position: int) -> None:
        """Drop entries pointing at or beyond `position` (the log is cut there)."""
        keep = bisect.bisect_left(self._positions, position)
        self._truncate_entries(keep)

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries whose offset >= `offset`."""
        self._truncate_entries(bisect.bisect_left(self._offsets, offset))

    def _truncate_entries(self, keep: int) -> None:
        if keep < len(self._offsets):
            del self._offsets[keep:]
            del self._positions[keep:]
            self.file.truncate(keep * self.ENTRY_SIZE)

    def reset(self) -> None:
        self._offsets.clear()
        self._positions.clear()
        self.file.truncate(0)

    def sanity_check(self, log_size: int) -> None:
        """Cheap consistency check against the log size, as Kafka does on clean load."""
        if self.file.size() != len(self._offsets) * self.ENTRY_SIZE:
            raise CorruptIndexError(f"{self.file.path}: file size does not match its entries")
        if self._positions and self._positions[-1] >= log_size:
            raise CorruptIndexError(f"{self.file.path}: last entry points past the end of the log")
