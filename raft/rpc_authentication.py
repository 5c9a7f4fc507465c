"""SASL at the start of an internal RPC connection (Raft, controller RPCs) on a SASL listener.

The Kafka protocol's SaslHandshake/SaslAuthenticate, as msgpack frames: before any other
frame the connecting node sends `rpc.SaslHandshake(mechanism)`, then `rpc.SaslAuthenticate`
tokens of the same sans-IO mechanisms the Kafka listeners use (wire.security), each answered
by the server. Anything else first, a wrong password, an unknown mechanism or a login that
does not finish within the listener's `sasl.handshake.timeout.ms` ends the connection before a
single request is read. Failures are answered (mechanisms offered / the message) so the
connecting node can log why.

The controller listener verifies PLAIN against the listener's static JAAS users; SCRAM
credentials live in the metadata log the controllers themselves replicate, so, as in Kafka's
KRaft mode, they are not offered for controller connections (the lookup finds no user).
"""
from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field

import trio

from wire.error_codes import ErrorCode
from wire.errors import DecodeError
from wire.rpc import FrameDecoder, encode_frame, rpc_message
from wire.security.principal import KafkaPrincipal
from wire.security.sasl_common import SaslAuthenticationError
from wire.security.sasl_config import SaslCredentials, SaslServerSettings, ScramLookup, new_client, new_server

__all__ = ["SaslHandshake", "SaslHandshakeResponse", "SaslAuthenticate", "SaslAuthenticateResponse",
           "authenticate_inbound", "login_outbound", "open_rpc_stream", "MAX_AUTH_FRAME"]

log = logging.getLogger(__name__)
MAX_AUTH_FRAME = 64 * 1024  # no login frame is near this; bounds what a stranger can make us buffer
_STREAM_ERRORS = (OSError, trio.BrokenResourceError, trio.ClosedResourceError)


@rpc_message("sasl.Handshake", version=1)
@dataclass(slots=True, frozen=True)
class SaslHandshake:
    mechanism: str


@rpc_message("sasl.HandshakeResponse", version=1)
@dataclass(slots=True, frozen=True)
class SaslHandshakeResponse:
    error: int
    mechanisms: list[str] = field(default_factory=list)


@rpc_message("sasl.Authenticate", version=1)
@dataclass(slots=True, frozen=True)
class SaslAuthenticate:
    auth_bytes: bytes


@rpc_message("sasl.AuthenticateResponse", version=1)
@dataclass(slots=True, frozen=True)
class SaslAuthenticateResponse:
    error: int
    message: str | None = None
    auth_bytes: bytes = b""


async def _next(stream, decoder: FrameDecoder):
    """The next frame's message; None if the peer closed. DecodeError on garbage."""
    while True:
        frame = decoder.next_frame()
        if frame is not None:
            return frame
        data = await stream.receive_some(1 << 16)
        if not data:
            return None
        decoder.feed(data)


async def authenticate_inbound(stream, settings: SaslServerSettings, scram: ScramLookup, env,
                               peer: str) -> tuple[KafkaPrincipal, FrameDecoder] | None:
    """Run the server side of the login; (principal, decoder holding any bytes read past it),
    or None when the connection must be closed (already answered where there is an answer)."""
    decoder = FrameDecoder(max_frame_size=MAX_AUTH_FRAME)
    with env.move_on_after(settings.handshake_timeout_ms / 1000):
        try:
            return await _server_exchange(stream, decoder, settings, scram, env.rng, peer)
        except DecodeError as e:
            log.warning("closing connection from %s: bad login frame: %s", peer, e)
            return None
        except _STREAM_ERRORS:
            return None
        except Exception:  # nothing a peer sends may take the listener down
            log.exception("SASL login from %s failed unexpectedly; closing the connection", peer)
            return None
    log.warning("closing connection from %s: SASL login did not complete in time", peer)
    return None


