"""Bounds on what connections may cost a listener, with Kafka's setting names.

- `ConnectionQuotas`: `max.connections` (all connections of the listener) and
  `max.connections.per.ip`; a new connection over either limit is closed at once,
  as Kafka does for the per-ip limit (Kafka's broker-wide limit blocks the acceptor
  instead; here the socket is refused the same way, so descriptors never pile up).
- `RequestMemoryPool`: `queued.max.request.bytes`, the bytes of requests being read or
  handled, shared by every connection: a connection whose next request does not fit is
  not read until enough is released (Kafka's MemoryPool and muted channels). -1 = no bound.

Sans-IO except the pool's waiting, on trio Events (no clock, no sockets).
"""
from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Awaitable, Callable

import trio

__all__ = ["ConnectionLimits", "ConnectionQuotas", "RequestMemoryPool", "UNBOUNDED"]

UNBOUNDED = 2**31 - 1  # Kafka's Int.MaxValue default for the connection limits


@dataclass(frozen=True)
class ConnectionLimits:
    """One listener's bounds (Kafka's names and defaults)."""

    max_connections: int = UNBOUNDED  # max.connections
    max_connections_per_ip: int = UNBOUNDED  # max.connections.per.ip
    idle_timeout_s: float = 600.0  # connections.max.idle.ms
    request_read_timeout_s: float = 30.0  # socket.request.read.timeout.ms (ours: Kafka has none)
    queued_max_request_bytes: int = -1  # queued.max.request.bytes


class ConnectionQuotas:
    """Open connections counted per listener and per client address."""

    def __init__(self, max_connections: int = UNBOUNDED, max_per_ip: int = UNBOUNDED):
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.total = 0
        self.per_ip: collections.Counter[str] = collections.Counter()
        self.refused = 0  # connections closed for being over a limit

    def try_open(self, ip: str) -> str | None:
        """Count a new connection from `ip`; None if admitted, else why it must be closed."""
        if self.total >= self.max_connections:
            why = f"max.connections={self.max_connections} reached"
        elif self.per_ip[ip] >= self.max_per_ip:
            why = f"max.connections.per.ip={self.max_per_ip} reached for {ip}"
        else:
            self.total += 1
            self.per_ip[ip] += 1
            return None
        self.refused += 1
        return why

    def close(self, ip: str) -> None:
        self.total -= 1
        self.per_ip[ip] -= 1
        if self.per_ip[ip] <= 0:
            del self.per_ip[ip]

    async def serve(self, stream, ip: str, serve: Callable[[], Awaitable[None]]) -> str | None:
        """Run `serve()` counted against the limits (None once it returns), or close `stream` at
        once and return why it was over a limit."""
        refused = self.try_open(ip)
        if refused is not None:
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(stream)
            return refused
        try:
            await serve()
        finally:
            self.close(ip)
        return None


class RequestMemoryPool:
    """Bytes reserved for requests, at most `capacity` at once (capacity < 0: unbounded)."""

    def __init__(self, capacity: int = -1):
        self.capacity = capacity
        self.used = 0
        self._waiting: list[trio.Event] = []

    def _fits(self, size: int) -> bool:
        # A request larger than the whole pool still gets its turn when the pool is empty
        # (config validation keeps the pool at least one whole request).
        return self.capacity < 0 or self.used + size <= self.capacity or self.used == 0

    async def reserve(self, size: int) -> int:
        """Wait until `size` bytes fit, take them, and return `size` (to release later)."""
        while not self._fits(size):
            freed = trio.Event()
            self._waiting.append(freed)
            await freed.wait()
        self.used += size
        return size

    def release(self, size: int) -> None:
        if size <= 0:
            return
        self.used -= size
        waiting, self._waiting = self._waiting, []
        for freed in waiting:  # each looks again whether its request fits now
            freed.set()
