"""The typed errors the metadata layer raises (its error codes are wire.error_codes.ErrorCode)."""
from __future__ import annotations

from wire.error_codes import ErrorCode

__all__ = ["ApiError", "InvalidRecordError", "bounded_message"]


# Error messages travel in int16-length strings (older request versions): at most 32767 bytes.
MAX_MESSAGE_CHARS = 1000


def bounded_message(message: str) -> str:
    """`message`, cut to fit any answer's error string: messages quote client input (a name
    of 32,767 bytes fits a request's string, not a message that quotes it)."""
    return message if len(message) <= MAX_MESSAGE_CHARS else message[:MAX_MESSAGE_CHARS] + "..."


class ApiError(Exception):
    """A request the controller refuses: carries the Kafka error code and a readable message."""

    def __init__(self, code: ErrorCode, message: str = ""):
        message = bounded_message(message)
        super().__init__(f"{code.name}: {message}" if message else code.name)
        self.code = code
        self.message = message or None


class InvalidRecordError(ValueError):
    """A committed record that does not fit the image it is replayed onto (a controller bug)."""
