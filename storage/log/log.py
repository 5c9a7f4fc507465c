"""The partition log (Kafka's UnifiedLog + LocalLog): segments, appends, reads, truncation.

Usable from async code: appends and reads are synchronous (page cache), the
calls that fsync or change the directory are async. One writer per partition
is assumed (the leader's produce path or the follower's fetcher); readers may
run at any time, including while the cleaner rewrites segments: a read works
on the segment map as it was when it started, and replaced or deleted
segments keep their open files for `file.delete.delay.ms` before they are
closed, so a `FetchData` handed to the network stays valid while it is sent.

Durability: data is durable up to `recovery_point` (advanced by `flush`).
The directory is only made durable after every rolled segment is fsynced
(`_sync_dir`), which is what lets recovery assume only the last segment can
be torn.

One class of ~500 lines on purpose: it is the single owner of the segment map and of
the offsets every mutation here must keep consistent (log start, end, recovery point,
high watermark); the pieces with a concept of their own already live beside it
(recovery, segments, epoch cache, producer snapshots, cleaner, retention policy).
"""
from __future__ import annotations

import posixpath
from typing import Awaitable, Callable

from sortedcontainers import SortedDict

from storage.env import Env
from storage.log.epoch_cache import LeaderEpochCache
from storage.log.log_config import LogConfig
from storage.log.log_types import (
    EARLIEST_TIMESTAMP,
    EMPTY_FETCH,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    AppendInfo,
    FetchData,
    InvalidAppendOffsetError,
    LogError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    TimestampOffset,
)
from storage.log.producer_state_snapshot import ProducerSnapshots
from storage.log.recovery import RecoveryStats, load_log
from storage.log.retention import segments_to_delete
from storage.log.segment import DELETED_SUFFIX, SWAP_SUFFIX, LogSegment
from storage.log.txn_index import AbortedTxn
from wire.batch_header import iter_batches, set_base_offset, set_leader_epoch, set_max_timestamp
from wire.errors import CorruptRecordError

__all__ = [
    "PartitionLog",
    "AppendInfo",
    "FetchData",
    "TimestampOffset",
    "LogError",
    "OffsetOutOfRangeError",
    "InvalidAppendOffsetError",
    "RecordTooLargeError",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
]

RecoveryPointListener = Callable[["PartitionLog"], Awaitable[None]]


