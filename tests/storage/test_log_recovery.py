"""Recovery: torn tails, appended garbage, corrupt bytes, lost indexes, interrupted swaps;
on the in-memory filesystem and on a real disk."""
import posixpath

import pytest

from storage.env import RealEnv
from storage.log import LogConfig, PartitionLog
from storage.log.segment import segment_file_name

from .log_helpers import FakeEnv, all_batches, check_consistent, value_batch

CONFIG = LogConfig(segment_bytes=3000, index_interval_bytes=300, file_delete_delay_ms=0)


async def build(env, path, n=40):
    log = await PartitionLog.open(env, path, CONFIG)
    for i in range(n):
        log.append_as_leader(value_batch(2, size=90, ts=1000 + i), leader_epoch=i // 10)
    await log.flush()
    batches = all_batches(log)
    await log.close()
    return log, batches


def last_log_file(fs, path):
    return posixpath.join(path, sorted(n for n in fs.listdir(path) if n.endswith(".log"))[-1])


def mutate(fs, file_path, fn):
    f = fs.open(file_path)
    fn(f)
    f.close()


@pytest.fixture(params=["memfs", "disk"])
def env_and_dir(request, tmp_path):
    if request.param == "memfs":
        return FakeEnv(), "/data/t-0"
    env = RealEnv(seed=1)
    return env, str(tmp_path / "t-0")


async def test_torn_tail_is_cut_at_the_last_whole_batch(env_and_dir):
    env, path = env_and_dir
    _, batches = await build(env, path)
    target = last_log_file(env.fs, path)
    mutate(env.fs, target, lambda f: f.truncate(f.size() - 17))
    log = await PartitionLog.open(env, path, CONFIG, recovery_point=0)
    assert all_batches(log) == batches[:-1]
    assert log.recovery_stats.bytes_truncated > 0
    assert log.log_end_offset == 78
    check_consistent(log)
    log.append_as_leader(value_batch(2), leader_epoch=9)  # and the log goes on
    assert log.log_end_offset == 80
    await log.close()


@pytest.mark.parametrize("garbage", [b"\x00" * 100, b"\xff" * 7, bytes(range(256)) * 3])
async def test_appended_garbage_is_removed(env_and_dir, garbage):
    env, path = env_and_dir
    _, batches = await build(env, path)
    mutate(env.fs, last_log_file(env.fs, path), lambda f: f.append(garbage))
    log = await PartitionLog.open(env, path, CONFIG, recovery_point=0)
    assert all_batches(log) == batches
    check_consistent(log)
    await log.close()


async def test_appended_copy_of_an_old_batch_is_rejected(env_and_dir):
    env, path = env_and_dir
    _, batches = await build(env, path)
    mutate(env.fs, last_log_file(env.fs, path), lambda f: f.append(batches[-3]))  # CRC-valid, offsets go back
    log = await PartitionLog.open(env, path, CONFIG, recovery_point=0)
    assert all_batches(log) == batches
    await log.close()


async def test_corrupt_byte_mid_log_truncates_there_and_drops_later_segments(env_and_dir):
    env, path = env_and_dir
    _, batches = await build(env, path)
    names = sorted(n for n in env.fs.listdir(path) if n.endswith(".log"))
    assert len(names) > 3
    victim = posixpath.join(path, names[1])

    def flip(f):
        data = bytearray(f.read(0, 400))
        data[300] ^= 0x40
        f.write_at(0, bytes(data))

    mutate(env.fs, victim, flip)
    log = await PartitionLog.open(env, path, CONFIG, recovery_point=0)
    kept = all_batches(log)
    assert kept == batches[: len(kept)] and len(kept) < len(batches)
    assert len(log.segments) == 2 and log.recovery_stats.segments_deleted == len(names) - 2
    check_consistent(log)
    await log.close()


async def test_recovery_point_limits_the_scan_and_clean_shutdown_skips_it(env_and_dir):
    env, path = env_and_dir
    closed, batches = await build(env, path)
    segments = len(closed.segments)
    log = await PartitionLog.open(env, path, CONFIG, recovery_point=closed.segments[-2].base_offset + 1)
    assert log.recovery_stats.segments_recovered == 2
    await log.close()
    log = await PartitionLog.open(env, path, CONFIG, recovery_point=80, clean_shutdown=True)
    assert log.recovery_stats.segments_recovered == 0 and len(log.segments) == segments
    assert all_batches(log) == batches
    await log.close()


async def test_missing_or_corrupt_indexes_are_rebuilt_even_after_clean_shutdown(env_and_dir):
    env, path = env_and_dir
    closed, batches = await build(env, path)
    first = closed.segments[0].base_offset
    env.fs.remove(posixpath.join(path, segment_file_name(first, ".index")))
    mutate(env.fs, posixpath.join(path, segment_file_name(closed.segments[1].base_offset, ".timeindex")),
           lambda f: f.append(b"\x01\x02\x03"))
    log = await PartitionLog.open(env, path, CONFIG, recovery_point=80, clean_shutdown=True)
    assert log.recovery_stats.segments_recovered == 2
    assert len(log.segments[0].offset_index) > 0
    assert all_batches(log) == batches
    check_consistent(log)
    await log.close()


async def test_index_pointing_past_a_shortened_log_fails_the_sanity_check(env_and_dir):
    env, path = env_and_dir
    closed, batches = await build(env, path)
    last = closed.segments[-1]
    mutate(env.fs, posixpath.join(path, segment_file_name(last.base_offset)), lambda f: f.truncate(200))
    log = await PartitionLog.open(env, path, CONFIG, recovery_point=80, clean_shutdown=True)
    assert log.recovery_stats.segments_recovered == 1
    check_consistent(log)
    await log.close()


async def test_leftovers_are_removed_and_an_interrupted_swap_is_finished():
    env = FakeEnv()
    path = "/data/t-0"
    closed, batches = await build(env, path)
    fs = env.fs
    bases = [s.base_offset for s in closed.segments]
    # A finished cleaner output covering the first two segments, as a .swap, with the
    # old segments still present (crash between the two directory syncs).
    merged = b"".join(b for b in batches if b"" == b"" and int.from_bytes(b[:8], "big") < bases[2])
    swap = fs.open(posixpath.join(path, segment_file_name(bases[0], ".log.swap")), create=True)
    swap.append(merged)
    for name in ("00000000000000000099.log.cleaned", "00000000000000000005.log.deleted",
                 "leader-epoch-checkpoint.tmp", segment_file_name(12345, ".index")):
        fs.open(posixpath.join(path, name), create=True).append(b"junk")
    log = await PartitionLog.open(env, path, CONFIG, recovery_point=0)
    assert log.recovery_stats.swaps_completed == 1
    assert [s.base_offset for s in log.segments] == [bases[0]] + bases[2:]
    assert all_batches(log) == batches
    names = fs.listdir(path)
    assert not [n for n in names if n.endswith((".swap", ".cleaned", ".deleted", ".tmp"))]
    assert segment_file_name(12345, ".index") not in names
    check_consistent(log)


async def test_producer_snapshots_survive_reopen_and_follow_truncation(env_and_dir):
    env, path = env_and_dir
    log = await PartitionLog.open(env, path, CONFIG)
    for i in range(30):
        log.append_as_leader(value_batch(2, size=90), leader_epoch=0)
    await log.save_producer_snapshot(17, b"at-17")
    await log.save_producer_snapshot(55, b"at-55")
    await log.close()
    log = await PartitionLog.open(env, path, CONFIG, recovery_point=0)
    assert log.latest_producer_snapshot() == (55, b"at-55")
    await log.truncate_to(40)
    await log.close()
    log = await PartitionLog.open(env, path, CONFIG, recovery_point=40, clean_shutdown=True)
    assert log.latest_producer_snapshot() == (17, b"at-17")
    await log.close()
