"""LogManager: data dirs, checkpoints, clean-shutdown marker, create/delete, background passes."""
import uuid

import trio

from storage.log import LogConfig, LogManager
from storage.log.checkpoints import read_offsets
import pytest

from storage.log.log_manager import CLEAN_SHUTDOWN_FILE, NAME_MAX, parse_log_dir_name

from .log_helpers import FakeEnv, all_batches, all_records, batch, value_batch

CONFIG = LogConfig(segment_bytes=1500, index_interval_bytes=200, file_delete_delay_ms=0)


def test_dir_names():
    assert parse_log_dir_name("orders-3") == ("orders", 3)
    assert parse_log_dir_name("my-topic.v2-10") == ("my-topic.v2", 10)
    for name in ("orders", "orders-x", "-1", "__cluster_metadata-0", "t-0.abc-delete"):
        assert parse_log_dir_name(name) is None


async def test_logs_spread_over_data_dirs_and_survive_clean_restart():
    env = FakeEnv()
    manager = LogManager(env, ["/d1", "/d2"], CONFIG)
    await manager.startup()
    logs = [await manager.get_or_create_log("t", p) for p in range(4)]
    assert sorted(manager.data_dir_of("t", p) for p in range(4)) == ["/d1", "/d1", "/d2", "/d2"]
    assert await manager.get_or_create_log("t", 0) is logs[0]
    for i, log in enumerate(logs):
        for _ in range(10 + i):
            log.append_as_leader(value_batch(2, size=100), leader_epoch=1)
        log.update_high_watermark(10 + i)
    contents = [all_batches(log) for log in logs]
    await manager.shutdown()
    for d in ("/d1", "/d2"):
        assert env.fs.exists(f"{d}/{CLEAN_SHUTDOWN_FILE}")
        assert set(read_offsets(env.fs, f"{d}/recovery-point-offset-checkpoint").values()) <= {20, 22, 24, 26}

    env.fs.crash()  # a clean shutdown is durable
    manager = LogManager(env, ["/d1", "/d2"], CONFIG)
    await manager.startup()
    assert manager.had_clean_shutdown == {"/d1": True, "/d2": True}
    assert not env.fs.exists(f"/d1/{CLEAN_SHUTDOWN_FILE}")
    for p in range(4):
        log = manager.get_log("t", p)
        assert log.recovery_stats.segments_recovered == 0
        assert all_batches(log) == contents[p]
        assert log.high_watermark == 10 + p  # restored from replication-offset-checkpoint


async def test_unclean_restart_recovers_from_checkpointed_recovery_points():
    env = FakeEnv()
    manager = LogManager(env, ["/d"], CONFIG)
    await manager.startup()
    log = await manager.get_or_create_log("t", 0)
    for _ in range(20):
        log.append_as_leader(value_batch(2, size=100), leader_epoch=1)
    await log.flush()
    await manager.checkpoint()
    flushed = all_batches(log)
    for _ in range(5):
        log.append_as_leader(value_batch(2, size=100), leader_epoch=1)
    env.fs.crash()
    manager = LogManager(env, ["/d"], CONFIG)
    await manager.startup()
    assert manager.had_clean_shutdown == {"/d": False}
    log = manager.get_log("t", 0)
    assert all_batches(log)[: len(flushed)] == flushed
    assert 0 < log.recovery_stats.segments_recovered < len(log.segments) + 1
    assert log.recovery_point == log.log_end_offset  # recovery fsynced what it kept


async def test_delete_log_is_crash_safe_and_ignores_foreign_dirs():
    env = FakeEnv()
    manager = LogManager(env, ["/d"], CONFIG)
    await manager.startup()
    for p in range(2):
        (await manager.get_or_create_log("gone", p)).append_as_leader(value_batch(1), leader_epoch=0)
    env.fs.makedirs("/d/__cluster_metadata-0")
    env.fs.open("/d/meta.properties", create=True).append(b"node.id=1\n")
    assert await manager.delete_log("gone", 0)
    assert not await manager.delete_log("gone", 0)
    assert not [n for n in env.fs.listdir("/d") if n.startswith("gone-0")]
    assert manager.get_log("gone", 0) is None
    # A crash after the rename but before the files went: the -delete dir goes at startup.
    env.fs.makedirs("/d/gone-1.0123abcd-delete")
    await env.fs.sync_dir("/d")
    env.fs.crash()
    manager = LogManager(env, ["/d"], CONFIG)
    await manager.startup()
    assert [tp for tp, _ in manager.all_logs()] == [("gone", 1)]
    assert "gone-1.0123abcd-delete" not in env.fs.listdir("/d")
    assert env.fs.exists("/d/__cluster_metadata-0")


