"""An index file that holds no file descriptor between uses.

Every segment has a `.log` and two index files. Holding all three open costs a
node three descriptors per partition, so 10,000 partitions did not fit in a
20,000-descriptor limit. The indexes are read only when a segment is opened
(their entries then live in memory, see `OffsetIndex`), and written only by
appending, so their file needs no descriptor in between: appended entries are
buffered here and written out (one open, write, close) when the segment is
flushed, truncated or closed.

Durability is unchanged: an index entry was never durable before the segment's
`flush()`, and that is when it is written and fsynced now. What a killed
process loses in addition (entries appended since the last flush) belongs to
the part of the log that recovery rescans after an unclean shutdown, and the
indexes are rebuilt there anyway.

Implements the subset of `storage.env.File` the index classes use.
"""
from __future__ import annotations

from storage.env import FileSystem

__all__ = ["IndexFile"]


class IndexFile:
    __slots__ = ("fs", "path", "_disk_size", "_pending")

    def __init__(self, fs: FileSystem, path: str, *, create: bool = False):
        self.fs = fs
        self.path = path
        f = fs.open(path, create=create)  # creates it now, so a directory sync covers it
        try:
            self._disk_size = f.size()
        finally:
            f.close()
        self._pending = bytearray()  # appended, not yet written to the file

    def size(self) -> int:
        return self._disk_size + len(self._pending)

    def read(self, offset: int, size: int) -> bytes:
        self._write_out()
        f = self.fs.open(self.path)
        try:
            return f.read(offset, size)
        finally:
            f.close()

    def append(self, data) -> int:
        position = self.size()
        self._pending += data
        return position

    def truncate(self, size: int) -> None:
        if size >= self._disk_size:
            del self._pending[size - self._disk_size:]
            return
        self._pending.clear()
        f = self.fs.open(self.path)
        try:
            f.truncate(size)
        finally:
            f.close()
        self._disk_size = size

    async def sync(self) -> None:
        f = self.fs.open(self.path)
        try:
            self._write_to(f)
            await f.sync()
        finally:
            f.close()

    def close(self) -> None:
        """Write what is buffered (to the page cache, as a write through a held descriptor would)."""
        try:
            self._write_out()
        except OSError:
            # The file or the whole process is gone (a deleted segment, a dead simulated
            # node): the entries were not durable and recovery rebuilds them from the log.
            self._pending = bytearray()

    def _write_out(self) -> None:
        if self._pending:
            f = self.fs.open(self.path)
            try:
                self._write_to(f)
            finally:
                f.close()

    def _write_to(self, f) -> None:
        if self._pending:
            f.write_at(self._disk_size, self._pending)
            self._disk_size += len(self._pending)
            self._pending = bytearray()
