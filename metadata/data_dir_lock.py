"""The data directory lock: proof that a broker's previous incarnation is dead.

Each log dir holds `.lock` (Kafka's name), flocked by the node (raftkafka.node.assembly)
before anything reads the dir and held for the life of the process; the OS releases it when
the process dies, however it dies. Its content is the incarnation id of
the process that last held it. A starting broker that takes every lock therefore knows that
the incarnation named there no longer runs, and presents it when it registers
(`previous_incarnation_id`): the controller replaces that registration at once instead of
refusing the new one as a duplicate until the old session lapses
(metadata.controller.brokers.register_broker). A lock held by another process refuses the
start: two processes must never share a log dir.

The id is written without fsync: after an OS crash the old process is dead anyway, and a
lost write only means no proof (the session path).

A FileSystem without `lock` (the simulation's, test doubles) proves nothing: the broker then
presents no previous incarnation and waits for the old session as before.
"""
from __future__ import annotations

import posixpath
import uuid
from typing import Sequence

from storage.env import FileSystem
from storage.meta_properties import DataDirError

__all__ = ["LOCK_FILE", "DataDirLocks", "lock_data_dirs"]

LOCK_FILE = ".lock"


class DataDirLocks:
    """The held locks (kept open for the life of the process) and what they proved."""

    def __init__(self, files: list, previous_incarnation: uuid.UUID | None):
        self.files = files
        self.previous_incarnation = previous_incarnation

    def name(self, incarnation_id: uuid.UUID) -> None:
        """Record `incarnation_id` as the holder (the one the next start will replace)."""
        for f in self.files:
            f.truncate(0)
            f.write_at(0, str(incarnation_id).encode())

    def close(self) -> None:
        for f in self.files:
            f.close()
        self.files = []


def lock_data_dirs(fs: FileSystem, data_dirs: Sequence[str]) -> DataDirLocks:
    """Lock every dir (before anything reads them); DataDirError if a lock is held
    elsewhere. `previous_incarnation` is the id all of them named, if one; the broker names
    itself (`name`) once it knows its incarnation."""
    lock = getattr(fs, "lock", None)
    if lock is None:
        return DataDirLocks([], None)
    files, named = [], set()
    try:
        for data_dir in sorted(data_dirs):
            fs.makedirs(data_dir)
            path = posixpath.join(data_dir, LOCK_FILE)
            try:
                f = lock(path)
            except BlockingIOError:
                raise DataDirError(f"{data_dir} is in use by another process (its {LOCK_FILE} is held)") from None
            files.append(f)
            named.add(_read_id(f))
    except BaseException:
        for f in files:
            f.close()
        raise
    return DataDirLocks(files, named.pop() if len(named) == 1 else None)


def _read_id(f) -> uuid.UUID | None:
    try:
        return uuid.UUID(f.read(0, min(f.size(), 64)).decode("ascii").strip())
    except (ValueError, UnicodeDecodeError):
        return None
