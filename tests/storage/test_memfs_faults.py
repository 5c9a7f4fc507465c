"""MemFileSystem's corruption and fsync-failure hooks: transient read flips, bit rot at
rest, and fsync EIO with Linux's lost-writeback semantics."""
import errno
import random

import pytest

from storage.memfs import MemFileSystem, ReadCorruption, flip_bit


class _Sink:
    def __init__(self):
        self.data = b""

    async def send_all(self, data):
        self.data += bytes(data)


def _bits_differing(a: bytes, b: bytes) -> int:
    assert len(a) == len(b)
    return sum(bin(x ^ y).count("1") for x, y in zip(a, b))


async def _file(fs: MemFileSystem, path: str, data: bytes, *, sync: bool = True):
    f = fs.open(path, create=True)
    f.append(data)
    if sync:
        await f.sync()
        await fs.sync_dir("/")
    return f


def test_flip_bit_flips_exactly_one_bit():
    assert flip_bit(b"\x00\x00", 9) == b"\x00\x02"
    assert flip_bit(b"\xff", 0) == b"\xfe"


async def test_read_corruption_is_transient_and_counted():
    fs = MemFileSystem()
    data = bytes(range(256)) * 4
    f = await _file(fs, "/a.log", data)
    fs.read_corruption = ReadCorruption(random.Random(1), probability=1.0)
    for _ in range(5):
        got = f.read(0, len(data))
        assert _bits_differing(got, data) == 1
    assert fs.read_corruption.flips == 5
    fs.read_corruption = None
    assert f.read(0, len(data)) == data  # at rest nothing changed
    assert fs.snapshot()["/a.log"] == data


async def test_read_corruption_probability_zero_never_flips():
    fs = MemFileSystem()
    f = await _file(fs, "/a.log", b"x" * 100)
    fs.read_corruption = ReadCorruption(random.Random(2), probability=0.0)
    assert all(f.read(0, 100) == b"x" * 100 for _ in range(50))
    assert fs.read_corruption.flips == 0


async def test_read_corruption_limited_to_paths_and_to_sendfile():
    fs = MemFileSystem()
    fs.makedirs("/p-0")
    seg = await _file(fs, "/p-0/0.log", b"s" * 64)
    state = await _file(fs, "/quorum-state", b"q" * 64)
    fs.read_corruption = ReadCorruption(random.Random(3), probability=1.0,
                                        applies_to=lambda p: p.endswith(".log"), sends_only=True)
    # The process's own reads (recovery, index rebuilds) see the true bytes...
    assert seg.read(0, 64) == b"s" * 64
    assert state.read(0, 64) == b"q" * 64
    # ...the bytes it serves with sendfile come out damaged, on the paths chosen only.
    sink = _Sink()
    assert await seg.send_to(sink, 0, 64) == 64
    assert _bits_differing(sink.data, b"s" * 64) == 1
    other = _Sink()
    await state.send_to(other, 0, 64)
    assert other.data == b"q" * 64
    assert fs.read_corruption.flips == 1


async def test_rot_changes_the_stored_bytes_in_the_range_only_and_survives_a_crash():
    fs = MemFileSystem()
    data = b"\x00" * 1000
    f = await _file(fs, "/seg.log", data)
    flipped = fs.rot("/seg.log", 400, 100, random.Random(4), bits=3)
    assert len(flipped) == 3 and all(400 * 8 <= b < 500 * 8 for b in flipped)
    damaged = f.read(0, 1000)
    assert _bits_differing(damaged, data) == 3
    assert damaged[:400] == data[:400] and damaged[500:] == data[500:]
    fs.crash(random.Random(0))
    assert fs.snapshot()["/seg.log"] == damaged  # at rest: the durable image is damaged too


async def test_rot_outside_the_file_is_refused():
    fs = MemFileSystem()
    await _file(fs, "/seg.log", b"abc")
    with pytest.raises(ValueError):
        fs.rot("/seg.log", 3, 10, random.Random(0))
    with pytest.raises(FileNotFoundError):
        fs.rot("/nope", 0, 1, random.Random(0))


async def test_failed_fsync_raises_eio_and_its_writes_never_become_durable():
    fs = MemFileSystem()
    f = await _file(fs, "/log", b"old-")
    f.append(b"lost")
    fs.fail_syncs = True
    with pytest.raises(OSError) as err:
        await f.sync()
    assert err.value.errno == errno.EIO
    assert fs.failed_syncs == 1
    fs.fail_syncs = False
    # The page cache still serves the write whose writeback failed...
    assert f.read(0, 8) == b"old-lost"
    # ...and a later fsync succeeds without making it durable (Linux marked the pages clean).
    f.append(b"-new")
    await f.sync()
    assert fs.durable_copy().snapshot()["/log"] == b"old-\0\0\0\0-new"
    fs.crash(random.Random(0))
    assert fs.snapshot()["/log"] == b"old-\0\0\0\0-new"


async def test_rewriting_the_lost_bytes_makes_them_durable_again():
    fs = MemFileSystem()
    f = await _file(fs, "/log", b"ab")
    f.append(b"cd")
    fs.fail_syncs = True
    with pytest.raises(OSError):
        await f.sync()
    fs.fail_syncs = False
    f.write_at(2, b"cd")
    await f.sync()
    fs.crash(random.Random(0))
    assert fs.snapshot()["/log"] == b"abcd"
    # Once the file is whole again, syncs are plain again.
    g = fs.open("/log")
    g.append(b"ef")
    await g.sync()
    assert fs.durable_copy().snapshot()["/log"] == b"abcdef"


async def test_failed_fsync_after_a_process_kill_still_loses_the_data_at_power_loss():
    fs = MemFileSystem()
    f = await _file(fs, "/log", b"ok")
    f.append(b"XX")
    fs.fail_syncs = True
    with pytest.raises(OSError):
        await f.sync()
    fs.fail_syncs = False
    fs.process_exit()  # the process died on EIO; the page cache lives on
    g = fs.open("/log")
    assert g.read(0, 4) == b"okXX"
    await g.sync()  # nothing pending: the restarted process cannot tell
    fs.crash(random.Random(0))
    assert fs.snapshot()["/log"] == b"ok"


async def test_failed_directory_sync_leaves_new_entries_undurable():
    fs = MemFileSystem()
    fs.makedirs("/d")
    await fs.sync_dir("/")
    f = fs.open("/d/new", create=True)
    f.append(b"x")
    await f.sync()
    fs.fail_syncs = True
    with pytest.raises(OSError) as err:
        await fs.sync_dir("/d")
    assert err.value.errno == errno.EIO
    fs.crash(random.Random(0))
    assert not fs.exists("/d/new")
