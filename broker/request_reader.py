"""Reading a Kafka client's requests under the listener's bounds (wire.connection_limits).

`RequestReader.next_frame()` returns the connection's next whole request frame, or None
when the connection must end: the peer closed it, it sat idle past
`connections.max.idle.ms`, or a request whose size prefix arrived did not arrive whole
within `socket.request.read.timeout.ms` (a client trickling bytes holds no memory and no
task for longer than that). Before a request's body is read its size is reserved in the
shared `queued.max.request.bytes` pool; `done()` releases it once the request is answered.
A bad size prefix raises DecodeError (framing is lost: the caller closes the connection).
"""
from __future__ import annotations

import logging

from wire.connection_limits import ConnectionLimits, RequestMemoryPool
from wire.protocol import FrameReader

__all__ = ["RequestReader"]

log = logging.getLogger("broker.server")
RECEIVE_CHUNK = 256 * 1024


class RequestReader:
    def __init__(self, stream, env, *, max_frame_size: int, limits: ConnectionLimits, pool: RequestMemoryPool):
        self.stream = stream
        self.env = env
        self.limits = limits
        self.pool = pool
        self.frames = FrameReader(max_frame_size)
        self._reserved = 0
        self._request_deadline: float | None = None  # set once a request's size prefix is in

    async def next_frame(self) -> bytes | None:
        while True:
            size = self.frames.pending_size()
            if size is not None and not self._reserved:
                self._reserved = await self.pool.reserve(4 + size)
            frame = self.frames.next_frame()
            if frame is not None:
                return frame
            if self._reserved and self._request_deadline is None:  # a request is on its way in
                self._request_deadline = self.env.now() + self.limits.request_read_timeout_s
            if not await self._receive():
                return None

    def done(self) -> None:
        """The last frame is answered: its bytes go back to the pool."""
        self.pool.release(self._reserved)
        self._reserved = 0
        self._request_deadline = None

    async def _receive(self) -> bool:
        if self.frames.buffered:
            deadline = self._request_deadline or self.env.now() + self.limits.request_read_timeout_s
            why = "a request did not arrive whole within socket.request.read.timeout.ms"
        else:
            deadline = self.env.now() + self.limits.idle_timeout_s
            why = "idle for connections.max.idle.ms"
        data = None
        with self.env.move_on_at(deadline):
            data = await self.stream.receive_some(RECEIVE_CHUNK)
        if data is None:
            log.info("closing connection: %s", why)
            return False
        if not data:
            return False
        self.frames.feed(data)
        return True
