"""Log-dir failures: Kafka's LogDirFailureChannel, and the file-system view that feeds it.

Any I/O error inside a data dir (ENOSPC, EIO on a write or an fsync, EFBIG, ...)
means that dir can no longer be trusted: a write may have gone half-way, an
fsync that failed may have dropped dirty pages. As in Kafka, the first such
error takes the dir *offline* for the rest of the process lifetime, and
whoever hit it gets a `KafkaStorageError` (which request handlers answer with
KAFKA_STORAGE_ERROR, a retriable error: clients refresh metadata and go to the
new leader).

Rather than wrap every call site of the log code, the LogManager hands its
logs an Env whose file system is `FailureReportingFileSystem`: every file and
directory operation under a data dir that fails with a device error reports
the dir to the channel and raises `KafkaStorageError` (keeping the errno).
Namespace errors the code uses as control flow (a missing file, an existing
one) pass through unchanged. What to do about an offline dir — answer
KAFKA_STORAGE_ERROR, stop fetching, halt without the clean-shutdown marker —
is the broker's business (broker.log_dir_failure_handler); this module only records.
"""
from __future__ import annotations

import posixpath

import trio

from storage.log.log_types import LogError

__all__ = ["KafkaStorageError", "LogDirFailureChannel", "FailureReportingFileSystem", "LogDirEnv"]

# Errors about names, not the device: the log code expects and handles these itself.
_NAMESPACE_ERRORS = (FileNotFoundError, FileExistsError, IsADirectoryError, NotADirectoryError)


class KafkaStorageError(LogError, OSError):
    """An I/O error in a log dir, which is now offline. A LogError (handlers answer
    KAFKA_STORAGE_ERROR) and still an OSError with the original errno."""

    def __init__(self, log_dir: str, cause: OSError, operation: str = ""):
        detail = cause.strerror or str(cause) or type(cause).__name__
        where = f" ({operation})" if operation else ""
        super().__init__(cause.errno, f"log dir {log_dir} failed: {detail}{where}")
        self.log_dir = log_dir
        self.__cause__ = cause

    def __str__(self) -> str:
        return self.strerror  # "log dir D failed: ...": already names what failed


class LogDirFailureChannel:
    """Which data dirs went offline in this process lifetime, and the error that did it.
    A dir is added once and never leaves; `failed` is set at the first (the broker waits on it)."""

    def __init__(self) -> None:
        self.offline: dict[str, OSError] = {}  # data dir -> first error, in failure order
        self.failed = trio.Event()

    def mark_offline(self, log_dir: str, error: OSError) -> bool:
        """Record a failure of `log_dir`; True only the first time for that dir."""
        if log_dir in self.offline:
            return False
        self.offline[log_dir] = error
        self.failed.set()
        return True

    def is_offline(self, log_dir: str | None) -> bool:
        return log_dir in self.offline

    @property
    def any_offline(self) -> bool:
        return bool(self.offline)

    def first(self) -> tuple[str, OSError] | None:
        """The first dir that failed and its error (None while all are healthy)."""
        return next(iter(self.offline.items()), None)


