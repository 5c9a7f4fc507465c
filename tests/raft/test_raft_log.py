"""The durable Raft log store: framing, segments, truncation, recovery after crashes."""
from __future__ import annotations

import random
import struct

import pytest
from crc32c import crc32c

from storage.env import RealFileSystem
from storage.memfs import MemFileSystem
from storage.meta_properties import DataDirError
from storage.raft_log import HEADER_SIZE, LogRecord, RaftLogStore, segment_name

DIR = "/data/__cluster_metadata-0"


def recs(start: int, n: int, epoch: int = 1, size: int = 10) -> list[LogRecord]:
    return [LogRecord(o, epoch, bytes([o % 251]) * size, o % 7 == 0) for o in range(start, start + n)]


async def open_store(fs, **kw):
    return await RaftLogStore.open(fs, DIR, **kw)


async def test_append_flush_reopen_roundtrip():
    fs = MemFileSystem()
    store, loaded = await open_store(fs)
    assert loaded == [] and store.start_offset == 0 and store.end_offset == 0
    store.append(recs(0, 20))
    await store.flush()
    assert store.read(0) == recs(0, 20)
    assert store.read(5, 8) == recs(5, 3)
    store.close()
    fs.crash(random.Random(1))
    store2, loaded = await open_store(fs)
    assert loaded == recs(0, 20)
    assert store2.end_offset == 20 and store2.last_epoch == 1


async def test_rejects_gaps_and_epoch_regressions():
    fs = MemFileSystem()
    store, _ = await open_store(fs)
    store.append(recs(0, 3, epoch=2))
    with pytest.raises(ValueError):
        store.append([LogRecord(5, 2, b"x")])
    with pytest.raises(ValueError):
        store.append([LogRecord(3, 1, b"x")])
    assert store.end_offset == 3


async def test_segments_roll_and_survive_crash_after_flush():
    fs = MemFileSystem()
    store, _ = await open_store(fs, segment_bytes=200)
    for i in range(10):
        store.append(recs(i * 5, 5, size=30))
    await store.flush()
    bases = store.segment_bases()
    assert len(bases) > 3 and bases[0] == 0
    assert [n for n in fs.listdir(DIR) if n.endswith(".log")] == [segment_name(b) for b in bases]
    fs.crash(random.Random(7))
    store2, loaded = await open_store(fs, segment_bytes=200)
    assert loaded == [r for i in range(10) for r in recs(i * 5, 5, size=30)]
    assert store2.segment_bases() == bases


async def _crash_with_an_unflushed_tail(rng, *, segment_bytes: int, durable: int, unflushed: int,
                                        size: int, sectors: bool = False):
    """Flush `durable` entries, append `unflushed` more, lose power; the reopened store, what
    it loaded, and what had been flushed."""
    fs = MemFileSystem()
    store, _ = await open_store(fs, segment_bytes=segment_bytes)
    store.append(recs(0, durable, size=rng.randint(1, 40)))
    await store.flush()
    flushed = store.read(0)
    store.append(recs(durable, unflushed, size=size))  # never flushed
    fs.crash(rng, sectors=sectors)
    store2, loaded = await open_store(fs, segment_bytes=segment_bytes)
    # Everything flushed survives; of the rest, only a clean prefix may survive.
    assert loaded[: len(flushed)] == flushed
    assert [r.offset for r in loaded] == list(range(len(loaded)))
    return fs, store2, loaded


async def test_unflushed_tail_is_cut_cleanly_on_crash():
    for seed in range(40):
        rng = random.Random(seed)
        fs, store2, loaded = await _crash_with_an_unflushed_tail(
            rng, segment_bytes=300, durable=rng.randint(0, 30), unflushed=rng.randint(1, 30), size=25)
        assert store2.end_offset == len(loaded)
        # And the recovered log accepts appends again.
        store2.append(recs(store2.end_offset, 2, epoch=5))
        await store2.flush()
        fs.crash(rng)
        _, again = await open_store(fs, segment_bytes=300)
        assert again == loaded + recs(len(loaded), 2, epoch=5)


