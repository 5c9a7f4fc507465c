"""Bytes for a producer-state snapshot (the blob storage keeps in `<offset>.snapshot`).

    version int16 (2) | producer count int32 | per producer, ascending id:
        producer_id int64 | epoch int16 | last_timestamp int64 | current_txn_first_offset int64 |
        coordinator_epoch int32 | batch count int8 |
        per batch: first_seq int32 | last_seq int32 | first_offset int64 | last_offset int64 | timestamp int64
    | aborted count int32 | per aborted transaction: producer_id int64 | first_offset int64 | last_offset int64

Aborted transactions live in the segments' `.txnindex` files (storage.log.txn_index): the
list is written empty, and one read from an older snapshot is written to the index.

Version 1 (no transactions: no current_txn_first_offset, coordinator_epoch or aborted list)
is still read.
The file wrapper already checksums the blob; this codec checks structure and raises
DecodeError for anything it cannot read exactly.
"""
from __future__ import annotations

import struct
from collections import deque
from typing import Iterable

from broker.producer_state.entry import AbortedTxn, BatchMetadata, ProducerEntry
from wire.errors import DecodeError, UnsupportedVersionError

__all__ = ["encode_snapshot", "decode_snapshot", "SNAPSHOT_VERSION"]

SNAPSHOT_VERSION = 2
_HEAD = struct.Struct(">hi")
_PRODUCER_V1 = struct.Struct(">qhqb")
_PRODUCER = struct.Struct(">qhqqib")
_BATCH = struct.Struct(">iiqqq")
_COUNT = struct.Struct(">i")
_ABORTED = struct.Struct(">qqq")


def encode_snapshot(entries: Iterable[ProducerEntry], aborted: Iterable[AbortedTxn] = ()) -> bytes:
    entries = list(entries)
    out = bytearray(_HEAD.pack(SNAPSHOT_VERSION, len(entries)))
    for e in entries:
        out += _PRODUCER.pack(e.producer_id, e.epoch, e.last_timestamp, e.current_txn_first_offset,
                              e.coordinator_epoch, len(e.batches))
        for b in e.batches:
            out += _BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp)
    aborted = list(aborted)
    out += _COUNT.pack(len(aborted))
    for a in aborted:
        out += _ABORTED.pack(a.producer_id, a.first_offset, a.last_offset)
    return bytes(out)


def decode_snapshot(blob: bytes) -> tuple[list[ProducerEntry], list[AbortedTxn]]:
    view = memoryview(blob)
    try:
        version, count = _HEAD.unpack_from(view, 0)
        if version not in (1, SNAPSHOT_VERSION):
            raise UnsupportedVersionError(f"producer state snapshot version {version} (know 1-{SNAPSHOT_VERSION})")
        if count < 0:
            raise DecodeError(f"producer state snapshot: negative producer count {count}")
        pos = _HEAD.size
        entries = []
        seen = set()
        for _ in range(count):
            if version == 1:
                pid, epoch, last_ts, nbatches = _PRODUCER_V1.unpack_from(view, pos)
                txn_first = coordinator_epoch = -1
                pos += _PRODUCER_V1.size
            else:
                pid, epoch, last_ts, txn_first, coordinator_epoch, nbatches = _PRODUCER.unpack_from(view, pos)
                pos += _PRODUCER.size
            if nbatches < 0 or pid < 0 or pid in seen:
                raise DecodeError(f"producer state snapshot: bad entry for producer {pid}")
            seen.add(pid)
            batches = deque()
            for _ in range(nbatches):
                batches.append(BatchMetadata(*_BATCH.unpack_from(view, pos)))
                pos += _BATCH.size
            entries.append(ProducerEntry(pid, epoch, batches, last_ts, txn_first, coordinator_epoch))
        aborted = []
        if version >= 2:
            (naborted,) = _COUNT.unpack_from(view, pos)
            pos += _COUNT.size
            if naborted < 0:
                raise DecodeError(f"producer state snapshot: negative aborted count {naborted}")
            for _ in range(naborted):
                aborted.append(AbortedTxn(*_ABORTED.unpack_from(view, pos)))
                pos += _ABORTED.size
    except struct.error as exc:
        raise DecodeError(f"producer state snapshot truncated: {exc}") from None
    if pos != len(view):
        raise DecodeError(f"producer state snapshot: {len(view) - pos} trailing bytes")
    return entries, aborted
