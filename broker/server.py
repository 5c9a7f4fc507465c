"""The Kafka-protocol listener: one task pair per connection, answers strictly in request order.

Per connection a reader task splits frames off the socket and queues them (so
the socket is drained while a long-poll fetch is parked), and the processor
handles them one at a time, like Kafka's muted channel: decode → handler →
response frame. Responses are written as a list of chunks; record data from
segment files (`RecordsSlice`) goes out with `File.send_to`, i.e. sendfile.

What closes a connection (and only that connection): a bad size prefix, a
request that does not parse, an api key or version we do not implement (except
ApiVersions, answered with a v0 body and UNSUPPORTED_VERSION so the client can
retry), a failed acks=0 produce. A handler that raises gets an
UNKNOWN_SERVER_ERROR answer for that request (KAFKA_STORAGE_ERROR if a log dir
failed under it); nothing a client sends can stop the listener.
"""
from __future__ import annotations

import logging

import trio

from broker.handlers import HANDLERS
from broker.handlers.api_versions import fallback_response
from broker.records_slice import RecordsSlice
from broker.request_errors import CloseConnection
from storage.log.log_dir_failure import KafkaStorageError
from wire.error_codes import ErrorCode
from wire.errors import DecodeError
from wire.protocol import (
    ApiKey, FrameReader, UnsupportedRequestError, decode_request, encode_response_parts,
)

__all__ = ["KafkaServer"]

log = logging.getLogger(__name__)
RECEIVE_CHUNK = 256 * 1024
_CONNECTION_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


class KafkaServer:
    def __init__(self, broker):
        self.broker = broker
        self.connections = 0  # open now
        self.closed_for_bad_input = 0  # connections closed because of what the client sent

    async def serve(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        cfg = self.broker.config
        await self.broker.env.net.serve(cfg.host, cfg.port, self.handle_connection, task_status=task_status)

    async def handle_connection(self, stream) -> None:
        self.connections += 1
        try:
            send, receive = trio.open_memory_channel(self.broker.config.max_pipelined_requests)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._read_frames, stream, send)
                try:
                    await self._process(stream, receive)
                finally:
                    nursery.cancel_scope.cancel()
        # Errors leave the nursery as exception groups; none may reach the listener.
        except* _CONNECTION_ERRORS:
            pass  # the peer went away: nothing to answer
        except* Exception:
            log.exception("connection handler failed; closing the connection")
        finally:
            self.connections -= 1
            with trio.CancelScope(shield=True):
                try:
                    await stream.aclose()
                except _CONNECTION_ERRORS:
                    pass

    async def _read_frames(self, stream, send) -> None:
        reader = FrameReader(self.broker.config.max_frame_size)
        async with send:
            while True:
                try:
                    data = await stream.receive_some(RECEIVE_CHUNK)
                except _CONNECTION_ERRORS:
                    return
                if not data:
                    return
                reader.feed(data)
                while True:
                    try:
                        frame = reader.next_frame()
                    except DecodeError as exc:
                        log.info("closing connection: %s", exc)
                        self.closed_for_bad_input += 1
                        await send.send(None)  # after the frames before it, which are still answered
                        return
                    if frame is None:
                        break
                    try:
                        send.send_nowait(frame)  # the common case: no need to give up the CPU here
                    except trio.WouldBlock:
                        await send.send(frame)  # the queue is full: wait for the processor

    async def _process(self, stream, receive) -> None:
        async for frame in receive:
            if frame is None:
                return
            started = self.broker.env.now()
            parts = await self.respond(frame)
            if len(frame) >= 2:
                self.broker.metrics.request(int.from_bytes(frame[:2], "big", signed=True),
                                            self.broker.env.now() - started)
            if parts is None:
                continue
            if parts is CLOSE:
                self.closed_for_bad_input += 1
                return
            await send_parts(stream, parts)

    async def respond(self, frame: bytes):
        """The response chunks for one request frame, None for no response, or CLOSE."""
        try:
            header, request = decode_request(frame)
        except UnsupportedRequestError as exc:
            if exc.header.api_key == ApiKey.API_VERSIONS:
                return encode_response_parts(exc.header.correlation_id, fallback_response(self.broker), version=0)
            log.info("closing connection: %s", exc)
            return CLOSE
        except DecodeError as exc:
            log.info("closing connection: malformed request: %s", exc)
            return CLOSE
        # The one place every request passes: authorization and quota checks belong here.
        handler = HANDLERS.get(header.api_key)
        if handler is None:
            log.info("closing connection: api key %d is not implemented", header.api_key)
            return CLOSE
        try:
            response = await handler.handle(self.broker, header, request)
            if response is None:
                return None
            return encode_response_parts(header, response)
        except CloseConnection as exc:
            log.info("closing connection: %s", exc)
            return CLOSE
        except trio.Cancelled:
            raise
        except KafkaStorageError as exc:  # a log dir failed under this request (the broker halts)
            log.warning("%s v%d failed: %s", ApiKey(header.api_key).name, header.api_version, exc)
            code = ErrorCode.KAFKA_STORAGE_ERROR
        except Exception:
            log.exception("%s v%d (correlation id %d) failed", ApiKey(header.api_key).name, header.api_version,
                          header.correlation_id)
            code = ErrorCode.UNKNOWN_SERVER_ERROR
        try:
            return encode_response_parts(header, handler.error(self.broker, header, request, code))
        except CloseConnection:
            return CLOSE
        except Exception:
            log.exception("cannot even build an error response; closing the connection")
            return CLOSE


CLOSE = object()


async def send_parts(stream, parts: list) -> None:
    """Write a response: byte chunks coalesced into one send, file slices sent zero-copy."""
    pending: list = []
    for part in parts:
        if isinstance(part, RecordsSlice):
            if pending:
                await stream.send_all(b"".join(pending))
                pending = []
            sent = await part.send_to(stream)
            if sent != len(part):
                # The segment shrank under us (truncation): the frame can no longer be completed.
                raise trio.BrokenResourceError(f"sent {sent} of {len(part)} record bytes")
        else:
            pending.append(part)
    if pending:
        await stream.send_all(b"".join(pending))
