"""The SASL phase of one Kafka-protocol connection on a SASL_PLAINTEXT / SASL_SSL listener.

It stands in front of the server's `respond` for the whole connection, as Kafka's
SaslServerAuthenticator does:

- until the login completes, only ApiVersions, SaslHandshake and SaslAuthenticate are
  served; anything else closes the connection, unanswered;
- SaslHandshake v1 names a mechanism, then SaslAuthenticate (v0-2) frames carry its
  tokens; SaslHandshake v0 (old clients) is followed by bare size-prefixed tokens;
- an unsupported mechanism is answered UNSUPPORTED_SASL_MECHANISM with the enabled
  ones, a failed login SASL_AUTHENTICATION_FAILED with a message, and the connection
  then closes (a failed login after `connection.failed.authentication.delay.ms`);
- the login must finish within `sasl.handshake.timeout.ms` (the connection's cancel
  scope carries that deadline until it does), and until it does no frame may exceed
  `sasl.server.max.receive.size`;
- with `connections.max.reauth.ms` (KIP-368) the session lifetime is reported in
  SaslAuthenticate v1+, a client may log in again on the same connection (as the same
  principal), and a request that arrives after the session expired closes the connection.

The mechanisms are the sans-IO state machines of wire.security; SCRAM credentials come
from the metadata image, so every broker verifies the same way.
"""
from __future__ import annotations

import functools
import logging
import math

from broker.request_errors import CLOSE, CloseAfter
from wire.error_codes import ErrorCode
from wire.errors import DecodeError
from wire.protocol import (
    ApiKey, SaslAuthenticateResponse, SaslHandshakeResponse, decode_request, encode_response_parts,
)
from wire.security.connection_security import uses_sasl
from wire.security.principal import KafkaPrincipal
from wire.security.sasl_common import SaslAuthenticationError
from wire.security.sasl_config import SaslServerSettings, new_server
from wire.security.sasl_scram import MECHANISM_IDS, ScramCredential

__all__ = ["sasl_phase", "SaslAuthenticator", "scram_lookup"]

log = logging.getLogger(__name__)
_SASL_APIS = (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)


def scram_lookup(image_source):
    """(mechanism, user) -> ScramCredential from the current metadata image."""

    def lookup(mechanism: str, username: str) -> ScramCredential | None:
        rec = image_source().scram.get((username, MECHANISM_IDS[mechanism]))
        if rec is None:
            return None
        return ScramCredential(rec.salt, rec.iterations, rec.stored_key, rec.server_key)

    return lookup


def sasl_phase(server, security, settings: SaslServerSettings | None, scope, reader, conn=None):
    """The responder for one connection: the server's own, or, on a SASL listener (`settings`
    from its ListenerSecurity), the SASL phase in front of it."""
    if security is None or not uses_sasl(security.protocol) or settings is None:
        return functools.partial(server.respond, conn=conn)
    return SaslAuthenticator(server, security, settings, scope, reader, conn).respond