class FailureReportingFileSystem:
    """A FileSystem that reports device errors under `data_dirs` to a channel."""

    def __init__(self, inner, data_dirs: list[str], channel: LogDirFailureChannel):
        self.inner = inner
        self.channel = channel
        # Longest first, so a dir nested in another is matched before its parent.
        self._dirs = sorted((posixpath.normpath(d) for d in data_dirs), key=len, reverse=True)
        self._given = {posixpath.normpath(d): d for d in data_dirs}  # report dirs as configured

    def data_dir_of(self, path: str) -> str:
        norm = posixpath.normpath(path)
        for d in self._dirs:
            if norm == d or norm.startswith(d + "/"):
                return self._given[d]
        return posixpath.dirname(path)  # outside every data dir: blame its own directory

    def failure(self, path: str, exc: OSError, operation: str) -> OSError:
        """What to raise for `exc` from `operation` on `path`: the error itself if it is
        about names (or already reported), else a KafkaStorageError with the dir offline."""
        if isinstance(exc, (KafkaStorageError,) + _NAMESPACE_ERRORS):
            return exc
        log_dir = self.data_dir_of(path)
        error = KafkaStorageError(log_dir, exc, f"{operation} {path}")
        self.channel.mark_offline(log_dir, error)
        return error

    def _checked(self, operation: str, path: str, call, *args):
        """`call(*args)`, with an OSError reported as `operation` on `path`."""
        try:
            return call(*args)
        except OSError as exc:
            raise self.failure(path, exc, operation) from exc

    # -- files ----------------------------------------------------------------------
    def open(self, path: str, *, create: bool = False):
        try:
            return _ReportingFile(self.inner.open(path, create=create), self)
        except OSError as exc:
            raise self.failure(path, exc, "open") from exc

    # -- the namespace ------------------------------------------------------------------
    def exists(self, path: str) -> bool:
        return self.inner.exists(path)

    def is_dir(self, path: str) -> bool:
        return self.inner.is_dir(path)

    def listdir(self, path: str) -> list[str]:
        return self._checked("listdir", path, self.inner.listdir, path)

    def makedirs(self, path: str) -> None:
        self._checked("makedirs", path, self.inner.makedirs, path)

    def remove(self, path: str) -> None:
        self._checked("remove", path, self.inner.remove, path)

    def rmtree(self, path: str) -> None:
        self._checked("rmtree", path, self.inner.rmtree, path)

    def rename(self, src: str, dst: str) -> None:
        self._checked("rename", src, self.inner.rename, src, dst)

    def file_size(self, path: str) -> int:
        return self._checked("stat", path, self.inner.file_size, path)

    async def sync_dir(self, path: str) -> None:
        try:
            await self.inner.sync_dir(path)
        except OSError as exc:
            raise self.failure(path, exc, "fsync of directory") from exc

    def free_bytes(self, path: str) -> int:
        return self.inner.free_bytes(path)

    def __getattr__(self, name: str):
        return getattr(self.inner, name)  # extras such as boot_id()


class _ReportingFile:
    """One open file of a log dir; its I/O errors go through the file system's `failure`."""

    __slots__ = ("_inner", "_fs", "path", "size", "send_to", "close")

    def __init__(self, inner, fs: FailureReportingFileSystem):
        self._inner = inner
        self._fs = fs
        self.path = inner.path
        self.size = inner.size  # no I/O (the size is kept in memory), and the log asks often
        # sendfile errors are mostly the socket's (a peer gone), not the disk's: not reported.
        self.send_to = inner.send_to
        self.close = inner.close

    def read(self, offset: int, size: int) -> bytes:
        return self._fs._checked("read", self.path, self._inner.read, offset, size)

    def append(self, data) -> int:
        end = self._inner.size()
        try:
            return self._inner.append(data)
        except OSError as exc:
            self._undo_partial_append(end)
            raise self._fs.failure(self.path, exc, "write") from exc

    def _undo_partial_append(self, end: int) -> None:
        """A write refused part-way (ENOSPC, EFBIG after a short write) leaves a torn batch
        that was never acknowledged: cut it now, so the log holds whole batches and the next
        start has nothing to cut (a cut log makes the restart unclean, KIP-966)."""
        try:
            if self._fs.inner.file_size(self.path) > end:
                self._inner.truncate(end)
        except OSError:
            pass  # the device is failing outright: recovery cuts the tail at the next start

    def write_at(self, offset: int, data) -> None:
        self._fs._checked("write", self.path, self._inner.write_at, offset, data)

    def truncate(self, size: int) -> None:
        self._fs._checked("truncate", self.path, self._inner.truncate, size)

    async def sync(self) -> None:
        try:
            await self._inner.sync()
        except OSError as exc:
            raise self._fs.failure(self.path, exc, "fsync") from exc


class LogDirEnv:
    """The node's Env as the partition logs see it: the same clock, randomness and
    network, with file access through a FailureReportingFileSystem."""

    def __init__(self, env, fs: FailureReportingFileSystem):
        self._env = env
        self.fs = fs
        self.now = env.now  # bound once: the log calls these on every append
        self.wall_ms = env.wall_ms
        self.sleep = env.sleep
        self.sleep_until = env.sleep_until
        self.uuid = env.uuid

    @property
    def rng(self):
        return self._env.rng

    @property
    def net(self):
        return self._env.net

    def __getattr__(self, name: str):
        return getattr(self._env, name)