async def test_corrupt_checkpoints_mean_full_recovery():
    env = FakeEnv()
    manager = LogManager(env, ["/d"], CONFIG)
    await manager.startup()
    log = await manager.get_or_create_log("t", 0)
    for _ in range(12):
        log.append_as_leader(value_batch(2, size=100), leader_epoch=1)
    await log.flush()
    contents = all_batches(log)
    f = env.fs.open("/d/recovery-point-offset-checkpoint", create=True)
    f.truncate(0)
    f.append(b"garbage")
    await f.sync()
    env.fs.crash()
    manager = LogManager(env, ["/d"], CONFIG)
    await manager.startup()
    log = manager.get_log("t", 0)
    assert log.recovery_stats.segments_recovered == len(log.segments)
    assert all_batches(log) == contents


async def test_retention_and_cleaning_passes_pick_the_right_logs():
    env = FakeEnv(wall_ms=1_000_000)
    manager = LogManager(env, ["/d"], CONFIG)
    await manager.startup()
    compact = LogConfig(**{**CONFIG.__dict__, "cleanup_policy": "compact", "min_cleanable_dirty_ratio": 0.3})
    deleting = LogConfig(**{**CONFIG.__dict__, "retention_bytes": 2000})
    c = await manager.get_or_create_log("compacted", 0, compact)
    d = await manager.get_or_create_log("deleted", 0, deleting)
    for i in range(60):
        c.append_as_leader(batch(0, [(b"k%d" % (i % 3), b"v%d" % i + b"x" * 60)]), leader_epoch=0)
        d.append_as_leader(value_batch(1, size=100), leader_epoch=0)
    for log in (c, d):
        log.roll()
        log.update_high_watermark(log.log_end_offset)
    assert await manager.retention_pass() > 0
    assert d.size_in_bytes < 2000 + CONFIG.segment_bytes and c.log_start_offset == 0
    result = await manager.cleaning_pass()
    assert result is not None and result.groups_cleaned > 0
    assert {r.key: r.offset for r in all_records(c)} == {b"k0": 57, b"k1": 58, b"k2": 59}
    assert read_offsets(env.fs, "/d/cleaner-offset-checkpoint") == {("compacted", 0): 60}
    assert await manager.cleaning_pass() is None  # nothing dirty any more


async def test_background_tasks_run_passes(autojump_clock):
    env = FakeEnv(wall_ms=1_000_000)
    manager = LogManager(env, ["/d"], LogConfig(**{**CONFIG.__dict__, "retention_ms": 10_000, "flush_ms": 500}))
    await manager.startup()
    log = await manager.get_or_create_log("t", 0)
    for i in range(40):
        log.append_as_leader(value_batch(1, size=100, ts=1_000_000), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.run_flusher, 0.1)
        await nursery.start(manager.run_retention, 1.0)
        await nursery.start(manager.run_cleaner, 1.0)
        await trio.sleep(2)
        assert log.recovery_point == log.log_end_offset  # flush.ms elapsed
        env.wall += 60_000
        await trio.sleep(2)
        assert len(log.segments) == 1  # everything but the active segment aged out
        nursery.cancel_scope.cancel()
    assert read_offsets(env.fs, "/d/log-start-offset-checkpoint") == {("t", 0): log.log_start_offset}


async def test_create_logs_in_one_batch_spreads_registers_and_is_durable():
    env = FakeEnv()
    manager = LogManager(env, ["/d1", "/d2"], CONFIG)
    await manager.startup()
    existing = await manager.get_or_create_log("t", 0)
    topic_id = uuid.UUID(int=7)
    wanted = [("t", p, None, topic_id) for p in range(6)] + [("bad", -1, None, None), ("t", 3, None, topic_id)]
    failures = await manager.create_logs(wanted)
    assert list(failures) == [("bad", -1)] and isinstance(failures[("bad", -1)], ValueError)
    assert manager.get_log("t", 0) is existing  # already there: left alone
    assert [tp for tp, _ in manager.all_logs()] == [("t", p) for p in range(6)]
    assert sorted(manager.data_dir_of("t", p) for p in range(6)) == ["/d1"] * 3 + ["/d2"] * 3
    for p in range(1, 6):
        manager.get_log("t", p).append_as_leader(value_batch(1, size=50), leader_epoch=1)
        await manager.get_log("t", p).flush()
    env.fs.crash()  # the new logs and their flushed data survive
    manager = LogManager(env, ["/d1", "/d2"], CONFIG)
    await manager.startup()
    assert [tp for tp, _ in manager.all_logs()] == [("t", p) for p in range(6)]
    assert [manager.get_log("t", p).log_end_offset for p in range(6)] == [0, 1, 1, 1, 1, 1]
    assert [manager.topic_id_of("t", p) for p in range(6)] == [None] + [topic_id] * 5


