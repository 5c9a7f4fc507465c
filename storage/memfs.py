"""An in-memory FileSystem with crash semantics, for tests and simulation.

Model (close to ext4 with data=ordered, which is what Kafka is run on):

- File data becomes durable only through `File.sync()`. Writes since the last
  sync are kept, in order, as pending; `crash()` keeps the durable bytes, then
  replays a random prefix of the pending writes, the last replayed one possibly
  torn (cut at a random byte). So after a crash a file holds exactly its fsynced
  content plus, possibly, some of the later writes in the order they were made.
- Namespace operations (create, rename, remove, makedirs) become durable through
  `sync_dir()` of the parent; `crash()` rolls back those that were not. A file
  created and fsynced but whose directory was never synced vanishes on a crash,
  as it can on a real disk.

`crash(rng)` models a power loss: every open handle is invalidated (using one
afterwards raises), the tree is reset to what was durable, and the filesystem
can be reused as if the machine rebooted.

Fault hooks for simulation: `fail_writes` (raise ENOSPC), `read_fault`
(called with (path, offset, data) -> data, e.g. to flip bits), and
`sync_delay` (seconds each fsync takes, slept through trio).
"""
from __future__ import annotations

import errno
import posixpath
import random
from dataclasses import dataclass, field
from typing import Callable

import trio

__all__ = ["MemFileSystem", "MemFile", "StaleHandleError"]


class StaleHandleError(OSError):
    """A handle opened before a crash was used after it."""


@dataclass
class _Inode:
    data: bytearray = field(default_factory=bytearray)
    durable: bytes = b""
    # Writes since the last sync, in order: ("w", offset, bytes) or ("t", size).
    pending: list = field(default_factory=list)


def _norm(path: str) -> str:
    # Relative paths are taken from the root: the in-memory tree has no cwd.
    return posixpath.normpath("/" + path.lstrip("/"))


class MemFile:
    __slots__ = ("path", "_fs", "_inode", "_generation")

    def __init__(self, fs: "MemFileSystem", path: str, inode: _Inode):
        self.path = path
        self._fs = fs
        self._inode = inode
        self._generation = fs._generation

    def _check(self) -> _Inode:
        if self._generation != self._fs._generation:
            raise StaleHandleError(errno.ESTALE, "file handle from before a crash", self.path)
        if self._inode is None:
            raise ValueError("I/O on closed file")
        return self._inode

    def size(self) -> int:
        return len(self._check().data)

    def read(self, offset: int, size: int) -> bytes:
        inode = self._check()
        data = bytes(inode.data[offset : offset + max(0, size)])
        fault = self._fs.read_fault
        if fault is not None and data:
            data = fault(self.path, offset, data)
        return data

    def append(self, data) -> int:
        inode = self._check()
        pos = len(inode.data)
        self.write_at(pos, data)
        return pos

    def write_at(self, offset: int, data) -> None:
        inode = self._check()
        data = bytes(data)
        self._fs._charge(len(data))
        if offset > len(inode.data):
            inode.data.extend(b"\0" * (offset - len(inode.data)))
        inode.data[offset : offset + len(data)] = data
        inode.pending.append(("w", offset, data))

    def truncate(self, size: int) -> None:
        inode = self._check()
        if size < len(inode.data):
            del inode.data[size:]
        else:
            inode.data.extend(b"\0" * (size - len(inode.data)))
        inode.pending.append(("t", size))

    async def sync(self) -> None:
        inode = self._check()
        if self._fs.sync_delay:
            await trio.sleep(self._fs.sync_delay)
            inode = self._check()  # a crash may have happened while we slept
        inode.durable = bytes(inode.data)
        inode.pending.clear()
        self._fs.fsyncs += 1

    async def send_to(self, stream, offset: int, count: int) -> int:
        data = self.read(offset, count)
        if data:
            await stream.send_all(data)
        return len(data)

    def close(self) -> None:
        self._inode = None


