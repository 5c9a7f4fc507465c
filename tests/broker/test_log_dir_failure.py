"""Log-dir failures, piece by piece: the failure channel and the file-system view that feeds
it, the log manager's clean-shutdown marker, the broker's halt message, and the mapping of
storage errors to KAFKA_STORAGE_ERROR (never UNKNOWN_SERVER_ERROR)."""
from __future__ import annotations

import errno
import posixpath

import pytest
import trio

from broker.log_dir_failure_handler import HALT_GRACE_S, LogDirHalt, halt_on_log_dir_failure
from storage.log import LogError, LogManager
from storage.log.log_dir_failure import FailureReportingFileSystem, KafkaStorageError, LogDirFailureChannel
from storage.log.log_manager import CLEAN_SHUTDOWN_FILE
from storage.memfs import MemFileSystem
from tests.broker import builders as B
from tests.broker.harness import RawClient, mem_env, running_cluster
from wire.error_codes import ErrorCode as E


def _view(*dirs: str) -> tuple[MemFileSystem, FailureReportingFileSystem, LogDirFailureChannel]:
    disk = MemFileSystem()
    for d in dirs:
        disk.makedirs(d)
    channel = LogDirFailureChannel()
    return disk, FailureReportingFileSystem(disk, list(dirs), channel), channel


# -- the channel and the file-system view --------------------------------------------------

def test_a_write_error_takes_its_dir_offline_and_raises_a_kafka_storage_error_with_the_errno():
    disk, fs, channel = _view("/data/a", "/data/b")
    f = fs.open("/data/a/t-0.log", create=True)
    f.append(b"fine")
    disk.fail_writes = True
    with pytest.raises(KafkaStorageError) as info:
        f.append(b"more")
    err = info.value
    assert isinstance(err, LogError) and isinstance(err, OSError)  # handlers map LogError; errno kept
    assert err.errno == errno.ENOSPC and err.log_dir == "/data/a"
    assert "log dir /data/a failed: No space left on device (write /data/a/t-0.log)" == err.strerror
    assert isinstance(err.__cause__, OSError) and err.__cause__.errno == errno.ENOSPC
    assert list(channel.offline) == ["/data/a"] and channel.failed.is_set()
    assert channel.is_offline("/data/a") and not channel.is_offline("/data/b")


def test_fsync_and_directory_sync_errors_are_reported_too():
    disk, fs, channel = _view("/data/a", "/data/b")
    f = fs.open("/data/b/x", create=True)

    async def failing_sync(*_):
        raise OSError(errno.EIO, "Input/output error")

    disk.sync_dir = failing_sync

    async def main():
        with pytest.raises(KafkaStorageError, match="fsync of directory /data/b"):
            await fs.sync_dir("/data/b")
    trio.run(main)
    assert list(channel.offline) == ["/data/b"]
    assert channel.offline["/data/b"].errno == errno.EIO
    f.close()


def test_name_errors_pass_through_and_take_nothing_offline():
    _, fs, channel = _view("/data/a")
    with pytest.raises(FileNotFoundError):
        fs.open("/data/a/missing")
    with pytest.raises(FileNotFoundError):
        fs.remove("/data/a/missing")
    assert not channel.any_offline and not channel.failed.is_set()


def test_only_the_first_error_of_a_dir_is_kept_and_nested_dirs_are_told_apart():
    disk, fs, channel = _view("/data/a", "/data/ab")
    assert fs.data_dir_of("/data/ab/t-0/x.log") == "/data/ab"
    assert fs.data_dir_of("/data/a/t-0/x.log") == "/data/a"
    f = fs.open("/data/ab/y", create=True)
    disk.fail_writes = True
    for _ in range(2):
        with pytest.raises(KafkaStorageError):
            f.write_at(0, b"z")
    first = channel.offline["/data/ab"]
    with pytest.raises(KafkaStorageError):
        f.append(b"w")
    assert channel.offline["/data/ab"] is first and channel.first() == ("/data/ab", first)


