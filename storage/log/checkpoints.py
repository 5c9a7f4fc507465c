"""Kafka's plain-text checkpoint files, written atomically.

Both the per-data-dir offset checkpoints (`recovery-point-offset-checkpoint`,
`log-start-offset-checkpoint`, `cleaner-offset-checkpoint`,
`replication-offset-checkpoint`) and the
per-partition `leader-epoch-checkpoint` share one layout:

    <version>\\n<count>\\n<entry>\\n... (entry fields separated by one space)

A file that does not parse raises `CorruptCheckpointError`; callers decide
whether that means "start from zero" (recovery points) or a hard stop.
"""
from __future__ import annotations

from storage.env import FileSystem, write_file_atomic

__all__ = [
    "CorruptCheckpointError",
    "read_entries",
    "write_entries",
    "read_offsets",
    "write_offsets",
    "RECOVERY_POINT_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "CLEANER_OFFSET_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
]

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"  # high watermarks
VERSION = 0


class CorruptCheckpointError(ValueError):
    """A checkpoint file exists but does not parse."""


def read_entries(fs: FileSystem, path: str, fields: int) -> list[list[str]] | None:
    """The entries of a checkpoint file (each a list of `fields` strings), or None if absent."""
    if not fs.exists(path):
        return None
    f = fs.open(path)
    try:
        raw = f.read(0, f.size())
    finally:
        f.close()
    try:
        lines = raw.decode("utf-8").split("\n")
    except UnicodeDecodeError:
        raise CorruptCheckpointError(f"{path}: not utf-8") from None
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2 or lines[0] != str(VERSION):
        raise CorruptCheckpointError(f"{path}: bad header")
    try:
        count = int(lines[1])
    except ValueError:
        raise CorruptCheckpointError(f"{path}: bad entry count {lines[1]!r}") from None
    entries = [line.split(" ") for line in lines[2:]]
    if count != len(entries) or any(len(e) != fields for e in entries):
        raise CorruptCheckpointError(f"{path}: expected {count} entries of {fields} fields")
    return entries


async def write_entries(fs: FileSystem, path: str, entries: list[tuple]) -> None:
    lines = [str(VERSION), str(len(entries))] + [" ".join(str(x) for x in e) for e in entries]
    await write_file_atomic(fs, path, ("\n".join(lines) + "\n").encode("utf-8"))


def read_offsets(fs: FileSystem, path: str) -> dict[tuple[str, int], int]:
    """A `topic partition offset` checkpoint as {(topic, partition): offset}; {} if absent."""
    entries = read_entries(fs, path, 3)
    result: dict[tuple[str, int], int] = {}
    for topic, partition, offset in entries or ():
        try:
            result[(topic, int(partition))] = int(offset)
        except ValueError:
            raise CorruptCheckpointError(f"{path}: bad entry {topic} {partition} {offset}") from None
    return result


async def write_offsets(fs: FileSystem, path: str, offsets: dict[tuple[str, int], int]) -> None:
    await write_entries(fs, path, [(t, p, o) for (t, p), o in sorted(offsets.items())])
