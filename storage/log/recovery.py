"""Loading a partition directory: finish or roll back interrupted work, then recover.

Kafka's LogLoader, in order:

1. Leftovers: `*.tmp` (unfinished atomic writes), `*.cleaned` (an unfinished
   cleaner output) and `*.deleted` (segments already logically removed) are
   deleted; index files without their `.log` are deleted.
2. Swaps: a `<base>.log.swap` is a complete, fsynced cleaner output whose
   old segments may still be present; the swap is finished by removing the
   segments it covers and renaming it into place.
3. Recovery: after an unclean stop every segment from the one holding the
   recovery point onwards is scanned (length, CRC-32C, increasing offsets)
   and its indexes rebuilt; the first invalid byte truncates the segment and
   every later segment is deleted. After a clean stop the indexes are trusted
   once they pass a cheap sanity check. Any segment whose indexes are missing
   or malformed is recovered either way.
4. Everything the loader changed is fsynced, so the recovery point becomes the
   log end.

The invariant that keeps this simple: the partition log never makes its
directory durable while an older-than-active segment has unflushed data (see
`PartitionLog._sync_dir`), so after a crash only the last segment can be torn.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from sortedcontainers import SortedDict

from storage.env import Env
from storage.log.epoch_cache import LeaderEpochCache
from storage.log.log_config import LogConfig
from storage.log.producer_state_snapshot import ProducerSnapshots
from storage.log.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    parse_segment_file_name,
)

__all__ = ["LoadedLog", "RecoveryStats", "load_log"]


@dataclass
class RecoveryStats:
    segments_recovered: int = 0
    bytes_scanned: int = 0
    bytes_truncated: int = 0
    segments_deleted: int = 0
    # Whole batches recovery had to drop (corruption, not a torn last write): records this
    # replica may have acknowledged are gone.
    whole_batches_lost: bool = False
    swaps_completed: int = 0
    leftovers_removed: int = 0


@dataclass
class LoadedLog:
    segments: SortedDict  # base offset -> LogSegment
    log_end_offset: int
    log_start_offset: int
    recovery_point: int
    epoch_cache: LeaderEpochCache
    stats: RecoveryStats = field(default_factory=RecoveryStats)


async def load_log(
    env: Env,
    log_dir: str,
    config: LogConfig,
    *,
    recovery_point: int = 0,
    log_start_offset: int = 0,
    clean_shutdown: bool = False,
    on_data_loss: Callable[[], None] | None = None,
) -> LoadedLog:
    fs = env.fs
    now_ms = env.wall_ms()
    stats = RecoveryStats()
    fs.makedirs(log_dir)
    opts = dict(index_bytes=config.segment_index_bytes, index_interval_bytes=config.index_interval_bytes, now_ms=now_ms)

    # 1. Leftovers, and the inventory of segments and swaps.
    bases: list[int] = []
    swaps: list[int] = []
    names = fs.listdir(log_dir)
    for name in names:
        path = f"{log_dir}/{name}"
        parsed = parse_segment_file_name(name)
        if name.endswith(".tmp") or name.endswith(CLEANED_SUFFIX) or name.endswith(DELETED_SUFFIX):
            fs.remove(path)
            stats.leftovers_removed += 1
        elif parsed is None:
            continue
        elif parsed[1] == LOG_SUFFIX:
            bases.append(parsed[0])
        elif parsed[1] == LOG_SUFFIX + SWAP_SUFFIX:
            swaps.append(parsed[0])
        elif parsed[1].endswith(SWAP_SUFFIX):
            fs.remove(path)  # a swap's indexes are rebuilt from its log
        elif parsed[1] in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX) and f"{name[:20]}{LOG_SUFFIX}" not in names:
            fs.remove(path)  # an index without its log
            stats.leftovers_removed += 1

    segments = SortedDict()
    suspect: set[int] = set()
    for base in bases:
        segment, indexes_ok = LogSegment.open(fs, log_dir, base, **opts)
        segments[base] = segment
        if not indexes_ok:
            suspect.add(base)

    # 2. Finish interrupted swaps.
    for base in swaps:
        swap, _ = LogSegment.open(fs, log_dir, base, suffix=SWAP_SUFFIX, **opts)
        swap.recover()
        if swap.next_offset == swap.base_offset:
            swap.close()  # never written by the cleaner; nothing to finish
            swap.remove_files()
            continue
        for old_base in list(segments.irange(base, swap.next_offset, inclusive=(True, False))):
            old = segments.pop(old_base)
            old.close()
            old.remove_files()
            suspect.discard(old_base)
        swap.rename("")
        segments[base] = swap
        stats.swaps_completed += 1

    # 3. Recovery scan.
    epoch_cache = LeaderEpochCache.load(fs, log_dir)
    bases = list(segments.keys())
    first_unflushed = 0
    if not clean_shutdown and bases:
        below = [b for b in bases if b <= recovery_point]
        first_unflushed = below[-1] if below else bases[0]
    previous_next = None
    changed = bool(stats.swaps_completed or stats.leftovers_removed)
    for i, base in enumerate(bases):
        segment = segments[base]
        must_scan = base in suspect or (not clean_shutdown and base >= first_unflushed)
        if not must_scan:
            previous_next = segment.next_offset
            continue
        stats.segments_recovered += 1
        stats.bytes_scanned += segment.size
        assign = lambda h: epoch_cache.assign(h.partition_leader_epoch, h.base_offset)  # noqa: E731
        truncated = segment.recover(assign, min_offset=max(base, previous_next or base))
        changed = True
        previous_next = segment.next_offset
        if truncated:
            stats.bytes_truncated += truncated
            stats.whole_batches_lost = not segment.recovery_cut_torn_tail or any(
                segments[later].size for later in bases[i + 1 :])
            if stats.whole_batches_lost and on_data_loss is not None:
                # Told at once, before any await: a crash during the rest of recovery leaves
                # the next start a log that looks whole, with no sign that records were cut.
                on_data_loss()
            for later in bases[i + 1 :]:
                dead = segments.pop(later)
                dead.close()
                dead.remove_files()
                stats.segments_deleted += 1
            break

    # 4. The log's bounds.
    if not segments:
        start = max(log_start_offset, 0)
        segments[start] = LogSegment.create(fs, log_dir, start, **opts)
        changed = True
    first, last = segments.peekitem(0)[1], segments.peekitem(-1)[1]
    log_end = last.next_offset
    log_start = min(max(log_start_offset, first.base_offset), log_end)
    epoch_cache.truncate_from_end(log_end)
    epoch_cache.truncate_from_start(log_start)
    snapshots = ProducerSnapshots(fs, log_dir)
    snapshots.truncate_after(log_end)

    # 5. Make what recovery did durable, then the whole log is below the recovery point.
    for segment in segments.values():
        await segment.flush()
    if changed:
        await fs.sync_dir(log_dir)
    await epoch_cache.flush()
    return LoadedLog(segments, log_end, log_start, log_end, epoch_cache, stats)
