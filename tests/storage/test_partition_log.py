"""PartitionLog: appends, reads, rolling, timestamps, truncation, retention, reopen."""
import pytest

from storage.log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    InvalidAppendOffsetError,
    LogConfig,
    OffsetOutOfRangeError,
    PartitionLog,
    RecordTooLargeError,
)
from wire.batch_header import parse_header
from wire.errors import CorruptRecordError
from wire.records import decode_batch, iter_records

from .log_helpers import FakeEnv, all_records, batch, check_consistent, value_batch

SMALL = LogConfig(segment_bytes=2000, index_interval_bytes=200, file_delete_delay_ms=0)


async def open_log(env, config=SMALL, **kwargs):
    return await PartitionLog.open(env, "/data/topic-0", config, **kwargs)


async def test_leader_append_assigns_offsets_and_epochs():
    env = FakeEnv()
    log = await open_log(env)
    client = value_batch(3)
    info = log.append_as_leader(client, leader_epoch=7)
    assert (info.first_offset, info.last_offset, info.batches) == (0, 2, 1)
    info = log.append_as_leader(value_batch(2), leader_epoch=7)
    assert (info.first_offset, info.last_offset) == (3, 4)
    assert parse_header(client).base_offset == 0  # caller's bytes untouched
    stored = log.read_bytes(3, 10_000)
    header = parse_header(stored)
    assert (header.base_offset, header.partition_leader_epoch) == (3, 7)
    assert [r.offset for r in iter_records(log.read_bytes(0, 10_000))] == [0, 1, 2, 3, 4]
    assert log.epoch_cache.entries() == [(7, 0)]
    assert log.log_end_offset == 5


async def test_log_append_time_is_stamped():
    env = FakeEnv(wall_ms=5_000_000)
    log = await open_log(env, LogConfig(message_timestamp_type="LogAppendTime"))
    info = log.append_as_leader(value_batch(2, ts=1), leader_epoch=0)
    assert info.log_append_time == 5_000_000
    header, records = decode_batch(log.read_bytes(0, 10_000))
    assert header.log_append_time and [r.timestamp for r in records] == [5_000_000] * 2


async def test_follower_append_keeps_offsets_and_rejects_going_back():
    env = FakeEnv()
    log = await open_log(env)
    log.append_as_follower(batch(0, [(b"k", b"v")] * 3, epoch=2) + batch(3, [(b"k", b"w")], epoch=4))
    assert log.log_end_offset == 4 and log.epoch_cache.entries() == [(2, 0), (4, 3)]
    with pytest.raises(InvalidAppendOffsetError):
        log.append_as_follower(batch(2, [(b"k", b"v")]))
    log.append_as_follower(batch(10, [(b"k", b"v")]))  # gaps are allowed (compacted leader)
    assert log.log_end_offset == 11


async def test_bad_appends_raise_typed_errors():
    env = FakeEnv()
    log = await open_log(env, LogConfig(max_message_bytes=500))
    good = value_batch(1)
    corrupt = bytearray(good)
    corrupt[-1] ^= 1
    for bad in (b"", good[:-3], bytes(corrupt), good + b"\x00" * 5):
        with pytest.raises(CorruptRecordError):
            log.append(bad)
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(value_batch(10, size=100), leader_epoch=0)
    assert log.log_end_offset == 0 and log.size_in_bytes == 0


async def test_read_returns_whole_batches_within_max_bytes_and_at_least_one():
    env = FakeEnv()
    log = await open_log(env, LogConfig())
    sizes = []
    for i in range(5):
        info = log.append_as_leader(value_batch(2, size=50), leader_epoch=0)
        sizes.append(info.size)
    # Offset 3 is inside batch [2, 3]: the fetch starts at that batch.
    fetch = log.read(3, sizes[0] * 2 + 10)
    assert fetch.first_offset == 2 and fetch.size == sizes[1] + sizes[2]
    assert log.read(3, 1).size == sizes[1]  # min one batch even beyond max_bytes
    assert log.read(3, 1, min_one_batch=False).size == 0
    # max_offset (the HW) excludes batches that end at or after it.
    assert log.read(0, 10_000, max_offset=5).size == sizes[0] + sizes[1]
    assert log.read(0, 10_000, max_offset=4).size == sizes[0] + sizes[1]
    assert log.read(4, 10_000, max_offset=4).size == 0
    assert log.read(10, 100).size == 0  # at the log end: empty
    with pytest.raises(OffsetOutOfRangeError):
        log.read(11, 100)


async def test_roll_by_size_and_reads_across_segments():
    env = FakeEnv()
    log = await open_log(env)
    for i in range(40):
        log.append_as_leader(value_batch(1, size=150, ts=1000 + i), leader_epoch=0)
    assert len(log.segments) > 3
    assert all(s.size <= SMALL.segment_bytes for s in log.segments)
    bases = [s.base_offset for s in log.segments]
    assert bases == sorted(bases) and bases[0] == 0
    for offset in range(40):
        assert log.read(offset, 1).first_offset == offset
    check_consistent(log)