class SaslAuthenticator:
    def __init__(self, server, security, settings: SaslServerSettings, scope, reader, conn=None):
        self.server = server
        self.conn = conn  # the server's record of this connection (follower fetches)
        self.env = server.broker.env
        self.security = security
        self.settings = settings
        self.scope = scope
        self.lookup = scram_lookup(lambda: server.broker.metadata.image)
        self.mechanism = None  # the exchange in progress, if any
        self.raw_tokens = False  # after SaslHandshake v0 the tokens come unframed
        self.expires_at = math.inf
        self._start_deadline()
        # Until the login, frames are bounded by sasl.server.max.receive.size (Kafka's 512 KiB).
        self.reader, self.max_frame_size = reader, reader.max_frame_size
        reader.max_frame_size = min(reader.max_frame_size, settings.max_receive_size)

    def _start_deadline(self) -> None:
        self.scope.deadline = self.env.now() + self.settings.handshake_timeout_ms / 1000

    async def respond(self, frame: bytes):
        if self.raw_tokens:
            return self._raw_token(frame)
        api_key = int.from_bytes(frame[:2], "big", signed=True) if len(frame) >= 2 else -1
        if api_key in _SASL_APIS:
            return self._sasl_request(frame)
        if not self.security.authenticated or self.mechanism is not None:
            if api_key == ApiKey.API_VERSIONS:
                return await self.server.respond(frame, self.conn)
            log.info("closing connection from %s: api key %d before SASL authentication completed",
                     self.security.peer_host, api_key)
            return CLOSE
        if self.env.now() >= self.expires_at:
            log.info("closing connection of %s: its SASL session expired (connections.max.reauth.ms)",
                     self.security.principal)
            return CLOSE
        return await self.server.respond(frame, self.conn)

    # ----------------------------------------------------------------- framed
    def _sasl_request(self, frame: bytes):
        try:
            header, request = decode_request(frame)
        except DecodeError as exc:
            log.info("closing connection: bad SASL request: %s", exc)
            return CLOSE
        if header.api_key == ApiKey.SASL_HANDSHAKE:
            return self._handshake(header, request)
        return self._authenticate(header, request)

    def _handshake(self, header, request):
        enabled = list(self.settings.mechanisms)
        if self.mechanism is not None or (self.security.authenticated and header.api_version == 0):
            return CloseAfter(encode_response_parts(header, SaslHandshakeResponse(
                error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=enabled)))
        if request.mechanism not in enabled:
            log.info("closing connection from %s: SASL mechanism %r is not enabled",
                     self.security.peer_host, request.mechanism)
            return CloseAfter(encode_response_parts(header, SaslHandshakeResponse(
                error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled)),
                self.settings.failed_delay_ms / 1000)
        self.mechanism = new_server(request.mechanism, self.settings, self.lookup, self.env.rng)
        self.raw_tokens = header.api_version == 0
        if self.security.authenticated:  # KIP-368 re-authentication: a fresh deadline
            self._start_deadline()
        return encode_response_parts(header, SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=enabled))

    def _authenticate(self, header, request):
        if self.mechanism is None:
            return CloseAfter(encode_response_parts(header, SaslAuthenticateResponse(
                error_code=ErrorCode.ILLEGAL_SASL_STATE, auth_bytes=b"",
                error_message="SaslAuthenticate without a SaslHandshake first")))
        try:
            reply = self._step(request.auth_bytes)
        except SaslAuthenticationError as exc:
            return CloseAfter(encode_response_parts(header, SaslAuthenticateResponse(
                error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=str(exc), auth_bytes=b"")),
                self.settings.failed_delay_ms / 1000)
        lifetime = self.settings.reauth_ms if self.mechanism is None else 0  # 0 until logged in
        return encode_response_parts(header, SaslAuthenticateResponse(
            error_code=ErrorCode.NONE, error_message=None, auth_bytes=reply, session_lifetime_ms=lifetime))

    # ------------------------------------------------------------- v0 tokens
    def _raw_token(self, frame: bytes):
        try:
            reply = self._step(frame)
        except SaslAuthenticationError:
            return CLOSE  # a v0 client has no error frame to read: Kafka just closes
        if self.mechanism is None:
            self.raw_tokens = False
        return [len(reply).to_bytes(4, "big"), reply]

    # ------------------------------------------------------------------ shared
    def _step(self, token: bytes) -> bytes:
        """Feed one client token; on completion the connection speaks for its user."""
        mechanism = self.mechanism
        try:
            reply = mechanism.respond(bytes(token))
        except SaslAuthenticationError as exc:
            log.info("SASL %s authentication from %s failed: %s", mechanism.mechanism,
                     self.security.peer_host, exc)
            self.mechanism = None
            raise
        except Exception:  # nothing a client sends may take the node down
            log.exception("SASL %s exchange failed unexpectedly", mechanism.mechanism)
            self.mechanism = None
            raise SaslAuthenticationError("Authentication failed") from None
        if mechanism.complete:
            principal = KafkaPrincipal("User", mechanism.username)
            if self.security.authenticated and principal != self.security.principal:
                self.mechanism = None
                raise SaslAuthenticationError("Cannot change principals during re-authentication")
            self.security.authenticate(principal)
            self.mechanism = None
            self.scope.deadline = math.inf
            self.reader.max_frame_size = self.max_frame_size
            reauth = self.settings.reauth_ms
            self.expires_at = self.env.now() + reauth / 1000 if reauth else math.inf
        return reply
