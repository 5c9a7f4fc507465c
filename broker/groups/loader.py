"""Rebuild groups and offsets by replaying a `__consumer_offsets` partition.

The partition is a compacted log of keyed records, so the state is simply the
last value per key: a tombstone erases, a later record replaces. Groups come
back Stable with their stored members (or Empty), exactly as Kafka's loader
returns them; offsets of a group without a metadata record belong to a simple
consumer's (Empty, protocol-less) group.

A record that does not decode (garbage, or a version no coordinator writes)
is skipped and reported through `on_skip`: one bad record must not keep every
group of the partition from loading. (Kafka's loader skips record types it
does not know and fails the load on other errors; a failed load here would
answer COORDINATOR_LOAD_IN_PROGRESS for ever.)
"""
from __future__ import annotations

from typing import Callable, Iterable

from broker.groups.group import ClassicGroup, OffsetAndMetadata
from broker.groups.records import (
    GroupRecordKey,
    OffsetRecordKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
)
from wire.errors import DecodeError

__all__ = ["replay"]


def replay(records: Iterable[tuple[bytes, bytes | None]], wall_ms: int,
           on_skip: Callable[[int, str], None] | None = None) -> dict[str, ClassicGroup]:
    """(key, value) records, oldest first -> groups by id; `on_skip(position, reason)` for each
    record that does not decode (it is left out)."""
    offsets: dict[str, dict[tuple[str, int], OffsetAndMetadata]] = {}
    metadata: dict[str, object] = {}
    for position, (key_bytes, value_bytes) in enumerate(records):
        if key_bytes is None:
            continue  # not a coordinator record (Kafka skips keyless records too)
        try:
            _apply(key_bytes, value_bytes, offsets, metadata)
        except DecodeError as exc:
            if on_skip is not None:
                on_skip(position, str(exc))
    groups: dict[str, ClassicGroup] = {}
    for group_id in sorted(set(metadata) | {g for g, o in offsets.items() if o}):
        value = metadata.get(group_id)
        group = (ClassicGroup(group_id, wall_ms) if value is None
                 else ClassicGroup.from_record_value(group_id, value, wall_ms))
        group.offsets = dict(sorted(offsets.get(group_id, {}).items()))
        groups[group_id] = group
    return groups


def _apply(key_bytes: bytes, value_bytes: bytes | None, offsets: dict, metadata: dict) -> None:
    key = decode_key(key_bytes)
    if isinstance(key, OffsetRecordKey):
        group_offsets = offsets.setdefault(key.group, {})
        if value_bytes is None:
            group_offsets.pop((key.topic, key.partition), None)
        else:
            v = decode_offset_value(value_bytes)
            group_offsets[(key.topic, key.partition)] = OffsetAndMetadata(
                v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp)
    elif isinstance(key, GroupRecordKey):
        if value_bytes is None:
            metadata.pop(key.group, None)
        else:
            metadata[key.group] = decode_group_value(value_bytes)
