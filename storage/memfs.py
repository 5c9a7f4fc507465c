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
`sync_delay` (seconds each fsync takes, slept through trio). Corruption and
fsync failure:

- `read_corruption` (a `ReadCorruption`): a read returns the bytes with one bit
  flipped, with some probability; the data at rest stays intact (a transient
  error on the way from the medium). It can be limited to some paths and to
  the bytes a file serves with `send_to` (sendfile).
- `rot(path, offset, length, rng)`: bit rot at rest. Bits flip in the stored
  bytes, durable image and page cache alike (as if the page had been evicted
  and read back from the damaged sector).
- `fail_syncs`: `sync()` raises OSError(EIO). As on Linux (the "fsyncgate"
  semantics) the dirty pages are then marked clean though their writeback
  failed: reads still see the new bytes, but they never become durable, not
  even by a later successful fsync. Only rewriting them does.

Why one module of ~500 lines: files, directories and the crash model share one pending-write
state (what a crash replays); split apart, each half would reach into the other's.
"""
from __future__ import annotations

import errno
import posixpath
import random
from dataclasses import dataclass, field
from typing import Callable

import trio

__all__ = ["MemFileSystem", "MemFile", "ReadCorruption", "StaleHandleError"]

NAME_MAX = 255  # bytes in one directory entry


class StaleHandleError(OSError):
    """A handle opened before a crash was used after it."""


@dataclass
class ReadCorruption:
    """Transient read errors: each read (of a path `applies_to` accepts) comes back with one
    flipped bit with `probability`. `sends_only`: only the bytes served through
    `send_to`, not those the process reads itself."""

    rng: random.Random
    probability: float
    applies_to: Callable[[str], bool] = lambda path: True
    sends_only: bool = False
    # Which bit of the bytes read to flip (None: none fits); default any. A format-aware
    # caller can aim at the bytes its readers can check.
    choose_bit: Callable[[bytes, random.Random], int | None] | None = None
    flips: int = 0  # how many reads it corrupted

    def maybe_flip(self, path: str, data: bytes) -> bytes:
        if not data or not self.applies_to(path) or self.rng.random() >= self.probability:
            return data
        bit = self.rng.randrange(len(data) * 8) if self.choose_bit is None else self.choose_bit(data, self.rng)
        if bit is None:
            return data
        self.flips += 1
        return flip_bit(data, bit)


def flip_bit(data: bytes, bit: int) -> bytes:
    out = bytearray(data)
    out[bit // 8] ^= 1 << (bit % 8)
    return bytes(out)


@dataclass
class _Inode:
    data: bytearray = field(default_factory=bytearray)
    durable: bytes = b""
    # Writes since the last sync, in order: ("w", offset, bytes) or ("t", size).
    pending: list = field(default_factory=list)
    # A failed fsync dropped the writeback of some writes: `data` is then no longer
    # `durable` plus `pending`, and a sync must replay `pending` onto `durable` instead.
    writeback_lost: bool = False


def _norm(path: str) -> str:
    # Relative paths are taken from the root: the in-memory tree has no cwd.
    return posixpath.normpath("/" + path.lstrip("/"))


class _Tree:
    """A namespace: files (path -> inode), directories, and the entries of each directory.

    The per-directory index keeps `sync_dir` and `listdir` proportional to the
    directory, not to the whole disk (a broker has hundreds of files)."""

    __slots__ = ("files", "dirs", "_entries")

    def __init__(self, files: dict[str, _Inode] | None = None, dirs=("/",)):
        self.files: dict[str, _Inode] = {}
        self.dirs: set[str] = set()
        self._entries: dict[str, set[str]] = {}  # directory -> paths directly inside it
        for d in dirs:
            self.add_dir(d)
        for path, inode in (files or {}).items():
            self.add_file(path, inode)

    def entries(self, directory: str) -> list[str]:
        """Paths directly inside `directory`, sorted."""
        return sorted(self._entries.get(directory, ()))

    def add_file(self, path: str, inode: _Inode) -> None:
        if path not in self.files:
            self._entries.setdefault(posixpath.dirname(path), set()).add(path)
        self.files[path] = inode

    def pop_file(self, path: str) -> _Inode:
        inode = self.files.pop(path)
        if path not in self.dirs:
            self._unlink(path)
        return inode

    def add_dir(self, path: str) -> None:
        if path not in self.dirs:
            self.dirs.add(path)
            if path != "/":
                self._entries.setdefault(posixpath.dirname(path), set()).add(path)

    def discard_dir(self, path: str) -> None:
        if path in self.dirs:
            self.dirs.discard(path)
            if path not in self.files:
                self._unlink(path)

    def _unlink(self, path: str) -> None:
        parent = posixpath.dirname(path)
        entries = self._entries.get(parent)
        if entries is not None:
            entries.discard(path)
            if not entries:
                del self._entries[parent]


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
        corruption = self._fs.read_corruption
        if corruption is not None and not corruption.sends_only:
            data = corruption.maybe_flip(self.path, data)
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
        if self._fs.fail_syncs:
            # The kernel reports the failed writeback once and marks the pages clean: what
            # was pending is lost to the disk, though the page cache still serves it.
            if inode.pending:
                inode.pending.clear()
                inode.writeback_lost = True
            self._fs.failed_syncs += 1
            raise OSError(errno.EIO, "Input/output error (fsync)", self.path)
        if inode.writeback_lost:
            inode.durable = _replay(inode.durable, inode.pending)
            inode.writeback_lost = inode.durable != inode.data
        else:
            inode.durable = bytes(inode.data)
        inode.pending.clear()
        self._fs.fsyncs += 1
        self._fs.durable_changes += 1

    async def send_to(self, stream, offset: int, count: int) -> int:
        data = self.read(offset, count)
        corruption = self._fs.read_corruption
        if corruption is not None and corruption.sends_only:
            data = corruption.maybe_flip(self.path, data)
        if data:
            await stream.send_all(data)
        return len(data)

    def close(self) -> None:
        self._inode = None

    @property
    def closed(self) -> bool:
        return self._inode is None or self._generation != self._fs._generation


class MemFileSystem:
    def __init__(self, capacity: int | None = None):
        self._live = _Tree()
        self._durable = _Tree()  # as of the last sync_dir of each parent
        self._generation = 0
        self.capacity = capacity
        self.fail_writes = False
        self.read_fault: Callable[[str, int, bytes], bytes] | None = None
        self.read_corruption: ReadCorruption | None = None
        self.fail_syncs = False
        self.sync_delay = 0.0
        self.fsyncs = 0
        self.failed_syncs = 0
        self.crashes = 0
        # Counts everything that may change what a crash would leave (a successful fsync or
        # sync_dir, a crash, rot at rest): equal counts, same `durable_copy()`.
        self.durable_changes = 0
        # path -> (holder, file) of each flock (simulations.env.IncarnationFS.lock): the
        # holder's process must be alive and the file open for the lock to be held.
        self.flocks: dict[str, tuple[object, MemFile]] = {}

    # -- space accounting ---------------------------------------------------
    def _used(self) -> int:
        return sum(len(i.data) for i in self._live.files.values())

    def _charge(self, nbytes: int) -> None:
        if self.fail_writes or (self.capacity is not None and self._used() + nbytes > self.capacity):
            raise OSError(errno.ENOSPC, "No space left on device")

    def free_bytes(self, path: str) -> int:
        if self.capacity is None:
            return 1 << 40
        return max(0, self.capacity - self._used())

    # -- namespace ----------------------------------------------------------
    @staticmethod
    def _name_must_fit(path: str) -> None:
        """As on ext4/xfs: one directory entry holds at most NAME_MAX (255) bytes."""
        if len(posixpath.basename(path).encode()) > NAME_MAX:
            raise OSError(errno.ENAMETOOLONG, "File name too long", path)

    def _parent_must_exist(self, path: str) -> None:
        parent = posixpath.dirname(path)
        if parent not in self._live.dirs:
            raise FileNotFoundError(errno.ENOENT, "No such directory", parent)

    def open(self, path: str, *, create: bool = False) -> MemFile:
        path = _norm(path)
        live = self._live
        inode = live.files.get(path)
        if inode is None:
            if path in live.dirs:
                raise IsADirectoryError(errno.EISDIR, "Is a directory", path)
            if not create:
                raise FileNotFoundError(errno.ENOENT, "No such file", path)
            self._name_must_fit(path)
            self._parent_must_exist(path)
            inode = _Inode()
            live.add_file(path, inode)
        return MemFile(self, path, inode)

    def exists(self, path: str) -> bool:
        path = _norm(path)
        return path in self._live.files or path in self._live.dirs

    def is_dir(self, path: str) -> bool:
        return _norm(path) in self._live.dirs

    def listdir(self, path: str) -> list[str]:
        path = _norm(path)
        if path not in self._live.dirs:
            raise FileNotFoundError(errno.ENOENT, "No such directory", path)
        return sorted({posixpath.basename(p) for p in self._live.entries(path)})

    def makedirs(self, path: str) -> None:
        path = _norm(path)
        if path in self._live.files:
            raise FileExistsError(errno.EEXIST, "File exists", path)
        while path not in self._live.dirs:
            self._name_must_fit(path)
            self._live.add_dir(path)
            path = posixpath.dirname(path)

    def remove(self, path: str) -> None:
        path = _norm(path)
        if path not in self._live.files:
            raise FileNotFoundError(errno.ENOENT, "No such file", path)
        self._live.pop_file(path)

    def rmtree(self, path: str) -> None:
        path = _norm(path)
        live = self._live
        if path not in live.dirs:
            raise FileNotFoundError(errno.ENOENT, "No such directory", path)
        prefix = path.rstrip("/") + "/"
        for p in [p for p in live.files if p.startswith(prefix)]:
            live.pop_file(p)
        for d in [d for d in live.dirs if d == path or d.startswith(prefix)]:
            live.discard_dir(d)

    def rename(self, src: str, dst: str) -> None:
        src, dst = _norm(src), _norm(dst)
        live = self._live
        self._name_must_fit(dst)
        if src in live.files:
            self._parent_must_exist(dst)
            live.add_file(dst, live.pop_file(src))
            return
        if src in live.dirs:
            self._parent_must_exist(dst)
            prefix = src.rstrip("/") + "/"
            moved = lambda p: dst + p[len(src):] if (p == src or p.startswith(prefix)) else p  # noqa: E731
            self._live = _Tree({moved(p): i for p, i in live.files.items()}, [moved(d) for d in live.dirs])
            return
        raise FileNotFoundError(errno.ENOENT, "No such file", src)

    def file_size(self, path: str) -> int:
        path = _norm(path)
        if path not in self._live.files:
            raise FileNotFoundError(errno.ENOENT, "No such file", path)
        return len(self._live.files[path].data)

    async def sync_dir(self, path: str) -> None:
        """Make the live entries directly inside `path` (and `path` itself) durable."""
        path = _norm(path)
        if path not in self._live.dirs:
            raise FileNotFoundError(errno.ENOENT, "No such directory", path)
        if self.sync_delay:
            await trio.sleep(self.sync_delay)
        if self.fail_syncs:  # the entries stay as durable as they were
            self.failed_syncs += 1
            raise OSError(errno.EIO, "Input/output error (fsync)", path)
        self.durable_changes += 1
        live, durable = self._live, self._durable
        # The directory itself and its ancestors become durable entries.
        d = path
        while d not in durable.dirs:
            durable.add_dir(d)
            d = posixpath.dirname(d)
        for p in durable.entries(path):
            if p in durable.files and p not in live.files:
                durable.pop_file(p)
            if p in durable.dirs and p not in live.dirs:
                durable.discard_dir(p)
        for p in live.entries(path):
            if p in live.files:
                durable.add_file(p, live.files[p])
            else:
                durable.add_dir(p)

    # -- corruption at rest -----------------------------------------------------
    def rot(self, path: str, offset: int, length: int, rng: random.Random, *, bits: int = 1) -> list[int]:
        """Flip `bits` random bits among bytes [offset, offset+length) of `path`, at rest.

        Both the live bytes and the durable image change (a damaged sector read back
        after the page was evicted). Returns the flipped bit positions (file-relative)."""
        path = _norm(path)
        inode = self._live.files.get(path)
        if inode is None:
            raise FileNotFoundError(errno.ENOENT, "No such file", path)
        end = min(offset + length, len(inode.data))
        if offset < 0 or end <= offset:
            raise ValueError(f"no bytes in [{offset}, {offset + length}) of {path} ({len(inode.data)} bytes)")
        flipped = sorted(rng.sample(range(offset * 8, end * 8), min(bits, (end - offset) * 8)))
        self.flip_bits(path, flipped)
        return flipped

    def misdirect(self, path: str, offset: int, length: int, wrong_offset: int) -> bool:
        """A misdirected write, at rest: the bytes [offset, offset+length) of `path` were written
        at `wrong_offset` of the same file instead (overwriting what was there), and their own
        place holds zeros (the write never reached it). Live and durable bytes alike, as `rot`.
        False (nothing changed) if either range is not inside the file."""
        inode = self._live.files.get(_norm(path))
        size = len(inode.data) if inode is not None else 0
        if inode is None or length <= 0 or offset < 0 or wrong_offset < 0 or \
                offset + length > size or wrong_offset + length > size or wrong_offset == offset:
            return False
        chunk = bytes(inode.data[offset:offset + length])
        durable = bytearray(inode.durable)
        for image in (inode.data, durable):
            if offset + length <= len(image) and wrong_offset + length <= len(image):
                image[offset:offset + length] = bytes(length)
                image[wrong_offset:wrong_offset + length] = chunk
        inode.durable = bytes(durable)
        self.durable_changes += 1
        return True

    def flip_bits(self, path: str, bits: list[int]) -> bool:
        """Flip these bit positions (file-relative) of `path` at rest, as `rot` does; False (and
        nothing flipped) if the file is missing or shorter than the last of them."""
        inode = self._live.files.get(_norm(path))
        if inode is None or not bits or max(bits) // 8 >= len(inode.data):
            return False
        durable = bytearray(inode.durable)
        for bit in bits:
            inode.data[bit // 8] ^= 1 << (bit % 8)
            if bit // 8 < len(durable):
                durable[bit // 8] ^= 1 << (bit % 8)
        inode.durable = bytes(durable)
        self.durable_changes += 1
        return True

    # -- crash ----------------------------------------------------------------
    def crash(self, rng: random.Random | None = None, *, torn_writes: bool = True, sectors: bool = False) -> None:
        """Power loss: keep what was durable plus a random, in-order prefix of pending writes.

        With `sectors`, the writeback was under way in no particular order: of every file's
        unsynced bytes, each 512-byte sector independently reached the disk or did not (a
        sector that did not keeps its durable bytes, zeros past the durable end), and the
        file's size is either its durable or its written one."""
        rng = rng or random.Random(0)
        self._generation += 1
        self.crashes += 1
        self.durable_changes += 1
        # Only entries whose every ancestor directory survives are reachable.
        dirs = self._reachable_durable_dirs()
        files: dict[str, _Inode] = {}
        for p, inode in sorted(self._durable.files.items()):
            if posixpath.dirname(p) in dirs:
                files[p] = _tear_sectors(inode, rng) if sectors else _recover_inode(inode, rng, torn_writes)
        # Two durable names may share one inode (a rename not yet synced on one side).
        self._live, self._durable = _Tree(files, sorted(dirs)), _Tree(files, sorted(dirs))

    def _reachable_durable_dirs(self) -> set[str]:
        durable_dirs = self._durable.dirs
        return {d for d in durable_dirs if _ancestors_in(d, durable_dirs)}

    def process_exit(self) -> None:
        """The process died but the machine did not (kill -9): the page cache survives, so
        every write stays, pending ones still to be made durable; open handles go stale."""
        self._generation += 1

    def snapshot(self) -> dict[str, bytes]:
        """Current live content of every file (for assertions in tests)."""
        return {p: bytes(i.data) for p, i in sorted(self._live.files.items())}

    def durable_copy(self) -> "MemFileSystem":
        """A separate filesystem holding only what is durable now (a crash keeping no pending write).

        For checkers that must judge what a node has really persisted, without crashing it.
        """
        copy = MemFileSystem(capacity=self.capacity)
        dirs = self._reachable_durable_dirs()
        files = {p: _Inode(data=bytearray(inode.durable), durable=inode.durable)
                 for p, inode in sorted(self._durable.files.items()) if posixpath.dirname(p) in dirs}
        copy._live, copy._durable = _Tree(files, sorted(dirs)), _Tree(files, sorted(dirs))
        return copy


