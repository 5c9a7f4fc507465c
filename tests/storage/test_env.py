"""The Env seam: real filesystem and network, and the in-memory filesystem's crash semantics."""
from __future__ import annotations

import random

import pytest
import trio

from storage.env import RealEnv, RealFileSystem, write_file_atomic
from storage.memfs import MemFileSystem, StaleHandleError


# --------------------------------------------------------------------------- #
# Behaviour shared by both filesystems
# --------------------------------------------------------------------------- #


@pytest.fixture(params=["real", "mem"])
def fs_and_root(request, tmp_path):
    if request.param == "real":
        return RealFileSystem(), str(tmp_path)
    fs = MemFileSystem()
    fs.makedirs("/data")
    return fs, "/data"


async def test_append_read_truncate(fs_and_root):
    fs, root = fs_and_root
    f = fs.open(f"{root}/a.log", create=True)
    assert f.append(b"hello ") == 0
    assert f.append(bytearray(b"world")) == 6
    assert f.size() == 11
    assert f.read(0, 100) == b"hello world"
    assert f.read(6, 3) == b"wor"
    assert f.read(50, 3) == b""
    f.write_at(0, memoryview(b"J"))
    assert f.read(0, 5) == b"Jello"
    f.truncate(5)
    assert f.size() == 5 and f.read(0, 100) == b"Jello"
    await f.sync()
    f.close()
    assert fs.file_size(f"{root}/a.log") == 5


async def test_namespace_operations(fs_and_root):
    fs, root = fs_and_root
    fs.makedirs(f"{root}/t-0/sub")
    for name in ["b", "a", "c"]:
        fs.open(f"{root}/t-0/{name}", create=True).close()
    assert fs.listdir(f"{root}/t-0") == ["a", "b", "c", "sub"]
    assert fs.is_dir(f"{root}/t-0/sub") and not fs.is_dir(f"{root}/t-0/a")
    fs.rename(f"{root}/t-0/a", f"{root}/t-0/z")
    assert fs.listdir(f"{root}/t-0") == ["b", "c", "sub", "z"]
    fs.remove(f"{root}/t-0/b")
    assert not fs.exists(f"{root}/t-0/b")
    with pytest.raises(FileNotFoundError):
        fs.open(f"{root}/t-0/missing")
    fs.rmtree(f"{root}/t-0")
    assert not fs.exists(f"{root}/t-0")
    assert fs.free_bytes(root) > 0


async def test_write_file_atomic_replaces(fs_and_root):
    fs, root = fs_and_root
    await write_file_atomic(fs, f"{root}/quorum-state", b"v1")
    await write_file_atomic(fs, f"{root}/quorum-state", b"v2")
    assert fs.open(f"{root}/quorum-state").read(0, 10) == b"v2"
    assert fs.listdir(root) == ["quorum-state"]


# --------------------------------------------------------------------------- #
# MemFileSystem crash semantics
# --------------------------------------------------------------------------- #


async def _durable_dir(fs: MemFileSystem, path: str) -> None:
    fs.makedirs(path)
    await fs.sync_dir(path)


async def test_crash_keeps_exactly_fsynced_data_without_torn_writes():
    fs = MemFileSystem()
    await _durable_dir(fs, "/d")
    f = fs.open("/d/log", create=True)
    await fs.sync_dir("/d")
    f.append(b"A" * 10)
    await f.sync()
    f.append(b"B" * 10)
    fs.crash(random.Random(1), torn_writes=False)
    data = fs.open("/d/log").read(0, 100)
    assert data in (b"A" * 10, b"A" * 10 + b"B" * 10)