async def test_roll_by_time_uses_record_timestamps():
    env = FakeEnv(wall_ms=10_000)
    log = await open_log(env, LogConfig(segment_ms=1000))
    log.append_as_leader(value_batch(1, ts=10_000), leader_epoch=0)
    log.append_as_leader(value_batch(1, ts=10_500), leader_epoch=0)
    assert len(log.segments) == 1
    log.append_as_leader(value_batch(1, ts=11_001), leader_epoch=0)
    assert [s.base_offset for s in log.segments] == [0, 2]


async def test_offset_for_timestamp():
    env = FakeEnv()
    log = await open_log(env)
    # Out-of-order timestamps inside and across batches, as producers may send.
    for i in range(30):
        log.append_as_leader(batch(0, [(b"k", b"v" * 50), (b"k", b"w")], ts=1000 + 10 * i), leader_epoch=i // 10)
    records = all_records(log)
    for target in (0, 999, 1000, 1001, 1005, 1150, 1151, 1291, 1292):
        expected = next(((r.offset, r.timestamp) for r in records if r.timestamp >= target), None)
        found = log.offset_for_timestamp(target)
        assert (found and (found.offset, found.timestamp)) == (expected or None), target
    assert log.offset_for_timestamp(5000) is None
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP).offset == 0
    assert log.offset_for_timestamp(LATEST_TIMESTAMP).offset == 60
    latest = log.offset_for_timestamp(MAX_TIMESTAMP)
    assert (latest.timestamp, latest.offset, latest.leader_epoch) == (1291, 59, 2)
    assert log.offset_for_timestamp(1150).leader_epoch == 1


async def test_truncate_to_middle_of_log_and_continue():
    env = FakeEnv()
    log = await open_log(env)
    for i in range(20):
        log.append_as_leader(value_batch(2, size=100), leader_epoch=i // 5)
    await log.flush()
    await log.save_producer_snapshot(30, b"s30")
    await log.save_producer_snapshot(10, b"s10")
    assert await log.truncate_to(21)  # inside batch [20, 21]: the whole batch goes
    assert log.log_end_offset == 20
    assert log.recovery_point == 20
    assert log.epoch_cache.entries() == [(0, 0), (1, 10)]
    assert log.producer_snapshots.offsets() == [10]
    assert not await log.truncate_to(50)
    log.append_as_leader(value_batch(1), leader_epoch=9)
    assert log.log_end_offset == 21
    check_consistent(log)
    assert [r.offset for r in all_records(log)] == list(range(21))


async def test_truncate_below_first_segment_truncates_fully():
    env = FakeEnv()
    log = await open_log(env)
    for i in range(20):
        log.append_as_leader(value_batch(2, size=100), leader_epoch=1)
    await log.truncate_to(0)
    assert log.log_end_offset == 0 and len(log.segments) == 1 and log.epoch_cache.entries() == []
    await log.truncate_fully_and_start_at(500)
    assert (log.log_start_offset, log.log_end_offset) == (500, 500)
    log.append_as_follower(batch(500, [(b"k", b"v")], epoch=3))
    assert log.read(500, 100).first_offset == 500
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)


async def test_starting_again_at_a_later_offset_keeps_the_hw_at_or_above_the_log_start():
    env = FakeEnv()
    log = await open_log(env)
    for _ in range(5):
        log.append_as_leader(value_batch(1), leader_epoch=0)
    log.update_high_watermark(3)
    await log.truncate_fully_and_start_at(100)  # a follower far behind the leader's log start
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (100, 100, 100)


async def test_retention_by_size_time_and_log_start():
    env = FakeEnv(wall_ms=100_000)
    config = LogConfig(segment_bytes=1000, retention_bytes=2500, retention_ms=50_000, file_delete_delay_ms=0)
    log = await open_log(env, config)
    for i in range(30):
        log.append_as_leader(value_batch(1, size=150, ts=10_000 + i * 1000), leader_epoch=0)
    segments_before = len(log.segments)
    assert await log.delete_old_segments(now_ms=0) == 0  # HW at 0: nothing is committed
    log.update_high_watermark(log.log_end_offset)
    # Size: keep >= retention.bytes... the walk stops while the log is still above it.
    deleted = await log.delete_old_segments(now_ms=0)
    assert deleted > 0 and log.size_in_bytes >= 2500 - 1000 and len(log.segments) == segments_before - deleted
    assert log.log_start_offset == log.segments[0].base_offset
    check_consistent(log)
    # Time: everything older than 50 s at now = 200 s, but never the active segment.
    assert await log.delete_old_segments(now_ms=200_000) > 0
    assert len(log.segments) == 1 and log.active_segment.size > 0
    active_base = log.active_segment.base_offset
    assert log.log_start_offset == active_base
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    assert log.read(active_base, 100).first_offset == active_base
    assert not [n for n in env.fs.listdir("/data/topic-0") if n.endswith(".deleted")]


