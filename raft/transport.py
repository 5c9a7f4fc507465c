"""Raft over TCP: the controller listener and one outbound link per peer.

The core speaks in messages, not calls: it emits `(dst, message)` pairs, some
requests, some responses to requests it received earlier (possibly much later:
a parked long-poll Fetch). The transport routes them like Kafka's network
layer does:

- requests to a peer go over *our* outbound connection to it (one per peer,
  reconnected with jittered exponential backoff), and its responses come back on
  that same connection, matched by correlation id;
- responses go back on the inbound connection the request arrived on, with the
  request's correlation id (per sender and response type, oldest first).

Raft tolerates loss, so nothing here retries: a message for a peer that is down
is dropped when its link reconnects, and the core resends on its own timers.

Client RPCs (DescribeQuorum, the diagnostic append) are answered on the
connection they came on by an async `client_handler`, at most
MAX_INFLIGHT_PER_CONNECTION at a time (then the connection is not read until one
is answered). The listener's bounds (wire.connection_limits: max.connections,
max.connections.per.ip, connections.max.idle.ms, socket.request.read.timeout.ms)
apply as on the Kafka listener. Bad input never kills the node: a foreign cluster id gets
ErrorCode.INCONSISTENT_CLUSTER_ID, an undecodable frame gets an `ErrorResponse` (and the
connection is closed when framing is lost). An inbound connection speaks for one
peer: the first node id a peer request on it names; a request naming another id
is refused (until connections are authenticated, the id still comes from the body).
"""
from __future__ import annotations

import collections
import functools
import logging
from typing import Awaitable, Callable

import trio

from raft import codec
from raft.rpc_authentication import authenticate_inbound, open_rpc_stream
from storage.env import Env
from storage.listener_security import ListenerSecurity
from wire.connection_limits import ConnectionLimits, ConnectionQuotas
from wire.error_codes import ErrorCode
from wire.errors import DecodeError
from wire.rpc import DEFAULT_MAX_FRAME_SIZE, FrameDecoder, decode_payload, encode_frame, unpack_payload
from wire.security.sasl_config import SaslCredentials

__all__ = ["Transport", "LINK_QUEUE", "BACKOFF_MIN", "BACKOFF_MAX"]

log = logging.getLogger("raftkafka.raft.transport")

LINK_QUEUE = 4096  # messages waiting for a peer link before new ones are dropped
MAX_INFLIGHT_PER_CONNECTION = 1000  # client RPCs being answered for one connection (a broker forwards all its clients' admin requests and heartbeats on one)
BACKOFF_MIN = 0.05
BACKOFF_MAX = 1.0
CONNECT_TIMEOUT = 1.0

# handler(request, connection): `connection` identifies the connection it came on (its
# `_Inbound`, hashable by identity) so the controller can tell when it closes.
ClientHandler = Callable[[object, object], Awaitable[object]]
# Controller connections log in with PLAIN: SCRAM users live in the metadata log (as in KRaft).
_NO_SCRAM = lambda mechanism, user: None  # noqa: E731
# What a broken or closed connection raises; each task catches these itself, because
# trio would wrap them in an ExceptionGroup once they leave a nursery.
_STREAM_ERRORS = (OSError, trio.BrokenResourceError, trio.ClosedResourceError)


class _Inbound:
    """One accepted connection: a reply route to whoever talks on it."""

    def __init__(self, stream: trio.abc.Stream, peer: str):
        self.stream = stream
        self.peer = peer
        self.out_send, self.out_recv = trio.open_memory_channel[bytes](LINK_QUEUE)
        self.pending: dict[tuple[int, type], collections.deque[int]] = collections.defaultdict(collections.deque)
        self.closed = False
        self.sender: int | None = None  # the node id this connection speaks for (its first claim)
        self.inflight = trio.Semaphore(MAX_INFLIGHT_PER_CONNECTION)

    def queue(self, data: bytes) -> None:
        try:
            self.out_send.send_nowait(data)
        except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
            log.warning("reply queue to %s full or closed; dropping a response", self.peer)


