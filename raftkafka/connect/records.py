"""The record a connector sees (Kafka Connect's SourceRecord / SinkRecord in one shape)."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ConnectRecord"]


@dataclass(frozen=True)
class ConnectRecord:
    topic: str
    partition: int | None  # None: the producer's partitioner chooses (source records)
    key_schema: dict | None
    key: object
    value_schema: dict | None
    value: object
    timestamp: int | None  # ms
    offset: int | None = None  # the Kafka offset of a sink record; None for source records
    headers: tuple[tuple[str, bytes | None], ...] = ()
