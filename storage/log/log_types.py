"""What the partition log hands back, and the errors it raises."""
from __future__ import annotations

from dataclasses import dataclass

from storage.env import File

__all__ = [
    "AppendInfo",
    "FetchData",
    "TimestampOffset",
    "LogError",
    "OffsetOutOfRangeError",
    "InvalidAppendOffsetError",
    "RecordTooLargeError",
    "EMPTY_FETCH",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
]

EARLIEST_TIMESTAMP = -2  # ListOffsets sentinels, as Kafka
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3


class LogError(Exception):
    """Base of the partition log's own errors (bad bytes raise wire's CorruptRecordError)."""


class OffsetOutOfRangeError(LogError):
    def __init__(self, offset: int, log_start: int, log_end: int):
        super().__init__(f"offset {offset} outside the log [{log_start}, {log_end}]")
        self.offset, self.log_start, self.log_end = offset, log_start, log_end


class InvalidAppendOffsetError(LogError):
    """A follower append whose offsets do not continue the log."""


class RecordTooLargeError(LogError):
    """A batch larger than max.message.bytes (or than a whole segment)."""


@dataclass(frozen=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    max_timestamp: int
    log_append_time: int  # -1 unless the log stamped LogAppendTime
    batches: int
    size: int


@dataclass(frozen=True)
class FetchData:
    """Whole batches at [position, position + size) of `file` (size 0: nothing to read)."""

    file: File | None
    position: int
    size: int
    first_offset: int  # base offset of the first batch; -1 when empty

    def read(self) -> bytes:
        return self.file.read(self.position, self.size) if self.size else b""

    async def send_to(self, stream) -> int:
        return await self.file.send_to(stream, self.position, self.size) if self.size else 0


EMPTY_FETCH = FetchData(None, 0, 0, -1)


@dataclass(frozen=True)
class TimestampOffset:
    timestamp: int
    offset: int
    leader_epoch: int
