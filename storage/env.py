"""The Env seam: every source of nondeterminism reaches node code through here.

Node code (raft/, metadata/, broker/, storage/) never calls the clock, `random`,
`os.urandom`, threads, sockets or files directly. It is handed an `Env` at
construction and uses:

    env.now()                 monotonic seconds (trio's clock; a virtual SimClock in simulation)
    await env.sleep(s) / env.sleep_until(t)
    with env.move_on_at(t) / env.move_on_after(s) / env.fail_after(s):
                              a wait bounded by an Env deadline (a trio cancel scope)
    env.wall_ms()             wall-clock milliseconds (record timestamps, logs)
    env.rng                   a `random.Random` (seeded per node in simulation)
    env.uuid()                a random UUID drawn from env.rng
    env.net                   `Network`: serve(host, port, handler, tls=) / connect(host, port, tls=)
    env.fs                    `FileSystem`: files under the data dirs

`RealEnv` is the production implementation. `storage.memfs.MemFileSystem` is an
in-memory filesystem with crash semantics for tests; the simulated Env lives in
`simulations/`.

File I/O is deliberately synchronous for reads and writes that hit the page cache
(a thread hop per append would cost more than the write), and asynchronous for
the calls that can block for long: `File.sync()`, `FileSystem.sync_dir()` and
`File.send_to()`. That is also where a simulation injects slow disks.

Why one module of ~500 lines: the Env protocol and the real implementation are the only code
allowed to touch the OS (tests/test_determinism_scan.py exempts this file alone); keeping them
together keeps that exemption to one place.
"""
from __future__ import annotations

import errno
import logging
import os
import random
import time
import uuid as _uuid
from typing import Awaitable, Callable, ContextManager, Protocol, runtime_checkable

import trio

log = logging.getLogger("raftkafka.env")

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
    "peer_host",
    "peer_certificate",
    "TrioDeadlines",
]

_log = logging.getLogger("raftkafka.net")

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
        tls=None,
        task_status=trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Accept connections forever, running `handler(stream)` for each in its own task.

        `task_status.started(bound_port)` is called once listening (port 0 picks one).
        With `tls` (a `storage.tls.TlsContext`) each connection completes a TLS handshake
        within `tls.handshake_timeout` before the handler sees it, or is closed;
        `peer_certificate(stream)` then says who the client proved to be.
        """
        ...

    async def connect(self, host: str, port: int, *, tls=None) -> trio.abc.Stream:
        """Open a stream (TLS with `tls`, checking `host` against the server's certificate
        when the context asks); raises OSError (ConnectionRefusedError, ...) on failure."""
        ...


class Env(Protocol):
    rng: random.Random
    net: Network
    fs: FileSystem

    def now(self) -> float: ...

    def wall_ms(self) -> int: ...

    async def sleep(self, seconds: float) -> None: ...

    async def sleep_until(self, deadline: float) -> None: ...

    def move_on_at(self, deadline: float) -> trio.CancelScope: ...

    def move_on_after(self, seconds: float) -> trio.CancelScope: ...

    def fail_after(self, seconds: float) -> ContextManager[trio.CancelScope]: ...

    def uuid(self) -> _uuid.UUID: ...


class TrioDeadlines:
    """Deadline-bounded waits for an Env whose `now()` is trio's clock (RealEnv; SimEnv, whose
    virtual clock is trio's clock): a deadline is a trio cancel scope's.

    Node code has two ways to bound a wait in time, both on Env time: these, for one wait
    bounded by one deadline (connect, one call, a driver sleeping until its core's next
    deadline), and `storage.deadline_reaper.DeadlineReaper`, for the many short waits a cancel
    scope each would make costly (parked fetches, request timeouts, fetch rounds)."""

    def move_on_at(self, deadline: float) -> trio.CancelScope:
        return trio.move_on_at(deadline)

    def move_on_after(self, seconds: float) -> trio.CancelScope:
        return trio.move_on_after(seconds)

    def fail_after(self, seconds: float) -> ContextManager[trio.CancelScope]:
        """Raises trio.TooSlowError when `seconds` pass."""
        return trio.fail_after(seconds)


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


# File descriptors kept free for the node's own files and peer links: an accepted connection
# that would eat into them is closed at once, so clients can never starve the logs (EMFILE).
# (accept itself failing with EMFILE/ENFILE is retried after a pause by trio.serve_listeners.)
DESCRIPTOR_RESERVE_MIN = 64
DESCRIPTOR_RESERVE_FRACTION = 0.1


def descriptor_headroom_left(fd: int) -> bool:
    """False when `fd`, a just-accepted socket, sits in the reserve below RLIMIT_NOFILE
    (descriptors are handed out lowest first, so everything below it is in use)."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return True
    reserve = max(DESCRIPTOR_RESERVE_MIN, int(soft * DESCRIPTOR_RESERVE_FRACTION))
    return fd < soft - reserve