class PartitionLog:
    def __init__(self, env: Env, log_dir: str, config: LogConfig, loaded, *, name: str | None = None):
        self.env = env
        self.fs = env.fs
        self.dir = log_dir
        self.name = name or posixpath.basename(log_dir)
        self.config = config
        self._segments: SortedDict = loaded.segments
        self._log_end_offset: int = loaded.log_end_offset
        self._log_start_offset: int = loaded.log_start_offset
        self._recovery_point: int = loaded.recovery_point
        self._high_watermark: int = loaded.log_start_offset
        self.epoch_cache: LeaderEpochCache = loaded.epoch_cache
        self.producer_snapshots = ProducerSnapshots(self.fs, log_dir)
        self.recovery_stats: RecoveryStats = loaded.stats
        self.on_recovery_point_lowered: RecoveryPointListener | None = None
        self._pending_deletes: list[tuple[float, LogSegment]] = []
        self._dir_dirty = False
        self._unflushed_messages = 0
        self._last_flush_time = env.now()
        self.structure_version = 0  # bumped whenever segments are removed or replaced
        self._truncations = 0
        self.closed = False

    @classmethod
    async def open(cls, env: Env, log_dir: str, config: LogConfig | None = None, *, recovery_point: int = 0,
                   log_start_offset: int = 0, clean_shutdown: bool = False, name: str | None = None,
                   on_data_loss=None) -> "PartitionLog":
        """Open (creating if needed) and recover the log in `log_dir`; `on_data_loss()` is called
        the moment recovery cuts whole batches (storage.log.recovery)."""
        config = config or LogConfig()
        loaded = await load_log(env, log_dir, config, recovery_point=recovery_point,
                                log_start_offset=log_start_offset, clean_shutdown=clean_shutdown,
                                on_data_loss=on_data_loss)
        return cls(env, log_dir, config, loaded, name=name)

    # -- facts --------------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    def update_high_watermark(self, offset: int) -> int:
        """Set the HW (the replica manager owns its semantics), clamped to the log."""
        self._high_watermark = min(max(offset, self._log_start_offset), self._log_end_offset)
        return self._high_watermark

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments.values())

    @property
    def active_segment(self) -> LogSegment:
        return self._segments.peekitem(-1)[1]

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments.values())

    @property
    def unflushed_messages(self) -> int:
        return self._unflushed_messages

    def flush_due(self, now: float) -> bool:
        """flush.messages / flush.ms say it is time to fsync (the log manager acts on it)."""
        if self._log_end_offset <= self._recovery_point:
            return False
        return (self._unflushed_messages >= self.config.flush_messages
                or (now - self._last_flush_time) * 1000 >= self.config.flush_ms)

    # -- appends ------------------------------------------------------------
    def append(self, buf) -> AppendInfo:
        """Append batches whose offsets are already assigned (the broker's produce path)."""
        return self._append(buf, assign=False)

    def append_as_follower(self, buf) -> AppendInfo:
        """Replicated batches: keep their offsets and leader epochs, which must continue the log."""
        return self._append(buf, assign=False)

    def append_as_leader(self, buf, leader_epoch: int, now_ms: int | None = None) -> AppendInfo:
        """Assign offsets (and LogAppendTime if configured) and stamp `leader_epoch`."""
        return self._append(buf, assign=True, leader_epoch=leader_epoch, now_ms=now_ms)

    def _append(self, buf, *, assign: bool, leader_epoch: int = -1, now_ms: int | None = None) -> AppendInfo:
        if self.closed:
            raise LogError(f"{self.name}: log is closed")
        if assign:
            buf = bytearray(buf)  # patched in place; the caller's bytes stay untouched
        batches = list(iter_batches(buf))
        size = batches[-1][0] + batches[-1][1].size if batches else 0
        if not batches or size != len(buf):
            raise CorruptRecordError(f"append of {len(buf)} bytes does not hold whole batches")
        now_ms = self.env.wall_ms() if now_ms is None else now_ms
        append_time = -1
        if assign:
            next_offset = self._log_end_offset
            stamp = self.config.log_append_time
            append_time = now_ms if stamp else -1
            for i, (pos, header) in enumerate(batches):
                if header.size > self.config.max_message_bytes:
                    raise RecordTooLargeError(
                        f"batch of {header.size} bytes exceeds max.message.bytes {self.config.max_message_bytes}")
                set_base_offset(buf, pos, next_offset)
                set_leader_epoch(buf, pos, leader_epoch)
                header = header._replace(base_offset=next_offset, partition_leader_epoch=leader_epoch)
                if stamp:
                    set_max_timestamp(buf, pos, header, now_ms)
                    header = header._replace(max_timestamp=now_ms, attributes=header.attributes | 0x08)
                batches[i] = (pos, header)
                next_offset = header.next_offset
        else:
            expected = self._log_end_offset
            for _, header in batches:
                if header.base_offset < expected:
                    raise InvalidAppendOffsetError(
                        f"{self.name}: batch at offset {header.base_offset} does not follow offset {expected - 1}")
                expected = header.next_offset
        for _, header in batches:
            if header.size > self.config.segment_bytes:
                raise RecordTooLargeError(f"batch of {header.size} bytes exceeds segment.bytes {self.config.segment_bytes}")

        first, last = batches[0][1], batches[-1][1]
        max_timestamp = max(h.max_timestamp for _, h in batches)
        segment = self._maybe_roll(size, last.last_offset, max_timestamp, now_ms)
        segment.append(buf, batches)
        cache = self.epoch_cache
        for _, header in batches:
            if header.partition_leader_epoch > cache.latest_epoch:
                cache.assign(header.partition_leader_epoch, header.base_offset)
        self._log_end_offset = last.next_offset
        self._unflushed_messages += sum(h.last_offset_delta + 1 for _, h in batches)
        return AppendInfo(first.base_offset, last.last_offset, max_timestamp, append_time, len(batches), size)

    def _maybe_roll(self, nbytes: int, last_offset: int, max_timestamp: int, now_ms: int) -> LogSegment:
        segment = self.active_segment
        if segment.is_empty:
            return segment
        cfg = self.config
        if (segment.size + nbytes > cfg.segment_bytes
                or segment.time_waited_for_roll(now_ms, max_timestamp) > cfg.segment_ms
                or segment.offset_index.is_full or segment.time_index.is_full
                or not segment.can_hold(last_offset, nbytes)):
            return self.roll(now_ms)
        return segment

    def roll(self, now_ms: int | None = None) -> LogSegment:
        """Start a new active segment at the log end (a no-op if the active one is empty)."""
        active = self.active_segment
        if active.is_empty:
            return active
        active.on_become_inactive()
        now_ms = self.env.wall_ms() if now_ms is None else now_ms
        segment = LogSegment.create(self.fs, self.dir, self._log_end_offset, index_bytes=self.config.segment_index_bytes,
                                    index_interval_bytes=self.config.index_interval_bytes, now_ms=now_ms)
        self._segments[segment.base_offset] = segment
        self._dir_dirty = True
        return segment

    # -- reads --------------------------------------------------------------
    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_batch: bool = True) -> FetchData:
        """Whole batches from the one holding `offset`, within `max_bytes` (at least one
        batch if `min_one_batch`), none at or past `max_offset` (e.g. the high watermark)."""
        log_end = self._log_end_offset
        if offset < self._log_start_offset or offset > log_end:
            raise OffsetOutOfRangeError(offset, self._log_start_offset, log_end)
        limit = log_end if max_offset is None else min(max_offset, log_end)
        if offset >= limit:
            return EMPTY_FETCH
        segments = self._segments
        floor = next(segments.irange(maximum=offset, reverse=True), None)
        for base in list(segments.irange(minimum=floor if floor is not None else offset)):
            segment = segments[base]
            if base >= limit:
                break
            max_position = None
            if limit < segment.next_offset:
                found = segment.find_batch(limit)
                max_position = found[0] if found else None
            result = segment.read(offset, max_bytes, max_position=max_position, min_one_batch=min_one_batch)
            if result is not None:
                position, size, header = result
                return FetchData(segment.log, position, size, header.base_offset)
        return EMPTY_FETCH

    def read_bytes(self, offset: int, max_bytes: int, **kwargs) -> bytes:
        return self.read(offset, max_bytes, **kwargs).read()

    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """Kafka's ListOffsets: the first offset whose record timestamp >= `timestamp`, or
        EARLIEST_TIMESTAMP / LATEST_TIMESTAMP / MAX_TIMESTAMP. None if no such record."""
        cache = self.epoch_cache
        if timestamp == EARLIEST_TIMESTAMP:
            return TimestampOffset(-1, self._log_start_offset, cache.epoch_for_offset(self._log_start_offset))
        if timestamp == LATEST_TIMESTAMP:
            return TimestampOffset(-1, self._log_end_offset, cache.latest_epoch)
        segments = list(self._segments.values())
        if timestamp == MAX_TIMESTAMP:
            best = max((s for s in segments if s.max_timestamp >= 0), key=lambda s: s.max_timestamp, default=None)
            if best is None:
                return None
            return TimestampOffset(best.max_timestamp, best.offset_of_max_timestamp,
                                   cache.epoch_for_offset(best.offset_of_max_timestamp))
        for segment in segments:
            if segment.max_timestamp < timestamp or segment.next_offset <= self._log_start_offset:
                continue
            found = segment.find_offset_by_timestamp(timestamp, self._log_start_offset)
            if found is not None:
                return TimestampOffset(found[1], found[0], cache.epoch_for_offset(found[0]))
        return None

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.epoch_cache.end_offset_for_epoch(epoch, self._log_end_offset)

    # -- durability ---------------------------------------------------------
    async def flush(self, up_to: int | None = None) -> None:
        """fsync data up to `up_to` (default: the log end); advances the recovery point."""
        target = self._log_end_offset if up_to is None else min(up_to, self._log_end_offset)
        truncations = self._truncations
        for segment in list(self._segments.values()):
            if segment.base_offset >= target:
                break
            await segment.flush()
        if self._dir_dirty:
            await self._sync_dir()
        await self._persist_epoch_cache()
        if truncations == self._truncations and target > self._recovery_point:
            self._recovery_point = target
        self._unflushed_messages = 0 if target >= self._log_end_offset else self._unflushed_messages
        self._last_flush_time = self.env.now()

    async def _flush_rolled(self) -> None:
        active = self.active_segment
        for segment in list(self._segments.values()):
            if segment is not active:
                await segment.flush()

    async def _sync_dir(self) -> None:
        """Make the directory durable: every rolled segment first, so a crash can only tear the last."""
        self._dir_dirty = False
        await self._flush_rolled()
        await self.fs.sync_dir(self.dir)

    async def _persist_epoch_cache(self) -> None:
        if self.epoch_cache.unsaved:
            await self._flush_rolled()
            await self.epoch_cache.flush()

    async def save_producer_snapshot(self, offset: int, blob: bytes) -> None:
        """Store the producer state as of `offset` (named `<offset>.snapshot`). The aborted
        transaction entries the state wrote are made durable first: a replay from this
        snapshot on will not write the earlier ones again."""
        await self._flush_rolled()
        for segment in self.segments:
            if not segment.closed:
                await segment.txn_index.sync()
        await self.producer_snapshots.save(offset, blob)

    def latest_producer_snapshot(self, up_to: int | None = None) -> tuple[int, bytes] | None:
        end = self._log_end_offset if up_to is None else min(up_to, self._log_end_offset)
        return self.producer_snapshots.latest(end)

    # -- aborted transactions (storage.log.txn_index) ------------------------
    def append_aborted_txn(self, txn: AbortedTxn) -> bool:
        """Index `txn` in the segment holding its ABORT marker (unless already there)."""
        index = self._segments.bisect_right(txn.last_offset) - 1
        if index < 0 or txn.last_offset >= self._log_end_offset:
            return False
        segment = self._segments.peekitem(index)[1]
        if not segment.txn_index.append(txn):
            return False
        segment.dirty = True  # its next flush (or the next producer snapshot) makes it durable
        return True

    def collect_aborted_txns(self, start: int, upper: int) -> list[AbortedTxn]:
        """Aborted transactions a read of [start, upper) may meet (Kafka's collectAbortedTransactions)."""
        found: list[AbortedTxn] = []
        first = max(self._segments.bisect_right(start) - 1, 0)
        for base in self._segments.islice(first):
            entries, complete = self._segments[base].txn_index.collect(start, upper)
            found.extend(entries)
            if complete:
                break
        return found

    @property
    def txn_index_stale_from(self) -> int | None:
        """Base offset of the first segment whose aborted transaction index must be written again
        (it was missing, did not decode, or its segment was recovered), None if all are whole."""
        return next((s.base_offset for s in self.segments if not s.txn_index_ok), None)

    def txn_indexes_rebuilt(self) -> None:
        for segment in self.segments:
            if not segment.txn_index_ok:
                segment.txn_index.rebuilt()
                segment.dirty = True  # the next flush writes its index file
            segment.txn_index_ok = True

    # -- truncation ---------------------------------------------------------
    async def truncate_to(self, offset: int) -> bool:
        """Follower reconciliation: drop everything from the batch holding `offset` on.

        The log end becomes the end of the last whole batch below `offset`. The
        lowered recovery point is persisted (through `on_recovery_point_lowered`)
        before this returns, so later appends are rescanned after a crash.
        """
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        if offset >= self._log_end_offset:
            # No record goes, but an epoch stamped at the log end (a leader that appended
            # nothing before the next one took over) must: the new leader may never have had
            # it, and the follower would ask about it for ever (Kafka's truncateTo does this too).
            self.epoch_cache.truncate_from_end(self._log_end_offset)
            await self._persist_epoch_cache()
            return False
        if offset <= self._segments.peekitem(0)[0]:
            await self.truncate_fully_and_start_at(offset)
            return True
        self._truncations += 1
        self.structure_version += 1
        doomed = [self._segments[b] for b in self._segments.irange(minimum=offset)]
        for segment in doomed:
            del self._segments[segment.base_offset]
        active = self.active_segment
        found = active.find_batch(offset)
        self._log_end_offset = active.next_offset if found is None else found[1].base_offset
        self._after_truncation()  # readers see the new end while we wait for the disk
        # The later segments must be durably gone before the active one shrinks: a crash
        # that kept the shrink but not the renames would resurrect them after a hole.
        await self._retire(doomed)
        active.truncate_to(offset)
        if active.next_offset < self._log_end_offset:
            # Compaction had emptied the offsets just below the cut: the log ends after the last
            # batch it still holds (lower is always safe: a follower fetches the rest again).
            self._log_end_offset = active.next_offset
            self._after_truncation()
        assert active.next_offset == self._log_end_offset
        await active.flush()
        await self._persist_epoch_cache()
        await self._announce_recovery_point()
        return True

    async def truncate_fully_and_start_at(self, offset: int) -> None:
        """Discard every segment and start empty at `offset` (a follower far behind)."""
        self._truncations += 1
        self.structure_version += 1
        doomed = list(self._segments.values())
        self._segments.clear()
        self._mark_retired(doomed)  # first: the new segment may reuse the first one's name
        segment = LogSegment.create(self.fs, self.dir, offset, index_bytes=self.config.segment_index_bytes,
                                    index_interval_bytes=self.config.index_interval_bytes, now_ms=self.env.wall_ms())
        self._segments[offset] = segment
        self._log_end_offset = offset
        self._log_start_offset = offset
        self.epoch_cache.clear()
        self.producer_snapshots.delete_all()
        self._after_truncation()
        await self._retire(doomed)  # syncs the directory
        await self._persist_epoch_cache()
        await self._announce_recovery_point()

    def _after_truncation(self) -> None:
        end = self._log_end_offset
        self.epoch_cache.truncate_from_end(end)
        self.producer_snapshots.truncate_after(end)
        self._recovery_point = min(self._recovery_point, end)
        self._log_start_offset = min(self._log_start_offset, end)
        # log start <= HW <= log end, also for a log started again at a later offset
        self._high_watermark = max(self._log_start_offset, min(self._high_watermark, end))
        self._unflushed_messages = 0

    async def _announce_recovery_point(self) -> None:
        if self.on_recovery_point_lowered is not None:
            await self.on_recovery_point_lowered(self)

    # -- retention ----------------------------------------------------------
    def delete_records_before(self, offset: int) -> int:
        """Kafka's DeleteRecords: move the log start offset up (segments go at the next retention pass)."""
        if offset > self._high_watermark:
            raise OffsetOutOfRangeError(offset, self._log_start_offset, self._high_watermark)
        if offset > self._log_start_offset:
            self._log_start_offset = offset
            self.epoch_cache.truncate_from_start(offset)
        return self._log_start_offset

    async def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Apply retention (time, size, log start offset); returns the number of segments deleted."""
        now_ms = self.env.wall_ms() if now_ms is None else now_ms
        doomed = segments_to_delete(list(self._segments.values()), config=self.config, now_ms=now_ms,
                                    log_start_offset=self._log_start_offset, high_watermark=self._high_watermark)
        if not doomed:
            return 0
        self.structure_version += 1
        for segment in doomed:
            del self._segments[segment.base_offset]
        new_start = self._segments.peekitem(0)[0]
        if new_start > self._log_start_offset:
            self._log_start_offset = new_start
            self.epoch_cache.truncate_from_start(new_start)
        self.producer_snapshots.delete_before(self._log_start_offset)
        await self._retire(doomed)
        await self._persist_epoch_cache()
        return len(doomed)

    async def replace_segments(self, new: LogSegment, old: list[LogSegment]) -> bool:
        """Swap a fsynced cleaner output (suffix `.cleaned`) in for `old`, crash-safely:
        `.cleaned` -> `.swap` (durable), old -> `.deleted` (durable), `.swap` -> live.
        Readers switch to `new` in one synchronous step. Returns False (and discards
        `new`) if `old` stopped being part of the log meanwhile (truncation, retention)."""

        def still_current() -> bool:
            return (not self.closed and all(self._segments.get(s.base_offset) is s for s in old)
                    and self.active_segment not in old)

        if still_current():
            new.rename(SWAP_SUFFIX)
            await self._sync_dir()
        if not still_current():
            new.close()
            new.remove_files()
            return False
        self.structure_version += 1
        for segment in old:
            del self._segments[segment.base_offset]
        self._segments[new.base_offset] = new
        self._mark_retired(old)
        await self._sync_dir()
        if new.suffix == SWAP_SUFFIX:  # not retired by a truncation while we synced
            new.rename("")
            await self._sync_dir()
        self.collect_deleted_files()
        return True

    async def _retire(self, segments: list[LogSegment]) -> None:
        """Rename to `.deleted` and make that durable; files close after file.delete.delay.ms."""
        if not segments:
            if self._dir_dirty:
                await self._sync_dir()
            return
        self._mark_retired(segments)
        await self._sync_dir()
        self.collect_deleted_files()

    def _mark_retired(self, segments: list[LogSegment]) -> None:
        fresh = [s for s in segments if s.suffix != DELETED_SUFFIX]
        for segment in fresh:
            segment.rename(DELETED_SUFFIX)
        deadline = self.env.now() + self.config.file_delete_delay_ms / 1000
        self._pending_deletes.extend((deadline, s) for s in fresh)

    def collect_deleted_files(self, now: float | None = None) -> int:
        """Close and remove retired segments whose delay has passed; returns how many."""
        now = self.env.now() if now is None else now
        due = [s for d, s in self._pending_deletes if d <= now]
        self._pending_deletes = [(d, s) for d, s in self._pending_deletes if d > now]
        for segment in due:
            segment.close()
            segment.remove_files()
        return len(due)

    # -- lifecycle ----------------------------------------------------------
    async def close(self) -> None:
        """Flush everything and close the files (the log manager then marks a clean shutdown)."""
        if self.closed:
            return
        self.active_segment.on_become_inactive()
        await self.flush()
        for segment in list(self._segments.values()):
            await segment.flush()
        self.closed = True
        self.collect_deleted_files(now=float("inf"))
        for segment in self._segments.values():
            segment.close()

    async def delete(self) -> None:
        """Remove the whole log directory (the log manager renames it away first)."""
        self.closed = True
        self.collect_deleted_files(now=float("inf"))
        for segment in self._segments.values():
            segment.close()
        self._segments.clear()
        if self.fs.exists(self.dir):
            self.fs.rmtree(self.dir)

    def __repr__(self) -> str:
        return (f"PartitionLog({self.name}, start={self._log_start_offset}, end={self._log_end_offset}, "
                f"segments={len(self._segments)})")
