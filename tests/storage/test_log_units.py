"""Unit tests: log config, offset/time indexes, epoch cache, checkpoints, producer snapshots."""
import pytest

from storage.log.checkpoints import CorruptCheckpointError, read_offsets, write_offsets
from storage.log.epoch_cache import LeaderEpochCache
from storage.log.log_config import LONG_MAX, LogConfig, LogConfigError
from storage.log.offset_index import CorruptIndexError, OffsetIndex
from storage.log.producer_state_snapshot import ProducerSnapshots
from storage.log.time_index import TimeIndex
from storage.memfs import MemFileSystem


def test_config_defaults_match_kafka():
    c = LogConfig()
    assert c.segment_bytes == 1073741824
    assert c.segment_ms == 604800000
    assert c.segment_index_bytes == 10485760
    assert c.index_interval_bytes == 4096
    assert c.retention_ms == 604800000 and c.retention_bytes == -1
    assert c.cleanup_policy == "delete" and c.delete and not c.compact
    assert c.delete_retention_ms == 86400000
    assert c.min_cleanable_dirty_ratio == 0.5
    assert c.min_compaction_lag_ms == 0 and c.max_compaction_lag_ms == LONG_MAX
    assert c.file_delete_delay_ms == 60000
    assert c.flush_messages == LONG_MAX and c.flush_ms == LONG_MAX
    assert c.message_timestamp_type == "CreateTime"
    assert c.max_message_bytes == 1048588


def test_config_from_kafka_properties():
    c = LogConfig.from_properties({"segment.bytes": "4096", "cleanup.policy": "compact,delete",
                                   "min.cleanable.dirty.ratio": "0.1", "unknown.thing": "x"})
    assert c.segment_bytes == 4096 and c.compact and c.delete and c.min_cleanable_dirty_ratio == 0.1
    assert LogConfig.from_properties(c.to_properties()) == c


@pytest.mark.parametrize("props", [
    {"segment.bytes": "abc"}, {"segment.bytes": "1"}, {"cleanup.policy": "shred"},
    {"min.cleanable.dirty.ratio": "2"}, {"message.timestamp.type": "Whenever"}, {"retention.ms": "-5"},
])
def test_config_rejects_bad_values(props):
    with pytest.raises(LogConfigError) as e:
        LogConfig.from_properties(props)
    assert list(props)[0] in str(e.value)


def _file(fs, path="/i"):
    return fs.open(path, create=True)


def test_offset_index_lookup_truncate_and_reload():
    fs = MemFileSystem()
    index = OffsetIndex(_file(fs), 100, 1024)
    assert index.lookup(500) == (100, 0)
    for i, (o, p) in enumerate([(105, 0), (110, 4096), (120, 9000)]):
        index.append(o, p)
    assert index.lookup(104) == (100, 0)
    assert index.lookup(105) == (105, 0)
    assert index.lookup(119) == (110, 4096)
    assert index.lookup(10**9) == (120, 9000)
    with pytest.raises(ValueError):
        index.append(115, 10000)
    reloaded = OffsetIndex.load(fs.open("/i"), 100, 1024)
    assert reloaded.entries() == index.entries()
    reloaded.truncate_to_position(4096)
    assert reloaded.entries() == [(105, 0)]
    assert OffsetIndex.load(fs.open("/i"), 100, 1024).entries() == [(105, 0)]
    assert not reloaded.is_full and OffsetIndex(_file(fs, "/j"), 0, 8).max_entries == 1


def test_offset_index_rejects_malformed_files():
    fs = MemFileSystem()
    f = _file(fs)
    f.append(b"\x00" * 7)
    with pytest.raises(CorruptIndexError):
        OffsetIndex.load(f, 0, 1024)
    f.truncate(0)
    f.append(bytes.fromhex("0000000500000010" "0000000300000020"))  # offsets go backwards
    with pytest.raises(CorruptIndexError):
        OffsetIndex.load(f, 0, 1024)
    index = OffsetIndex(_file(fs, "/k"), 0, 1024)
    index.append(5, 100)
    with pytest.raises(CorruptIndexError):
        index.sanity_check(log_size=100)  # points at the end of the log
    index.sanity_check(log_size=200)


def test_time_index_only_grows_and_looks_up_floor():
    fs = MemFileSystem()
    index = TimeIndex(_file(fs), 10, 1200)
    assert index.lookup(5) == (-1, 10) and index.last_entry == (-1, 10)
    index.maybe_append(1000, 12)
    index.maybe_append(900, 15)  # not later: ignored
    index.maybe_append(2000, 20)
    assert index.entries() == [(1000, 12), (2000, 20)]
    assert index.lookup(999) == (-1, 10)
    assert index.lookup(1500) == (1000, 12)
    assert TimeIndex.load(fs.open("/i"), 10, 1200).entries() == index.entries()
    index.truncate_to_offset(20)
    assert index.entries() == [(1000, 12)]
    f = _file(fs, "/bad")
    f.append(b"\x01" * 13)
    with pytest.raises(CorruptIndexError):
        TimeIndex.load(f, 0, 1200)


