"""Shared helpers for the partition-log tests: a deterministic Env, batch builders,
a filesystem that crashes after N mutating operations, and log consistency checks."""
from __future__ import annotations

import random

import trio

from storage.env import TrioDeadlines
from storage.log.log import PartitionLog
from storage.log.segment import LogSegment
from storage.memfs import MemFile, MemFileSystem
from wire.records import SimpleRecord, build_batch, decode_batch


class FakeEnv(TrioDeadlines):
    """Env with a MemFileSystem, a settable wall clock and trio's (or a manual) monotonic clock."""

    def __init__(self, fs=None, *, seed: int = 0, wall_ms: int = 1_000_000, trio_clock: bool = True):
        self.fs = fs if fs is not None else MemFileSystem()
        self.rng = random.Random(seed)
        self.net = None
        self.wall = wall_ms
        self.mono = 0.0
        self.trio_clock = trio_clock

    def now(self) -> float:
        return trio.current_time() if self.trio_clock else self.mono

    def wall_ms(self) -> int:
        return self.wall

    async def sleep(self, seconds: float) -> None:
        if self.trio_clock:
            await trio.sleep(seconds)
        else:
            self.mono += seconds

    async def sleep_until(self, deadline: float) -> None:
        await trio.sleep_until(deadline)

    def uuid(self):
        from storage.env import uuid_from_rng

        return uuid_from_rng(self.rng)


class SimulatedCrash(Exception):
    """Raised by CrashingFS at the chosen operation: the machine loses power there."""


class _CrashingFile(MemFile):
    __slots__ = ()

    def write_at(self, offset, data):
        self._fs.tick()
        super().write_at(offset, data)

    def truncate(self, size):
        self._fs.tick()
        super().truncate(size)

    async def sync(self):
        self._fs.tick()
        await super().sync()


class CrashingFS(MemFileSystem):
    """MemFileSystem that raises SimulatedCrash at the `crash_at`-th mutating operation."""

    def __init__(self):
        super().__init__()
        self.ops = 0
        self.crash_at: int | None = None

    def tick(self) -> None:
        self.ops += 1
        if self.crash_at is not None and self.ops >= self.crash_at:
            self.crash_at = None
            raise SimulatedCrash(self.ops)

    def open(self, path, *, create=False):
        f = super().open(path, create=create)
        f.__class__ = _CrashingFile
        return f

    def rename(self, src, dst):
        self.tick()
        super().rename(src, dst)

    def remove(self, path):
        self.tick()
        super().remove(path)

    async def sync_dir(self, path):
        self.tick()
        await super().sync_dir(path)


def batch(offset: int, records: list[tuple[bytes | None, bytes | None]], *, ts: int = 1000,
          epoch: int = -1, **kwargs) -> bytes:
    """A batch at `offset` of (key, value) records with timestamps ts, ts+1, ..."""
    simple = [SimpleRecord(k, v, timestamp=ts + i) for i, (k, v) in enumerate(records)]
    return build_batch(simple, base_offset=offset, partition_leader_epoch=epoch, **kwargs)


def value_batch(n: int, size: int = 100, *, ts: int = 1000, key: bytes | None = None) -> bytes:
    """A client batch (base offset 0) of `n` records of `size`-byte values."""
    return batch(0, [(key, bytes([i % 251]) * size) for i in range(n)], ts=ts)


def all_batches(log: PartitionLog) -> list[bytes]:
    """Every batch of the log, in order, by walking the segment files."""
    out = []
    for segment in log.segments:
        for pos, header in segment.batches():
            out.append(segment.log.read(pos, header.size))
    return out


def all_records(log: PartitionLog):
    records = []
    for data in all_batches(log):
        records.extend(decode_batch(data)[1])
    return records


def check_consistent(log: PartitionLog) -> None:
    """Structural invariants: valid batches, increasing offsets, indexes agree with the data,
    every batch readable through `read`, and the log end matches the last batch."""
    previous_next = None
    for segment in log.segments:
        _check_segment(segment)
        for pos, header in segment.batches():
            data = segment.log.read(pos, header.size)
            decode_batch(data)  # raises on any corruption
            assert header.base_offset >= segment.base_offset
            if previous_next is not None:
                assert header.base_offset >= previous_next, (header.base_offset, previous_next)
            previous_next = header.next_offset
            if header.last_offset >= log.log_start_offset:
                fetched = log.read(max(header.base_offset, log.log_start_offset), 1)
                assert fetched.first_offset == header.base_offset
                assert fetched.read() == data
    expected_end = previous_next if previous_next is not None else log.active_segment.base_offset
    assert log.log_end_offset == max(expected_end, log.active_segment.base_offset)
    assert log.log_start_offset <= log.log_end_offset


def _check_segment(segment: LogSegment) -> None:
    headers = {pos: h for pos, h in segment.batches()}
    assert sum(h.size for h in headers.values()) == segment.size, "segment ends mid-batch"
    last = -1
    for offset, position in segment.offset_index.entries():
        assert position in headers, f"index entry ({offset}, {position}) not at a batch"
        assert headers[position].last_offset == offset
        assert offset > last
        last = offset
    by_last = {h.last_offset: h for h in headers.values()}
    max_so_far = -1
    for timestamp, offset in segment.time_index.entries():
        assert offset in by_last, f"time index offset {offset} is not a batch end"
        assert by_last[offset].max_timestamp == timestamp
        assert timestamp > max_so_far
        max_so_far = timestamp
    real_max = max((h.max_timestamp for h in headers.values()), default=-1)
    assert segment.max_timestamp == real_max
