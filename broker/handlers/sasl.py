"""SaslHandshake and SaslAuthenticate outside a login: on a listener without SASL, or on a
SASL listener once the connection's SASL phase (broker.sasl_authenticator) has let a request
through, which it never does for these two. Kafka answers ILLEGAL_SASL_STATE."""
from __future__ import annotations

from wire.error_codes import ErrorCode
from wire.protocol import SaslAuthenticateResponse, SaslHandshakeResponse

__all__ = ["handle_handshake", "handshake_error", "handle_authenticate", "authenticate_error"]


async def handle_handshake(broker, header, request) -> SaslHandshakeResponse:
    return handshake_error(broker, header, request, ErrorCode.ILLEGAL_SASL_STATE)


def handshake_error(broker, header, request, code: int) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(error_code=code, mechanisms=[])


async def handle_authenticate(broker, header, request) -> SaslAuthenticateResponse:
    return authenticate_error(broker, header, request, ErrorCode.ILLEGAL_SASL_STATE)


def authenticate_error(broker, header, request, code: int) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(error_code=code, error_message="SASL is not enabled on this listener",
                                    auth_bytes=b"")