async def test_epoch_cache_assign_end_offsets_and_truncation():
    fs = MemFileSystem()
    fs.makedirs("/p")
    cache = LeaderEpochCache(fs, "/p")
    assert cache.end_offset_for_epoch(3, 100) == (-1, -1)
    assert cache.assign(1, 0) and cache.assign(3, 50) and cache.assign(5, 80)
    assert not cache.assign(5, 90)  # same epoch, later offset: nothing new
    assert not cache.assign(-1, 95)
    assert cache.entries() == [(1, 0), (3, 50), (5, 80)]
    # Kafka's semantics: latest epoch -> log end; else (largest epoch <= requested, next start).
    assert cache.end_offset_for_epoch(5, 100) == (5, 100)
    assert cache.end_offset_for_epoch(3, 100) == (3, 80)
    assert cache.end_offset_for_epoch(4, 100) == (3, 80)
    assert cache.end_offset_for_epoch(0, 100) == (0, 0)
    assert cache.end_offset_for_epoch(7, 100) == (-1, -1)
    assert cache.epoch_for_offset(60) == 3
    await cache.flush()
    assert LeaderEpochCache.load(fs, "/p").entries() == [(1, 0), (3, 50), (5, 80)]
    # A new epoch at a lower offset replaces what it contradicts (follower truncation).
    cache.assign(6, 60)
    assert cache.entries() == [(1, 0), (3, 50), (6, 60)]
    cache.truncate_from_end(55)
    assert cache.entries() == [(1, 0), (3, 50)]
    cache.truncate_from_start(20)
    assert cache.entries() == [(1, 20), (3, 50)]
    cache.truncate_from_start(50)
    assert cache.entries() == [(3, 50)]


async def test_epoch_cache_flushes_one_writer_at_a_time():
    """A new epoch assigned while the checkpoint is being written (slow fsync) starts a second
    flush: it waits for the first instead of renaming its temporary file away, and every
    caller returns only once the entries it saw are on disk."""
    import trio
    fs = MemFileSystem()
    fs.makedirs("/p")
    fs.sync_delay = 0.01
    cache = LeaderEpochCache(fs, "/p")
    cache.assign(1, 0)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(cache.flush)
        await trio.sleep(0.005)  # the first write is in its fsync
        assert cache.unsaved and not cache.dirty
        cache.assign(2, 10)
        await cache.flush()
        assert LeaderEpochCache.load(fs, "/p").entries() == [(1, 0), (2, 10)]
    assert not cache.unsaved


async def test_epoch_cache_corrupt_file_loads_empty():
    fs = MemFileSystem()
    fs.makedirs("/p")
    f = fs.open("/p/leader-epoch-checkpoint", create=True)
    f.append(b"0\n2\n1 0\n")
    cache = LeaderEpochCache.load(fs, "/p")
    assert cache.entries() == [] and cache.dirty


async def test_offset_checkpoint_round_trip_and_corruption():
    fs = MemFileSystem()
    fs.makedirs("/d")
    offsets = {("orders", 1): 42, ("a-b.c", 0): 7}
    await write_offsets(fs, "/d/recovery-point-offset-checkpoint", offsets)
    raw = fs.open("/d/recovery-point-offset-checkpoint").read(0, 1000)
    assert raw == b"0\n2\na-b.c 0 7\norders 1 42\n"  # Kafka's layout, sorted
    assert read_offsets(fs, "/d/recovery-point-offset-checkpoint") == offsets
    assert read_offsets(fs, "/d/missing") == {}
    for bad in (b"1\n0\n", b"0\n3\nt 0 1\n", b"0\n1\nt x 1\n", b"\xff\xfe"):
        f = fs.open("/d/bad", create=True)
        f.truncate(0)
        f.append(bad)
        with pytest.raises(CorruptCheckpointError):
            read_offsets(fs, "/d/bad")


async def test_producer_snapshots_save_load_prune():
    fs = MemFileSystem()
    fs.makedirs("/p")
    snaps = ProducerSnapshots(fs, "/p")
    for offset in (10, 20, 30):
        await snaps.save(offset, b"state@%d" % offset)
    assert fs.listdir("/p") == [f"{o:020d}.snapshot" for o in (10, 20, 30)]
    assert snaps.latest() == (30, b"state@30")
    assert snaps.latest(up_to=25) == (20, b"state@20")
    f = fs.open(snaps.path(30))
    f.write_at(12, b"X")  # corrupt the blob: fails its checksum, treated as absent
    assert snaps.latest() == (20, b"state@20")
    assert snaps.offsets() == [10, 20]
    snaps.truncate_after(15)
    assert snaps.offsets() == [10]
    await snaps.save(40, b"x")
    snaps.delete_before(40)
    assert snaps.offsets() == [40]
