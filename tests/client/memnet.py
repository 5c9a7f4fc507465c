"""A tiny in-memory `Network` and test `Env` so client tests need no sockets.

Streams are `trio.testing.memory_stream_pair()`; `serve` registers a handler that
`connect` runs in the listener's nursery. `MockClock(autojump_threshold=0)` in
the tests makes linger and backoff sleeps cost no wall time.
"""
from __future__ import annotations

import random
import uuid

import trio
import trio.testing

from storage.env import TrioDeadlines


class MemNetwork:
    def __init__(self):
        self._listeners: dict[tuple[str, int], tuple[trio.Nursery, object]] = {}
        self.server_streams: dict[tuple[str, int], list] = {}
        self.connects = 0

    async def serve(self, host, port, handler, *, tls=None, task_status=trio.TASK_STATUS_IGNORED):
        async with trio.open_nursery() as nursery:
            self._listeners[(host, port)] = (nursery, handler)
            task_status.started(port)
            try:
                await trio.sleep_forever()
            finally:
                del self._listeners[(host, port)]

    async def connect(self, host, port, *, tls=None):
        await trio.lowlevel.checkpoint()
        entry = self._listeners.get((host, port))
        if entry is None:
            raise ConnectionRefusedError(f"nothing listens on {host}:{port}")
        nursery, handler = entry
        client, server = trio.testing.memory_stream_pair()
        self.connects += 1
        self.server_streams.setdefault((host, port), []).append(server)
        nursery.start_soon(handler, server)
        return client

    async def reset(self, host, port):
        """Close every server-side stream of a listener (the client sees EOF)."""
        for stream in self.server_streams.pop((host, port), []):
            await stream.aclose()


class MemEnv(TrioDeadlines):
    def __init__(self, seed: int = 0):
        self.rng = random.Random(seed)
        self.net = MemNetwork()
        self.fs = None

    def now(self) -> float:
        return trio.current_time()

    def wall_ms(self) -> int:
        return 1_700_000_000_000 + int(trio.current_time() * 1000)

    async def sleep(self, seconds: float) -> None:
        await trio.sleep(seconds)

    async def sleep_until(self, deadline: float) -> None:
        await trio.sleep_until(deadline)

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(int=self.rng.getrandbits(128), version=4)
