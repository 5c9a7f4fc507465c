"""How metadata sits in the Raft log: record batches as entries, and snapshot bytes.

One metadata record = one Raft entry, so a record's log offset is its entry's offset (a
broker epoch is the offset of its RegisterBroker record, as in Kafka). The controller
writes records in atomic batches (a topic with all its partitions), but Raft commits entry
by entry and a leader may die with only a prefix of a batch replicated. So every entry
carries one leading byte saying whether it ends its batch, and `BatchAssembler` hands out
whole batches only:

- records accumulate until an entry flagged END;
- a control entry (a new leader's LeaderChange) or an entry of another epoch arriving while
  a batch is open means the open batch was abandoned by a dead leader: it is dropped. Every
  replica sees the same committed log, so every replica drops the same records.

Snapshot bytes: msgpack ``[1, image_offset, image_epoch, [record...], open_epoch,
[open record...]]`` — the image as records, plus the records of a batch still open at the
snapshot point (a snapshot is taken at any committed offset, possibly mid-batch).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import msgpack

from metadata.image import MetadataImage
from metadata.records import Record, decode_record, encode_record
from metadata.snapshot import image_to_records
from raft.entry import Entry, decode_leader_change
from wire.errors import DecodeError

__all__ = [
    "encode_batch", "BatchAssembler", "CommittedBatch", "ControlEntry", "SnapshotContents",
    "encode_snapshot", "decode_snapshot",
]

_MORE = b"\x00"
_END = b"\x01"
SNAPSHOT_FORMAT = 1


def encode_batch(records: Sequence[Record]) -> list[bytes]:
    """One atomic batch → Raft entry payloads (the last one flagged END)."""
    if not records:
        raise ValueError("an empty batch")
    out = [_MORE + encode_record(r) for r in records]
    out[-1] = _END + out[-1][1:]
    return out


@dataclass(frozen=True, slots=True)
class CommittedBatch:
    last_offset: int
    epoch: int
    records: list[Record]


@dataclass(frozen=True, slots=True)
class ControlEntry:
    """A Raft control entry; `leader_id` is set for a LeaderChange."""

    offset: int
    epoch: int
    leader_id: int | None


class BatchAssembler:
    """Committed entries in, whole batches (and control entries) out, in log order."""

    def __init__(self) -> None:
        self.open_records: list[Record] = []
        self.open_epoch = -1
        self.dropped_batches = 0
        self.bad_entries: list[tuple[int, str]] = []  # (offset, why): never expected

    def reset(self, open_epoch: int = -1, open_records: Iterable[Record] = ()) -> None:
        self.open_records = list(open_records)
        self.open_epoch = open_epoch

    def feed(self, entries: Iterable[Entry]) -> list[CommittedBatch | ControlEntry]:
        out: list[CommittedBatch | ControlEntry] = []
        for e in entries:
            if self.open_records and e.epoch != self.open_epoch:
                self._drop()
            if e.control:
                if self.open_records:
                    self._drop()
                change = decode_leader_change(e.payload)
                out.append(ControlEntry(e.offset, e.epoch, None if change is None else change.leader_id))
                continue
            payload = e.payload
            try:
                if not payload or payload[:1] not in (_MORE, _END):
                    raise DecodeError("missing batch flag")
                record = decode_record(memoryview(payload)[1:])
            except DecodeError as exc:
                # Only a bug writes an undecodable committed entry; skip it but keep the
                # log's offsets moving (an empty batch), and keep it visible.
                self.bad_entries.append((e.offset, str(exc)))
                self.open_records = []
                out.append(CommittedBatch(e.offset, e.epoch, []))
                continue
            self.open_records.append(record)
            self.open_epoch = e.epoch
            if payload[:1] == _END:
                out.append(CommittedBatch(e.offset, e.epoch, self.open_records))
                self.open_records = []
        return out

    def _drop(self) -> None:
        self.dropped_batches += 1
        self.open_records = []


@dataclass(frozen=True, slots=True)
class SnapshotContents:
    image_offset: int
    image_epoch: int
    records: list[Record]
    open_epoch: int
    open_records: list[Record]


def encode_snapshot(image: MetadataImage, open_epoch: int = -1,
                    open_records: Sequence[Record] = ()) -> bytes:
    return msgpack.packb([
        SNAPSHOT_FORMAT, image.offset, image.epoch,
        [encode_record(r) for r in image_to_records(image)],
        open_epoch, [encode_record(r) for r in open_records],
    ], use_bin_type=True)


def decode_snapshot(data: bytes) -> SnapshotContents:
    """DecodeError (or UnsupportedVersionError for a newer record) on bad bytes."""
    try:
        body = msgpack.unpackb(data, raw=False, use_list=True)
    except Exception as exc:  # msgpack raises many unrelated types on garbage
        raise DecodeError(f"metadata snapshot: not valid msgpack ({exc})") from None
    if type(body) is not list or len(body) != 6 or body[0] != SNAPSHOT_FORMAT:
        raise DecodeError("metadata snapshot: expected [1, offset, epoch, records, epoch, records]")
    _, offset, epoch, records, open_epoch, open_records = body
    if not all(type(v) is int for v in (offset, epoch, open_epoch)):
        raise DecodeError("metadata snapshot: offsets and epochs must be integers")
    if type(records) is not list or type(open_records) is not list:
        raise DecodeError("metadata snapshot: records must be arrays")
    if not all(type(r) is bytes for r in records + open_records):
        raise DecodeError("metadata snapshot: each record must be bytes")
    return SnapshotContents(offset, epoch, [decode_record(r) for r in records], open_epoch,
                            [decode_record(r) for r in open_records])
