"""One connection to one broker: framing, correlation ids, in-order pipelining.

Kafka answers the requests of a connection in the order they were sent, so the
connection keeps a FIFO of pending slots; a reader task takes frames off the
stream and hands each to the slot at the head (checking its correlation id).
Many requests can be in flight at once (pipelining). A caller that gives up
(cancelled or timed out) leaves its slot behind: the answer is read and
dropped, so the stream stays in sync (but one cancelled while its send waits for
room closes the connection: part of its frame may be out). A request timeout closes the
connection, as the Java client does — the broker may be stuck and everything
queued behind the late answer would wait too. Like the Java client's poll loop,
one watchdog per connection checks the deadlines of the pending requests (a
request costs no timer of its own).

A caller either awaits the answer (`request`) or hands over a callback and goes on
(`send`): the reader task then gives the answer to the callback itself, which
saves the consumer and the producer a task, and a wake-up, per request.

On open the connection negotiates versions with ApiVersions (KIP-35): we send
our newest version; a broker that does not know it answers in v0 with
UNSUPPORTED_VERSION and its range, and we retry with that. Afterwards
`version_for(api_key)` is the highest version both sides implement.

With SASL credentials (`security.protocol=SASL_PLAINTEXT/SASL_SSL`) the connection then
logs in (SaslHandshake v1, SaslAuthenticate with the mechanism's tokens) before it is handed
out; a refused login is `AuthenticationError`, not retried. When the broker reports a session
lifetime (KIP-368), the connection counts as closed shortly before it ends, so the pool opens
a fresh, freshly authenticated one instead of having requests cut by the broker; the retired
one closes once its last answer is in.
"""
from __future__ import annotations

import itertools
from collections import deque

import trio

from raftkafka.client.security import PLAINTEXT_CLIENT, ClientSecurity
from raftkafka.client.errors import (
    AuthenticationError,
    ClientClosedError,
    KafkaConnectionError,
    KafkaTimeoutError,
    UnsupportedVersionError,
    raise_for_code,
)
from storage.env import Env
from wire.error_codes import ErrorCode
from wire.errors import DecodeError
from wire.protocol import API_VERSIONS, ApiKey, ApiVersionsRequest, FrameReader, decode_response, encode_request
from wire.protocol.message import Message
from wire.security.kafka_sasl_login import sasl_login
from wire.security.sasl_common import SaslAuthenticationError

__all__ = ["BrokerConnection", "CLIENT_SOFTWARE_NAME", "CLIENT_SOFTWARE_VERSION"]

CLIENT_SOFTWARE_NAME = "raftkafka-python"
CLIENT_SOFTWARE_VERSION = "0.1.0"
_RECEIVE_CHUNK = 256 * 1024
_SESSION_MARGIN = 0.85  # of a SASL session's lifetime, after which the connection is retired


class _Slot:
    __slots__ = ("correlation_id", "api_key", "version", "done", "on_done", "response", "error", "deadline",
                 "wait", "timed_out")

    def __init__(self, correlation_id: int, api_key: int, version: int, deadline: float, on_done):
        self.correlation_id = correlation_id
        self.api_key = api_key
        self.version = version
        # Its outcome goes to `on_done` (a `send`) or wakes the caller waiting on `done` (a `request`).
        self.on_done = on_done
        self.done = trio.Event() if on_done is None else None
        self.response: Message | None = None
        self.error: Exception | None = None
        self.deadline = deadline  # the answer is overdue after this (Env time)
        self.wait = 0.0  # how long the answer may take once the request is sent
        self.timed_out = False


class _SendTurn:
    """Whose turn it is to write a frame: a lock without trio.Lock's owner bookkeeping (about
    9k instructions a request). Taking a free turn sets a flag; waiters queue in order and
    are handed the turn."""

    __slots__ = ("_taken", "_waiting")

    def __init__(self):
        self._taken = False
        self._waiting = trio.lowlevel.ParkingLot()

    async def take(self) -> bool:
        """Take the turn, waiting if it is taken; True if it waited. No checkpoint when free."""
        if not self._taken:
            self._taken = True
            return False
        await self._waiting.park()  # a cancelled waiter leaves the queue; a woken one holds the turn
        return True

    def give_up(self) -> None:
        if self._waiting:
            self._waiting.unpark()  # handed over: still taken, by the next in line
        else:
            self._taken = False


