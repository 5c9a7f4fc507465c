"""Compaction: last value per key, original offsets, tombstones and delete.retention.ms,
reads during cleaning, compression and batch boundaries."""
import trio

from storage.log import LogConfig, PartitionLog, clean_log
from storage.log.cleaner import cleanable_range, dirty_ratio
from storage.log.txn_index import AbortedTxn
from wire.records import Compression, decode_batch

from .log_helpers import FakeEnv, all_batches, all_records, batch, check_consistent

COMPACT = LogConfig(cleanup_policy="compact", segment_bytes=1500, index_interval_bytes=100,
                    delete_retention_ms=10_000, file_delete_delay_ms=0)


async def compacted_log(env, writes, config=COMPACT, **batch_kwargs):
    """A log holding `writes` (one record per batch, in order), rolled past the last write."""
    log = await PartitionLog.open(env, "/data/c-0", config)
    for key, value in writes:
        log.append_as_leader(batch(0, [(key, value)], ts=env.wall, **batch_kwargs), leader_epoch=0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    return log


def latest(writes):
    model = {}
    for offset, (key, value) in enumerate(writes):
        model[key] = (offset, value)
    return model


def keyed_writes(n, keys=7):
    return [(b"key-%d" % (i % keys), b"value-%d-" % i + b"x" * 40) for i in range(n)]


async def test_compaction_keeps_the_last_value_per_key_at_its_offset():
    env = FakeEnv()
    writes = keyed_writes(120)
    log = await compacted_log(env, writes)
    before = log.size_in_bytes
    result = await clean_log(env, log, 0)
    assert not result.aborted and result.groups_cleaned > 0
    assert result.first_dirty == log.active_segment.base_offset
    records = all_records(log)
    expected = latest(writes)
    kept = {r.key: (r.offset, r.value) for r in records}
    assert kept == expected
    # Only the last batch of each group may stay, emptied, besides the kept records.
    assert [r.offset for r in records] == sorted(o for o, _ in expected.values())
    assert log.size_in_bytes < before / 4
    assert log.log_end_offset == 120
    check_consistent(log)
    for offset, _ in expected.values():
        fetched = decode_batch(log.read_bytes(offset, 1))[1]
        assert fetched[0].offset == offset


async def test_second_pass_only_maps_the_new_dirty_section_and_keeps_results():
    env = FakeEnv()
    writes = keyed_writes(60)
    log = await compacted_log(env, writes)
    first = await clean_log(env, log, 0)
    more = keyed_writes(30, keys=3)
    for key, value in more:
        log.append_as_leader(batch(0, [(key, value + b"!")]), leader_epoch=0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    start, end = cleanable_range(log, first.first_dirty, env.wall)
    assert start == first.first_dirty and end == log.active_segment.base_offset
    assert dirty_ratio(log, start, end) > 0.5
    await clean_log(env, log, first.first_dirty)
    expected = latest(writes + [(k, v + b"!") for k, v in more])
    assert {r.key: (r.offset, r.value) for r in all_records(log)} == expected
    check_consistent(log)


async def test_tombstones_survive_until_delete_retention_then_go():
    env = FakeEnv(wall_ms=1_000_000)
    writes = keyed_writes(30, keys=3) + [(b"key-1", None)]
    log = await compacted_log(env, writes)
    result = await clean_log(env, log, 0, now_ms=1_000_000)
    records = {r.key: r for r in all_records(log)}
    assert records[b"key-1"].value is None and records[b"key-1"].offset == 30
    assert result.earliest_delete_horizon == 1_000_000 + COMPACT.delete_retention_ms
    # Before the horizon: still there.
    await clean_log(env, log, result.first_dirty, now_ms=1_000_000 + 9_999)
    assert any(r.key == b"key-1" for r in all_records(log))
    # After it: gone, and the other keys keep their last values.
    after = await clean_log(env, log, result.first_dirty, now_ms=1_000_000 + 10_000)
    assert after.earliest_delete_horizon is None
    records = {r.key: (r.offset, r.value) for r in all_records(log)}
    expected = latest(writes)
    del expected[b"key-1"]
    assert records == expected
    assert log.log_end_offset == 31
    check_consistent(log)


async def test_active_segment_hw_and_min_lag_are_never_cleaned():
    env = FakeEnv(wall_ms=50_000)
    writes = keyed_writes(40, keys=2)
    log = await compacted_log(env, writes)
    for key, value in keyed_writes(10, keys=2):
        log.append_as_leader(batch(0, [(key, value)]), leader_epoch=0)  # in the active segment
    active_records = [r for r in all_records(log) if r.offset >= 40]
    await clean_log(env, log, 0)
    assert [r for r in all_records(log) if r.offset >= 40] == active_records
    # With the HW at 0 nothing is cleanable at all.
    env2 = FakeEnv(wall_ms=50_000)
    log2 = await compacted_log(env2, writes)
    log2.update_high_watermark(0)
    before = all_batches(log2)
    result = await clean_log(env2, log2, 0)
    assert all_batches(log2) == before and result.groups_cleaned == 0
    # min.compaction.lag.ms keeps recent segments dirty.
    env3 = FakeEnv(wall_ms=50_000)
    log3 = await compacted_log(env3, writes, LogConfig(**{**COMPACT.__dict__, "min_compaction_lag_ms": 60_000}))
    assert cleanable_range(log3, 0, 50_000)[1] == 0
    assert cleanable_range(log3, 0, 50_000 + 60_000 + 1000)[1] == log3.active_segment.base_offset


async def test_compressed_batches_are_rewritten_with_their_codec_and_boundaries():
    env = FakeEnv()
    log = await PartitionLog.open(env, "/data/c-0", COMPACT)
    for i in range(12):
        records = [(b"k%d" % (j % 4), b"v%d-%d" % (i, j)) for j in range(5)]
        log.append_as_leader(batch(0, records, compression=Compression.GZIP), leader_epoch=0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    await clean_log(env, log, 0)
    for data in all_batches(log):
        header, records = decode_batch(data)
        assert header.compression == Compression.GZIP
        assert (header.base_offset % 5, header.last_offset_delta) == (0, 4)  # boundaries kept
    expected = {}
    for i in range(12):
        for j in range(5):
            expected[b"k%d" % (j % 4)] = (i * 5 + j, b"v%d-%d" % (i, j))
    assert {r.key: (r.offset, r.value) for r in all_records(log)} == expected


async def test_keyless_records_are_dropped_and_control_batches_kept():
    env = FakeEnv()
    log = await PartitionLog.open(env, "/data/c-0", COMPACT)
    log.append_as_leader(batch(0, [(None, b"no key"), (b"a", b"1")]), leader_epoch=0)
    log.append_as_leader(batch(0, [(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")], control=True), leader_epoch=0)
    log.append_as_leader(batch(0, [(b"a", b"2")]), leader_epoch=0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    await clean_log(env, log, 0)
    headers = [decode_batch(b)[0] for b in all_batches(log)]
    assert any(h.is_control for h in headers)
    assert [(r.offset, r.key) for r in all_records(log) if r.key == b"a" or r.key is None] == [(3, b"a")]


async def test_aborted_records_never_displace_committed_ones():
    """An aborted record must not hide an earlier committed value: it stays out of the offset map
    and is removed; its producer's last batch stays (emptied), and so does the ABORT marker
    while that batch is left (more in test_cleaner_transactions)."""
    env = FakeEnv()
    log = await PartitionLog.open(env, "/data/c-0", COMPACT)
    log.append_as_leader(batch(0, [(b"k", b"committed")]), leader_epoch=0)                     # 0
    log.append_as_leader(batch(0, [(b"k", b"aborted")], producer_id=7, producer_epoch=0,
                               base_sequence=0, transactional=True), leader_epoch=0)           # 1
    log.append_as_leader(batch(0, [(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00")], producer_id=7,
                               producer_epoch=0, transactional=True, control=True), leader_epoch=0)  # 2: ABORT
    log.append_aborted_txn(AbortedTxn(7, 1, 2, 3))
    log.append_as_leader(batch(0, [(b"j", b"1")]), leader_epoch=0)                             # 3
    log.append_as_leader(batch(0, [(b"j", b"2")]), leader_epoch=0)                             # 4
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    await clean_log(env, log, 0)
    assert [(r.offset, r.value) for r in all_records(log) if r.key != b"\x00\x00\x00\x00"] == [
        (0, b"committed"), (4, b"2")]
    headers = [decode_batch(b)[0] for b in all_batches(log)]
    assert [h.base_offset for h in headers if h.producer_id == 7] == [1, 2]  # emptied batch, marker
    assert log.collect_aborted_txns(0, 5) == [AbortedTxn(7, 1, 2, 3)]
    check_consistent(log)


async def test_reads_during_cleaning_see_consistent_data():
    env = FakeEnv()
    writes = keyed_writes(300, keys=5)
    log = await compacted_log(env, writes)
    expected = latest(writes)
    errors = []

    async def reader():
        for _ in range(200):
            offset = log.log_start_offset
            seen = {}
            while offset < log.log_end_offset:
                fetch = log.read(offset, 500)
                if fetch.size == 0:
                    break
                for data in [fetch.read()]:
                    for r in decode_batch(data)[1]:
                        seen[r.key] = (r.offset, r.value)
                    offset = decode_batch(data)[0].next_offset
                await trio.sleep(0)
            if seen != expected:
                errors.append(seen)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
        await clean_log(env, log, 0)
    assert not errors
    check_consistent(log)


async def test_cleaning_gives_up_when_the_log_is_replaced_underneath():
    env = FakeEnv()
    log = await compacted_log(env, keyed_writes(300, keys=5))
    results = []

    async def cleaner():
        results.append(await clean_log(env, log, 0))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(cleaner)
        for _ in range(3):
            await trio.sleep(0)
        await log.truncate_fully_and_start_at(1000)
    assert results[0].aborted
    assert (log.log_start_offset, log.log_end_offset, len(log.segments)) == (1000, 1000, 1)
    log.collect_deleted_files(now=float("inf"))
    assert [n for n in env.fs.listdir("/data/c-0") if n[0].isdigit()] == [
        "00000000000000001000.index", "00000000000000001000.log", "00000000000000001000.timeindex",
        "00000000000000001000.txnindex"]
    check_consistent(log)
