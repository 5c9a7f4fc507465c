"""Errors raised by the codecs.

Every decoder in wire/ raises `DecodeError` (and nothing else) on malformed
input: truncated frames, wrong lengths, bad varints, bad CRCs, unknown
versions. Callers catch exactly this type to answer with a Kafka error code.
"""
from __future__ import annotations

__all__ = ["DecodeError", "CorruptRecordError", "UnsupportedVersionError"]


class DecodeError(ValueError):
    """Malformed bytes on the wire or on disk."""


class CorruptRecordError(DecodeError):
    """A RecordBatch failed validation (length, magic, CRC, counts)."""


class UnsupportedVersionError(DecodeError):
    """A request/record version this build does not implement."""

    def __init__(self, message: str, *, api_key: int | None = None, version: int | None = None):
        super().__init__(message)
        self.api_key = api_key
        self.version = version
