"""The aborted transaction index of one segment (Kafka's TransactionIndex, `<base>.txnindex`).

One entry per transaction aborted by an ABORT marker in the segment, in marker order:

    version int16 (0) | producer_id int64 | first_offset int64 | last_offset int64 | last_stable_offset int64

`first_offset` is the transaction's first batch, `last_offset` its ABORT marker, and
`last_stable_offset` the partition's last stable offset once the marker was written: no
transaction aborted later can start below it, so a search for the aborted transactions of
a read [start, upper) stops at the first entry whose last_stable_offset reaches `upper`.
read_committed fetches list these entries; the cleaner uses them to drop aborted records.

The partition's producer state writes the entries as it applies ABORT markers (leader,
followers and replays alike); an entry already present (its marker is not after the last
entry's) is skipped, so a replay writes each entry once. A file that does not decode (a
torn write, a bad version, offsets out of order) is never trusted: the segment reports it
and the log has the entries rebuilt by a producer state replay. A file present is read as
whole, so once removed (`reset`) it comes back only with its rebuilt entries, written to a
temporary file, fsynced and renamed into place (`sync` after `rebuilt`): a crash before that
leaves it missing, and the next start replays again.
"""
from __future__ import annotations

import bisect
import struct
from dataclasses import dataclass

from storage.env import FileSystem, write_file_atomic
from storage.log.index_file import IndexFile

__all__ = ["AbortedTxn", "TxnIndex", "decode_entries", "encode_entry", "collect_aborted", "ENTRY_SIZE"]

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34 bytes, as Kafka's
_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int = -1  # the partition's LSO once the marker was written


class CorruptTxnIndexError(ValueError):
    pass


def encode_entry(txn: AbortedTxn) -> bytes:
    return _ENTRY.pack(_VERSION, txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset)


def decode_entries(blob: bytes) -> list[AbortedTxn]:
    """Entries of a whole index file; CorruptTxnIndexError unless every entry is well formed."""
    if len(blob) % ENTRY_SIZE:
        raise CorruptTxnIndexError(f"txn index of {len(blob)} bytes is not a whole number of {ENTRY_SIZE}-byte entries")
    entries: list[AbortedTxn] = []
    for pos in range(0, len(blob), ENTRY_SIZE):
        version, pid, first, last, lso = _ENTRY.unpack_from(blob, pos)
        if version != _VERSION:
            raise CorruptTxnIndexError(f"txn index entry {pos // ENTRY_SIZE} has unknown version {version}")
        if pid < 0 or first < 0 or last < first:
            raise CorruptTxnIndexError(f"txn index entry {pos // ENTRY_SIZE} is malformed: {pid}, {first}..{last}")
        if entries and last <= entries[-1].last_offset:
            raise CorruptTxnIndexError(f"txn index entry {pos // ENTRY_SIZE} is out of order")
        entries.append(AbortedTxn(pid, first, last, lso))
    return entries


def collect_aborted(entries: list[AbortedTxn], start: int, upper: int) -> tuple[list[AbortedTxn], bool]:
    """(entries a read of [start, upper) may meet, whether later segments can hold no more)."""
    found = []
    for txn in entries[bisect.bisect_left([e.last_offset for e in entries], start):]:
        if txn.first_offset < upper:
            found.append(txn)
        if txn.last_stable_offset >= upper:
            return found, True
    return found, False


class TxnIndex:
    """A segment's aborted transactions: in memory, appended to the file on flush."""

    def __init__(self, fs: FileSystem, path: str, entries: list[AbortedTxn] | None = None, *, create: bool = True):
        self.file = IndexFile(fs, path, create=create)
        self.entries: list[AbortedTxn] = entries or []
        self.unsynced = False  # changed since the last fsync
        self.removed = False  # `reset` removed the file; entries are kept in memory only
        self.whole = False  # removed, and its entries rebuilt since: `sync` writes the file

    @classmethod
    def load(cls, fs: FileSystem, path: str, max_bytes: int) -> tuple["TxnIndex", bool]:
        """(index, ok): a missing or undecodable file, or one over `max_bytes` (each entry
        stands for a marker of the segment, so it is never larger than the segment's data),
        comes back empty (and emptied) with ok=False."""
        if not fs.exists(path):
            index = cls(fs, path)
            index.reset()  # gone again at once: an empty file would read as whole
            return index, False
        index = cls(fs, path)
        try:
            if index.file.size() > max_bytes:
                raise CorruptTxnIndexError(f"{path}: {index.file.size()} bytes for a segment of {max_bytes}")
            index.entries = decode_entries(index.file.read(0, index.file.size()))
            return index, True
        except CorruptTxnIndexError:
            index.reset()
            return index, False

    @property
    def last_offset(self) -> int:
        return self.entries[-1].last_offset if self.entries else -1

    def append(self, txn: AbortedTxn) -> bool:
        """Add `txn` unless an entry for its marker (or a later one) is already here."""
        if txn.last_offset <= self.last_offset:
            return False
        self.entries.append(txn)
        if not self.removed:
            self.file.append(encode_entry(txn))
        self.unsynced = True
        return True

    def collect(self, start: int, upper: int) -> tuple[list[AbortedTxn], bool]:
        return collect_aborted(self.entries, start, upper)

    def truncate_to(self, offset: int) -> None:
        """Forget transactions whose marker is at or after `offset`."""
        keep = bisect.bisect_left([e.last_offset for e in self.entries], offset)
        if keep < len(self.entries):
            del self.entries[keep:]
            self.file.truncate(keep * ENTRY_SIZE)
            self.unsynced = True

    def reset(self) -> None:
        """Forget every entry until a producer state replay writes them again. The file goes
        too: a start before that replay must find it missing (to be rebuilt), not empty (whole)."""
        self.entries = []
        self.file.truncate(0)
        if self.file.fs.exists(self.file.path):
            self.file.fs.remove(self.file.path)
        self.removed, self.whole = True, False
        self.unsynced = True

    def rebuilt(self) -> None:
        """The entries are whole again (a producer state replay wrote them): the next `sync`
        writes the file, never before they are durable in it."""
        if self.removed:
            self.whole = self.unsynced = True

    async def sync(self) -> None:
        if not self.unsynced:
            return
        if not self.removed:
            self.unsynced = False
            await self.file.sync()
        elif self.whole:
            fs, path, entries = self.file.fs, self.file.path, list(self.entries)
            self.whole = False  # one writer at a time
            try:
                await write_file_atomic(fs, path, b"".join(encode_entry(e) for e in entries))
            finally:
                self.whole = True
            if self.file.path != path or self.entries != entries:  # renamed or changed meanwhile
                if fs.exists(path):
                    fs.remove(path)
                return  # still removed and whole: the next sync writes it again
            self.file = IndexFile(fs, path)
            self.removed = self.whole = self.unsynced = False