@pytest.mark.parametrize("seed", range(50))
async def test_crash_result_is_fsynced_prefix_plus_in_order_prefix_of_later_writes(seed):
    rng = random.Random(seed)
    fs = MemFileSystem()
    await _durable_dir(fs, "/d")
    f = fs.open("/d/log", create=True)
    await fs.sync_dir("/d")
    synced = b""
    written = b""
    for i in range(rng.randint(1, 8)):
        chunk = bytes([65 + i]) * rng.randint(1, 20)
        f.append(chunk)
        written += chunk
        if rng.random() < 0.4:
            await f.sync()
            synced = written
    fs.crash(rng)
    after = fs.open("/d/log").read(0, 10_000)
    # Everything fsynced survives; beyond it only a prefix of what was written, in order.
    assert after.startswith(synced)
    assert written.startswith(after)


async def test_handles_from_before_a_crash_are_stale():
    fs = MemFileSystem()
    await _durable_dir(fs, "/d")
    f = fs.open("/d/x", create=True)
    fs.crash()
    with pytest.raises(StaleHandleError):
        f.append(b"late")


async def test_unsynced_directory_entries_vanish_on_crash():
    fs = MemFileSystem()
    await _durable_dir(fs, "/d")
    f = fs.open("/d/new", create=True)
    f.append(b"data")
    await f.sync()  # data synced, but the directory entry never was
    fs.crash()
    assert not fs.exists("/d/new")


async def test_rename_is_durable_only_after_sync_dir():
    fs = MemFileSystem()
    await _durable_dir(fs, "/d")
    await write_file_atomic(fs, "/d/state", b"old")
    tmp = fs.open("/d/state.tmp", create=True)
    tmp.append(b"new")
    await tmp.sync()
    fs.rename("/d/state.tmp", "/d/state")
    fs.crash()  # no sync_dir after the rename: the old file is what survives
    assert fs.open("/d/state").read(0, 10) == b"old"
    await write_file_atomic(fs, "/d/state", b"new")
    fs.crash()
    assert fs.open("/d/state").read(0, 10) == b"new"


async def test_disk_full_and_read_faults():
    fs = MemFileSystem(capacity=10)
    await _durable_dir(fs, "/d")
    f = fs.open("/d/x", create=True)
    f.append(b"12345678")
    with pytest.raises(OSError) as info:
        f.append(b"too much")
    assert info.value.errno == 28  # ENOSPC
    fs.read_fault = lambda path, offset, data: bytes([data[0] ^ 0xFF]) + data[1:]
    assert f.read(0, 2) == bytes([ord("1") ^ 0xFF]) + b"2"


async def test_slow_fsync_takes_simulated_time(autojump_clock):
    fs = MemFileSystem()
    fs.sync_delay = 0.5
    await _durable_dir(fs, "/d")
    f = fs.open("/d/x", create=True)
    start = trio.current_time()
    await f.sync()
    assert trio.current_time() - start == pytest.approx(0.5)


# --------------------------------------------------------------------------- #
# RealEnv: clock, rng, network
# --------------------------------------------------------------------------- #


async def test_real_env_clock_rng_and_uuid():
    env = RealEnv(seed=7)
    assert RealEnv(seed=7).rng.random() == env.rng.random()
    t0 = env.now()
    await env.sleep(0.01)
    assert env.now() >= t0 + 0.01
    assert env.wall_ms() > 1_600_000_000_000
    u = env.uuid()
    assert u.version == 4 and u != env.uuid()


async def test_real_network_serve_connect_and_sendfile(tmp_path):
    env = RealEnv()
    path = str(tmp_path / "seg.log")
    f = env.fs.open(path, create=True)
    f.append(b"0123456789" * 1000)

    async def handler(stream):
        await f.send_to(stream, 5, 9000)
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        port = await nursery.start(env.net.serve, "127.0.0.1", 0, handler)
        client = await env.net.connect("127.0.0.1", port)
        received = bytearray()
        while chunk := await client.receive_some(65536):
            received += chunk
        nursery.cancel_scope.cancel()
    assert bytes(received) == (b"0123456789" * 1000)[5:9005]
    f.close()
