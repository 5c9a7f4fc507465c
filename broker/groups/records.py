"""`__consumer_offsets` records, byte-compatible with Kafka's group coordinator.

Every record's key and value start with an int16 version; the key version
says what the record is:

    key v0/v1  OffsetCommitKey   {group, topic, partition int32}
    key v2     GroupMetadataKey  {group}
    key v3+    KIP-848 / share-group records (not ours; the loader skips them)

Values: OffsetCommitValue v0-4 {offset, leaderEpoch (v3+), metadata,
commitTimestamp, expireTimestamp (v1 only)}, GroupMetadataValue v0-4
{protocolType, generation, protocol?, leader?, currentStateTimestamp (v2+),
members[...]}; v4 of both is flexible. A null value is a tombstone (offset or
group deleted). We write what Kafka writes: OffsetCommitKey v1 with value v3
(v1 when the commit carries an explicit expire timestamp) and GroupMetadataKey
v2 with value v3, and read every version.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from wire.errors import DecodeError
from wire.protocol.message import as_memoryview, define_message
from wire.protocol.schema import ArrayOf, F, BYTES, INT32, INT64, STRING

__all__ = [
    "OffsetCommitKey",
    "OffsetCommitValue",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "OffsetRecordKey",
    "GroupRecordKey",
    "offset_commit_record",
    "group_metadata_record",
    "decode_key",
    "decode_offset_value",
    "decode_group_value",
]

OffsetCommitKey = define_message("OffsetCommitKey", [
    F("group", STRING),
    F("topic", STRING),
    F("partition", INT32),
], api_key=None, kind="data", versions="0-1")

OffsetCommitValue = define_message("OffsetCommitValue", [
    F("offset", INT64),
    F("leader_epoch", INT32, "3+", default=-1),
    F("metadata", STRING),
    F("commit_timestamp", INT64),
    F("expire_timestamp", INT64, "1", default=-1),
], api_key=None, kind="data", versions="0-4", flexible="4+")

GroupMetadataKey = define_message("GroupMetadataKey", [
    F("group", STRING),
], api_key=None, kind="data", versions="2")

GroupMetadataValue = define_message("GroupMetadataValue", [
    F("protocol_type", STRING),
    F("generation", INT32),
    F("protocol", STRING, nullable="0+", default=None),
    F("leader", STRING, nullable="0+", default=None),
    F("current_state_timestamp", INT64, "2+", default=-1),
    F("members", ArrayOf("MemberMetadata",
        F("member_id", STRING),
        F("group_instance_id", STRING, "3+", nullable="3+", default=None),
        F("client_id", STRING),
        F("client_host", STRING),
        F("rebalance_timeout", INT32, "1+", default=-1),
        F("session_timeout", INT32),
        F("subscription", BYTES),
        F("assignment", BYTES),
    )),
], api_key=None, kind="data", versions="0-4", flexible="4+")

_VERSION = struct.Struct(">h")
OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3


@dataclass(frozen=True, slots=True)
class OffsetRecordKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupRecordKey:
    group: str


def _versioned(message, version: int) -> bytes:
    return _VERSION.pack(version) + message.encode(version)


def offset_commit_record(group: str, topic: str, partition: int,
                         value: "OffsetCommitValue | None") -> tuple[bytes, bytes | None]:
    """(key, value) bytes for a commit; `value=None` writes the tombstone that deletes it."""
    key = _versioned(OffsetCommitKey(group=group, topic=topic, partition=partition), OFFSET_KEY_VERSION)
    if value is None:
        return key, None
    version = OFFSET_VALUE_VERSION if value.expire_timestamp == -1 else OFFSET_VALUE_VERSION_WITH_EXPIRY
    return key, _versioned(value, version)


def group_metadata_record(group: str, value: "GroupMetadataValue | None") -> tuple[bytes, bytes | None]:
    key = _versioned(GroupMetadataKey(group=group), GROUP_KEY_VERSION)
    return key, None if value is None else _versioned(value, GROUP_VALUE_VERSION)


def _split(data, what: str) -> tuple[int, memoryview]:
    buf = as_memoryview(data)
    if len(buf) < 2:
        raise DecodeError(f"{what}: missing version prefix")
    (version,) = _VERSION.unpack_from(buf, 0)
    return version, buf


def decode_key(data) -> OffsetRecordKey | GroupRecordKey | None:
    """The key of a `__consumer_offsets` record; None for record types this coordinator does not own."""
    version, buf = _split(data, "__consumer_offsets key")
    if version in (0, 1):
        key, pos = OffsetCommitKey.decode_from(buf, 2, version)
        result = OffsetRecordKey(key.group, key.topic, key.partition)
    elif version == GROUP_KEY_VERSION:
        key, pos = GroupMetadataKey.decode_from(buf, 2, version)
        result = GroupRecordKey(key.group)
    elif version > GROUP_KEY_VERSION:
        return None
    else:
        raise DecodeError(f"__consumer_offsets key: negative version {version}")
    if pos != len(buf):
        raise DecodeError(f"__consumer_offsets key v{version}: {len(buf) - pos} trailing bytes")
    return result


def _decode_value(cls, data):
    version, buf = _split(data, cls.__name__)
    if not cls.VERSIONS.lo <= version <= cls.VERSIONS.hi:
        raise DecodeError(f"{cls.__name__}: unknown version {version}")
    return cls.decode(buf[2:], version)


def decode_offset_value(data) -> "OffsetCommitValue":
    return _decode_value(OffsetCommitValue, data)


def decode_group_value(data) -> "GroupMetadataValue":
    return _decode_value(GroupMetadataValue, data)
