"""The client side of a SASL login over the Kafka protocol: SaslHandshake v1, then the
mechanism's tokens in SaslAuthenticate requests until the mechanism is complete.

`call(request, version) -> response` is the caller's way of sending one request on its
connection (the client library's BrokerConnection, the replica fetcher's link), so this holds
no I/O of its own. A refusal raises SaslAuthenticationError with the broker's message.
"""
from __future__ import annotations

import random
from typing import Awaitable, Callable

from wire.protocol import SaslAuthenticateRequest, SaslHandshakeRequest
from wire.security.sasl_common import SaslAuthenticationError
from wire.security.sasl_config import SaslCredentials, new_client

__all__ = ["sasl_login"]


async def sasl_login(call: Callable[..., Awaitable], credentials: SaslCredentials, rng: random.Random, *,
                     authenticate_version: int = 1) -> int:
    """Log in; returns the session lifetime in ms the broker reported (0: no limit)."""
    handshake = await call(SaslHandshakeRequest(mechanism=credentials.mechanism), 1)
    if handshake.error_code:
        raise SaslAuthenticationError(f"SASL mechanism {credentials.mechanism} is not enabled "
                                      f"(the broker offers {', '.join(handshake.mechanisms) or 'none'})")
    mechanism = new_client(credentials, rng)
    token = mechanism.initial()
    while True:
        response = await call(SaslAuthenticateRequest(auth_bytes=token), authenticate_version)
        if response.error_code:
            raise SaslAuthenticationError(response.error_message or "SASL authentication failed")
        token = mechanism.respond(response.auth_bytes)
        if mechanism.complete:
            return response.session_lifetime_ms if authenticate_version >= 1 else 0
