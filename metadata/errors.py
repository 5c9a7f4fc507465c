"""The typed errors the metadata layer raises (its error codes are wire.error_codes.ErrorCode)."""
from __future__ import annotations

from wire.error_codes import ErrorCode

__all__ = ["ApiError", "InvalidRecordError"]


# Error messages travel in int16-length strings (older request versions): at most 32767 bytes.
MAX_MESSAGE_CHARS = 1000


class ApiError(Exception):
    """A request the controller refuses: carries the Kafka error code and a readable message."""

    def __init__(self, code: ErrorCode, message: str = ""):
        if len(message) > MAX_MESSAGE_CHARS:  # it quotes client input; the answer's string must fit
            message = message[:MAX_MESSAGE_CHARS] + "..."
        super().__init__(f"{code.name}: {message}" if message else code.name)
        self.code = code
        self.message = message or None


class InvalidRecordError(ValueError):
    """A committed record that does not fit the image it is replayed onto (a controller bug)."""
