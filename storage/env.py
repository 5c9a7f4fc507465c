"""The Env seam: every source of nondeterminism reaches node code through here.

Node code (raft/, metadata/, broker/, storage/) never calls the clock, `random`,
`os.urandom`, threads, sockets or files directly. It is handed an `Env` at
construction and uses:

    env.now()                 monotonic seconds (trio's clock; a virtual SimClock in simulation)
    await env.sleep(s) / env.sleep_until(t)
    env.wall_ms()             wall-clock milliseconds (record timestamps, logs)
    env.rng                   a `random.Random` (seeded per node in simulation)
    env.uuid()                a random UUID drawn from env.rng
    env.net                   `Network`: serve(host, port, handler) / connect(host, port)
    env.fs                    `FileSystem`: files under the data dirs

`RealEnv` is the production implementation. `storage.memfs.MemFileSystem` is an
in-memory filesystem with crash semantics for tests; the simulated Env lives in
`simulations/`.

File I/O is deliberately synchronous for reads and writes that hit the page cache
(a thread hop per append would cost more than the write), and asynchronous for
the calls that can block for long: `File.sync()`, `FileSystem.sync_dir()` and
`File.send_to()`. That is also where a simulation injects slow disks.
"""
from __future__ import annotations

import errno
import os
import random
import time
import uuid as _uuid
from typing import Awaitable, Callable, Protocol, runtime_checkable

import trio

__all__ = [
    "Env",
    "RealEnv",
    "File",
    "FileSystem",
    "Network",
    "RealFileSystem",
    "RealNetwork",
    "StreamHandler",
    "write_file_atomic",
]

StreamHandler = Callable[[trio.abc.Stream], Awaitable[None]]


# --------------------------------------------------------------------------- #
# Protocols
# --------------------------------------------------------------------------- #


@runtime_checkable
class File(Protocol):
    """An open file. Positions are explicit: no hidden file pointer."""

    path: str

    def size(self) -> int: ...

    def read(self, offset: int, size: int) -> bytes:
        """Up to `size` bytes starting at `offset` (fewer at end of file)."""
        ...

    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Write at the end of the file; returns the position the data starts at."""
        ...

    def write_at(self, offset: int, data: bytes | bytearray | memoryview) -> None:
        """Overwrite/extend at `offset` (index files are preallocated and patched)."""
        ...

    def truncate(self, size: int) -> None: ...

    async def sync(self) -> None:
        """fsync: after it returns, everything written so far survives a crash."""
        ...

    async def send_to(self, stream: trio.abc.SendStream, offset: int, count: int) -> int:
        """Send `count` bytes from `offset` to `stream` (zero-copy on the real Env)."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class FileSystem(Protocol):
    """Paths are plain strings; directories are created explicitly."""

    def open(self, path: str, *, create: bool = False) -> File:
        """Open for reading and writing. FileNotFoundError unless it exists or create."""
        ...

    def exists(self, path: str) -> bool: ...

    def is_dir(self, path: str) -> bool: ...

    def listdir(self, path: str) -> list[str]:
        """Names in a directory, sorted (ordering must never depend on the platform)."""
        ...

    def makedirs(self, path: str) -> None: ...

    def remove(self, path: str) -> None: ...

    def rmtree(self, path: str) -> None: ...

    def rename(self, src: str, dst: str) -> None:
        """Atomic replace of `dst`."""
        ...

    def file_size(self, path: str) -> int: ...

    async def sync_dir(self, path: str) -> None:
        """Make creations, renames and removals inside `path` durable."""
        ...

    def free_bytes(self, path: str) -> int: ...