async def test_damage_followed_by_valid_entries_is_refused_with_one_line_on_real_files(tmp_path):
    """A flipped byte in an entry that a later frame proves flushed is damage to durable
    (maybe committed) entries, not a torn tail: the store refuses to open, naming the file,
    rather than silently cut offsets 6..19. An observer (cut_damage) cuts there and re-fetches.
    Real files, as a node has them."""
    fs = RealFileSystem()
    directory = str(tmp_path / "__cluster_metadata-0")
    store, _ = await RaftLogStore.open(fs, directory)
    store.append(recs(0, 10))
    await store.flush()
    store.append(recs(10, 10))  # written after offsets 0..9 were flushed: each frame says so
    await store.flush()
    store.close()
    frame = HEADER_SIZE + 10
    path = tmp_path / "__cluster_metadata-0" / segment_name(0)
    raw = bytearray(path.read_bytes())
    raw[frame * 6 + HEADER_SIZE + 3] ^= 0xFF  # the payload of offset 6
    path.write_bytes(bytes(raw))
    with pytest.raises(DataDirError) as refused:
        await RaftLogStore.open(fs, directory)
    assert str(path) in str(refused.value) and "\n" not in str(refused.value)
    assert path.read_bytes() == bytes(raw)  # nothing was cut
    store2, loaded = await RaftLogStore.open(fs, directory, cut_damage=True)
    assert loaded == recs(0, 6)
    assert store2.end_offset == 6 and store2.recovered_bytes_cut == 14 * frame
    store2.close()


async def test_damage_in_the_last_flushed_batch_cannot_be_told_from_a_torn_tail_and_is_cut():
    """No frame written after offsets 0..9 says they were flushed: a hole at 6 with valid
    frames after it is what a power loss during writeback leaves, and it is cut."""
    fs = MemFileSystem()
    store, _ = await open_store(fs)
    store.append(recs(0, 10))
    await store.flush()
    store.close()
    f = fs.open(f"{DIR}/{segment_name(0)}")
    frame = HEADER_SIZE + 10
    f.write_at(frame * 6 + HEADER_SIZE + 3, b"\xff")
    store2, loaded = await open_store(fs)
    assert loaded == recs(0, 6) and store2.recovered_bytes_cut == 4 * frame


async def test_frames_of_an_older_log_without_the_flushed_end_still_count_as_proof():
    """A log written before frames carried `flushed`: damage followed by valid frames is refused
    as it was then."""
    fs = MemFileSystem()
    store, _ = await open_store(fs)
    store.close()
    f = fs.open(f"{DIR}/{segment_name(0)}")
    old_frames = []
    for r in recs(0, 5):
        body = struct.pack(">qiB", r.offset, r.epoch, int(r.control)) + r.payload
        old_frames.append(struct.pack(">II", len(body) + 4, crc32c(body)) + body)
    f.append(b"".join(old_frames))
    _, loaded = await open_store(fs)
    assert loaded == recs(0, 5)
    f.write_at(len(old_frames[0]) + 5, b"\xff")  # offset 1's header
    with pytest.raises(DataDirError):
        await open_store(fs)


async def test_damage_in_an_earlier_segment_is_refused_and_a_torn_last_frame_is_cut():
    fs = MemFileSystem()
    store, _ = await open_store(fs, segment_bytes=150)
    store.append(recs(0, 15, size=20))
    await store.flush()
    store.append(recs(15, 15, size=20))  # its frames say 0..14 were flushed
    await store.flush()
    bases = store.segment_bases()
    assert bases[1] <= 15
    f = fs.open(f"{DIR}/{segment_name(bases[0])}")
    size = f.size()
    f.write_at(size - 5, b"\xff")  # the last frame of the first segment; later segments are valid
    store.close()
    with pytest.raises(DataDirError, match=segment_name(bases[0])):
        await open_store(fs, segment_bytes=150)
    f.write_at(size - 5, bytes(recs(0, 30, size=20)[bases[1] - 1].payload[:1]))  # repaired
    last = fs.open(f"{DIR}/{segment_name(bases[-1])}")
    last.truncate(last.size() - 3)  # a torn final write
    store2, loaded = await open_store(fs, segment_bytes=150)
    assert loaded == recs(0, 29, size=20)


async def test_appended_garbage_is_cut():
    fs = MemFileSystem()
    store, _ = await open_store(fs)
    store.append(recs(0, 4))
    await store.flush()
    f = fs.open(f"{DIR}/{segment_name(0)}")
    f.append(b"\x00\x00\x00\x30garbage-garbage")
    store.close()
    store2, loaded = await open_store(fs)
    assert loaded == recs(0, 4)
    store2.append(recs(4, 1))
    assert store2.read(0) == recs(0, 5)


async def test_truncate_within_and_across_segments():
    fs = MemFileSystem()
    store, _ = await open_store(fs, segment_bytes=150)
    store.append(recs(0, 30, size=20))
    await store.flush()
    assert len(store.segment_bases()) > 3
    await store.truncate_to(17)
    assert store.end_offset == 17 and store.read(0) == recs(0, 17, size=20)
    assert all(b < 17 for b in store.segment_bases())
    store.append(recs(17, 3, epoch=3))
    await store.flush()
    fs.crash(random.Random(3))
    _, loaded = await open_store(fs, segment_bytes=150)
    assert loaded == recs(0, 17, size=20) + recs(17, 3, epoch=3)


