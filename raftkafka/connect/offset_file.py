"""The worker's offsets file (`offset.storage.file.filename`): where each connector has got to.

Kafka's standalone worker keeps a map {[connector, source partition] -> offset} in this file.
Ours holds the same map as JSON (Kafka's file is Java-serialized, so the two cannot read each
other's): keys are Kafka's JSON key form `["local-file-source",{"filename":"test.txt"}]`, values
the connector's offset (`{"position": 1234}`). Every `put` rewrites the file atomically (temporary
sibling, fsync, rename, directory fsync), so after a crash it holds the last completed write.
"""
from __future__ import annotations

import json

import trio

from storage.env import RealEnv, write_file_atomic

__all__ = ["OffsetFile", "OffsetFileError"]

_FORMAT = "raftkafka-connect-offsets-v1"


class OffsetFileError(ValueError):
    pass


class OffsetFile:
    def __init__(self, path: str, entries: dict[str, dict]):
        self.path = path
        self._entries = entries
        self._lock = trio.Lock()
        self._fs = RealEnv().fs

    @classmethod
    def load(cls, path: str) -> "OffsetFile":
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            return cls(path, {})
        except OSError as e:
            raise OffsetFileError(f"offset.storage.file.filename {path}: {e.strerror or e}") from None
        if not text.strip():
            return cls(path, {})
        try:
            document = json.loads(text)
        except ValueError:
            document = None
        if not isinstance(document, dict) or document.get("format") != _FORMAT or \
                not isinstance(document.get("offsets"), dict):
            raise OffsetFileError(f"offset.storage.file.filename {path}: not a raftkafka offsets file "
                                  "(move it away to start every connector from scratch)")
        return cls(path, document["offsets"])

    @staticmethod
    def key(connector: str, partition: dict) -> str:
        return json.dumps([connector, partition], separators=(",", ":"), sort_keys=True)

    def get(self, connector: str, partition: dict) -> dict | None:
        value = self._entries.get(self.key(connector, partition))
        return value if isinstance(value, dict) else None

    async def put(self, connector: str, partition: dict, offset: dict) -> None:
        """Store `offset` and make it durable before returning."""
        async with self._lock:
            self._entries[self.key(connector, partition)] = offset
            data = json.dumps({"format": _FORMAT, "offsets": self._entries}, indent=1, sort_keys=True)
            await write_file_atomic(self._fs, self.path, data.encode())
