"""The log manager: every partition log of a node, across its data directories.

Kafka's LogManager. Each data dir holds one directory per partition
(`<topic>-<partition>`) plus its checkpoints:

    recovery-point-offset-checkpoint   flushed-up-to offset per log (recovery starts there)
    log-start-offset-checkpoint        log start offset per log (DeleteRecords, retention)
    cleaner-offset-checkpoint          first dirty offset per compacted log
    replication-offset-checkpoint      high watermark per log (restored, clamped, at startup)
    .kafka_cleanshutdown               present only after a clean shutdown

and each partition directory holds `partition.metadata`, the id of the topic it
belongs to (storage.log.partition_metadata): a log whose id differs from the one
metadata gives is never handed out under that name (`get_or_create_log` sets the
old directory aside as a stray and starts an empty one).

On startup the marker decides between trusting the indexes (clean) and
scanning every log from its recovery point (unclean); it is removed once the
logs are loaded so a later crash is seen as unclean. The marker is never
written once a data dir has failed in this process lifetime (`failures`, Kafka's
LogDirFailureChannel: every I/O error under a data dir is reported there by the
file-system view the logs get): a broker that dies of a disk error must recover
at its next start, not trust files it could not write. Deleted logs are renamed
to `<topic>-<partition>.<uuid>-delete` (durably) before their files go, so a crash
mid-delete never resurrects a half-deleted partition. Stray logs (metadata does not
place them here, or they belong to an older topic of the same name) are renamed to
`...-stray` and kept, as Kafka does: no data goes on the word of metadata alone; an
operator removes them. Every directory name stays within NAME_MAX (255 bytes): the
topic name is cut short in the `-delete`/`-stray` names as in Kafka's
LocalLog.logDeleteDirName, and a partition whose own directory name would not fit
is refused (a ValueError for that partition, not a failure of the data dir).

Background work (`run_retention`, `run_cleaner`, `run_flusher`) runs as trio
tasks the node starts; each pass is bounded (one log cleaned per pass, at
most `cleaner_max_bytes_per_pass` dirty bytes). A log holding a record the
cleaner cannot decode is marked uncleanable (`uncleanable`, with the reason)
and skipped until restart, with one logged error: the others keep being
cleaned.

Why one module of ~500 lines: it is the single owner of the logs map and the per-dir
checkpoints that describe it; segments, recovery and the cleaner live in their own modules.
"""
from __future__ import annotations

import errno
import logging
import posixpath
import uuid
from typing import Callable

import trio

from storage.env import Env
from storage.log.checkpoints import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CorruptCheckpointError,
    read_offsets,
    write_offsets,
)
from storage.log.cleaner import CleanResult, clean_log, cleanable_range, dirty_ratio
from storage.log.log import PartitionLog
from storage.log.log_config import LogConfig
from storage.log.log_dir_failure import (FailureReportingFileSystem, KafkaStorageError, LogDirEnv,
                                         LogDirFailureChannel)
from storage.log.partition_metadata import read_topic_id, write_topic_id
from wire.errors import CorruptRecordError

__all__ = ["LogManager", "CLEAN_SHUTDOWN_FILE", "TopicPartition", "parse_log_dir_name", "log_dir_name"]

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
DELETE_SUFFIX = "-delete"
STRAY_SUFFIX = "-stray"
NAME_MAX = 255  # bytes in one directory entry (ext4, xfs, ...)
RESERVED_TOPICS = frozenset({"__cluster_metadata"})  # the Raft log store's own directory
_CONCURRENT_CREATES = 16  # new logs opened at once (each waits on fsyncs in worker threads)

TopicPartition = tuple[str, int]
logger = logging.getLogger(__name__)


def log_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def retired_dir_name(topic: str, partition: int, unique: uuid.UUID, suffix: str) -> str:
    """`<topic>-<partition>.<uuid><suffix>`, the topic cut short so the name fits NAME_MAX
    (Kafka's logDirNameWithSuffixCappedLength): a legal 249-byte topic name must not make
    a delete fail."""
    tail = f"-{partition}.{unique.hex}{suffix}"
    return topic.encode()[: NAME_MAX - len(tail)].decode("utf-8", "ignore") + tail