class RealNetwork:
    def __init__(self) -> None:
        self.refused_for_descriptors = 0
        self._tls_failures_logged: dict[str, float] = {}  # peer host → when we last said so

    async def serve(self, host, port, handler, *, tls=None, task_status=trio.TASK_STATUS_IGNORED):
        listeners = await trio.open_tcp_listeners(port, host=host)
        bound = listeners[0].socket.getsockname()[1]
        task_status.started(bound)
        wrapped = _nodelay(handler) if tls is None else self._tls_handler(handler, tls)
        await trio.serve_listeners(self._guarded(wrapped), listeners)

    def _guarded(self, handler: StreamHandler) -> StreamHandler:
        async def guarded(stream):
            if not descriptor_headroom_left(stream.socket.fileno()):
                self.refused_for_descriptors += 1
                if self.refused_for_descriptors % 100 == 1:
                    log.warning("closing new connections: file descriptors are nearly exhausted "
                                "(%d refused so far); raise the limit (ulimit -n) or lower max.connections",
                                self.refused_for_descriptors)
                await trio.aclose_forcefully(stream)
                return
            await handler(stream)

        return guarded

    async def connect(self, host: str, port: int, *, tls=None) -> trio.abc.Stream:
        stream = await trio.open_tcp_stream(host, port)
        _set_nodelay(stream)
        if tls is None:
            return stream
        ssl_stream = trio.SSLStream(stream, tls.context, server_hostname=host)
        try:
            with trio.fail_after(tls.handshake_timeout):
                await ssl_stream.do_handshake()
        except (trio.BrokenResourceError, trio.TooSlowError, OSError) as e:
            await trio.aclose_forcefully(stream)
            raise ConnectionError(f"TLS handshake with {host}:{port} failed: {_tls_reason(e)}") from None
        return ssl_stream

    def _tls_handler(self, handler: StreamHandler, tls) -> StreamHandler:
        async def handshake_then_serve(stream):
            _set_nodelay(stream)
            ssl_stream = trio.SSLStream(stream, tls.context, server_side=True)
            try:
                with trio.fail_after(tls.handshake_timeout):
                    await ssl_stream.do_handshake()
            except (trio.BrokenResourceError, trio.TooSlowError, OSError) as e:
                self._log_tls_failure(peer_host(stream), e)
                await trio.aclose_forcefully(stream)
                return
            await handler(ssl_stream)

        return handshake_then_serve

    def _log_tls_failure(self, peer: str, e: BaseException) -> None:
        """Once per peer host a minute: a misconfigured client retrying must not flood the log."""
        now = time.monotonic()
        if now - self._tls_failures_logged.get(peer, -1e9) < 60.0:
            return
        if len(self._tls_failures_logged) > 10_000:
            self._tls_failures_logged.clear()
        self._tls_failures_logged[peer] = now
        _log.warning("TLS handshake from %s failed: %s", peer, _tls_reason(e))


def _tls_reason(e: BaseException) -> str:
    if isinstance(e, trio.TooSlowError):
        return "no handshake within the deadline"
    cause = e.__cause__ or e.__context__ or e
    return getattr(cause, "verify_message", None) or getattr(cause, "reason", None) or str(cause) or type(cause).__name__


def peer_host(stream) -> str:
    """The remote address of a stream (TLS or not), or '' when it has none (in-memory)."""
    sock = getattr(getattr(stream, "transport_stream", stream), "socket", None)
    try:
        return str(sock.getpeername()[0])
    except Exception:  # no socket, or already closed
        return ""


def peer_certificate(stream) -> dict | None:
    """The certificate a TLS client proved it holds (`ssl.SSLSocket.getpeercert()`), or None."""
    getpeercert = getattr(stream, "getpeercert", None)
    if getpeercert is None:
        return None
    try:
        return getpeercert() or None
    except (ValueError, AttributeError):  # no handshake yet
        return None


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


class RealEnv(TrioDeadlines):
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