async def test_concurrent_checkpoints_of_one_dir_do_not_collide():
    """The flusher, the retention task and a truncation may all checkpoint a dir at once; with
    fsyncs that take time, unserialised writers renamed each other's temporary file away and
    the resulting I/O error took the data dir offline."""
    env = FakeEnv()
    manager = LogManager(env, ["/d"], CONFIG)
    await manager.startup()
    log = await manager.get_or_create_log("t", 0)
    log.append_as_leader(value_batch(2, size=100), leader_epoch=1)
    await log.flush()
    env.fs.sync_delay = 0.01
    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(manager.checkpoint)
    assert not manager.failures.is_offline("/d")
    assert read_offsets(env.fs, "/d/recovery-point-offset-checkpoint") == {("t", 0): 2}


async def test_a_legal_249_byte_topic_name_is_deleted_and_set_aside_within_name_max():
    """The `-delete` and `-stray` names cut the topic short (Kafka's logDeleteDirName): the
    plain `<topic>-<p>.<uuid>-delete` of a long name exceeds NAME_MAX and the rename fails."""
    env = FakeEnv()
    manager = LogManager(env, ["/d"], CONFIG)
    await manager.startup()
    topic = "t" * 249
    for p in range(3):
        (await manager.get_or_create_log(topic, p)).append_as_leader(value_batch(1), leader_epoch=0)
    assert await manager.delete_log(topic, 0)
    assert await manager.set_aside_stray(topic, 1)
    names = env.fs.listdir("/d")
    stray = [n for n in names if n.endswith("-stray")]
    assert len(stray) == 1 and len(stray[0]) == NAME_MAX and stray[0].startswith("t" * 200)
    assert not any(n.endswith("-delete") for n in names)
    assert manager.failures.offline == {}
    with pytest.raises(ValueError, match="exceed 255 bytes"):
        await manager.get_or_create_log(topic, 100_000)  # "<249 bytes>-100000" is 256 bytes
    failures = await manager.create_logs([(topic, 100_000, None, None)])
    assert isinstance(failures[(topic, 100_000)], ValueError)
    assert manager.failures.offline == {}

    await manager.shutdown()
    manager = LogManager(env, ["/d"], CONFIG)
    await manager.startup()  # the stray is kept, not loaded
    assert [tp for tp, _ in manager.all_logs()] == [(topic, 2)]
    assert stray[0] in env.fs.listdir("/d")


async def test_a_log_of_an_older_topic_id_is_set_aside_and_one_without_an_id_adopts_it():
    env = FakeEnv()
    manager = LogManager(env, ["/d"], CONFIG)
    await manager.startup()
    old_id, new_id = uuid.UUID(int=1), uuid.UUID(int=2)
    old = await manager.get_or_create_log("t", 0, topic_id=old_id)
    old.append_as_leader(value_batch(3), leader_epoch=0)
    legacy = await manager.get_or_create_log("t", 1)  # a directory from before partition.metadata
    legacy.append_as_leader(value_batch(2), leader_epoch=0)
    await manager.shutdown()

    manager = LogManager(env, ["/d"], CONFIG)
    await manager.startup()
    assert manager.topic_id_of("t", 0) == old_id and manager.topic_id_of("t", 1) is None
    fresh = await manager.get_or_create_log("t", 0, topic_id=new_id)
    assert fresh.log_end_offset == 0 and manager.topic_id_of("t", 0) == new_id
    adopted = await manager.get_or_create_log("t", 1, topic_id=new_id)
    assert adopted.log_end_offset == 2 and manager.topic_id_of("t", 1) == new_id
    assert len([n for n in env.fs.listdir("/d") if n.startswith("t-0.") and n.endswith("-stray")]) == 1
    env.fs.crash()
    manager = LogManager(env, ["/d"], CONFIG)
    await manager.startup()
    assert (manager.topic_id_of("t", 0), manager.topic_id_of("t", 1)) == (new_id, new_id)
    assert manager.get_log("t", 0).log_end_offset == 0 and manager.get_log("t", 1).log_end_offset == 2