async def _server_exchange(stream, decoder, settings, scram, rng, peer):
    frame = await _next(stream, decoder)
    if frame is None:
        return None
    if not isinstance(frame.message, SaslHandshake):
        log.warning("closing connection from %s: %s before the SASL login", peer, frame.type)
        return None
    enabled = list(settings.mechanisms)
    if frame.message.mechanism not in enabled:
        await stream.send_all(encode_frame(SaslHandshakeResponse(ErrorCode.UNSUPPORTED_SASL_MECHANISM, enabled),
                                           frame.correlation_id))
        log.warning("closing connection from %s: SASL mechanism %r is not enabled", peer, frame.message.mechanism)
        return None
    mechanism = new_server(frame.message.mechanism, settings, scram, rng)
    await stream.send_all(encode_frame(SaslHandshakeResponse(ErrorCode.NONE, enabled), frame.correlation_id))
    while not mechanism.complete:
        frame = await _next(stream, decoder)
        if frame is None:
            return None
        if not isinstance(frame.message, SaslAuthenticate):
            log.warning("closing connection from %s: %s during the SASL login", peer, frame.type)
            return None
        try:
            reply = mechanism.respond(frame.message.auth_bytes)
        except SaslAuthenticationError as e:
            log.warning("SASL login from %s failed: %s", peer, e)
            await stream.send_all(encode_frame(SaslAuthenticateResponse(
                ErrorCode.SASL_AUTHENTICATION_FAILED, str(e)), frame.correlation_id))
            return None
        await stream.send_all(encode_frame(SaslAuthenticateResponse(ErrorCode.NONE, None, reply),
                                           frame.correlation_id))
    decoder.max_frame_size = FrameDecoder().max_frame_size  # logged in: ordinary frames from here
    return KafkaPrincipal("User", mechanism.username), decoder


async def login_outbound(stream, credentials: SaslCredentials, rng: random.Random) -> None:
    """The client side; raises SaslAuthenticationError (refused) or OSError-like stream errors.
    The caller bounds it in time (its connect timeout)."""
    decoder = FrameDecoder(max_frame_size=MAX_AUTH_FRAME)

    async def call(message, correlation_id: int):
        await stream.send_all(encode_frame(message, correlation_id))
        frame = await _next(stream, decoder)
        if frame is None:
            raise SaslAuthenticationError("the peer closed the connection during the SASL login")
        return frame.message

    handshake = await call(SaslHandshake(credentials.mechanism), 1)
    if not isinstance(handshake, SaslHandshakeResponse) or handshake.error:
        offered = ", ".join(getattr(handshake, "mechanisms", [])) or "none"
        raise SaslAuthenticationError(f"SASL mechanism {credentials.mechanism} is not enabled (offered: {offered})")
    mechanism = new_client(credentials, rng)
    token = mechanism.initial()
    while True:
        reply = await call(SaslAuthenticate(token), 2)
        if not isinstance(reply, SaslAuthenticateResponse):
            raise SaslAuthenticationError(f"unexpected {type(reply).__name__} during the SASL login")
        if reply.error:
            raise SaslAuthenticationError(reply.message or "SASL authentication failed")
        token = mechanism.respond(reply.auth_bytes)
        if mechanism.complete:
            return


async def open_rpc_stream(env, host: str, port: int, *, tls=None,
                          login: SaslCredentials | None = None) -> trio.abc.Stream:
    """Connect to a node's RPC listener (over TLS with `tls`, a storage.tls.TlsContext) and, on a
    SASL listener, log in first. A refused login is an OSError, as a refused connection is, so
    every caller's reconnect logic applies."""
    stream = await env.net.connect(host, port, tls=tls)
    if login is None:
        return stream
    try:
        await login_outbound(stream, login, env.rng)
    except (SaslAuthenticationError, DecodeError) as e:
        await trio.aclose_forcefully(stream)
        raise OSError(f"SASL login to {host}:{port} failed: {e}") from None
    except BaseException:
        await trio.aclose_forcefully(stream)
        raise
    return stream