class _PeerLink:
    """Our outbound connection to one voter: requests out, their responses in."""

    def __init__(self, transport: "Transport", node_id: int, host: str, port: int):
        self.t = transport
        self.node_id = node_id
        self.host, self.port = host, port
        self.send_ch, self.recv_ch = trio.open_memory_channel[object](LINK_QUEUE)
        self.connected = False
        self._next_corr = 0
        self._pending: dict[int, type] = {}

    def enqueue(self, msg) -> None:
        try:
            self.send_ch.send_nowait(msg)
        except trio.WouldBlock:
            log.debug("link to %d full; dropping %s", self.node_id, type(msg).__name__)

    async def run(self) -> None:
        backoff = BACKOFF_MIN
        while True:
            try:
                with self.t.env.fail_after(CONNECT_TIMEOUT):
                    stream = await open_rpc_stream(self.t.env, self.host, self.port, tls=self.t.security.client_tls,
                                                   login=self.t.login)
            except (OSError, trio.TooSlowError) as e:
                if isinstance(e, ConnectionRefusedError) and self.t.on_connect_refused is not None:
                    self.t.on_connect_refused(self.node_id)
                self._drop_queued()
                # Jitter keeps a restarted cluster's nodes from reconnecting in lockstep.
                await self.t.env.sleep(backoff * (0.5 + self.t.env.rng.random()))
                backoff = min(backoff * 2, BACKOFF_MAX)
                log.debug("connect to node %d at %s:%d failed: %s", self.node_id, self.host, self.port, e)
                continue
            backoff = BACKOFF_MIN
            self.connected = True
            log.info("connected to node %d at %s:%d", self.node_id, self.host, self.port)
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._read, stream, nursery.cancel_scope)
                    nursery.start_soon(self._write, stream, nursery.cancel_scope)
            finally:
                self.connected = False
                self._pending.clear()
                with trio.CancelScope(shield=True):
                    await trio.aclose_forcefully(stream)
            if self.t.on_link_lost is not None:
                self.t.on_link_lost(self.node_id)
            self._drop_queued()
            await self.t.env.sleep(BACKOFF_MIN)

    def _drop_queued(self) -> None:
        # Stale Raft traffic is worse than none: the core resends what still matters.
        while True:
            try:
                self.recv_ch.receive_nowait()
            except trio.WouldBlock:
                return

    async def _write(self, stream, scope: trio.CancelScope) -> None:
        try:
            await self._write_frames(stream)
        except _STREAM_ERRORS as e:
            log.info("link to node %d lost: %s", self.node_id, e)
        finally:
            scope.cancel()

    async def _write_frames(self, stream) -> None:
        while True:
            msg = await self.recv_ch.receive()
            batch = [msg]
            while len(batch) < 64:
                try:
                    batch.append(self.recv_ch.receive_nowait())
                except trio.WouldBlock:
                    break
            frames = []
            for msg in batch:
                self._next_corr += 1
                self._pending[self._next_corr] = type(msg)
                frames.append(encode_frame(msg, self._next_corr))
            await stream.send_all(b"".join(frames))

    async def _read(self, stream, scope: trio.CancelScope) -> None:
        decoder = FrameDecoder(max_frame_size=DEFAULT_MAX_FRAME_SIZE)
        try:
            while True:
                data = await stream.receive_some(1 << 16)
                if not data:
                    log.info("node %d closed the connection", self.node_id)
                    return
                decoder.feed(data)
                for frame in decoder:
                    self._deliver(frame)
        except DecodeError as e:
            log.warning("bad frame from node %d: %s; reconnecting", self.node_id, e)
        except _STREAM_ERRORS as e:
            log.info("link to node %d lost: %s", self.node_id, e)
        finally:
            scope.cancel()

    def _deliver(self, frame) -> None:
        sent_type = self._pending.pop(frame.correlation_id, None)
        msg = frame.message
        if isinstance(msg, codec.ErrorResponse):
            log.warning("node %d rejected a %s: %s", self.node_id, getattr(sent_type, "__name__", "?"), msg.message)
            return
        if sent_type is None or codec.PEER_RESPONSE_TYPE.get(sent_type) is not type(msg):
            log.warning("unexpected %s from node %d (correlation %d)", frame.type, self.node_id, frame.correlation_id)
            return
        self.t.deliver(self.node_id, msg)


