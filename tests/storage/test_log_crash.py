"""Crash tests on the in-memory filesystem: power loss at a random filesystem operation
while appending, rolling, flushing, truncating, deleting segments and compacting.

After every crash the log must hold exactly a prefix of what was written — at least
everything that was fsynced, possibly some whole later batches, never a corrupt batch —
with indexes consistent with the data, and it must keep working.
"""
import random

import pytest

from storage.log import LogConfig, LogManager, PartitionLog, clean_log
from wire.records import decode_batch

from .log_helpers import CrashingFS, FakeEnv, SimulatedCrash, all_batches, all_records, batch, check_consistent

CONFIG = LogConfig(segment_bytes=1500, index_interval_bytes=200, file_delete_delay_ms=0, retention_ms=-1)
PATH = "/data/t-0"


def random_batch(rng: random.Random, ts: int) -> bytes:
    n = rng.randint(1, 4)
    return batch(0, [(b"k%d" % rng.randint(0, 9), bytes([rng.randint(0, 255)]) * rng.randint(1, 300))
                     for _ in range(n)], ts=ts)


async def crash_and_reopen(env, rng, **kwargs) -> PartitionLog:
    """Power loss, reboot, open the log — and sometimes crash again during that recovery."""
    env.fs.crash(rng)
    if rng.random() < 0.3:
        env.fs.crash_at = env.fs.ops + rng.randint(1, 20)
        try:
            await PartitionLog.open(env, PATH, CONFIG, **kwargs)
        except SimulatedCrash:
            env.fs.crash(rng)
        env.fs.crash_at = None
    return await PartitionLog.open(env, PATH, CONFIG, **kwargs)


@pytest.mark.parametrize("seed", range(60))
async def test_crash_while_appending_rolling_and_flushing(seed):
    rng = random.Random(seed)
    env = FakeEnv(CrashingFS(), seed=seed, trio_clock=False)
    log = await PartitionLog.open(env, PATH, CONFIG)
    written: list[bytes] = []
    durable = 0  # batches known to be fsynced
    recovery_point = 0  # what a recovery-point checkpoint would hold
    env.fs.crash_at = env.fs.ops + rng.randint(1, 150)
    try:
        for step in range(150):
            r = rng.random()
            if r < 0.8:
                info = log.append_as_leader(random_batch(rng, 1000 + step), leader_epoch=step // 40)
                written.append(log.read_bytes(info.first_offset, 1))
            elif r < 0.9:
                await log.flush()
                durable, recovery_point = len(written), log.recovery_point
            else:
                up_to = rng.randint(0, log.log_end_offset)
                await log.flush(up_to)
                recovery_point = log.recovery_point
                durable = max(durable, sum(1 for b in written if decode_batch(b)[0].next_offset <= up_to))
    except SimulatedCrash:
        pass
    env.fs.crash_at = None
    log = await crash_and_reopen(env, rng, recovery_point=recovery_point if rng.random() < 0.5 else 0)
    got = all_batches(log)
    assert got == written[: len(got)], "not a prefix of what was written"
    assert len(got) >= durable, f"lost fsynced batches: {len(got)} < {durable}"
    check_consistent(log)
    epochs = log.epoch_cache.entries()
    assert all(start < log.log_end_offset for _, start in epochs)
    # It keeps working, and a clean restart sees the same log.
    log.append_as_leader(random_batch(rng, 9999), leader_epoch=99)
    got = all_batches(log)
    await log.close()
    reopened = await PartitionLog.open(env, PATH, CONFIG, recovery_point=log.recovery_point, clean_shutdown=True)
    assert all_batches(reopened) == got
    check_consistent(reopened)


@pytest.mark.parametrize("seed", [*range(40), 61, 122, 249, 432, 534, 550, 654])
async def test_crash_with_truncation_through_the_log_manager(seed):
    """Follower-style work (append, truncate, append) with the manager's checkpoints."""
    rng = random.Random(seed)
    env = FakeEnv(CrashingFS(), seed=seed, trio_clock=False)
    manager = LogManager(env, ["/data"], CONFIG)
    await manager.startup()
    log = await manager.get_or_create_log("t", 0)
    current: list[bytes] = []
    before_truncation: list[bytes] | None = None
    durable = 0
    env.fs.crash_at = env.fs.ops + rng.randint(1, 200)
    try:
        for step in range(120):
            r = rng.random()
            if r < 0.75:
                info = log.append_as_leader(random_batch(rng, 1000 + step), leader_epoch=step // 30)
                current.append(log.read_bytes(info.first_offset, 1))
            elif r < 0.85:
                await log.flush()
                durable = len(current)
            elif r < 0.92:
                await manager.checkpoint()
            elif current:
                keep = rng.randint(0, len(current) - 1)
                before_truncation = list(current)
                await log.truncate_to(decode_batch(current[keep])[0].base_offset)
                current = current[:keep]
                durable = min(durable, keep)
                before_truncation = None
    except SimulatedCrash:
        pass
    env.fs.crash_at = None
    env.fs.crash(rng)
    manager = LogManager(env, ["/data"], CONFIG)
    await manager.startup()
    assert not manager.had_clean_shutdown["/data"]
    log = manager.get_log("t", 0)
    got = all_batches(log)
    ok_current = got == current[: len(got)] and len(got) >= durable
    ok_before = before_truncation is not None and got == before_truncation[: len(got)]
    assert ok_current or ok_before
    check_consistent(log)
    await manager.shutdown()


async def _filled_log(env, rng, config, n=150, keys=8, tombstones=True):
    log = await PartitionLog.open(env, PATH, config)
    writes = []
    for i in range(n):
        key = b"key-%d" % rng.randint(0, keys - 1)
        value = None if tombstones and rng.random() < 0.1 else b"v%d-" % i + b"x" * rng.randint(0, 120)
        log.append_as_leader(batch(0, [(key, value)], ts=1000 + i), leader_epoch=0)
        writes.append((key, value))
    log.roll()
    await log.flush()
    log.update_high_watermark(log.log_end_offset)
    return log, writes


@pytest.mark.parametrize("seed", range(40))
async def test_crash_while_compacting(seed):
    rng = random.Random(seed)
    env = FakeEnv(CrashingFS(), seed=seed, wall_ms=5_000, trio_clock=False)
    config = LogConfig(**{**CONFIG.__dict__, "cleanup_policy": "compact", "delete_retention_ms": 1_000_000})
    log, writes = await _filled_log(env, rng, config)
    end = log.log_end_offset
    original = {r.offset: (r.key, r.value) for r in all_records(log)}
    last = {}
    for offset, (key, value) in enumerate(writes):
        last[key] = offset
    env.fs.crash_at = env.fs.ops + rng.randint(1, 120)
    try:
        first_dirty = (await clean_log(env, log, 0)).first_dirty
        await clean_log(env, log, first_dirty)
    except SimulatedCrash:
        pass
    env.fs.crash_at = None
    log = await crash_and_reopen(env, rng, recovery_point=end if rng.random() < 0.5 else 0)
    assert log.log_end_offset == end
    check_consistent(log)
    records = all_records(log)
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets))
    for r in records:
        assert original[r.offset] == (r.key, r.value), "a record changed or moved"
    present = set(offsets)
    assert all(offset in present for offset in last.values()), "lost the last value of a key"
    # Cleaning again after the crash finishes the job.
    log.update_high_watermark(log.log_end_offset)
    await clean_log(env, log, 0)
    assert {r.offset for r in all_records(log)} == set(last.values())
    check_consistent(log)