# -- the log manager: no clean-shutdown marker after a failure ---------------------------------

async def _manager_with_one_log(disk: MemFileSystem, dirs=("/data/a",)) -> LogManager:
    env = mem_env()
    env.fs = disk
    manager = LogManager(env, list(dirs))
    await manager.startup()
    plog = await manager.get_or_create_log("t", 0)
    plog.append_as_leader(B.batch(3), 0, now_ms=1000)
    return manager


def _markers(disk: MemFileSystem, dirs=("/data/a",)) -> list[bool]:
    return [disk.exists(posixpath.join(d, CLEAN_SHUTDOWN_FILE)) for d in dirs]


async def test_a_clean_stop_writes_the_marker_and_the_next_start_skips_recovery():
    disk = MemFileSystem()
    manager = await _manager_with_one_log(disk)
    await manager.shutdown()
    assert _markers(disk) == [True]
    again = await _manager_with_one_log(disk)
    assert again.had_clean_shutdown == {"/data/a": True}


async def test_after_a_write_error_shutdown_writes_nothing_and_the_next_start_recovers():
    disk = MemFileSystem()
    manager = await _manager_with_one_log(disk)
    plog = manager.get_log("t", 0)
    disk.fail_writes = True
    with pytest.raises(KafkaStorageError):
        plog.append_as_leader(B.batch(2), 0, now_ms=1000)
    assert manager.is_offline("t", 0)
    disk.fail_writes = False  # the disk works again by the time the broker stops
    before = disk.snapshot()
    await manager.shutdown()
    assert _markers(disk) == [False]
    assert disk.snapshot() == before  # no flush, no checkpoint: a halt leaves files as they are
    disk.process_exit()
    env = mem_env()
    env.fs = disk
    again = LogManager(env, ["/data/a"])
    await again.startup()
    assert again.had_clean_shutdown == {"/data/a": False}
    recovered = again.get_log("t", 0)
    assert recovered.recovery_stats.segments_recovered == 1
    assert recovered.log_end_offset == 3  # what was written before the failure


async def test_a_failure_while_closing_also_suppresses_the_marker():
    disk = MemFileSystem()
    manager = await _manager_with_one_log(disk)
    disk.fail_writes = True  # the flush on close fails
    with pytest.raises(KafkaStorageError):
        await manager.shutdown()
    disk.fail_writes = False
    assert _markers(disk) == [False]


async def test_new_logs_avoid_an_offline_dir_and_none_are_created_when_all_failed():
    dirs = ("/data/a", "/data/b")
    disk = MemFileSystem()
    manager = await _manager_with_one_log(disk, dirs)
    failed_dir = manager.data_dir_of("t", 0)
    healthy = [d for d in dirs if d != failed_dir][0]
    manager.failures.mark_offline(failed_dir, OSError(errno.EIO, "Input/output error"))
    for i in range(1, 4):
        await manager.get_or_create_log("t", i)
        assert manager.data_dir_of("t", i) == healthy
    manager.failures.mark_offline(healthy, OSError(errno.EIO, "Input/output error"))
    with pytest.raises(KafkaStorageError, match="every log dir is offline"):
        await manager.get_or_create_log("u", 0)
    with pytest.raises(KafkaStorageError, match="every log dir is offline"):
        await manager.create_logs([("u", 1, None, None), ("u", 2, None, None)])
    assert manager.get_log("u", 1) is None and manager.get_log("u", 0) is None


# -- the broker's halt --------------------------------------------------------------------------

def test_the_halt_says_which_dir_failed_and_why_in_one_line():
    cause = KafkaStorageError("/var/kafka", OSError(errno.EFBIG, "File too large"), "write /var/kafka/t-0/0.log")
    halt = LogDirHalt("/var/kafka", cause)
    assert str(halt) == "log dir /var/kafka failed: File too large (write /var/kafka/t-0/0.log); halting"
    assert halt.errno == errno.EFBIG and isinstance(halt, OSError) and "\n" not in str(halt)


