"""SASL PLAIN (RFC 4616): one client token `authzid NUL authcid NUL password`.

The server checks the password against Kafka's static JAAS users (or any
`check(username, password) -> bool`); as in Kafka, an authorization id, when
given, must equal the user name. Only sensible over TLS or a trusted network:
the password travels as it is.
"""
from __future__ import annotations

import hmac
from typing import Callable, Mapping

from wire.security.sasl_common import PLAIN, SaslAuthenticationError

__all__ = ["PlainServer", "PlainClient", "static_users_check", "MAX_TOKEN"]

MAX_TOKEN = 4096  # user name + password; anything longer is not a login
_INVALID = "Authentication failed: Invalid username or password"


def static_users_check(users: Mapping[str, str]) -> Callable[[str, str], bool]:
    """A password check against fixed users, in constant time per comparison."""

    def check(username: str, password: str) -> bool:
        expected = users.get(username)
        if expected is None:
            return False
        return hmac.compare_digest(expected.encode("utf-8"), password.encode("utf-8"))

    return check


class PlainServer:
    mechanism = PLAIN

    def __init__(self, check: Callable[[str, str], bool]):
        self._check = check
        self.complete = False
        self.username: str | None = None

    def respond(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationError("Authentication failed: PLAIN takes a single token")
        if len(token) > MAX_TOKEN:
            raise SaslAuthenticationError("Authentication failed: PLAIN token too long")
        parts = bytes(token).split(b"\x00")
        if len(parts) != 3:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, username, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: not UTF-8") from None
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        if not self._check(username, password):
            raise SaslAuthenticationError(_INVALID)
        self.username = username
        self.complete = True
        return b""


class PlainClient:
    mechanism = PLAIN

    def __init__(self, username: str, password: str):
        self._token = b"\x00" + username.encode("utf-8") + b"\x00" + password.encode("utf-8")
        self.complete = False

    def initial(self) -> bytes:
        return self._token

    def respond(self, challenge: bytes) -> bytes:
        if challenge:
            raise SaslAuthenticationError("unexpected challenge after a PLAIN token")
        self.complete = True
        return b""
