"""RaftLog: the core's in-memory view of its replicated log.

    [snapshot: everything below snapshot end]  [entries: start_offset .. end_offset)

The driver builds it from disk at start (latest snapshot + the entries after the
log start); afterwards only the core mutates it and mirrors each mutation to disk
through `Actions`. `start_offset <= snapshot end` once a snapshot exists (entries
just behind the snapshot may be kept), and the log is never empty of history:
with no entries, the snapshot id stands in for the last entry.
"""
from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence

from raft.entry import Entry
from raft.errors import LogInvariantError

__all__ = ["RaftLog", "NO_SNAPSHOT"]

NO_SNAPSHOT = (0, 0)  # (end_offset, epoch) of "nothing snapshotted yet"


class RaftLog:
    def __init__(
        self,
        entries: Iterable[Entry] = (),
        snapshot_id: tuple[int, int] = NO_SNAPSHOT,
        snapshot: bytes | None = None,
    ):
        self.snapshot_id = (int(snapshot_id[0]), int(snapshot_id[1]))
        self.snapshot = snapshot
        entries = list(entries)
        snap_end, snap_epoch = self.snapshot_id
        if entries and snap_end > 0 and not self._consistent_with_snapshot(entries):
            # A crash between writing a snapshot and dropping the old log: the snapshot wins.
            entries = []
        self.start_offset = entries[0].offset if entries else snap_end
        self.entries: list[Entry] = []
        self._epoch_starts: list[tuple[int, int]] = []  # (epoch, first offset) per epoch run
        self._extend(entries, expected=self.start_offset)

    def _consistent_with_snapshot(self, entries: Sequence[Entry]) -> bool:
        snap_end, snap_epoch = self.snapshot_id
        first, last = entries[0].offset, entries[-1].offset
        if not first <= snap_end or last + 1 < snap_end:
            return False
        return snap_end == first or entries[snap_end - 1 - first].epoch == snap_epoch

    # ------------------------------------------------------------------ reads

    @property
    def end_offset(self) -> int:
        """Exclusive end: the offset the next entry gets."""
        return self.entries[-1].offset + 1 if self.entries else self.start_offset

    @property
    def last_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else self.snapshot_id[1]

    @property
    def has_snapshot(self) -> bool:
        return self.snapshot_id != NO_SNAPSHOT

    def entry(self, offset: int) -> Entry | None:
        if self.start_offset <= offset < self.end_offset:
            return self.entries[offset - self.start_offset]
        return None

    def epoch_at(self, offset: int) -> int | None:
        """Epoch of the entry at offset, falling back to the snapshot id for its last offset."""
        e = self.entry(offset)
        if e is not None:
            return e.epoch
        if offset == self.snapshot_id[0] - 1:
            return self.snapshot_id[1]
        if offset == -1:
            return 0
        return None

    def read(self, offset: int, max_bytes: int) -> list[Entry]:
        """Entries from offset up to max_bytes (always at least one if any exist)."""
        if offset < self.start_offset:
            raise LogInvariantError(f"read at {offset} below log start {self.start_offset}")
        out: list[Entry] = []
        size = 0
        for i in range(offset - self.start_offset, len(self.entries)):
            e = self.entries[i]
            size += e.size()
            if out and size > max_bytes:
                break
            out.append(e)
        return out

    def entries_between(self, start: int, end: int) -> list[Entry]:
        lo = max(start, self.start_offset) - self.start_offset
        hi = max(min(end, self.end_offset) - self.start_offset, lo)
        return self.entries[lo:hi]

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= `epoch` in this log, the end offset of that epoch's run).

        Kafka's `endOffsetForEpoch`: how a leader tells a follower where their logs diverge.
        """
        epochs = [e for e, _ in self._epoch_starts]
        i = bisect.bisect_right(epochs, epoch)
        if i == 0:
            # Nothing in the entries at or below that epoch: the snapshot is the floor.
            snap_end, snap_epoch = self.snapshot_id
            if snap_epoch <= epoch:
                return (snap_epoch, self.start_offset)
            return (0, 0)
        found_epoch = self._epoch_starts[i - 1][0]
        end = self._epoch_starts[i][1] if i < len(self._epoch_starts) else self.end_offset
        return (found_epoch, end)

    # -------------------------------------------------------------- mutations

    def append(self, entries: Sequence[Entry]) -> None:
        self._extend(entries, expected=self.end_offset)

    def _extend(self, entries: Iterable[Entry], expected: int) -> None:
        if self.entries:
            last_epoch = self.entries[-1].epoch
        elif expected >= self.snapshot_id[0]:
            last_epoch = self.snapshot_id[1]
        else:
            # Entries kept just behind the snapshot may predate its epoch: the snapshot's
            # epoch only bounds what comes after its end.
            last_epoch = 0
        for e in entries:
            if e.offset != expected:
                raise LogInvariantError(f"entry offset {e.offset}, expected {expected}")
            if e.epoch < last_epoch:
                raise LogInvariantError(f"entry epoch {e.epoch} below {last_epoch} at {e.offset}")
            if not self._epoch_starts or self._epoch_starts[-1][0] != e.epoch:
                self._epoch_starts.append((e.epoch, e.offset))
            self.entries.append(e)
            last_epoch = e.epoch
            expected += 1

    def truncate_to(self, end_offset: int) -> None:
        """Drop entries at and after end_offset."""
        if end_offset < max(self.start_offset, self.snapshot_id[0]):
            raise LogInvariantError(f"truncate to {end_offset} below the snapshot/log start")
        del self.entries[end_offset - self.start_offset :]
        while self._epoch_starts and self._epoch_starts[-1][1] >= end_offset:
            self._epoch_starts.pop()

    def set_snapshot(self, snapshot_id: tuple[int, int], data: bytes) -> None:
        """A snapshot of the committed prefix up to snapshot_id's end now exists."""
        end, epoch = snapshot_id
        if end < self.snapshot_id[0] or end > self.end_offset or end < self.start_offset:
            raise LogInvariantError(f"snapshot {snapshot_id} outside the log")
        if end > 0 and self.epoch_at(end - 1) != epoch:
            raise LogInvariantError(f"snapshot {snapshot_id} epoch does not match the log")
        self.snapshot_id = (end, epoch)
        self.snapshot = data

    def delete_before(self, offset: int) -> None:
        """Log cleaning: forget entries below offset (must be covered by the snapshot)."""
        if offset > self.snapshot_id[0]:
            raise LogInvariantError(f"cleaning to {offset} past the snapshot {self.snapshot_id}")
        if offset <= self.start_offset:
            return
        del self.entries[: offset - self.start_offset]
        self.start_offset = offset
        while len(self._epoch_starts) > 1 and self._epoch_starts[1][1] <= offset:
            self._epoch_starts.pop(0)
        if self._epoch_starts and self.entries:
            self._epoch_starts[0] = (self._epoch_starts[0][0], offset)
        elif not self.entries:
            self._epoch_starts = []

    def reset_to_snapshot(self, snapshot_id: tuple[int, int], data: bytes) -> None:
        """Follower install: the whole log is replaced by the snapshot."""
        self.snapshot_id = (int(snapshot_id[0]), int(snapshot_id[1]))
        self.snapshot = data
        self.entries = []
        self._epoch_starts = []
        self.start_offset = self.snapshot_id[0]

    def __repr__(self) -> str:
        return (
            f"RaftLog(start={self.start_offset}, end={self.end_offset}, "
            f"snapshot={self.snapshot_id}, last_epoch={self.last_epoch})"
        )