class BrokerConnection:
    """Use `await BrokerConnection.open(env, nursery, host, port, ...)`."""

    def __init__(self, env: Env, host: str, port: int, *, node_id: int = -1, client_id: str = "raftkafka",
                 request_timeout: float = 30.0, security: ClientSecurity = PLAINTEXT_CLIENT):
        self.env = env
        self.security = security  # TLS and, on SASL_*, the login (client.security.ClientSecurity)
        self._session_end = float("inf")  # when the SASL session is retired (KIP-368)
        self.host = host
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.broker_versions: dict[int, tuple[int, int]] = {}
        self._stream: trio.abc.Stream | None = None
        self._pending: deque[_Slot] = deque()
        self._send_turn = _SendTurn()
        self._correlation = itertools.count(1)
        self._closed = False
        self._close_error: Exception | None = None
        self._watchdog_scope = trio.CancelScope()
        # KIP-219: a response's throttle_time_ms holds back what is sent next, as the broker
        # reads nothing from this connection meanwhile (its client quota was exceeded).
        self.throttled_until = float("-inf")

    def __repr__(self) -> str:
        return f"<BrokerConnection node={self.node_id} {self.host}:{self.port}{' closed' if self._closed else ''}>"

    @classmethod
    async def open(cls, env: Env, nursery: trio.Nursery, host: str, port: int, **kwargs) -> "BrokerConnection":
        conn = cls(env, host, port, **kwargs)
        try:
            with env.fail_after(conn.request_timeout):
                conn._stream = await env.net.connect(host, port, tls=conn.security.tls)
        except trio.TooSlowError:
            raise KafkaConnectionError(f"connect to {host}:{port} timed out") from None
        except OSError as exc:
            raise KafkaConnectionError(f"connect to {host}:{port} failed: {exc}") from None
        nursery.start_soon(conn._read_loop)
        nursery.start_soon(conn._watch_deadlines)
        try:
            await conn._negotiate_versions()
            if conn.security.login is not None:
                await conn._authenticate()
                if conn._session_end < float("inf"):
                    nursery.start_soon(conn._retire)
        except BaseException:
            await conn.aclose()
            raise
        return conn

    @property
    def closed(self) -> bool:
        return self._closed or self.env.now() >= self._session_end

    # ------------------------------------------------------------------ SASL

    async def _authenticate(self) -> None:
        async def call(request, version):
            return await self.request(request, version=version)

        try:
            lifetime_ms = await sasl_login(call, self.security.login, self.env.rng,
                                           authenticate_version=self.version_for(ApiKey.SASL_AUTHENTICATE))
        except SaslAuthenticationError as exc:
            raise AuthenticationError(f"{self.host}:{self.port}: {exc}") from None
        if lifetime_ms > 0:
            self._session_end = self.env.now() + lifetime_ms / 1000 * _SESSION_MARGIN

    async def _retire(self) -> None:
        """Past its session the pool no longer hands this connection out (`closed`); once the
        answers it still owes are in, close it."""
        await self.env.sleep_until(self._session_end)
        while self._pending and not self._closed:
            await self.env.sleep(min(1.0, self.request_timeout))
        await self._fail(ClientClosedError(f"SASL session to {self.host}:{self.port} ended"))

    # ------------------------------------------------------------------ versions

    async def _negotiate_versions(self) -> None:
        version = API_VERSIONS[ApiKey.API_VERSIONS][1]
        for _ in range(2):
            response = await self.request(
                ApiVersionsRequest(client_software_name=CLIENT_SOFTWARE_NAME,
                                   client_software_version=CLIENT_SOFTWARE_VERSION),
                version=version)
            ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
            if response.error_code == ErrorCode.UNSUPPORTED_VERSION and ApiKey.API_VERSIONS in ranges:
                broker_max = ranges[ApiKey.API_VERSIONS][1]
                if broker_max < version:
                    version = broker_max
                    continue
            raise_for_code(response.error_code, context=f"ApiVersions from {self.host}:{self.port}")
            self.broker_versions = ranges
            return
        raise UnsupportedVersionError(f"{self.host}:{self.port} does not agree on an ApiVersions version")

    def version_for(self, api_key: int, max_version: int | None = None) -> int:
        """The highest version of `api_key` both we and the broker implement."""
        ours = API_VERSIONS.get(api_key)
        theirs = self.broker_versions.get(api_key)
        if ours is None or theirs is None:
            raise UnsupportedVersionError(f"broker {self.node_id} does not support api {api_key}")
        hi = min(ours[1], theirs[1], max_version if max_version is not None else ours[1])
        lo = max(ours[0], theirs[0])
        if hi < lo:
            raise UnsupportedVersionError(
                f"api {ApiKey(api_key).name}: we speak {ours}, broker {self.node_id} speaks {theirs}")
        return hi

    def supports(self, api_key: int) -> bool:
        try:
            self.version_for(api_key)
            return True
        except UnsupportedVersionError:
            return False

    # ------------------------------------------------------------------ requests

    async def request(self, body: Message, *, version: int | None = None, expect_response: bool = True,
                      timeout: float | None = None, sent: trio.Event | None = None) -> Message | None:
        """Send `body` and wait for its answer (None when `expect_response` is False, as acks=0).

        `timeout` adds to the request timeout (long-poll Fetch waits longer on purpose).
        `sent` is set once the request is on the wire or has failed (the producer orders
        pipelined requests by it).
        """
        try:
            return await self._request(body, version, expect_response, timeout, sent)
        finally:
            if sent is not None:
                sent.set()

    async def send(self, body: Message, on_done, *, version: int | None = None,
                   timeout: float | None = None) -> None:
        """Send `body` and return once it is on the wire, without waiting for the answer.

        `on_done(response, error)` is called once: with the answer, or with the KafkaError
        that ended the request (connection lost, request timed out). It runs in whichever
        task learns the outcome (the reader, the watchdog, a closer): it must not block.
        If `send` itself raises (cancelled before sending, connection already closed, a
        version the broker lacks), `on_done` is never called.
        """
        await self._send(body, version, True, timeout, on_done)

    async def _request(self, body: Message, version: int | None, expect_response: bool,
                       timeout: float | None, sent: trio.Event | None) -> Message | None:
        slot = await self._send(body, version, expect_response, timeout, None)
        if sent is not None:
            sent.set()
        if not expect_response:
            return None
        await slot.done.wait()
        if slot.timed_out:
            raise self._timeout_error()
        if slot.error is not None:
            raise slot.error
        return slot.response

    async def _send(self, body: Message, version: int | None, expect_response: bool,
                    timeout: float | None, on_done) -> _Slot:
        if self._closed:
            raise self._closed_error()
        if version is None:
            version = self.version_for(body.API_KEY)
        correlation_id = next(self._correlation) & 0x7FFFFFFF
        frame = encode_request(body, version, correlation_id, self.client_id)
        # Until it is sent, the request timeout bounds the send (the watchdog sees the slot).
        slot = _Slot(correlation_id, body.API_KEY, version, self.env.now() + self.request_timeout, on_done)
        # The turn to send without a schedule point of its own when it is free (the send
        # that follows is one); a cancelled caller still stops here, before sending.
        await trio.lowlevel.checkpoint_if_cancelled()
        if self.throttled_until > self.env.now():
            await self.env.sleep_until(self.throttled_until)
        waited = await self._send_turn.take()
        try:
            if waited:  # handed the turn, perhaps cancelled meanwhile: stop here, with nothing sent
                await trio.lowlevel.checkpoint_if_cancelled()
            if self._closed:
                raise self._closed_error()
            if not expect_response:
                # No pending slot for the watchdog to see: the send gets its own deadline.
                await self._send_frame_with_deadline(frame, slot.deadline)
                return slot
            self._pending.append(slot)
            error = None
            try:
                await self._stream.send_all(frame)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                error = KafkaConnectionError(f"send to {self.host}:{self.port} failed: {exc!r}")
            except trio.Cancelled:
                # Cancelled inside send_all, so while it waited for room: part of the frame may
                # be on the wire and the stream can never be in step again. (A cancel that came
                # before stopped at the checkpoint above, in this same step, with nothing sent.)
                # No shielded send here: one cancel scope per request was a visible cost; a send
                # that waits for room is rare, and a cancelled caller does not wait for it.
                self._forget(slot)  # this caller gets Cancelled, not its `on_done`
                with trio.CancelScope(shield=True):
                    await self._fail(KafkaConnectionError(f"send to {self.host}:{self.port} cancelled midway"))
                raise
            if error is not None:
                with trio.CancelScope(shield=True):
                    await self._fail(error)  # fails our pending slot too: `on_done` has the error
                if on_done is None:
                    raise self._closed_error()
                return slot
        finally:
            self._send_turn.give_up()
        slot.wait = self.request_timeout + (timeout or 0.0)
        slot.deadline = self.env.now() + slot.wait
        return slot

    async def _send_frame_with_deadline(self, frame: bytes, deadline: float) -> None:
        """Send a frame nobody waits an answer for: shielded (a cut frame would desynchronise
        the stream), bounded by the request timeout."""
        error = None
        with self.env.move_on_at(deadline) as send_scope:
            send_scope.shield = True
            try:
                await self._stream.send_all(frame)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                error = KafkaConnectionError(f"send to {self.host}:{self.port} failed: {exc!r}")
        if send_scope.cancelled_caught:
            error = KafkaConnectionError(f"send to {self.host}:{self.port} timed out")
        if error is not None:
            with trio.CancelScope(shield=True):
                await self._fail(error)
            raise self._closed_error()

    def _forget(self, slot: _Slot) -> None:
        try:
            self._pending.remove(slot)
        except ValueError:
            pass

    def _timeout_error(self) -> KafkaTimeoutError:
        return KafkaTimeoutError(f"request to broker {self.node_id} timed out")

    def _finish(self, slot: _Slot) -> None:
        if slot.on_done is None:
            slot.done.set()
        else:
            slot.on_done(slot.response, self._timeout_error() if slot.timed_out else slot.error)

    async def _watch_deadlines(self) -> None:
        """Close the connection once a pending request's answer is overdue."""
        with self._watchdog_scope:
            while not self._closed:
                now = self.env.now()
                overdue = [slot for slot in self._pending if slot.deadline <= now]
                if overdue:
                    for slot in overdue:
                        slot.timed_out = True
                    first = overdue[0]
                    await self._fail(KafkaTimeoutError(
                        f"{ApiKey(first.api_key).name} to {self.host}:{self.port} got no answer in {first.wait:.1f}s"))
                    return
                # A request made later is due a whole request timeout after it was made, so
                # looking again within one request timeout from now never misses a deadline.
                wake = now + self.request_timeout
                for slot in self._pending:
                    wake = min(wake, slot.deadline)
                await self.env.sleep_until(wake)  # in the simulation a clock timer, no cancel scope

    # ------------------------------------------------------------------ reading

    async def _read_loop(self) -> None:
        reader = FrameReader()
        try:
            while not self._closed:
                try:
                    data = await self._stream.receive_some(_RECEIVE_CHUNK)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                    raise KafkaConnectionError(f"receive from {self.host}:{self.port} failed: {exc!r}") from None
                if not data:
                    raise KafkaConnectionError(f"{self.host}:{self.port} closed the connection")
                reader.feed(data)
                for frame in reader:
                    self._deliver(frame)
        except (KafkaConnectionError, DecodeError) as exc:
            error = exc if isinstance(exc, KafkaConnectionError) else KafkaConnectionError(
                f"malformed response from {self.host}:{self.port}: {exc}")
            await self._fail(error)

    def _deliver(self, frame: bytes) -> None:
        if not self._pending:
            raise KafkaConnectionError(f"{self.host}:{self.port} sent a response nobody asked for")
        slot = self._pending.popleft()
        try:
            correlation_id, body = decode_response(frame, slot.api_key, slot.version)
        except DecodeError:
            if slot.api_key != ApiKey.API_VERSIONS or slot.version == 0:
                raise
            # A broker that lacks our ApiVersions version answers in v0 (KIP-511).
            correlation_id, body = decode_response(frame, slot.api_key, 0)
        if correlation_id != slot.correlation_id:
            raise KafkaConnectionError(
                f"correlation id {correlation_id} from {self.host}:{self.port}, expected {slot.correlation_id}")
        throttle_ms = getattr(body, "throttle_time_ms", 0) or 0
        if throttle_ms > 0:
            self.throttled_until = max(self.throttled_until, self.env.now() + throttle_ms / 1000)
        slot.response = body
        self._finish(slot)

    # ------------------------------------------------------------------ closing

    def _closed_error(self) -> Exception:
        if isinstance(self._close_error, KafkaConnectionError):
            return KafkaConnectionError(str(self._close_error))
        return ClientClosedError(f"connection to {self.host}:{self.port} is closed")

    async def _fail(self, error: Exception) -> None:
        if self._closed:
            return
        self._closed = True
        self._watchdog_scope.cancel()
        self._close_error = error if isinstance(error, KafkaConnectionError) else KafkaConnectionError(str(error))
        pending, self._pending = self._pending, deque()
        for slot in pending:
            slot.error = KafkaConnectionError(str(error))
            self._finish(slot)
        if self._stream is not None:
            with trio.CancelScope(shield=True):
                try:
                    await self._stream.aclose()
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    pass

    async def aclose(self) -> None:
        if self._closed:
            return
        await self._fail(ClientClosedError("closed"))
        self._close_error = None
