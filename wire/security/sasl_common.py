"""What every SASL mechanism shares: the failure type and the mechanism names we speak.

A server mechanism is a sans-IO state machine: `respond(token) -> bytes` takes
the client's next token and returns the next challenge (b"" when there is
none), raising `SaslAuthenticationError` on a failed or malformed exchange;
`complete` turns true once the client has proved who it is, and `username`
names it. A client mechanism mirrors it: `initial() -> bytes`, then
`respond(challenge) -> bytes` until `complete`.
"""
from __future__ import annotations

__all__ = ["SaslAuthenticationError", "PLAIN", "SCRAM_SHA_256", "SCRAM_SHA_512", "MECHANISMS"]

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512)


class SaslAuthenticationError(Exception):
    """The exchange failed; str(e) is the message the client is told (never a secret)."""