class Transport:
    """Routes the core's messages; hands what arrives to `inbox` as (src, message)."""

    def __init__(
        self,
        env: Env,
        *,
        node_id: int,
        cluster_id: str,
        peers: dict[int, tuple[str, int]],
        inbox: trio.MemorySendChannel,
        client_handler: ClientHandler | None = None,
        status: Callable[[], tuple[int, int | None]] = lambda: (0, None),
        limits: ConnectionLimits = ConnectionLimits(),
        security: ListenerSecurity | None = None,
        on_client_closed: Callable[[object], None] | None = None,
        login: SaslCredentials | None = None,
        on_link_lost: Callable[[int], None] | None = None,
        on_connect_refused: Callable[[int], None] | None = None,
    ):
        self.env = env
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.inbox = inbox
        self.client_handler = client_handler
        self.status = status  # (epoch, leader_id) for error answers
        self.on_client_closed = on_client_closed  # called with the connection once it closed
        self.on_link_lost = on_link_lost  # called with the peer's id when our link to it broke
        self.on_connect_refused = on_connect_refused  # ... when a connection to it was refused
        self.links = {
            nid: _PeerLink(self, nid, host, port) for nid, (host, port) in sorted(peers.items()) if nid != node_id
        }
        self.routes: dict[int, _Inbound] = {}  # reply route per requesting node id
        self.limits = limits
        self.bad_frames = 0
        # The controller listener's security: TLS and SASL on both sides, and who may speak on it.
        self.security = security or ListenerSecurity("CONTROLLER")
        # The controller listener is the nodes' own: only a creation rate set for it by name applies.
        self.quotas = ConnectionQuotas(limits, env, protected=frozenset({self.security.name}))
        self.login = login  # what this node logs in with to its peers' SASL controller listener
        self.refused = 0  # connections closed before a frame: not a cluster member
        self._nursery: trio.Nursery | None = None  # runs the peer links once `run` started

    # ----------------------------------------------------------------- running
    async def run(self, host: str | None, port: int | None, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Serve the controller listener (if host given) and keep the peer links up."""
        async with trio.open_nursery() as nursery:
            bound = None
            if host is not None:
                bound = await nursery.start(functools.partial(
                    self.env.net.serve, host, port, self._serve_connection, tls=self.security.server_tls))
            for tls in self.security.tls_contexts():
                nursery.start_soon(tls.watch, self.env)
            for link in self.links.values():
                nursery.start_soon(link.run)
            self._nursery = nursery
            task_status.started(bound)

    def set_peer(self, node_id: int, host: str, port: int) -> None:
        """A voter's controller endpoint, as the voter set in the log names it (KIP-853)."""
        if node_id == self.node_id:
            return
        link = self.links.get(node_id)
        if link is not None:
            link.host, link.port = host, port  # used from its next connect
            return
        link = self.links[node_id] = _PeerLink(self, node_id, host, port)
        if self._nursery is not None:
            self._nursery.start_soon(link.run)

    # ------------------------------------------------------------------- sends
    def send(self, dst: int, msg) -> None:
        if codec.is_response(msg):
            route = self.routes.get(dst)
            if route is None or route.closed:
                log.debug("no connection from node %d to answer on; dropping %s", dst, type(msg).__name__)
                return
            pending = route.pending.get((dst, type(msg)))
            corr = pending.popleft() if pending else 0
            route.queue(encode_frame(msg, corr))
            return
        link = self.links.get(dst)
        if link is None:
            log.debug("no address for node %d; dropping %s", dst, type(msg).__name__)
            return
        link.enqueue(msg)

    def deliver(self, src: int, msg) -> None:
        try:
            self.inbox.send_nowait((src, msg))
        except trio.WouldBlock:
            log.warning("raft inbox full; dropping %s from %d", type(msg).__name__, src)

    # ----------------------------------------------------------------- inbound
    async def admit(self, stream: trio.abc.Stream) -> FrameDecoder | None:
        """The gate before any frame is read: the listener's TLS principal, then on a SASL
        listener the login, then the member check; the decoder to go on with (it may hold frames
        sent right after the login), or None: close (no vote, no fetch, no metadata append,
        no registration, heartbeat or fencing from a stranger)."""
        peer = _peer_name(stream)
        decoder = FrameDecoder(max_frame_size=DEFAULT_MAX_FRAME_SIZE)
        security = self.security.accept(stream)
        if security is not None and self.security.sasl is not None:
            outcome = await authenticate_inbound(stream, self.security.sasl, _NO_SCRAM, self.env, peer)
            if outcome is None:  # the login failed (logged there)
                self.refused += 1
                return None
            principal, decoder = outcome
            security.authenticate(principal)
        if security is not None and self.security.admits_member(security):
            return decoder
        self.refused += 1
        who = "a certificate no mapping rule names" if security is None else str(security.principal)
        log.warning("closing connection from %s: %s is not a cluster member", peer, who)
        return None

    async def _serve_connection(self, stream: trio.abc.Stream) -> None:
        peer = _peer_name(stream)
        refused = await self.quotas.serve(stream, peer.rpartition(":")[0] or peer,
                                          lambda: self._admit_and_serve(stream, peer), self.security.name)
        if refused is not None:
            log.info("closed a new connection from %s: %s", peer, refused)

    async def _admit_and_serve(self, stream: trio.abc.Stream, peer: str) -> None:
        decoder = await self.admit(stream)
        if decoder is None:
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(stream)
            return
        await self._serve_admitted(stream, peer, decoder)

    async def _serve_admitted(self, stream: trio.abc.Stream, peer: str, decoder: FrameDecoder) -> None:
        conn = _Inbound(stream, peer)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._reply_writer, conn, nursery.cancel_scope)
                try:
                    await self._read_requests(conn, nursery, decoder)
                except _STREAM_ERRORS as e:
                    log.info("connection from %s lost: %s", conn.peer, e)
                    nursery.cancel_scope.cancel()
                # Let queued replies drain, then the writer ends.
                conn.out_send.close()
        finally:
            conn.closed = True
            if self.on_client_closed is not None:
                self.on_client_closed(conn)
            for nid in [n for n, r in self.routes.items() if r is conn]:
                del self.routes[nid]
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(stream)

    async def _reply_writer(self, conn: _Inbound, scope: trio.CancelScope) -> None:
        try:
            async for data in conn.out_recv:
                batch = [data]
                while True:
                    try:
                        batch.append(conn.out_recv.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                await conn.stream.send_all(b"".join(batch))
        except _STREAM_ERRORS as e:
            log.info("connection from %s lost: %s", conn.peer, e)
        finally:
            scope.cancel()

    async def _read_requests(self, conn: _Inbound, nursery, decoder: FrameDecoder) -> None:
        partial_since: float | None = None  # when the frame being read began to arrive
        while True:
            while True:  # every whole frame buffered (the first may have come with the login)
                try:
                    payload = decoder.next_payload()
                except DecodeError as e:
                    # Framing is lost: answer once, then hang up.
                    self._reject(conn, 0, f"{e}; closing the connection")
                    return
                if payload is None:
                    break
                try:
                    frame = decode_payload(payload)
                except DecodeError as e:
                    self._reject(conn, _correlation_of(payload), str(e))
                    continue
                await self._on_request(conn, frame, nursery)
            if decoder.buffered:
                partial_since = self.env.now() if partial_since is None else partial_since
                deadline = partial_since + self.limits.request_read_timeout_s
            else:
                partial_since = None
                deadline = self.env.now() + self.limits.idle_timeout_s
            data = None
            with self.env.move_on_at(deadline):
                data = await conn.stream.receive_some(1 << 16)
            if data is None:
                log.info("closing connection from %s: %s", conn.peer,
                         "a frame did not arrive whole in time" if decoder.buffered else "idle")
                return
            if not data:
                return
            decoder.feed(data)

    def _reject(self, conn: _Inbound, corr: int, why: str) -> None:
        self.bad_frames += 1
        log.warning("malformed frame from %s: %s", conn.peer, why)
        conn.queue(encode_frame(codec.ErrorResponse(ErrorCode.INVALID_REQUEST, why), corr))

    async def _on_request(self, conn: _Inbound, frame, nursery) -> None:
        msg = frame.message
        if codec.is_response(msg):
            log.warning("unsolicited %s from %s ignored", frame.type, conn.peer)
            return
        if codec.foreign_cluster(msg, self.cluster_id):
            epoch, leader = self.status()
            log.warning("%s from %s names cluster %r, not ours (%s)", frame.type, conn.peer, msg.cluster_id, self.cluster_id)
            reply = codec.error_response_for(
                msg, ErrorCode.INCONSISTENT_CLUSTER_ID, cluster_id=self.cluster_id, epoch=epoch, leader_id=leader
            )
            conn.queue(encode_frame(reply, frame.correlation_id))
            return
        src = codec.sender_of(msg)
        if not self._speaks_for(conn, frame, src if src is not None else _broker_id_of(msg)):
            return
        response_type = codec.PEER_RESPONSE_TYPE.get(type(msg))
        if response_type is not None and src is not None:
            self.routes[src] = conn
            conn.pending[(src, response_type)].append(frame.correlation_id)
            self.deliver(src, msg)
            return
        if self.client_handler is None:
            self._reject(conn, frame.correlation_id, f"{frame.type} is not served here")
            return
        await conn.inflight.acquire()  # backpressure: the socket is not read meanwhile
        nursery.start_soon(self._answer_client, conn, frame)

    def _speaks_for(self, conn: _Inbound, frame, node_id: int | None) -> bool:
        """One connection speaks for one node (the first it names): a member cannot pose as
        another member mid-stream, in Raft or in a broker's controller requests."""
        if node_id is None:
            return True
        if conn.sender is not None and node_id != conn.sender:
            self._reject(conn, frame.correlation_id, f"{frame.type} claims node {node_id} on node "
                                                     f"{conn.sender}'s connection")
            return False
        conn.sender = node_id
        return True

    async def _answer_client(self, conn: _Inbound, frame) -> None:
        try:
            reply = await self.client_handler(frame.message, conn)
        except Exception as e:  # a bug in a handler must not take the node down
            log.exception("handling %s from %s failed", frame.type, conn.peer)
            reply = codec.ErrorResponse(ErrorCode.INVALID_REQUEST, f"internal error: {type(e).__name__}")
        finally:
            conn.inflight.release()
        if reply is not None:
            conn.queue(encode_frame(reply, frame.correlation_id))


def _correlation_of(payload: bytes) -> int:
    """Best effort: the correlation id of a frame whose body did not decode."""
    try:
        value = unpack_payload(payload)
    except DecodeError:  # any garbage: there is no id to echo
        return 0
    if type(value) is list and len(value) >= 3 and type(value[2]) is int:
        return value[2]
    return 0


def _broker_id_of(msg) -> int | None:
    """The broker a controller request speaks for (registration, heartbeat, AlterPartition...)."""
    value = getattr(msg, "broker_id", None)
    return value if type(value) is int else None


def _peer_name(stream) -> str:
    sock = getattr(getattr(stream, "transport_stream", stream), "socket", None)
    try:
        host, port = sock.getpeername()[:2]
        return f"{host}:{port}"
    except Exception:  # in-memory streams have no socket
        return "peer"