class MemFileSystem:
    def __init__(self, capacity: int | None = None):
        # Live namespace: path -> inode (files) or None (directories).
        self._files: dict[str, _Inode] = {}
        self._dirs: set[str] = {"/"}
        # Durable namespace, as of the last sync_dir of each parent.
        self._durable_files: dict[str, _Inode] = {}
        self._durable_dirs: set[str] = {"/"}
        self._generation = 0
        self.capacity = capacity
        self.fail_writes = False
        self.read_fault: Callable[[str, int, bytes], bytes] | None = None
        self.sync_delay = 0.0
        self.fsyncs = 0
        self.crashes = 0

    # -- space accounting ---------------------------------------------------
    def _used(self) -> int:
        return sum(len(i.data) for i in self._files.values())

    def _charge(self, nbytes: int) -> None:
        if self.fail_writes or (self.capacity is not None and self._used() + nbytes > self.capacity):
            raise OSError(errno.ENOSPC, "No space left on device")

    def free_bytes(self, path: str) -> int:
        if self.capacity is None:
            return 1 << 40
        return max(0, self.capacity - self._used())

    # -- namespace ----------------------------------------------------------
    def _parent_must_exist(self, path: str) -> None:
        parent = posixpath.dirname(path)
        if parent not in self._dirs:
            raise FileNotFoundError(errno.ENOENT, "No such directory", parent)

    def open(self, path: str, *, create: bool = False) -> MemFile:
        path = _norm(path)
        inode = self._files.get(path)
        if inode is None:
            if path in self._dirs:
                raise IsADirectoryError(errno.EISDIR, "Is a directory", path)
            if not create:
                raise FileNotFoundError(errno.ENOENT, "No such file", path)
            self._parent_must_exist(path)
            inode = self._files[path] = _Inode()
        return MemFile(self, path, inode)

    def exists(self, path: str) -> bool:
        path = _norm(path)
        return path in self._files or path in self._dirs

    def is_dir(self, path: str) -> bool:
        return _norm(path) in self._dirs

    def listdir(self, path: str) -> list[str]:
        path = _norm(path)
        if path not in self._dirs:
            raise FileNotFoundError(errno.ENOENT, "No such directory", path)
        names = {posixpath.basename(p) for p in self._files if posixpath.dirname(p) == path}
        names |= {posixpath.basename(d) for d in self._dirs if d != "/" and posixpath.dirname(d) == path}
        return sorted(names)

    def makedirs(self, path: str) -> None:
        path = _norm(path)
        if path in self._files:
            raise FileExistsError(errno.EEXIST, "File exists", path)
        while path not in self._dirs:
            self._dirs.add(path)
            path = posixpath.dirname(path)

    def remove(self, path: str) -> None:
        path = _norm(path)
        if path not in self._files:
            raise FileNotFoundError(errno.ENOENT, "No such file", path)
        del self._files[path]

    def rmtree(self, path: str) -> None:
        path = _norm(path)
        if path not in self._dirs:
            raise FileNotFoundError(errno.ENOENT, "No such directory", path)
        prefix = path.rstrip("/") + "/"
        for p in [p for p in self._files if p.startswith(prefix)]:
            del self._files[p]
        for d in [d for d in self._dirs if d == path or d.startswith(prefix)]:
            self._dirs.discard(d)

    def rename(self, src: str, dst: str) -> None:
        src, dst = _norm(src), _norm(dst)
        if src in self._files:
            self._parent_must_exist(dst)
            self._files[dst] = self._files.pop(src)
            return
        if src in self._dirs:
            self._parent_must_exist(dst)
            prefix = src.rstrip("/") + "/"
            self._dirs = {dst + d[len(src):] if (d == src or d.startswith(prefix)) else d for d in self._dirs}
            self._files = {
                (dst + p[len(src):] if p.startswith(prefix) else p): i for p, i in self._files.items()
            }
            return
        raise FileNotFoundError(errno.ENOENT, "No such file", src)

    def file_size(self, path: str) -> int:
        path = _norm(path)
        if path not in self._files:
            raise FileNotFoundError(errno.ENOENT, "No such file", path)
        return len(self._files[path].data)

    async def sync_dir(self, path: str) -> None:
        """Make the live entries directly inside `path` (and `path` itself) durable."""
        path = _norm(path)
        if path not in self._dirs:
            raise FileNotFoundError(errno.ENOENT, "No such directory", path)
        if self.sync_delay:
            await trio.sleep(self.sync_delay)
        # The directory itself and its ancestors become durable entries.
        d = path
        while d not in self._durable_dirs:
            self._durable_dirs.add(d)
            d = posixpath.dirname(d)
        in_dir = lambda p: posixpath.dirname(p) == path  # noqa: E731
        for p in [p for p in self._durable_files if in_dir(p) and p not in self._files]:
            del self._durable_files[p]
        for p, inode in self._files.items():
            if in_dir(p):
                self._durable_files[p] = inode
        for d in [d for d in self._durable_dirs if in_dir(d) and d not in self._dirs]:
            self._durable_dirs.discard(d)
        for d in self._dirs:
            if in_dir(d):
                self._durable_dirs.add(d)

    # -- crash ----------------------------------------------------------------
    def crash(self, rng: random.Random | None = None, *, torn_writes: bool = True) -> None:
        """Power loss: keep what was durable plus a random, in-order prefix of pending writes."""
        rng = rng or random.Random(0)
        self._generation += 1
        self.crashes += 1
        # Only entries whose every ancestor directory survives are reachable.
        dirs = {d for d in self._durable_dirs if _ancestors_in(d, self._durable_dirs)}
        files: dict[str, _Inode] = {}
        for p, inode in sorted(self._durable_files.items()):
            if posixpath.dirname(p) in dirs:
                files[p] = _recover_inode(inode, rng, torn_writes)
        # Two durable names may share one inode (a rename not yet synced on one side).
        self._files, self._dirs = files, set(dirs)
        self._durable_files, self._durable_dirs = dict(files), set(dirs)

    def process_exit(self) -> None:
        """The process died but the machine did not (kill -9): the page cache survives, so
        every write stays, pending ones still to be made durable; open handles go stale."""
        self._generation += 1

    def snapshot(self) -> dict[str, bytes]:
        """Current live content of every file (for assertions in tests)."""
        return {p: bytes(i.data) for p, i in sorted(self._files.items())}

    def durable_copy(self) -> "MemFileSystem":
        """A separate filesystem holding only what is durable now (a crash keeping no pending write).

        For checkers that must judge what a node has really persisted, without crashing it.
        """
        copy = MemFileSystem(capacity=self.capacity)
        dirs = {d for d in self._durable_dirs if _ancestors_in(d, self._durable_dirs)}
        for p, inode in sorted(self._durable_files.items()):
            if posixpath.dirname(p) in dirs:
                copy._files[p] = _Inode(data=bytearray(inode.durable), durable=inode.durable)
        copy._dirs, copy._durable_dirs = set(dirs), set(dirs)
        copy._durable_files = dict(copy._files)
        return copy


def _ancestors_in(d: str, dirs: set[str]) -> bool:
    while d != "/":
        if d not in dirs:
            return False
        d = posixpath.dirname(d)
    return True


def _recover_inode(inode: _Inode, rng: random.Random, torn_writes: bool) -> _Inode:
    data = bytearray(inode.durable)
    pending = inode.pending
    keep = rng.randint(0, len(pending)) if pending else 0
    for i, op in enumerate(pending[:keep]):
        if op[0] == "t":
            size = op[1]
            if size < len(data):
                del data[size:]
            else:
                data.extend(b"\0" * (size - len(data)))
            continue
        _, offset, chunk = op
        if torn_writes and i == keep - 1 and chunk:
            chunk = chunk[: rng.randint(0, len(chunk))]
        if offset > len(data):
            data.extend(b"\0" * (offset - len(data)))
        data[offset : offset + len(chunk)] = chunk
    recovered = bytes(data)
    return _Inode(data=bytearray(recovered), durable=recovered, pending=[])
