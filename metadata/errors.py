"""Kafka error codes the metadata layer answers with, and the typed errors it raises."""
from __future__ import annotations

from wire.error_codes import ErrorCode

__all__ = ["Errors", "ApiError", "InvalidRecordError"]


# One table of Kafka's error codes for every layer: the metadata layer answers with the same
# enum the wire codecs carry.
Errors = ErrorCode


class ApiError(Exception):
    """A request the controller refuses: carries the Kafka error code and a readable message."""

    def __init__(self, code: Errors, message: str = ""):
        super().__init__(f"{code.name}: {message}" if message else code.name)
        self.code = code
        self.message = message or None


class InvalidRecordError(ValueError):
    """A committed record that does not fit the image it is replayed onto (a controller bug)."""
