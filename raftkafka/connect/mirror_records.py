"""MirrorMaker 2's record formats, byte for byte as Kafka writes them (Kafka's protocol `Struct`
encoding: STRING = int16 length + UTF-8, INT16/INT32/INT64 big-endian), so Kafka's own tools
(RemoteClusterUtils.translateOffsets, a Java MM2 taking over) read what we write.

- offset sync (topic `mm2-offset-syncs.<target>.internal`): key (topic, partition), value
  (upstreamOffset, offset): record `upstreamOffset` of the source partition is `offset` downstream.
- checkpoint (topic `<source>.checkpoints.internal` on the target): key (group, topic, partition)
  with the *target* topic name, value version INT16 0 then (upstreamOffset, offset, metadata).
- heartbeat (topic `heartbeats` on the target): key (sourceClusterAlias, targetClusterAlias),
  value version INT16 0 then timestamp INT64 (ms).
- progress (topic `mm2-offsets.<source>.internal` on the target), Connect's offset form in JSON:
  key `["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"orders"}]`, value
  `{"offset":N}` with N the last upstream offset replicated.
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass

__all__ = ["OffsetSync", "Checkpoint", "Heartbeat", "encode_progress", "decode_progress", "RecordFormatError"]


class RecordFormatError(ValueError):
    pass


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def take(self, fmt: str):
        size = struct.calcsize(fmt)
        if self.at + size > len(self.data):
            raise RecordFormatError("record too short")
        (value,) = struct.unpack_from(fmt, self.data, self.at)
        self.at += size
        return value

    def string(self) -> str:
        n = self.take(">h")
        if n < 0 or self.at + n > len(self.data):
            raise RecordFormatError("bad string length")
        text = self.data[self.at:self.at + n].decode("utf-8", "replace")
        self.at += n
        return text


@dataclass(frozen=True)
class OffsetSync:
    topic: str
    partition: int
    upstream: int
    downstream: int

    def key(self) -> bytes:
        return _string(self.topic) + struct.pack(">i", self.partition)

    def value(self) -> bytes:
        return struct.pack(">qq", self.upstream, self.downstream)

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> "OffsetSync":
        k, v = _Reader(key or b""), _Reader(value or b"")
        return cls(k.string(), k.take(">i"), v.take(">q"), v.take(">q"))


@dataclass(frozen=True)
class Checkpoint:
    group: str
    topic: str  # the topic's name on the target
    partition: int
    upstream: int
    downstream: int
    metadata: str = ""

    def key(self) -> bytes:
        return _string(self.group) + _string(self.topic) + struct.pack(">i", self.partition)

    def value(self) -> bytes:
        return struct.pack(">hqq", 0, self.upstream, self.downstream) + _string(self.metadata)

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> "Checkpoint":
        k, v = _Reader(key or b""), _Reader(value or b"")
        group, topic, partition = k.string(), k.string(), k.take(">i")
        v.take(">h")  # version
        return cls(group, topic, partition, v.take(">q"), v.take(">q"), v.string())


@dataclass(frozen=True)
class Heartbeat:
    source_alias: str
    target_alias: str
    timestamp: int

    def key(self) -> bytes:
        return _string(self.source_alias) + _string(self.target_alias)

    def value(self) -> bytes:
        return struct.pack(">hq", 0, self.timestamp)

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> "Heartbeat":
        k, v = _Reader(key or b""), _Reader(value or b"")
        source, target = k.string(), k.string()
        v.take(">h")  # version
        return cls(source, target, v.take(">q"))


def encode_progress(source_alias: str, topic: str, partition: int, offset: int) -> tuple[bytes, bytes]:
    key = ["MirrorSourceConnector", {"cluster": source_alias, "partition": partition, "topic": topic}]
    return (json.dumps(key, separators=(",", ":")).encode(),
            json.dumps({"offset": offset}, separators=(",", ":")).encode())


def decode_progress(source_alias: str, key: bytes, value: bytes | None) -> tuple[tuple[str, int], int | None] | None:
    """((topic, partition), last replicated offset or None for a tombstone), or None for another
    connector's or cluster's record."""
    try:
        name, where = json.loads(key)
        if name != "MirrorSourceConnector" or where.get("cluster") != source_alias:
            return None
        tp = (str(where["topic"]), int(where["partition"]))
        return tp, (None if value is None else int(json.loads(value)["offset"]))
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
