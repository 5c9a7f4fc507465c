"""A client of the controller listener: request → response, matched by correlation id.

Used by the CLI (`quorum describe`), the benchmark, the multi-process tests and
by a follower forwarding a diagnostic append to its leader. Many calls may be in
flight at once on one connection (the benchmark pipelines appends).

    async with open_client(env, host, port) as client:
        reply = await client.call(DescribeQuorumRequest(cluster_id), timeout=5)
"""
from __future__ import annotations

import contextlib
from typing import AsyncIterator, Callable

import trio

from raft import codec  # noqa: F401  (registers the message types)
from raft.rpc_authentication import open_rpc_stream
from storage.env import Env
from wire.errors import DecodeError
from wire.rpc import DEFAULT_MAX_FRAME_SIZE, FrameDecoder, FrameTooLargeError, encode_frame

__all__ = ["RpcClient", "open_client", "ConnectionLost"]


class ConnectionLost(ConnectionError):
    """The connection closed (or sent garbage) before the answer came."""


class RpcClient:
    def __init__(self, env: Env, stream: trio.abc.Stream, on_lost: Callable[[], None] | None = None):
        self.env = env
        self.stream = stream
        self.on_lost = on_lost  # called once when the connection breaks
        self._next_corr = 0
        self._waiting: dict[int, list] = {}  # corr -> [event, reply]
        self._send_lock = trio.Lock()
        self._lost: Exception | None = None

    async def call(self, request, *, timeout: float = 10.0):
        """Send `request` and wait for its answer; TooSlowError on timeout, ConnectionLost if cut,
        FrameTooLargeError (nothing sent) for a request no peer reads."""
        if self._lost is not None:
            raise ConnectionLost(str(self._lost))
        self._next_corr += 1
        corr = self._next_corr
        frame = encode_frame(request, corr)
        if len(frame) - 4 > DEFAULT_MAX_FRAME_SIZE:  # the peer would close the connection on it
            raise FrameTooLargeError(f"a {type(request).__name__} of {len(frame) - 4} bytes is over the "
                                     f"{DEFAULT_MAX_FRAME_SIZE}-byte frame limit of the controller listener")
        slot = self._waiting[corr] = [trio.Event(), None]
        try:
            with self.env.fail_after(timeout):
                async with self._send_lock:
                    await self.stream.send_all(frame)
                await slot[0].wait()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as e:
            raise ConnectionLost(str(e)) from None
        finally:
            self._waiting.pop(corr, None)
        if isinstance(slot[1], Exception):
            raise slot[1]
        return slot[1]

    @property
    def lost(self) -> bool:
        return self._lost is not None

    async def run(self) -> None:
        """Read answers until the connection breaks, then close it. Cancelled (its node
        stopping), it closes the connection too: the peer sees it closed, and so must `lost`
        (a broker's session lease ends with its controller connection)."""
        try:
            await self._read()
        finally:
            self._break(ConnectionLost("connection closed by this side"))
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(self.stream)

    async def _read(self) -> None:
        decoder = FrameDecoder()
        try:
            while True:
                data = await self.stream.receive_some(1 << 16)
                if not data:
                    raise ConnectionLost("connection closed by the server")
                decoder.feed(data)
                for frame in decoder:
                    slot = self._waiting.get(frame.correlation_id)
                    if slot is not None:
                        slot[1] = frame.message
                        slot[0].set()
        except (DecodeError, ConnectionLost, trio.BrokenResourceError, trio.ClosedResourceError, OSError) as e:
            self._break(e if isinstance(e, ConnectionLost) else ConnectionLost(f"{type(e).__name__}: {e}"))

    def _break(self, why: ConnectionLost) -> None:
        """The connection is gone (the first cause counts): fail every waiting call, tell `on_lost`."""
        if self._lost is not None:
            return
        self._lost = why
        for slot in self._waiting.values():
            slot[1] = why
            slot[0].set()
        if self.on_lost is not None:
            self.on_lost()


@contextlib.asynccontextmanager
async def open_client(env: Env, host: str, port: int, *, connect_timeout: float = 5.0,
                      tls=None, login=None) -> AsyncIterator[RpcClient]:
    """Connect (OSError / TooSlowError on failure; TLS with `tls`, a storage.tls.TlsContext; on a
    SASL listener, log in with `login`, wire.security.sasl_config.SaslCredentials) and run the
    reader until the block ends."""
    with env.fail_after(connect_timeout):
        stream = await open_rpc_stream(env, host, port, tls=tls, login=login)
    client = RpcClient(env, stream)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client._read)
            try:
                yield client
            finally:
                nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await trio.aclose_forcefully(stream)
