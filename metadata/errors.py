"""The typed errors the metadata layer raises (its error codes are wire.error_codes.ErrorCode)."""
from __future__ import annotations

from wire.error_codes import ErrorCode

__all__ = ["ApiError", "InvalidRecordError"]


class ApiError(Exception):
    """A request the controller refuses: carries the Kafka error code and a readable message."""

    def __init__(self, code: ErrorCode, message: str = ""):
        super().__init__(f"{code.name}: {message}" if message else code.name)
        self.code = code
        self.message = message or None


class InvalidRecordError(ValueError):
    """A committed record that does not fit the image it is replayed onto (a controller bug)."""
