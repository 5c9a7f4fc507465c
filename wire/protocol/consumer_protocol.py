"""The embedded "consumer" protocol carried inside JoinGroup/SyncGroup bytes.

Clients put a subscription in each JoinGroup protocol's `metadata` and the
group leader puts an assignment per member in SyncGroup. Both are int16
version-prefixed, never flexible, and every version only appends fields, so a
newer version is read by decoding the newest known prefix and ignoring the
rest (as Kafka's ConsumerProtocol does). The broker treats these bytes as
opaque; this module is for tools (DescribeGroups output) and our own client.
"""
from __future__ import annotations

import struct

from wire.errors import DecodeError
from wire.protocol.message import Message, as_memoryview, define_message
from wire.protocol.schema import ArrayOf, F, BYTES, INT32, STRING

__all__ = [
    "ConsumerProtocolSubscription",
    "ConsumerProtocolAssignment",
    "encode_subscription",
    "decode_subscription",
    "encode_assignment",
    "decode_assignment",
]

ConsumerProtocolSubscription = define_message("ConsumerProtocolSubscription", [
    F("topics", ArrayOf(STRING)),
    F("user_data", BYTES, nullable="0+", default=None),
    F("owned_partitions", ArrayOf("TopicPartition",
        F("topic", STRING),
        F("partitions", ArrayOf(INT32)),
    ), "1+"),
    F("generation_id", INT32, "2+", default=-1),
    F("rack_id", STRING, "3+", nullable="3+", default=None),
], api_key=None, kind="data", versions="0-3")

ConsumerProtocolAssignment = define_message("ConsumerProtocolAssignment", [
    F("assigned_partitions", ArrayOf("TopicPartition",
        F("topic", STRING),
        F("partitions", ArrayOf(INT32)),
    )),
    F("user_data", BYTES, nullable="0+", default=None),
], api_key=None, kind="data", versions="0-3")

_VERSION = struct.Struct(">h")


def _encode(message: Message, version: int) -> bytes:
    return _VERSION.pack(version) + message.encode(version)


def _decode(cls: type, data) -> tuple[int, Message]:
    buf = as_memoryview(data)
    if len(buf) < 2:
        raise DecodeError(f"{cls.__name__}: missing version prefix")
    (version,) = _VERSION.unpack_from(buf, 0)
    if version < 0:
        raise DecodeError(f"{cls.__name__}: negative version {version}")
    known = min(version, cls.VERSIONS.hi)
    obj, pos = cls.decode_from(buf, 2, known)
    if pos != len(buf) and version <= cls.VERSIONS.hi:
        raise DecodeError(f"{cls.__name__} v{version}: {len(buf) - pos} trailing bytes")
    return version, obj


def encode_subscription(subscription, version: int = 0) -> bytes:
    return _encode(subscription, version)


def decode_subscription(data) -> tuple[int, "ConsumerProtocolSubscription"]:
    """Returns (version on the wire, subscription); newer versions read their known prefix."""
    return _decode(ConsumerProtocolSubscription, data)


def encode_assignment(assignment, version: int = 0) -> bytes:
    return _encode(assignment, version)


def decode_assignment(data) -> tuple[int, "ConsumerProtocolAssignment"]:
    return _decode(ConsumerProtocolAssignment, data)
