"""Offsets as Spark sees them: canonical JSON `{"topic": {"partition": next_offset}}`.

Spark compares streaming offsets by their JSON text (G8 in reference/spark.md), so
every offset dict we hand out is built with topics sorted, partitions sorted
numerically, keys as str and values as int. The value is Kafka's "1 + last
offset to read": an exclusive end, the same as `KafkaConsumer.position()`.

Inside the source, offsets are `PartitionOffsets = dict[(topic, partition), int]`.
"""
from __future__ import annotations

import json
from typing import Any

__all__ = [
    "TopicPartition",
    "PartitionOffsets",
    "EARLIEST",
    "LATEST",
    "OffsetsFormatError",
    "to_json_dict",
    "to_json_text",
    "from_json_dict",
    "parse_offsets_option",
    "parse_assign_option",
]

TopicPartition = tuple[str, int]
PartitionOffsets = dict[TopicPartition, int]

# Sentinels in startingOffsets/endingOffsets JSON, as in Kafka's ListOffsets.
LATEST = -1
EARLIEST = -2


class OffsetsFormatError(ValueError):
    """An offsets/assign JSON text that does not have the documented shape."""


def to_json_dict(offsets: PartitionOffsets) -> dict[str, dict[str, int]]:
    """The canonical nested dict (insertion order = sorted order, so json.dumps is canonical)."""
    out: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(offsets):
        out.setdefault(topic, {})[str(partition)] = int(offsets[(topic, partition)])
    return out


def to_json_text(offsets: PartitionOffsets) -> str:
    return json.dumps(to_json_dict(offsets), separators=(",", ":"))


def from_json_dict(value: Any, *, what: str = "offsets") -> PartitionOffsets:
    """Inverse of `to_json_dict`; accepts str or int partition keys (they become str in JSON)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise OffsetsFormatError(f"{what} is not valid JSON: {exc.msg} at position {exc.pos}") from None
    if not isinstance(value, dict):
        raise OffsetsFormatError(f'{what} must be a JSON object like {{"topicA":{{"0":23,"1":-1}}}}, got {value!r}')
    out: PartitionOffsets = {}
    for topic, partitions in value.items():
        if not isinstance(topic, str) or not topic:
            raise OffsetsFormatError(f"{what}: topic names must be non-empty strings, got {topic!r}")
        if not isinstance(partitions, dict):
            raise OffsetsFormatError(f"{what}: topic {topic!r} must map partitions to offsets, got {partitions!r}")
        for partition, offset in partitions.items():
            out[(topic, _partition_number(partition, what, topic))] = _offset_number(offset, what, topic, partition)
    return out


def parse_offsets_option(text: str, option: str) -> PartitionOffsets:
    """A startingOffsets/endingOffsets (or ...ByTimestamp) JSON value."""
    return from_json_dict(text, what=f"option '{option}'")


def parse_assign_option(text: str) -> list[TopicPartition]:
    """`{"topicA":[0,1],"topicB":[2,4]}` → sorted [(topic, partition)]."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OffsetsFormatError(f"option 'assign' is not valid JSON: {exc.msg} at position {exc.pos}") from None
    if not isinstance(value, dict) or not value:
        raise OffsetsFormatError(f'option \'assign\' must be a JSON object like {{"topicA":[0,1]}}, got {text!r}')
    out: set[TopicPartition] = set()
    for topic, partitions in value.items():
        if not topic or not isinstance(partitions, list):
            raise OffsetsFormatError(f"option 'assign': topic {topic!r} must map to a list of partitions")
        for partition in partitions:
            out.add((topic, _partition_number(partition, "option 'assign'", topic)))
    if not out:
        raise OffsetsFormatError("option 'assign' names no partitions")
    return sorted(out)


def _partition_number(value: Any, what: str, topic: str) -> int:
    if isinstance(value, bool):
        raise OffsetsFormatError(f"{what}: partition {value!r} of topic {topic!r} is not a number")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise OffsetsFormatError(f"{what}: partition {value!r} of topic {topic!r} is not a number") from None
    if number < 0 or str(number) != str(value).strip():
        raise OffsetsFormatError(f"{what}: partition {value!r} of topic {topic!r} is not a partition number")
    return number


def _offset_number(value: Any, what: str, topic: str, partition: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise OffsetsFormatError(f"{what}: offset of {topic}-{partition} must be an integer, got {value!r}")
    if value < EARLIEST:
        raise OffsetsFormatError(f"{what}: offset of {topic}-{partition} is {value}; use >= 0, -1 (latest) or -2 (earliest)")
    return value