@pytest.mark.parametrize("seed", range(30))
async def test_crash_while_deleting_segments(seed):
    rng = random.Random(seed)
    env = FakeEnv(CrashingFS(), seed=seed, trio_clock=False)
    config = LogConfig(**{**CONFIG.__dict__, "retention_bytes": 3000})
    log, _ = await _filled_log(env, rng, config, tombstones=False)
    batches = all_batches(log)
    end = log.log_end_offset
    env.fs.crash_at = env.fs.ops + rng.randint(1, 30)
    try:
        await log.delete_old_segments()
        retained = all_batches(log)
    except SimulatedCrash:
        retained = None
    env.fs.crash_at = None
    log = await crash_and_reopen(env, rng, recovery_point=end)
    got = all_batches(log)
    assert got == batches[len(batches) - len(got):], "not a suffix of the log"
    if retained is not None:
        assert len(got) >= len(retained)
    assert log.log_end_offset == end
    check_consistent(log)
    assert log.read(log.log_start_offset, 1).first_offset == log.log_start_offset


async def test_index_entries_buffered_at_a_process_kill_are_rebuilt():
    """Index files are written at flush/close (storage.log.index_file): a kill -9 loses the
    entries appended since the last flush, and recovery rebuilds exactly those."""
    from .log_helpers import value_batch

    env = FakeEnv()
    config = LogConfig(segment_bytes=4000, index_interval_bytes=150, file_delete_delay_ms=0)
    log = await PartitionLog.open(env, PATH, config)
    for i in range(30):
        log.append_as_leader(value_batch(2, size=60, ts=1000 + i), leader_epoch=0)
    await log.flush()
    flushed_end = log.log_end_offset
    for i in range(30, 45):
        log.append_as_leader(value_batch(2, size=60, ts=1000 + i), leader_epoch=0)
    written = all_batches(log)
    assert len(log.segments) > 2
    active = log.active_segment
    assert active.offset_index.file.size() > env.fs.file_size(active.offset_index.file.path)  # still buffered
    env.fs.process_exit()
    log = await PartitionLog.open(env, PATH, config, recovery_point=flushed_end)
    assert all_batches(log) == written
    assert log.recovery_stats.segments_recovered >= 1
    check_consistent(log)  # every index entry points at a batch, every batch is readable
