"""The sparse time index of a segment: max timestamp so far -> offset.

As in Kafka's TimeIndex, an entry is 12 bytes (timestamp int64, offset relative
to the segment base as int32); entries are strictly increasing in both fields,
so a lookup of timestamp T gives the last entry with timestamp <= T: every
batch up to that entry's offset has a max timestamp <= the entry's, which lets
`offset_for_timestamp` start its scan there.
"""
from __future__ import annotations

import bisect
import struct

from storage.env import File
from storage.log.offset_index import CorruptIndexError

__all__ = ["TimeIndex"]

_ENTRY = struct.Struct(">qi")


class TimeIndex:
    ENTRY_SIZE = _ENTRY.size

    def __init__(self, file: File, base_offset: int, max_bytes: int):
        self.file = file
        self.base_offset = base_offset
        self.max_entries = max(1, max_bytes // self.ENTRY_SIZE)
        self._timestamps: list[int] = []
        self._offsets: list[int] = []

    @classmethod
    def load(cls, file: File, base_offset: int, max_bytes: int) -> "TimeIndex":
        index = cls(file, base_offset, max_bytes)
        data = file.read(0, file.size())
        if len(data) % cls.ENTRY_SIZE:
            raise CorruptIndexError(f"{file.path}: size {len(data)} is not a multiple of {cls.ENTRY_SIZE}")
        for timestamp, rel in _ENTRY.iter_unpack(data):
            offset = base_offset + rel
            if rel < 0 or (index._timestamps and (timestamp <= index._timestamps[-1] or offset < index._offsets[-1])):
                raise CorruptIndexError(f"{file.path}: entries out of order at timestamp {timestamp}")
            index._timestamps.append(timestamp)
            index._offsets.append(offset)
        return index

    def __len__(self) -> int:
        return len(self._timestamps)

    @property
    def is_full(self) -> bool:
        return len(self._timestamps) >= self.max_entries

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry, or (-1, base_offset)."""
        if not self._timestamps:
            return -1, self.base_offset
        return self._timestamps[-1], self._offsets[-1]

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._timestamps, self._offsets))

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add an entry if `timestamp` is later than the last one (else it adds nothing)."""
        if self._timestamps and timestamp <= self._timestamps[-1]:
            return
        if self._offsets and offset < self._offsets[-1]:
            raise ValueError(f"time index offset {offset} before the last entry's")
        self.file.append(_ENTRY.pack(timestamp, offset - self.base_offset))
        self._timestamps.append(timestamp)
        self._offsets.append(offset)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """The last entry with timestamp <= `timestamp`, or (-1, base_offset)."""
        i = bisect.bisect_right(self._timestamps, timestamp) - 1
        if i < 0:
            return -1, self.base_offset
        return self._timestamps[i], self._offsets[i]

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries whose offset >= `offset`."""
        keep = bisect.bisect_left(self._offsets, offset)
        if keep < len(self._offsets):
            del self._timestamps[keep:]
            del self._offsets[keep:]
            self.file.truncate(keep * self.ENTRY_SIZE)

    def reset(self) -> None:
        self._timestamps.clear()
        self._offsets.clear()
        self.file.truncate(0)

    def sanity_check(self, next_offset_bound: int | None = None) -> None:
        if self.file.size() != len(self._timestamps) * self.ENTRY_SIZE:
            raise CorruptIndexError(f"{self.file.path}: file size does not match its entries")
        if next_offset_bound is not None and self._offsets and self._offsets[-1] >= next_offset_bound:
            raise CorruptIndexError(f"{self.file.path}: last entry beyond the log")