async def test_delete_records_before_moves_start_and_drops_whole_segments():
    env = FakeEnv()
    log = await open_log(env, LogConfig(segment_bytes=1000, retention_ms=-1, file_delete_delay_ms=0))
    for i in range(30):
        log.append_as_leader(value_batch(1, size=150), leader_epoch=0)
    log.update_high_watermark(20)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(25)
    second = log.segments[1]
    target = second.base_offset + 1
    assert log.delete_records_before(target) == target
    assert await log.delete_old_segments() == 1  # only the wholly-deleted first segment
    assert log.log_start_offset == target and log.segments[0] is second
    assert log.read(target, 1).first_offset == target
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP).offset == target


async def test_readers_keep_retired_segments_until_the_delay():
    env = FakeEnv(trio_clock=False)
    log = await open_log(env, LogConfig(segment_bytes=1000, retention_ms=-1, file_delete_delay_ms=5000))
    for i in range(20):
        log.append_as_leader(value_batch(1, size=150), leader_epoch=0)
    log.update_high_watermark(20)
    fetch = log.read(0, 10_000)
    expected = fetch.read()
    log.delete_records_before(log.segments[1].base_offset)
    assert await log.delete_old_segments() == 1
    assert fetch.read() == expected  # the in-flight fetch still reads the retired file
    assert any(n.endswith(".log.deleted") for n in env.fs.listdir("/data/topic-0"))
    env.mono += 5
    assert log.collect_deleted_files() == 1
    assert not any(n.endswith(".deleted") for n in env.fs.listdir("/data/topic-0"))


async def test_clean_reopen_trusts_indexes_and_unclean_reopen_rescans():
    env = FakeEnv()
    log = await open_log(env)
    for i in range(25):
        log.append_as_leader(value_batch(2, size=120, ts=5000 + i), leader_epoch=i // 10)
    await log.close()
    clean = await open_log(env, recovery_point=log.recovery_point, clean_shutdown=True)
    assert clean.recovery_stats.segments_recovered == 0
    assert clean.log_end_offset == 50 and clean.epoch_cache.entries() == [(0, 0), (1, 20), (2, 40)]
    check_consistent(clean)
    assert clean.offset_for_timestamp(5013).offset == 25
    await clean.close()
    unclean = await open_log(env, recovery_point=0)
    assert unclean.recovery_stats.segments_recovered == len(unclean.segments)
    assert unclean.log_end_offset == 50
    check_consistent(unclean)


async def test_flush_advances_recovery_point_and_flush_policy():
    env = FakeEnv(trio_clock=False)
    log = await open_log(env, LogConfig(flush_messages=5))
    log.append_as_leader(value_batch(3), leader_epoch=0)
    assert log.recovery_point == 0 and not log.flush_due(env.now())
    log.append_as_leader(value_batch(3), leader_epoch=0)
    assert log.flush_due(env.now())
    await log.flush(4)
    assert log.recovery_point == 4
    await log.flush()
    assert log.recovery_point == 6 and not log.flush_due(env.now())


async def test_full_index_rolls_the_segment():
    env = FakeEnv()
    log = await open_log(env, LogConfig(segment_index_bytes=24, index_interval_bytes=0))  # 3 offset entries
    for _ in range(12):
        log.append_as_leader(value_batch(1), leader_epoch=0)
    assert len(log.segments) > 1
    assert all(len(s.offset_index) <= 3 for s in log.segments)
    check_consistent(log)


async def test_truncating_at_the_log_end_still_drops_an_epoch_with_no_records():
    # A broker made leader in epoch 2 stamps the epoch at its log end, appends nothing and
    # follows a leader that never had epoch 2. Reconciling to its own log end must forget
    # epoch 2, or it asks the leader about epoch 2 for ever (sim seed 308). Kafka's truncateTo
    # truncates the epoch cache even when the offset is past the log.
    env = FakeEnv()
    log = await open_log(env)
    for _ in range(3):
        log.append_as_leader(value_batch(2), leader_epoch=0)
    log.epoch_cache.assign(2, log.log_end_offset)
    assert log.epoch_cache.latest_epoch == 2
    assert not await log.truncate_to(log.log_end_offset)
    assert log.epoch_cache.entries() == [(0, 0)] and log.log_end_offset == 6
    reopened = await open_log(env)  # the cache file says so too
    assert reopened.epoch_cache.entries() == [(0, 0)]
    assert not await log.truncate_to(50) and log.epoch_cache.entries() == [(0, 0)]
