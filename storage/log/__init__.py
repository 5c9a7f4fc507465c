"""Partition logs on disk (DESIGN §6): segments, indexes, recovery, retention, compaction.

Public surface:

    LogConfig                          Kafka-named per-log settings with Kafka's defaults
    PartitionLog                       one partition: append / read / truncate / flush / retention
    AppendInfo, FetchData, TimestampOffset, EARLIEST/LATEST/MAX_TIMESTAMP
    LogError, OffsetOutOfRangeError, InvalidAppendOffsetError, RecordTooLargeError
    LogManager                         all logs of a node: data dirs, checkpoints, background tasks
    LeaderEpochCache                   epoch -> start offset, end_offset_for_epoch
    clean_log, CleanResult             one compaction pass over a log

Bad bytes (torn, CRC mismatch) raise wire.errors.CorruptRecordError.
"""
from storage.log.cleaner import CleanResult, clean_log
from storage.log.epoch_cache import LeaderEpochCache
from storage.log.log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    AppendInfo,
    FetchData,
    InvalidAppendOffsetError,
    LogError,
    OffsetOutOfRangeError,
    PartitionLog,
    RecordTooLargeError,
    TimestampOffset,
)
from storage.log.log_config import LogConfig, LogConfigError
from storage.log.log_manager import LogManager

__all__ = [
    "AppendInfo",
    "CleanResult",
    "EARLIEST_TIMESTAMP",
    "FetchData",
    "InvalidAppendOffsetError",
    "LATEST_TIMESTAMP",
    "LeaderEpochCache",
    "LogConfig",
    "LogConfigError",
    "LogError",
    "LogManager",
    "MAX_TIMESTAMP",
    "OffsetOutOfRangeError",
    "PartitionLog",
    "RecordTooLargeError",
    "TimestampOffset",
    "clean_log",
]