async def test_truncate_restores_last_epoch():
    fs = MemFileSystem()
    store, _ = await open_store(fs)
    store.append(recs(0, 5, epoch=1) + recs(5, 5, epoch=4))
    await store.truncate_to(5)
    assert store.last_epoch == 1
    store.append(recs(5, 1, epoch=2))  # epoch 2 < 4 would be refused had the epoch not been restored
    await store.truncate_to(0)
    assert store.last_epoch == -1 and store.end_offset == 0


async def test_interrupted_truncation_leaves_a_contiguous_log():
    # A crash right after later segments were removed but before the cut: a stale
    # later segment must never be glued onto an earlier one with a gap.
    fs = MemFileSystem()
    store, _ = await open_store(fs, segment_bytes=100)
    store.append(recs(0, 20, size=20))
    await store.flush()
    bases = store.segment_bases()
    # Simulate a leftover: remove a middle segment's file only.
    fs.remove(f"{DIR}/{segment_name(bases[1])}")
    await fs.sync_dir(DIR)
    store.close()
    store2, loaded = await open_store(fs, segment_bytes=100)
    assert loaded == recs(0, bases[1], size=20)
    assert store2.segment_bases() == [0]
    assert [n for n in fs.listdir(DIR) if n.endswith(".log")] == [segment_name(0)]


async def test_reset_and_delete_before():
    fs = MemFileSystem()
    store, _ = await open_store(fs, segment_bytes=100)
    store.append(recs(0, 20, size=20))
    await store.flush()
    bases = store.segment_bases()
    start = await store.delete_before(bases[2] + 1)
    assert start == bases[2] and store.segment_bases() == bases[2:]
    assert store.read(bases[2]) == recs(bases[2], 20 - bases[2], size=20)
    await store.reset(100)
    assert (store.start_offset, store.end_offset, store.last_epoch) == (100, 100, -1)
    store.append(recs(100, 2, epoch=9))
    await store.flush()
    fs.crash(random.Random(0))
    store2, loaded = await open_store(fs, start_offset=0, segment_bytes=100)
    assert loaded == recs(100, 2, epoch=9) and store2.start_offset == 100


async def test_empty_log_starts_at_the_given_offset():
    fs = MemFileSystem()
    store, loaded = await open_store(fs, start_offset=42)
    assert loaded == [] and store.start_offset == 42 and store.end_offset == 42
    with pytest.raises(ValueError):
        store.append([LogRecord(0, 1, b"")])
    store.append([LogRecord(42, 1, b"a")])
    assert store.read(42) == [LogRecord(42, 1, b"a")]


async def test_random_operations_against_a_model_with_crashes():
    for seed in range(200):
        rng = random.Random(1000 + seed)
        fs = MemFileSystem()
        store, _ = await open_store(fs, segment_bytes=rng.choice([64, 200, 1000]))
        model: list[LogRecord] = []  # what is durable
        live: list[LogRecord] = []
        epoch = 1
        for _ in range(60):
            op = rng.random()
            if op < 0.5:
                epoch += rng.random() < 0.2
                new = [LogRecord(len(live) + i, epoch, rng.randbytes(rng.randint(0, 30)), rng.random() < 0.1)
                       for i in range(rng.randint(1, 6))]
                store.append(new)
                live += new
            elif op < 0.7:
                await store.flush()
                model = list(live)
            elif op < 0.85 and live:
                cut = rng.randint(0, len(live))
                await store.truncate_to(cut)
                live = live[:cut]
                model = list(live)
                epoch = max(epoch, live[-1].epoch if live else 1)
            else:
                fs.crash(rng)
                store, loaded = await open_store(fs, segment_bytes=store.segment_bytes)
                assert loaded[: len(model)] == model, seed
                assert loaded == live[: len(loaded)], seed
                live = loaded
                model = list(loaded)
                epoch = max([epoch] + [r.epoch for r in live])
            assert store.read(0) == live


async def test_a_sector_torn_power_loss_always_recovers_what_was_flushed():
    """Found by the simulation (membership workload, seed 24231): a power loss in the middle
    of writeback keeps any subset of the unsynced 512-byte sectors, so a hole can have whole
    valid frames after it. Those were never flushed: recovery cuts them, where it refused to
    start, taking them for damage to durable entries."""
    for seed in range(300):
        rng = random.Random(seed)
        _, store2, _ = await _crash_with_an_unflushed_tail(  # several sectors unflushed
            rng, segment_bytes=1500, durable=rng.randint(0, 60), unflushed=rng.randint(20, 80),
            size=rng.randint(5, 40), sectors=True)
        store2.close()
