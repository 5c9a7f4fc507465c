"""`partition.metadata`: the topic id a partition directory belongs to (Kafka's PartitionMetadataFile).

A topic deleted and re-created under the same name gets a new id; a broker that
was down meanwhile still holds a directory of the old topic under the same
name. The id written here at creation is how the broker tells the two apart
(broker.replica_manager). The layout is Kafka's:

    version: 0
    topic_id: <the id, Kafka's URL-safe base64 without padding>

A file that does not parse is reported as missing (`None`): the broker then
adopts the id of the topic its caught-up metadata places there, as it does for
directories written before the file existed.
"""
from __future__ import annotations

import posixpath
import uuid

from storage.env import FileSystem, write_file_atomic
from wire.kafka_uuid import uuid_from_str, uuid_to_str

__all__ = ["PARTITION_METADATA_FILE", "read_topic_id", "write_topic_id"]

PARTITION_METADATA_FILE = "partition.metadata"
_VERSION = 0


def read_topic_id(fs: FileSystem, log_dir: str) -> uuid.UUID | None:
    """The topic id recorded in `log_dir`, or None (no file, or one that does not parse)."""
    path = posixpath.join(log_dir, PARTITION_METADATA_FILE)
    if not fs.exists(path):
        return None
    f = fs.open(path)
    try:
        text = f.read(0, min(f.size(), 4096)).decode("ascii", "replace")
    finally:
        f.close()
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    try:
        if int(fields.get("version", "-1")) != _VERSION:
            return None
        return uuid_from_str(fields["topic_id"])
    except (KeyError, ValueError):
        return None


async def write_topic_id(fs: FileSystem, log_dir: str, topic_id: uuid.UUID) -> None:
    """Durably record `topic_id` for `log_dir` (atomic: the old file or the new one)."""
    body = f"version: {_VERSION}\ntopic_id: {uuid_to_str(topic_id)}\n"
    await write_file_atomic(fs, posixpath.join(log_dir, PARTITION_METADATA_FILE), body.encode())