async def test_the_halt_task_takes_the_partitions_offline_then_raises(autojump_clock):
    channel = LogDirFailureChannel()
    offline_calls = []

    class Replicas:
        def handle_log_dir_failure(self, data_dir, reason):
            offline_calls.append((data_dir, reason))

    class Env:
        sleep = staticmethod(trio.sleep)

    async def fail_later():
        await trio.sleep(5)
        channel.mark_offline("/d", KafkaStorageError("/d", OSError(errno.ENOSPC, "No space left on device")))

    with pytest.raises(ExceptionGroup) as info:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fail_later)
            await halt_on_log_dir_failure(Env(), channel, Replicas())
    [halt] = info.value.exceptions
    assert isinstance(halt, LogDirHalt) and str(halt) == "log dir /d failed: No space left on device; halting"
    assert trio.current_time() >= 5.0 + HALT_GRACE_S  # the answers already built had their moment
    assert offline_calls == [("/d", "log dir /d failed: No space left on device")]


# -- requests: KAFKA_STORAGE_ERROR, not UNKNOWN_SERVER_ERROR ------------------------------------

def _eio(path, offset, data):
    raise OSError(errno.EIO, "Input/output error")


async def test_a_read_error_answers_fetch_and_list_offsets_with_kafka_storage_error():
    async with running_cluster() as c:
        broker = c.brokers[0]
        broker.halt_grace_s = 3600  # the halt itself is the next file's subject
        client = await RawClient.connect(broker.port)
        assert (await client.call(B.create_topic("t"), 4)).topics[0].error_code == E.NONE
        assert B.one_partition(await client.call(B.produce("t", 0, B.batch(3, timestamp=1000)), 8)).error_code == 0
        c.env.fs.read_fault = _eio
        fetched = await client.call(B.fetch([("t", 0, 0)]), 11)
        assert fetched.error_code in (E.NONE, E.KAFKA_STORAGE_ERROR)
        assert B.one_partition(fetched).error_code == E.KAFKA_STORAGE_ERROR
        c.env.fs.read_fault = None
        # The dir is offline now: every later request for its partitions is refused up front.
        offsets = await client.call(B.list_offsets("t", 0, 500), 3)
        assert offsets.topics[0].partitions[0].error_code == E.KAFKA_STORAGE_ERROR
        produced = B.one_partition(await client.call(B.produce("t", 0, B.batch(1)), 8))
        assert produced.error_code == E.KAFKA_STORAGE_ERROR


def test_an_append_refused_part_way_is_cut_back_to_the_last_whole_write():
    disk, fs, channel = _view("/data/a")

    class ShortWriteDisk:
        """Writes only the first 3 bytes of an append, then fails (a real disk's ENOSPC/EFBIG)."""

        def __init__(self, inner):
            self.inner = inner

        def open(self, path, *, create=False):
            return ShortWriteFile(self.inner.open(path, create=create))

        def file_size(self, path):
            return self.inner.file_size(path)

    class ShortWriteFile:
        def __init__(self, inner):
            self.inner, self.path = inner, inner.path
            self.size, self.truncate, self.send_to, self.close = inner.size, inner.truncate, inner.send_to, inner.close

        def append(self, data):
            self.inner.append(bytes(data)[:3])
            raise OSError(errno.EFBIG, "File too large")

    fs.inner = ShortWriteDisk(disk)
    f = fs.open("/data/a/t-0.log", create=True)
    f._inner.inner.append(b"whole batch")
    with pytest.raises(KafkaStorageError, match="File too large"):
        f.append(b"torn batch")
    assert disk.snapshot()["/data/a/t-0.log"] == b"whole batch" and f.size() == len(b"whole batch")
    assert channel.is_offline("/data/a")