@runtime_checkable
class Network(Protocol):
    async def serve(
        self,
        host: str,
        port: int,
        handler: StreamHandler,
        *,
        task_status=trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Accept connections forever, running `handler(stream)` for each in its own task.

        `task_status.started(bound_port)` is called once listening (port 0 picks one).
        """
        ...

    async def connect(self, host: str, port: int) -> trio.abc.Stream:
        """Open a stream; raises OSError (ConnectionRefusedError, ...) on failure."""
        ...


class Env(Protocol):
    rng: random.Random
    net: Network
    fs: FileSystem

    def now(self) -> float: ...

    def wall_ms(self) -> int: ...

    async def sleep(self, seconds: float) -> None: ...

    async def sleep_until(self, deadline: float) -> None: ...

    def uuid(self) -> _uuid.UUID: ...


# --------------------------------------------------------------------------- #
# Helpers shared by every Env
# --------------------------------------------------------------------------- #


async def write_file_atomic(fs: FileSystem, path: str, data: bytes) -> None:
    """Write `data` to `path` so that a crash leaves either the old or the new file.

    Write a temporary sibling, fsync it, rename over the target, fsync the directory.
    """
    tmp = path + ".tmp"
    if fs.exists(tmp):
        fs.remove(tmp)
    f = fs.open(tmp, create=True)
    try:
        f.truncate(0)
        f.append(data)
        await f.sync()
    finally:
        f.close()
    fs.rename(tmp, path)
    await fs.sync_dir(os.path.dirname(path) or ".")


def uuid_from_rng(rng: random.Random) -> _uuid.UUID:
    return _uuid.UUID(int=rng.getrandbits(128), version=4)


# --------------------------------------------------------------------------- #
# The real Env
# --------------------------------------------------------------------------- #


class RealFile:
    """An OS file opened O_RDWR. pread/pwrite keep positions explicit."""

    __slots__ = ("path", "_fd", "_size")

    def __init__(self, path: str, fd: int):
        self.path = path
        self._fd = fd
        self._size = os.fstat(fd).st_size

    def size(self) -> int:
        return self._size

    def read(self, offset: int, size: int) -> bytes:
        if size <= 0 or offset >= self._size:
            return b""
        return os.pread(self._fd, min(size, self._size - offset), offset)

    def append(self, data) -> int:
        pos = self._size
        self._pwrite_all(data, pos)
        return pos

    def write_at(self, offset: int, data) -> None:
        self._pwrite_all(data, offset)

    def _pwrite_all(self, data, offset: int) -> None:
        view = memoryview(data).cast("B")
        written = 0
        while written < len(view):
            written += os.pwrite(self._fd, view[written:], offset + written)
        self._size = max(self._size, offset + len(view))

    def truncate(self, size: int) -> None:
        os.ftruncate(self._fd, size)
        self._size = size

    async def sync(self) -> None:
        # fsync can block for tens of milliseconds: keep it off the event loop.
        await trio.to_thread.run_sync(os.fsync, self._fd)

    async def send_to(self, stream: trio.abc.SendStream, offset: int, count: int) -> int:
        count = max(0, min(count, self._size - offset))
        if count == 0:
            return 0
        sock = getattr(stream, "socket", None)
        if sock is None:
            await stream.send_all(self.read(offset, count))
            return count
        sent = 0
        fileno = sock.fileno()
        while sent < count:
            try:
                n = os.sendfile(fileno, self._fd, offset + sent, count - sent)
            except BlockingIOError:
                n = 0
            if n == 0:
                await trio.lowlevel.wait_writable(sock)
                continue
            sent += n
        return sent

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class RealFileSystem:
    def open(self, path: str, *, create: bool = False) -> RealFile:
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        return RealFile(path, os.open(path, flags, 0o644))

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path)

    def listdir(self, path: str) -> list[str]:
        return sorted(os.listdir(path))

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def remove(self, path: str) -> None:
        os.remove(path)

    def rmtree(self, path: str) -> None:
        import shutil

        shutil.rmtree(path, ignore_errors=False)

    def rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def file_size(self, path: str) -> int:
        return os.path.getsize(path)

    async def sync_dir(self, path: str) -> None:
        def _sync() -> None:
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

        await trio.to_thread.run_sync(_sync)

    def free_bytes(self, path: str) -> int:
        st = os.statvfs(path)
        return st.f_bavail * st.f_frsize

    def lock(self, path: str) -> RealFile:
        """Open (creating) `path` and hold an exclusive flock on it while the file stays open,
        i.e. until this process closes it or dies (Kafka's log dir `.lock`). BlockingIOError
        if another process holds it."""
        import fcntl

        f = self.open(path, create=True)
        try:
            fcntl.flock(f._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            raise
        return f

    def boot_id(self) -> str | None:
        """The OS boot these files' page cache belongs to: it changes when unflushed data may
        have been lost (power loss, OS crash), not when a process dies. None if unknown."""
        try:
            with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
                return f.read().strip() or None
        except OSError:
            return None


class RealNetwork:
    async def serve(self, host, port, handler, *, task_status=trio.TASK_STATUS_IGNORED):
        listeners = await trio.open_tcp_listeners(port, host=host)
        bound = listeners[0].socket.getsockname()[1]
        task_status.started(bound)
        await trio.serve_listeners(_nodelay(handler), listeners)

    async def connect(self, host: str, port: int) -> trio.abc.Stream:
        stream = await trio.open_tcp_stream(host, port)
        _set_nodelay(stream)
        return stream


def _set_nodelay(stream) -> None:
    import socket

    sock = getattr(stream, "socket", None)
    if sock is not None:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError as e:  # pragma: no cover - platform specific
            if e.errno not in (errno.EINVAL, errno.ENOPROTOOPT):
                raise


def _nodelay(handler: StreamHandler) -> StreamHandler:
    async def wrapped(stream):
        _set_nodelay(stream)
        await handler(stream)

    return wrapped


class RealEnv:
    """Production Env: trio's clock, the OS clock, os.urandom-seeded RNG, TCP, OS files."""

    def __init__(self, *, seed: int | None = None):
        self.rng = random.Random(seed if seed is not None else int.from_bytes(os.urandom(16), "big"))
        self.net: Network = RealNetwork()
        self.fs: FileSystem = RealFileSystem()

    def now(self) -> float:
        return trio.current_time()

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000

    async def sleep(self, seconds: float) -> None:
        await trio.sleep(seconds)

    async def sleep_until(self, deadline: float) -> None:
        await trio.sleep_until(deadline)

    def uuid(self) -> _uuid.UUID:
        return uuid_from_rng(self.rng)
