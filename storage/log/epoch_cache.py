"""Leader-epoch cache: which leader epoch started at which offset.

Kafka's LeaderEpochFileCache. Each entry (epoch, start_offset) says that
records from `start_offset` on were written by the leader of `epoch`, until
the next entry. Followers use `end_offset_for_epoch` (OffsetsForLeaderEpoch /
diverging epoch in Fetch) to find where their log diverges from the leader's.

Changes are made in memory (the append path is synchronous) and persisted to
`leader-epoch-checkpoint` by `flush()`; the partition log calls it before it
advances its recovery point, and recovery re-derives entries for the records
after that point, so the file never needs to be ahead of the data.
"""
from __future__ import annotations

import bisect
import posixpath

import trio

from storage.env import FileSystem
from storage.log.checkpoints import CorruptCheckpointError, read_entries, write_entries

__all__ = ["LeaderEpochCache", "EpochEntry", "LEADER_EPOCH_CHECKPOINT", "UNDEFINED_EPOCH", "UNDEFINED_OFFSET"]

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1

EpochEntry = tuple[int, int]  # (epoch, start_offset)


class LeaderEpochCache:
    def __init__(self, fs: FileSystem, log_dir: str, entries: list[EpochEntry] | None = None):
        self.fs = fs
        self.path = posixpath.join(log_dir, LEADER_EPOCH_CHECKPOINT)
        self._epochs: list[int] = [e for e, _ in entries or ()]
        self._starts: list[int] = [s for _, s in entries or ()]
        self.dirty = False
        self._write_done: trio.Event | None = None  # set when the write under way ends

    @classmethod
    def load(cls, fs: FileSystem, log_dir: str) -> "LeaderEpochCache":
        """Read the checkpoint; a missing or unreadable file gives an empty cache
        (recovery rebuilds entries from the batches it scans)."""
        cache = cls(fs, log_dir)
        try:
            rows = read_entries(fs, cache.path, 2) or []
            entries = [(int(e), int(s)) for e, s in rows]
        except (CorruptCheckpointError, ValueError):
            cache.dirty = True
            return cache
        for epoch, start in entries:
            cache.assign(epoch, start)
        cache.dirty = False
        return cache

    # -- queries ------------------------------------------------------------
    def entries(self) -> list[EpochEntry]:
        return list(zip(self._epochs, self._starts))

    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return (self._epochs[0], self._starts[0]) if self._epochs else None

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch that wrote `offset` (UNDEFINED_EPOCH if before the first entry)."""
        i = bisect.bisect_right(self._starts, offset) - 1
        return self._epochs[i] if i >= 0 else UNDEFINED_EPOCH

    def end_offset_for_epoch(self, requested: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as in Kafka: the largest epoch <= `requested` and the
        start offset of the first epoch after it (the log end for the latest epoch)."""
        if requested == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if requested == self._epochs[-1]:
            return requested, log_end_offset
        higher = bisect.bisect_right(self._epochs, requested)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if higher == 0:
            return requested, self._starts[0]
        return self._epochs[higher - 1], self._starts[higher]

    # -- updates ------------------------------------------------------------
    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset` (a no-op if it is already known)."""
        if epoch < 0:
            return False
        if self._epochs and self._epochs[-1] == epoch and self._starts[-1] <= start_offset:
            return False
        # Entries must increase in both epoch and start offset: drop what contradicts.
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start_offset):
            self._epochs.pop()
            self._starts.pop()
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        self.dirty = True
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Remove entries starting at or after `end_offset` (the log was truncated there)."""
        keep = bisect.bisect_left(self._starts, end_offset)
        if keep < len(self._starts):
            del self._epochs[keep:]
            del self._starts[keep:]
            self.dirty = True

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at `start_offset`: drop older entries, keeping the epoch
        that covers `start_offset` with its start moved up to it."""
        i = bisect.bisect_right(self._starts, start_offset) - 1
        if i < 0 or (i == 0 and self._starts[0] == start_offset):
            return
        del self._epochs[:i]
        del self._starts[:i]
        self._starts[0] = start_offset
        self.dirty = True

    def clear(self) -> None:
        if self._epochs:
            self._epochs.clear()
            self._starts.clear()
            self.dirty = True

    @property
    def unsaved(self) -> bool:
        """Entries not yet known to be on disk (changed, or being written right now)."""
        return self.dirty or self._write_done is not None

    async def flush(self) -> None:
        """Persist the entries; returns once what the caller saw is on disk. One writer at a
        time: two would rename each other's temporary file away (an I/O error, dir offline)."""
        while self._write_done is not None:
            await self._write_done.wait()
        # (Not a trio.Lock: recovery and the log model tests drive this without a trio run
        # when nothing suspends, and an uncontended flush must not need one.)
        done = self._write_done = trio.Event()
        try:
            while self.dirty:
                self.dirty = False
                await write_entries(self.fs, self.path, self.entries())
        finally:
            self._write_done = None
            done.set()
