"""Walking the batches of a log file in large chunks (recovery scans, the cleaner).

Reading one batch header at a time costs a syscall per batch; these helpers
read up to 8 MiB at once and walk the headers in memory, falling back to an
exact read for a batch larger than a chunk.
"""
from __future__ import annotations

import struct
from typing import Callable, Iterator

from storage.env import File
from wire.batch_header import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, iter_batches, validate_batch
from wire.errors import CorruptRecordError

__all__ = ["scan_valid_batches", "iter_batch_bytes", "is_torn_tail"]

_SCAN_CHUNK = 8 << 20
_LENGTH = struct.Struct(">i")


def scan_valid_batches(
    file: File, start: int, end: int, on_batch: Callable[[int, BatchHeader], bool]
) -> int:
    """Walk whole, CRC-valid batches in [start, end); return where the valid bytes end.

    `on_batch(position, header)` may return False to reject a batch (e.g. offsets
    going backwards), which ends the valid region there. Reads in large chunks:
    this is the recovery scan and runs at memory speed.
    """
    pos = start
    while end - pos >= LOG_OVERHEAD:
        chunk = file.read(pos, min(_SCAN_CHUNK, end - pos))
        consumed = 0
        try:
            for rel, header in iter_batches(chunk):
                if not on_batch(pos + rel, header):
                    return pos + rel
                consumed = rel + header.size
        except CorruptRecordError:
            return pos + consumed
        if consumed == 0:
            # The first batch is larger than a chunk (or torn): read exactly it.
            (length,) = _LENGTH.unpack_from(chunk, 8)
            size = LOG_OVERHEAD + length
            if length < HEADER_SIZE - LOG_OVERHEAD or pos + size > end or size <= len(chunk):
                return pos
            chunk = file.read(pos, size)
            try:
                header = next(iter_batches(chunk), (0, None))[1]
            except CorruptRecordError:
                return pos
            if header is None or not on_batch(pos, header):
                return pos
            consumed = header.size
        pos += consumed
    return pos


def is_torn_tail(file: File, pos: int, end: int) -> bool:
    """Whether the invalid bytes [pos, end) are shorter than the batch they begin and are the
    last thing in the file: what a write cut short leaves (a crash mid-append). A whole-length
    batch that fails its checks is corruption instead: records a replica may have acknowledged
    are gone. So is a length field that reaches past the end while a whole valid batch follows:
    the length itself was damaged (bit rot, a misdirected write), not the last write cut short
    (simulation seed 287, 10 s: a misdirected write read as a torn tail let a broker that had
    lost 40 acknowledged batches claim a clean restart and be elected leader)."""
    if end - pos < LOG_OVERHEAD:
        return True
    (length,) = _LENGTH.unpack(file.read(pos + 8, 4))
    if pos + LOG_OVERHEAD + length <= end:
        return False
    return not _valid_batch_within(file, pos + 1, end)


_MAGIC_AT = 16  # baseOffset, batchLength, partitionLeaderEpoch, then magic
_TAIL_SCAN_LIMIT = 8 << 20  # past this many invalid bytes no single write was cut short


def _valid_batch_within(file: File, start: int, end: int) -> bool:
    """Whether a whole CRC-valid batch starts anywhere in [start, end)."""
    if end - start > _TAIL_SCAN_LIMIT:
        return True
    data = file.read(start, end - start)
    i = data.find(b"\x02", _MAGIC_AT)
    while i >= 0:
        at = i - _MAGIC_AT
        (length,) = _LENGTH.unpack_from(data, at + 8)
        if HEADER_SIZE - LOG_OVERHEAD <= length and at + LOG_OVERHEAD + length <= len(data):
            try:
                validate_batch(data, at)
                return True
            except CorruptRecordError:
                pass
        i = data.find(b"\x02", i + 1)
    return False


def iter_batch_bytes(file: File, start: int, end: int) -> Iterator[tuple[BatchHeader, memoryview]]:
    """(header, bytes) of each batch in [start, end) of data known to be valid (CRC checked
    anyway; corruption raises CorruptRecordError). Reads in large chunks."""
    pos = start
    while end - pos >= LOG_OVERHEAD:
        chunk = file.read(pos, min(_SCAN_CHUNK, end - pos))
        view = memoryview(chunk)
        consumed = 0
        for rel, header in iter_batches(chunk):
            yield header, view[rel : rel + header.size]
            consumed = rel + header.size
        if consumed == 0:
            (length,) = _LENGTH.unpack_from(chunk, 8)
            data = file.read(pos, LOG_OVERHEAD + max(length, 0))
            header = validate_batch(data)
            yield header, memoryview(data)
            consumed = header.size
        pos += consumed
    if pos != end:
        raise CorruptRecordError(f"{file.path}: {end - pos} stray bytes at position {pos}")