def _ancestors_in(d: str, dirs: set[str]) -> bool:
    while d != "/":
        if d not in dirs:
            return False
        d = posixpath.dirname(d)
    return True


def _replay(durable: bytes, pending: list) -> bytes:
    """The durable image after every pending write and truncate reached the disk."""
    data = bytearray(durable)
    for op in pending:
        if op[0] == "t":
            del data[op[1]:]
            data.extend(b"\0" * (op[1] - len(data)))
            continue
        _, offset, chunk = op
        if offset > len(data):
            data.extend(b"\0" * (offset - len(data)))
        data[offset : offset + len(chunk)] = chunk
    return bytes(data)


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


SECTOR = 512


def _tear_sectors(inode: _Inode, rng: random.Random) -> _Inode:
    """`crash(sectors=True)` of one file: see there."""
    durable = inode.durable
    written = _replay(durable, inode.pending)
    if written == durable:
        return _Inode(data=bytearray(durable), durable=durable, pending=[])
    size = len(written) if rng.random() < 0.5 else len(durable)
    old = durable[:size].ljust(size, b"\0")
    out = bytearray(old)
    for start in range(0, size, SECTOR):
        if written[start:start + SECTOR] != old[start:start + SECTOR] and rng.random() < 0.5:
            out[start:start + SECTOR] = written[start:start + SECTOR].ljust(min(SECTOR, size - start), b"\0")
    recovered = bytes(out[:size])
    return _Inode(data=bytearray(recovered), durable=recovered, pending=[])