def _check_log_dir_name(topic: str, partition: int) -> None:
    if parse_log_dir_name(log_dir_name(topic, partition)) != (topic, partition):
        raise ValueError(f"invalid topic-partition {topic!r} {partition}")
    if len(log_dir_name(topic, partition).encode()) > NAME_MAX:
        raise ValueError(f"the directory name of partition {partition} of topic {topic!r} "
                         f"would exceed {NAME_MAX} bytes")


def parse_log_dir_name(name: str) -> TopicPartition | None:
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit() or topic in RESERVED_TOPICS:
        return None
    return topic, int(partition)


class LogManager:
    def __init__(self, env: Env, data_dirs: list[str], default_config: LogConfig | None = None, *,
                 cleaner_max_bytes_per_pass: int = 128 << 20):
        if not data_dirs:
            raise ValueError("at least one data dir is needed")
        self.data_dirs = list(data_dirs)
        self.failures = LogDirFailureChannel()
        # Every file operation of the logs goes through this view: a device error in a data dir
        # takes that dir offline (and is raised as KafkaStorageError).
        self.fs = FailureReportingFileSystem(env.fs, self.data_dirs, self.failures)
        self.env = LogDirEnv(env, self.fs)
        self.default_config = default_config or LogConfig()
        self.topic_configs: dict[str, LogConfig] = {}
        self.cleaner_max_bytes_per_pass = cleaner_max_bytes_per_pass
        # Called (synchronously) when recovery at startup cuts whole batches from a log: the
        # broker withdraws its clean-restart claim then (raftkafka.node.metadata_roles).
        self.on_data_loss = None
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._sorted_logs: list[tuple[TopicPartition, PartitionLog]] | None = None  # all_logs(), until a change
        self._dir_of: dict[TopicPartition, str] = {}
        self._topic_ids: dict[TopicPartition, uuid.UUID] = {}  # from partition.metadata
        self._cleaner_offsets: dict[TopicPartition, int] = {}
        self._delete_horizons: dict[TopicPartition, int] = {}
        # Logs the cleaner failed on (a record it cannot decode), with the reason: skipped until
        # this process restarts, so one damaged log cannot stop compaction of all the others
        # (Kafka's uncleanable partitions). Keyed by the log object: a re-created log is cleaned.
        self.uncleanable: dict[TopicPartition, tuple[PartitionLog, str]] = {}
        # The broker's answer to "below which offset may the cleaner work on this log": its last
        # stable offset, with the aborted transactions below it indexed. None: the high watermark.
        self.stable_offset: Callable[[TopicPartition, PartitionLog], int] | None = None
        # One checkpoint writer per data dir at a time: two interleaved write_file_atomic calls
        # on the same file rename each other's temporary away, and that I/O error would take
        # the dir offline (the flusher and the retention task both checkpoint).
        self._checkpoint_locks = {d: trio.Lock() for d in self.data_dirs}
        self.had_clean_shutdown: dict[str, bool] = {}
        self.started = False

    # -- startup and shutdown -------------------------------------------------
    async def startup(self) -> None:
        for data_dir in self.data_dirs:
            self.fs.makedirs(data_dir)
            marker = posixpath.join(data_dir, CLEAN_SHUTDOWN_FILE)
            clean = self.fs.exists(marker)
            self.had_clean_shutdown[data_dir] = clean
            recovery_points = _read_or_empty(self.fs, posixpath.join(data_dir, RECOVERY_POINT_CHECKPOINT))
            log_starts = _read_or_empty(self.fs, posixpath.join(data_dir, LOG_START_OFFSET_CHECKPOINT))
            cleaner = _read_or_empty(self.fs, posixpath.join(data_dir, CLEANER_OFFSET_CHECKPOINT))
            high_watermarks = _read_or_empty(self.fs, posixpath.join(data_dir, REPLICATION_OFFSET_CHECKPOINT))
            for name in self.fs.listdir(data_dir):
                path = posixpath.join(data_dir, name)
                if not self.fs.is_dir(path):
                    continue
                if name.endswith(DELETE_SUFFIX):
                    self.fs.rmtree(path)
                    continue
                if name.endswith(STRAY_SUFFIX):
                    logger.warning("stray log %s is kept: remove it once its data is not needed", path)
                    continue
                tp = parse_log_dir_name(name)
                if tp is None:
                    continue
                if tp in self._logs:
                    raise RuntimeError(f"partition {name} found in two data dirs ({self._dir_of[tp]} and {data_dir})")
                plog = await PartitionLog.open(self.env, path, self.config_for(tp[0]),
                                               recovery_point=recovery_points.get(tp, 0),
                                               log_start_offset=log_starts.get(tp, 0), clean_shutdown=clean,
                                               on_data_loss=self.on_data_loss)
                self._register(tp, data_dir, plog)
                plog.update_high_watermark(high_watermarks.get(tp, 0))
                topic_id = read_topic_id(self.fs, path)
                if topic_id is not None:
                    self._topic_ids[tp] = topic_id
                if tp in cleaner:
                    self._cleaner_offsets[tp] = cleaner[tp]
            if clean:
                self.fs.remove(marker)
            await self.fs.sync_dir(data_dir)
        await self.checkpoint()
        self.started = True

    async def shutdown(self) -> None:
        """Flush and close every log, write the checkpoints, then the clean-shutdown markers.

        After a log-dir failure nothing is written (Kafka halts): no flush, no checkpoint
        and above all no marker, so the next start runs the recovery scan."""
        if self.failures.any_offline:
            self._forget_logs()
            return
        for tp in sorted(self._logs):
            await self._logs[tp].close()
        await self.checkpoint()
        for data_dir in self.data_dirs:
            if self.failures.any_offline:  # a failure while closing: the marker would lie
                break
            marker = self.fs.open(posixpath.join(data_dir, CLEAN_SHUTDOWN_FILE), create=True)
            await marker.sync()
            marker.close()
            await self.fs.sync_dir(data_dir)
        self._forget_logs()

    def _forget_logs(self) -> None:
        self._logs.clear()
        self._sorted_logs = None
        self._dir_of.clear()
        self._topic_ids.clear()
        self.started = False

    # -- offline dirs ---------------------------------------------------------
    def is_offline(self, topic: str, partition: int) -> bool:
        """Whether this partition's log lives in a data dir that failed."""
        return bool(self.failures.offline) and self.failures.is_offline(self._dir_of.get((topic, partition)))

    def _online_counts(self) -> dict[str, int]:
        """Partitions per healthy data dir (new logs go there); KafkaStorageError if none is left."""
        counts = {d: n for d, n in self._partition_counts().items() if not self.failures.is_offline(d)}
        if not counts:
            log_dir, _ = self.failures.first()
            raise KafkaStorageError(log_dir, OSError(errno.EIO, "every log dir is offline"))
        return counts

    # -- logs -----------------------------------------------------------------
    def config_for(self, topic: str) -> LogConfig:
        return self.topic_configs.get(topic, self.default_config)

    def set_topic_config(self, topic: str, config: LogConfig) -> None:
        self.topic_configs[topic] = config
        for (t, _), log in self.all_logs():
            if t == topic:
                log.config = config

    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> list[tuple[TopicPartition, PartitionLog]]:
        # The background passes ask every second; sorting 10,000 logs each time was most of
        # an idle node's CPU. A copy, so callers may add or delete logs while iterating.
        if self._sorted_logs is None:
            self._sorted_logs = sorted(self._logs.items())
        return list(self._sorted_logs)

    def data_dir_of(self, topic: str, partition: int) -> str | None:
        return self._dir_of.get((topic, partition))

    def topic_id_of(self, topic: str, partition: int) -> uuid.UUID | None:
        """The topic id recorded in the partition's directory (None: no log, or no id yet)."""
        return self._topic_ids.get((topic, partition))

    async def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None,
                                topic_id: uuid.UUID | None = None) -> PartitionLog:
        """The log of `topic`-`partition`, created if missing. With a `topic_id`, a log recorded
        under another id (an older topic of the same name) is set aside as a stray and an empty
        one takes its place; a log with no id yet adopts this one."""
        tp = (topic, partition)
        existing = self._logs.get(tp)
        if existing is not None:
            on_disk = self._topic_ids.get(tp)
            if topic_id is None or on_disk == topic_id:
                return existing
            if on_disk is None:
                await self._record_topic_id(tp, topic_id)
                return existing
            logger.warning("log %s holds topic id %s, metadata says %s: an older topic of that name",
                           existing.dir, on_disk, topic_id)
            await self.set_aside_stray(topic, partition)
        _check_log_dir_name(topic, partition)
        if config is not None:
            self.topic_configs[topic] = config
        data_dir = _emptiest(self._online_counts())
        plog = await self._open_new(tp, data_dir, topic_id)
        await self.fs.sync_dir(data_dir)  # the partition directory itself must survive a crash
        self._register(tp, data_dir, plog, topic_id)
        return plog

    async def create_logs(self, wanted: list[tuple[str, int, LogConfig | None, uuid.UUID | None]]
                          ) -> dict[TopicPartition, Exception]:
        """Create the logs in `wanted` (topic, partition, config, topic id) that do not exist yet,
        concurrently; returns the failures.

        A new log costs several fsyncs (its files, its directory, the data dir);
        done one after the other, a broker given 1000 new partitions spent seconds
        before the first could take a record. Here the opens overlap (bounded) and
        each data dir is synced once for all its new partition directories, before
        any of them is registered.
        """
        plans: list[tuple[TopicPartition, str, uuid.UUID | None]] = []
        counts = self._online_counts()
        failures: dict[TopicPartition, Exception] = {}
        planned: set[TopicPartition] = set()
        for topic, partition, config, topic_id in wanted:
            tp = (topic, partition)
            if tp in self._logs or tp in planned:
                continue
            try:
                _check_log_dir_name(topic, partition)
            except ValueError as e:
                failures[tp] = e
                continue
            if config is not None:
                self.topic_configs[topic] = config
            data_dir = _emptiest(counts)
            counts[data_dir] += 1
            plans.append((tp, data_dir, topic_id))
            planned.add(tp)
        opened: dict[TopicPartition, PartitionLog] = {}
        limiter = trio.CapacityLimiter(_CONCURRENT_CREATES)

        async def open_one(tp: TopicPartition, data_dir: str, topic_id: uuid.UUID | None) -> None:
            async with limiter:
                try:
                    opened[tp] = await self._open_new(tp, data_dir, topic_id)
                except Exception as exc:  # one bad partition must not sink the others
                    failures[tp] = exc

        async with trio.open_nursery() as nursery:
            for tp, data_dir, topic_id in plans:
                nursery.start_soon(open_one, tp, data_dir, topic_id)
        for data_dir in sorted({d for tp, d, _ in plans if tp in opened}):
            # The partition directories themselves must survive a crash.
            await self.fs.sync_dir(data_dir)
        for tp, data_dir, topic_id in plans:  # in request order, not completion order
            if tp in opened:
                self._register(tp, data_dir, opened[tp], topic_id)
        return failures

    async def _open_new(self, tp: TopicPartition, data_dir: str, topic_id: uuid.UUID | None) -> PartitionLog:
        path = posixpath.join(data_dir, log_dir_name(*tp))
        plog = await PartitionLog.open(self.env, path, self.config_for(tp[0]))
        if topic_id is not None:
            await write_topic_id(self.fs, path, topic_id)
        return plog

    async def _record_topic_id(self, tp: TopicPartition, topic_id: uuid.UUID) -> None:
        await write_topic_id(self.fs, self._logs[tp].dir, topic_id)
        self._topic_ids[tp] = topic_id

    def _partition_counts(self) -> dict[str, int]:
        counts = {d: 0 for d in self.data_dirs}
        for d in self._dir_of.values():
            counts[d] += 1
        return counts

    def _register(self, tp: TopicPartition, data_dir: str, log: PartitionLog,
                  topic_id: uuid.UUID | None = None) -> None:
        self._logs[tp] = log
        self._sorted_logs = None
        self._dir_of[tp] = data_dir
        if topic_id is not None:
            self._topic_ids[tp] = topic_id
        log.on_recovery_point_lowered = self._recovery_point_lowered

    async def _recovery_point_lowered(self, log: PartitionLog) -> None:
        """A truncation: persist the lower recovery point (and cleaner offset) before new appends."""
        for tp, other in self.all_logs():
            if other is log:
                if self._cleaner_offsets.get(tp, 0) > log.log_end_offset:
                    self._cleaner_offsets[tp] = log.log_end_offset
                await self._write_dir_checkpoints(self._dir_of[tp])
                return

    async def delete_log(self, topic: str, partition: int) -> bool:
        plog = await self._retire((topic, partition), DELETE_SUFFIX)
        if plog is None:
            return False
        await plog.delete()
        return True

    async def set_aside_stray(self, topic: str, partition: int) -> bool:
        """Stop serving a log metadata does not place here, keeping its files (`...-stray`)."""
        plog = await self._retire((topic, partition), STRAY_SUFFIX)
        if plog is not None:
            logger.warning("stray log of %s-%d set aside as %s", topic, partition, plog.dir)
        return plog is not None

    async def _retire(self, tp: TopicPartition, suffix: str) -> PartitionLog | None:
        """Forget a log and rename its directory (durably) to a name ending in `suffix`."""
        plog = self._logs.pop(tp, None)
        self._sorted_logs = None
        if plog is None:
            return None
        data_dir = self._dir_of.pop(tp)
        self._cleaner_offsets.pop(tp, None)
        self._delete_horizons.pop(tp, None)
        self._topic_ids.pop(tp, None)
        target = posixpath.join(data_dir, retired_dir_name(*tp, self.env.uuid(), suffix))
        await plog.close()
        self.fs.rename(plog.dir, target)
        await self.fs.sync_dir(data_dir)
        plog.dir = target
        await self._write_dir_checkpoints(data_dir)
        return plog

    # -- checkpoints ----------------------------------------------------------
    async def checkpoint(self) -> None:
        for data_dir in self.data_dirs:
            if not self.failures.is_offline(data_dir):  # its files may be half-written: leave them
                await self._write_dir_checkpoints(data_dir)

    async def _write_dir_checkpoints(self, data_dir: str) -> None:
        async with self._checkpoint_locks[data_dir]:
            logs = {tp: log for tp, log in self.all_logs() if self._dir_of[tp] == data_dir}
            await write_offsets(self.fs, posixpath.join(data_dir, RECOVERY_POINT_CHECKPOINT),
                                {tp: log.recovery_point for tp, log in logs.items()})
            await write_offsets(self.fs, posixpath.join(data_dir, LOG_START_OFFSET_CHECKPOINT),
                                {tp: log.log_start_offset for tp, log in logs.items()})
            await write_offsets(self.fs, posixpath.join(data_dir, CLEANER_OFFSET_CHECKPOINT),
                                {tp: o for tp, o in self._cleaner_offsets.items() if tp in logs})
            await write_offsets(self.fs, posixpath.join(data_dir, REPLICATION_OFFSET_CHECKPOINT),
                                {tp: log.high_watermark for tp, log in logs.items()})

    # -- background work ------------------------------------------------------
    async def flush_due_logs(self) -> int:
        now = self.env.now()
        flushed = 0
        for _, log in self.all_logs():
            if not log.closed and log.flush_due(now):
                await log.flush()
                flushed += 1
        return flushed

    async def retention_pass(self, now_ms: int | None = None) -> int:
        """Apply retention to every log; returns the number of segments deleted."""
        now_ms = self.env.wall_ms() if now_ms is None else now_ms
        deleted = 0
        for _, log in self.all_logs():
            if not log.closed:
                deleted += await log.delete_old_segments(now_ms)
                log.collect_deleted_files()
        return deleted

    def _cleaning_candidate(self, now_ms: int) -> tuple[TopicPartition, PartitionLog, int, int | None] | None:
        """The compacted log most in need of cleaning, as Kafka's LogCleanerManager chooses."""
        best, best_ratio = None, -1.0
        for tp, log in self.all_logs():
            if log.closed or not log.config.compact or self.is_uncleanable(tp, log):
                continue
            stable = None if self.stable_offset is None else self.stable_offset(tp, log)
            first_dirty, uncleanable = cleanable_range(log, self._cleaner_offsets.get(tp, 0), now_ms, stable)
            ratio = dirty_ratio(log, first_dirty, uncleanable)
            horizon = self._delete_horizons.get(tp)
            overdue = any(now_ms - s.largest_timestamp > log.config.max_compaction_lag_ms
                          for s in log.segments if s.base_offset >= first_dirty and s.next_offset <= uncleanable)
            due = ratio >= log.config.min_cleanable_dirty_ratio and ratio > 0
            if due or overdue or (horizon is not None and horizon <= now_ms):
                score = ratio + (1.0 if overdue or (horizon is not None and horizon <= now_ms) else 0.0)
                if score > best_ratio:
                    best, best_ratio = (tp, log, first_dirty, stable), score
        return best

    async def cleaning_pass(self, now_ms: int | None = None) -> CleanResult | None:
        """Clean the one log that needs it most (or nothing); returns what was done."""
        now_ms = self.env.wall_ms() if now_ms is None else now_ms
        candidate = self._cleaning_candidate(now_ms)
        if candidate is None:
            return None
        tp, log, first_dirty, stable = candidate
        try:
            result = await clean_log(self.env, log, first_dirty, now_ms=now_ms,
                                     max_dirty_bytes=self.cleaner_max_bytes_per_pass, stable_offset=stable)
        except CorruptRecordError as exc:
            self.uncleanable[tp] = (log, str(exc))
            logger.error("log cleaner: %s-%d is uncleanable until restart (other logs are still cleaned): %s",
                       tp[0], tp[1], exc)
            return CleanResult(first_dirty=first_dirty, aborted=True)
        if not result.aborted and self._logs.get(tp) is log:
            self._cleaner_offsets[tp] = result.first_dirty
            if result.earliest_delete_horizon is None:
                self._delete_horizons.pop(tp, None)
            else:
                self._delete_horizons[tp] = result.earliest_delete_horizon
            await self._write_dir_checkpoints(self._dir_of[tp])
        return result

    def is_uncleanable(self, tp: TopicPartition, log: PartitionLog) -> bool:
        entry = self.uncleanable.get(tp)
        return entry is not None and entry[0] is log

    async def run_retention(self, interval: float = 300.0, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Forever: a retention pass and checkpoints every `interval` s (log.retention.check.interval.ms)."""
        task_status.started()
        while True:
            await self.retention_pass()
            await self.checkpoint()
            await self.env.sleep(interval)

    async def run_cleaner(self, backoff: float = 15.0, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Forever, as Kafka's cleaner thread: clean the dirtiest log that is due, at once again
        after a log was cleaned, else after `backoff` s (log.cleaner.backoff.ms)."""
        task_status.started()
        while True:
            if await self.cleaning_pass() is not None:
                await self.checkpoint()
                await trio.lowlevel.checkpoint()  # the next log, after others had their turn
            else:
                await self.env.sleep(backoff)

    async def run_flusher(self, interval: float = 1.0, *, checkpoint_interval: float = 60.0,
                          task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Forever: flush logs whose flush.messages / flush.ms is due; checkpoint recovery points."""
        task_status.started()
        next_checkpoint = self.env.now() + checkpoint_interval
        while True:
            await self.flush_due_logs()
            if self.env.now() >= next_checkpoint:
                await self.checkpoint()
                next_checkpoint = self.env.now() + checkpoint_interval
            await self.env.sleep(interval)


def _emptiest(counts: dict[str, int]) -> str:
    """Kafka's choice for a new log: the data dir holding the fewest partitions (first on a tie)."""
    return min(counts, key=lambda d: counts[d])


def _read_or_empty(fs, path: str) -> dict[TopicPartition, int]:
    """A missing or corrupt offset checkpoint means 'no information': recover from zero."""
    try:
        return read_offsets(fs, path)
    except CorruptCheckpointError:
        return {}
