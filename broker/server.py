"""The Kafka-protocol listener: one task per connection, answers strictly in request order.

Each connection is served by one task that reads a frame, handles it and
writes the response before it looks at the next frame: Kafka's muted channel
(its Processor stops reading a connection while one of its requests is in
flight). Pipelined requests wait in the socket and the frame buffer; the
socket is read only when the buffer holds no whole frame. As in Kafka, a
client that goes away while its request waits (a parked long-poll fetch, an
acks=all produce) is noticed when its response cannot be written, so the
handler ends by that request's own deadline.

Responses are a list of chunks; record data from segment files
(`RecordsSlice`) goes out with `File.send_to`, i.e. sendfile, when the stream
is a socket. A stream without one (TLS, the simulated network) cannot take a
file, so the slices are copied in and the response is one write, as Kafka
does without zero copy.

Resource bounds (wire.connection_limits, broker.request_reader): a new connection
over max.connections / max.connections.per.ip is closed at once; a request is read
only once its size fits the shared queued.max.request.bytes pool, and released when
answered; an idle connection (connections.max.idle.ms) or a request that does not
arrive whole in time (socket.request.read.timeout.ms) is closed.

Client quotas (broker.quotas): an answered request is recorded against its user's and
client-id's quotas; over one, its response carries throttle_time_ms and the connection is
not read for that long after the response is written (KIP-219).

A request naming more than MAX_REQUEST_ITEMS items in all (broker.request_caps) is
answered INVALID_REQUEST without being handled.

What closes a connection (and only that connection): a bad size prefix, a
request that does not parse (or holds more than MAX_DECODED_ITEMS items), an api key or version we do not implement (except
ApiVersions, answered with a v0 body and UNSUPPORTED_VERSION so the client can
retry), a failed acks=0 produce. A handler that raises gets an
UNKNOWN_SERVER_ERROR answer for that request (KAFKA_STORAGE_ERROR if a log dir
failed under it); nothing a client sends can stop the listener.
"""
from __future__ import annotations

import logging

import trio

from broker.broker_config import BrokerListener
from broker.connection_context import current_security, set_current_security
from broker.handlers import HANDLERS
from broker.handlers.api_versions import fallback_response
from broker.quotas.run_time import RunTime
from broker.records_slice import RecordsSlice
from broker.request_caps import MAX_DECODED_ITEMS, over_cap
from broker.request_errors import CLOSE, CloseAfter, CloseConnection
from broker.request_reader import RequestReader
from broker.sasl_authenticator import sasl_phase
from metadata.client_quotas import ip_connection_rate
from storage.env import peer_host
from storage.log.log_dir_failure import KafkaStorageError
from wire.connection_limits import ConnectionQuotas, RequestMemoryPool
from wire.error_codes import ErrorCode
from wire.errors import DecodeError
from wire.protocol import ApiKey, UnsupportedRequestError, decode_request, encode_response_parts
from wire.rpc import FrameTooLargeError
from wire.security.connection_security import ConnectionSecurity, is_member

__all__ = ["KafkaServer"]

log = logging.getLogger(__name__)
_CONNECTION_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


