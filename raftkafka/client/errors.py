"""Typed client errors. Every error a broker reports carries its Kafka error code.

    KafkaError            base; `.code` is a `wire.error_codes.ErrorCode`
      BrokerResponseError   a broker answered with a non-zero error code
      KafkaConnectionError  connect/send/receive failed (retriable, refreshes metadata)
      KafkaTimeoutError     a deadline passed (request, delivery, metadata wait)
      UnsupportedVersionError no API version both sides speak
      ClientClosedError     the client was closed while the call was pending
      AuthenticationError   the broker refused our SASL login (not retriable)

`retriable` says whether retrying the same call may succeed; `invalid_metadata`
says the client should refresh its metadata first (the Java client's
InvalidMetadataException family).
"""
from __future__ import annotations

from wire.error_codes import ErrorCode

__all__ = [
    "KafkaError",
    "BrokerResponseError",
    "KafkaConnectionError",
    "KafkaTimeoutError",
    "UnsupportedVersionError",
    "ClientClosedError",
    "AuthenticationError",
    "error_for",
    "raise_for_code",
]


class KafkaError(Exception):
    code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str = "", code: ErrorCode | int | None = None):
        if code is not None:
            self.code = ErrorCode.of(int(code))
        super().__init__(message or self.code.name)

    @property
    def retriable(self) -> bool:
        return self.code.retriable

    @property
    def invalid_metadata(self) -> bool:
        return self.code.invalid_metadata


class BrokerResponseError(KafkaError):
    """A broker answered with `code` (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, ...)."""


class KafkaConnectionError(KafkaError):
    code = ErrorCode.NETWORK_EXCEPTION


class KafkaTimeoutError(KafkaError):
    code = ErrorCode.REQUEST_TIMED_OUT


class UnsupportedVersionError(KafkaError):
    code = ErrorCode.UNSUPPORTED_VERSION


class ClientClosedError(KafkaError):
    """Not retriable: the client is gone."""

    code = ErrorCode.UNKNOWN_SERVER_ERROR


class AuthenticationError(KafkaError):
    """The broker refused the SASL login (wrong password, mechanism not enabled): not retriable."""

    code = ErrorCode.SASL_AUTHENTICATION_FAILED


def error_for(code: int, message: str | None = None, context: str = "") -> BrokerResponseError:
    name = ErrorCode.of(code).name
    text = f"{context}: {name}" if context else name
    if message:
        text += f" ({message})"
    return BrokerResponseError(text, code)


def raise_for_code(code: int, message: str | None = None, context: str = "") -> None:
    if code:
        raise error_for(code, message, context)
