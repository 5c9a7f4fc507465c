"""Records of `__transaction_state`: key = the transactional id, value = its stored metadata.

    key   (version int16 = 0) | transactional_id string(int16 length, UTF-8)
    value (version int16 = 0) | producer_id int64 | last_producer_id int64 |
          producer_epoch int16 | last_producer_epoch int16 | timeout_ms int32 | state int8 |
          partition topics int32 | per topic: name string | count int32 | partition int32 ... |
          last_update_ms int64 | txn_start_ms int64

A null value (tombstone) removes the id. Our own layout after Kafka's TransactionLogKey /
TransactionLogValue (same facts; Kafka's v1 flexible encoding is not reproduced).
Anything that does not decode exactly raises DecodeError.
"""
from __future__ import annotations

import struct

from broker.transactions.metadata import TransactionMetadata, TxnState
from wire.errors import DecodeError

__all__ = ["encode_key", "decode_key", "encode_value", "decode_value"]

_VERSION = struct.Struct(">h")
_STR_LEN = struct.Struct(">h")
_HEAD = struct.Struct(">qqhhib")
_COUNT = struct.Struct(">i")
_TIMES = struct.Struct(">qq")


def _put_str(out: bytearray, text: str) -> None:
    raw = text.encode("utf-8")
    out += _STR_LEN.pack(len(raw))
    out += raw


def _get_str(view, pos: int) -> tuple[str, int]:
    (size,) = _STR_LEN.unpack_from(view, pos)
    pos += _STR_LEN.size
    if size < 0 or pos + size > len(view):
        raise DecodeError(f"transaction log string of {size} bytes does not fit")
    return bytes(view[pos:pos + size]).decode("utf-8"), pos + size


def encode_key(transactional_id: str) -> bytes:
    out = bytearray(_VERSION.pack(0))
    _put_str(out, transactional_id)
    return bytes(out)


def decode_key(data: bytes) -> str:
    view = memoryview(data)
    try:
        (version,) = _VERSION.unpack_from(view, 0)
        if version != 0:
            raise DecodeError(f"transaction log key version {version}")
        txn_id, pos = _get_str(view, _VERSION.size)
    except (struct.error, UnicodeDecodeError) as exc:
        raise DecodeError(f"transaction log key: {exc}") from None
    if pos != len(view):
        raise DecodeError("transaction log key: trailing bytes")
    return txn_id


def encode_value(m: TransactionMetadata) -> bytes:
    out = bytearray(_VERSION.pack(0))
    out += _HEAD.pack(m.producer_id, m.last_producer_id, m.producer_epoch, m.last_producer_epoch,
                      m.timeout_ms, int(m.state))
    topics: dict[str, list[int]] = {}
    for topic, partition in sorted(m.partitions):
        topics.setdefault(topic, []).append(partition)
    out += _COUNT.pack(len(topics))
    for topic, partitions in topics.items():
        _put_str(out, topic)
        out += _COUNT.pack(len(partitions))
        out += struct.pack(f">{len(partitions)}i", *partitions)
    out += _TIMES.pack(m.last_update_ms, m.txn_start_ms)
    return bytes(out)


def decode_value(transactional_id: str, data: bytes) -> TransactionMetadata:
    view = memoryview(data)
    try:
        (version,) = _VERSION.unpack_from(view, 0)
        if version != 0:
            raise DecodeError(f"transaction log value version {version}")
        pos = _VERSION.size
        pid, last_pid, epoch, last_epoch, timeout_ms, state = _HEAD.unpack_from(view, pos)
        pos += _HEAD.size
        (ntopics,) = _COUNT.unpack_from(view, pos)
        pos += _COUNT.size
        if ntopics < 0:
            raise DecodeError("transaction log value: negative topic count")
        partitions = set()
        for _ in range(ntopics):
            topic, pos = _get_str(view, pos)
            (count,) = _COUNT.unpack_from(view, pos)
            pos += _COUNT.size
            if count < 0 or pos + 4 * count > len(view):
                raise DecodeError("transaction log value: bad partition count")
            partitions.update((topic, p) for p in struct.unpack_from(f">{count}i", view, pos))
            pos += 4 * count
        last_update, start = _TIMES.unpack_from(view, pos)
        pos += _TIMES.size
        txn_state = TxnState(state)
    except (struct.error, UnicodeDecodeError, ValueError) as exc:
        raise DecodeError(f"transaction log value: {exc}") from None
    if pos != len(view):
        raise DecodeError("transaction log value: trailing bytes")
    return TransactionMetadata(transactional_id, pid, epoch, timeout_ms, txn_state, frozenset(partitions),
                               start, last_update, last_pid, last_epoch)