class KafkaServer:
    def __init__(self, broker):
        self.broker = broker
        limits = broker.config.connection_limits
        # Beside other client listeners, the inter-broker one is the nodes' own: exempt from the
        # broker-wide and per-ip creation rates (alone, it is every client's and is not).
        protected = {broker.config.listener_name} if len(broker.config.served_listeners()) > 1 else set()
        self.quotas = ConnectionQuotas(limits, broker.env, protected=frozenset(protected))
        self.quotas.ip_quota = lambda ip: ip_connection_rate(broker.metadata.image.client_quotas, ip)
        self.memory_pool = RequestMemoryPool(limits.queued_max_request_bytes)
        self.connections = 0  # open now
        self.closed_for_bad_input = 0  # connections closed because of what the client sent
        # replica id -> the connection its latest follower Fetch came on
        self._fetch_connections: dict[int, _Connection] = {}

    async def serve(self, listener: BrokerListener | None = None, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Serve one listener (the config's first by default) until cancelled."""
        listener = listener or self.broker.config.served_listeners()[0]
        security = listener.security

        async def handle(stream) -> None:
            try:
                accepted = security.accept(stream)
                if accepted is None:  # a certificate no mapping rule names
                    await trio.aclose_forcefully(stream)
                    return
                await self._admit(stream, accepted, security.sasl, security.name)
            except Exception:  # the last line: nothing on one connection may stop the listener
                log.exception("connection setup failed; closing the connection")
                await trio.aclose_forcefully(stream)

        await self.broker.env.net.serve(listener.host, listener.port, handle, tls=security.server_tls,
                                        task_status=task_status)

    async def _admit(self, stream, security: ConnectionSecurity, sasl=None, listener: str = "") -> None:
        """Connection limits and creation rates (wire.connection_limits): a connection over a
        limit is closed; over a creation rate it waits, or (per address) is closed after a delay."""
        refused = await self.quotas.serve(stream, security.peer_host,
                                          lambda: self.handle_connection(stream, security, sasl), listener)
        if refused is not None:
            log.info("closed a new connection from %s: %s", security.peer_host, refused)

    async def handle_connection(self, stream, security: ConnectionSecurity | None = None, sasl=None) -> None:
        """Serve one accepted connection; `sasl` (wire.security.sasl_config.SaslServerSettings)
        is its SASL listener's, which puts the SASL phase in front of the server's responder."""
        self.connections += 1
        if security is None:  # a stream handed in directly (tests): the inter-broker listener's, plaintext
            security = ConnectionSecurity.accepted(self.broker.config.listener_name, "PLAINTEXT", peer_host(stream))
        conn = _Connection()
        try:
            set_current_security(security)
            with trio.CancelScope() as scope:  # a SASL listener's login deadline lives here
                await self._serve_requests(stream, security, sasl, scope, conn)
            if scope.cancelled_caught:
                log.info("closing connection from %s: SASL authentication did not complete in time",
                         security.peer_host)
        except _CONNECTION_ERRORS:
            pass  # the peer went away: nothing to answer
        except Exception:  # none may reach the listener
            log.exception("connection handler failed; closing the connection")
        finally:
            self.connections -= 1
            self._closed(conn)
            with trio.CancelScope(shield=True):
                try:
                    await stream.aclose()
                except _CONNECTION_ERRORS:
                    pass

    def _closed(self, conn: "_Connection") -> None:
        """A follower's latest fetch connection closed: its leaders shrink the ISRs now."""
        replica = conn.replica
        if replica is None or self._fetch_connections.get(replica) is not conn:
            return
        del self._fetch_connections[replica]
        shrunk = self.broker.replicas.follower_connection_closed(replica)
        if shrunk:
            log.info("replica %d: its fetch connection closed; shrinking %d ISRs", replica, shrunk)

    async def _serve_requests(self, stream, security, sasl, scope, conn: "_Connection | None" = None) -> None:
        """Read a frame, answer it, repeat; return when the peer closes or must be dropped."""
        reader = RequestReader(stream, self.broker.env, max_frame_size=self.broker.config.max_frame_size,
                               limits=self.broker.config.connection_limits, pool=self.memory_pool)
        try:
            await self._answer_frames(stream, reader, sasl_phase(self, security, sasl, scope, reader.frames, conn),
                                      conn)
        finally:
            reader.done()

    async def _answer_frames(self, stream, reader: RequestReader, respond, conn: "_Connection | None" = None) -> None:
        """Answer each frame with `respond` (the server's own, or a SASL phase in front of it)."""
        env, metrics = self.broker.env, self.broker.metrics
        while True:
            try:
                frame = await reader.next_frame()
            except DecodeError as exc:  # the frames before it were answered
                log.info("closing connection: %s", exc)
                self.closed_for_bad_input += 1
                return
            if frame is None:
                return
            started = env.now()
            parts = await respond(frame)
            if len(frame) >= 2:
                metrics.request(int.from_bytes(frame[:2], "big", signed=True), env.now() - started)
            if parts is CLOSE:
                self.closed_for_bad_input += 1
                return
            if isinstance(parts, CloseAfter):
                await send_parts(stream, parts.parts)
                self.closed_for_bad_input += 1
                await env.sleep(parts.delay)
                return
            if parts is not None:
                await send_parts(stream, parts)
            reader.done()
            if conn is not None and conn.muted_until > env.now():  # throttled: read nothing meanwhile
                await env.sleep_until(conn.muted_until)

    async def respond(self, frame: bytes, conn: "_Connection | None" = None):
        """The response chunks for one request frame, None for no response, or CLOSE."""
        try:
            header, request = decode_request(frame, max_items=MAX_DECODED_ITEMS)
        except UnsupportedRequestError as exc:
            if exc.header.api_key == ApiKey.API_VERSIONS:
                return encode_response_parts(exc.header.correlation_id, fallback_response(self.broker), version=0)
            log.info("closing connection: %s", exc)
            return CLOSE
        except DecodeError as exc:
            log.info("closing connection: malformed request: %s", exc)
            return CLOSE
        # The one place every request passes: authorization and quota checks belong here.
        if not self._admitted(header, request):
            return CLOSE
        handler = HANDLERS.get(header.api_key)
        if handler is None:
            log.info("closing connection: api key %d is not implemented", header.api_key)
            return CLOSE
        too_many = over_cap(header, request)
        if too_many is not None:
            log.info("refusing %s v%d: %s", ApiKey(header.api_key).name, header.api_version, too_many)
            return _error_answer(handler, self.broker, header, request, ErrorCode.INVALID_REQUEST)
        handling = RunTime(self.broker.env.now)
        try:
            response = await handling.run(handler.handle(self.broker, header, request))
            if response is None:
                self._throttle(conn, header, request, None, len(frame), None, handling.seconds)
                return None
            if (conn is not None and header.api_key == ApiKey.FETCH and request.replica_id >= 0
                    and response.error_code == ErrorCode.NONE):
                conn.replica = request.replica_id
                self._fetch_connections[request.replica_id] = conn
            self.broker.metrics.answered(header.api_key, response)
            parts = encode_response_parts(header, response)
            if self._throttle(conn, header, request, response, len(frame), parts, handling.seconds):
                parts = encode_response_parts(header, response)  # now with its throttle_time_ms
            return parts
        except CloseConnection as exc:
            log.info("closing connection: %s", exc)
            return CLOSE
        except trio.Cancelled:
            raise
        except FrameTooLargeError as exc:  # forwarded to the controller, it would be refused unread
            log.info("refusing %s v%d: %s", ApiKey(header.api_key).name, header.api_version, exc)
            code = ErrorCode.INVALID_REQUEST
        except KafkaStorageError as exc:  # a log dir failed under this request (the broker halts)
            log.warning("%s v%d failed: %s", ApiKey(header.api_key).name, header.api_version, exc)
            code = ErrorCode.KAFKA_STORAGE_ERROR
        except Exception:
            log.exception("%s v%d (correlation id %d) failed", ApiKey(header.api_key).name, header.api_version,
                          header.correlation_id)
            code = ErrorCode.UNKNOWN_SERVER_ERROR
        return _error_answer(handler, self.broker, header, request, code)

    def _throttle(self, conn, header, request, response, request_bytes, parts, handled_s: float) -> bool:
        """Client quotas (broker.quotas): record the request; when its entity is over a quota,
        put the throttle time in the response and mute the connection for it (KIP-219).
        True when the response changed."""
        env = self.broker.env
        throttle_ms = self.broker.client_quotas.throttle_ms(
            header, request, response, request_bytes, 0 if parts is None else sum(map(len, parts)), handled_s)
        if throttle_ms <= 0:
            return False
        if conn is not None:
            conn.muted_until = max(conn.muted_until, env.now() + throttle_ms / 1000)
        if response is None or "throttle_time_ms" not in type(response).__slots__:
            return False
        response.throttle_time_ms = max(response.throttle_time_ms or 0, throttle_ms)
        return True

    def _admitted(self, header, request) -> bool:
        """Nothing but ApiVersions (and the SASL exchange, which answers those itself) before a
        SASL listener's login; and a follower's requests (replica_id >= 0: they read past the
        high watermark and move the ISR) only from a cluster member (Kafka's CLUSTER_ACTION)."""
        security = current_security()
        if security is not None and not security.authenticated and header.api_key != ApiKey.API_VERSIONS:
            log.info("closing connection from %s: %s before SASL authentication", security.peer_host,
                     ApiKey(header.api_key).name)
            return False
        if header.api_key not in _REPLICA_APIS or getattr(request, "replica_id", -1) < 0:
            return True
        if security is None or is_member(security, self.broker.config.super_users):
            return True
        log.warning("closing connection from %s (%s): %s as replica %d, not a cluster member",
                    security.peer_host, security.principal, ApiKey(header.api_key).name, request.replica_id)
        return False


_REPLICA_APIS = frozenset({ApiKey.FETCH, ApiKey.LIST_OFFSETS})


def _error_answer(handler, broker, header, request, code: int):
    """The answer giving every item of the request `code`, or CLOSE."""
    try:
        response = handler.error(broker, header, request, code)
        broker.metrics.answered(header.api_key, response)
        return encode_response_parts(header, response)
    except CloseConnection:
        return CLOSE
    except Exception:
        log.exception("cannot even build an error response; closing the connection")
        return CLOSE


async def send_parts(stream, parts: list) -> None:
    """Write a response: file slices zero-copy between coalesced byte chunks on a socket,
    the whole frame as one write on a stream that cannot take a file descriptor."""
    if getattr(stream, "socket", None) is None:
        await stream.send_all(await _gather(parts))
        return
    pending: list = []
    for part in parts:
        if isinstance(part, RecordsSlice):
            if pending:
                await stream.send_all(b"".join(pending))
                pending = []
            _check_complete(part, await part.send_to(stream))
        else:
            pending.append(part)
    if pending:
        await stream.send_all(b"".join(pending))


class _Collector:
    """A send-only stream that keeps what it is sent: `File.send_to` into it copies the
    slice the way it would leave the file (a simulated disk's in-transit faults included)."""

    __slots__ = ("chunks",)

    def __init__(self, chunks: list):
        self.chunks = chunks

    async def send_all(self, data) -> None:
        self.chunks.append(data)


async def _gather(parts: list) -> bytes:
    chunks: list = []
    collector = _Collector(chunks)
    for part in parts:
        if isinstance(part, RecordsSlice):
            _check_complete(part, await part.send_to(collector))
        else:
            chunks.append(part)
    return b"".join(chunks)


def _check_complete(part: RecordsSlice, sent: int) -> None:
    if sent != len(part):
        # The segment shrank under us (truncation): the frame can no longer be completed.
        raise trio.BrokenResourceError(f"sent {sent} of {len(part)} record bytes")


class _Connection:
    """One client connection; `replica` is the follower whose Fetches came on it, if any."""
    __slots__ = ("replica", "muted_until")

    def __init__(self):
        self.replica: int | None = None
        self.muted_until = 0.0  # Env time: not read before then (a quota throttle, KIP-219)
