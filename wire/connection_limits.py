"""Bounds on what connections may cost a listener, with Kafka's setting names.

- `ConnectionQuotas`: `max.connections` (all connections of the listener) and
  `max.connections.per.ip` (+ `max.connections.per.ip.overrides`); a new connection over
  either limit is closed at once, as Kafka does for the per-ip limit (Kafka's broker-wide
  limit blocks the acceptor instead; here the socket is refused the same way, so
  descriptors never pile up). Connection creation rates (KIP-612, wire.connection_rate):
  over `max.connection.creation.rate` or a listener's own, accepting is delayed until the
  rate is back within it; over an address's `connection_creation_rate` the connection is
  closed after the throttle time, as Kafka does.
- `RequestMemoryPool`: `queued.max.request.bytes`, the bytes of requests being read or
  handled, shared by every connection: a connection whose next request does not fit is
  not read until enough is released (Kafka's MemoryPool and muted channels). -1 = no bound.

Sans-IO except `ConnectionQuotas.serve` (waits through the Env) and the pool's waiting, on
trio Events (no clock, no sockets).
"""
from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Awaitable, Callable, Mapping

import trio

from wire.connection_rate import QUOTA_WINDOW_NUM, QUOTA_WINDOW_SIZE_S, CreationRate

__all__ = ["ConnectionLimits", "ConnectionQuotas", "Refusal", "RequestMemoryPool", "UNBOUNDED"]

UNBOUNDED = 2**31 - 1  # Kafka's Int.MaxValue default for the connection limits


@dataclass(frozen=True)
class ConnectionLimits:
    """One listener's bounds (Kafka's names and defaults)."""

    max_connections: int = UNBOUNDED  # max.connections
    max_connections_per_ip: int = UNBOUNDED  # max.connections.per.ip
    idle_timeout_s: float = 600.0  # connections.max.idle.ms
    request_read_timeout_s: float = 30.0  # socket.request.read.timeout.ms (ours: Kafka has none)
    queued_max_request_bytes: int = -1  # queued.max.request.bytes
    max_connections_per_ip_overrides: Mapping[str, int] = field(default_factory=dict)  # address → limit
    max_connection_creation_rate: int = UNBOUNDED  # max.connection.creation.rate (all but protected listeners)
    # listener name → listener.name.<name>.max.connection.creation.rate
    listener_connection_creation_rates: Mapping[str, int] = field(default_factory=dict)
    # Kafka's `connection_creation_rate` quota on entity type ip: the default and per address
    ip_connection_creation_rate: float | None = None
    ip_connection_creation_rate_overrides: Mapping[str, float] = field(default_factory=dict)
    quota_window_num: int = QUOTA_WINDOW_NUM  # quota.window.num
    quota_window_size_s: float = QUOTA_WINDOW_SIZE_S  # quota.window.size.seconds


@dataclass(frozen=True)
class Refusal:
    """Why a new connection is closed, and after how long (a per-ip rate: Kafka's throttled close)."""

    why: str
    close_after_s: float = 0.0


class ConnectionQuotas:
    """Open connections counted per listener and per client address, and the rates of new ones.

    Sans-IO decisions (`accept_delay`, `try_open`, `close`, given the time) and one driver,
    `serve`, that waits and closes through the Env. `protected` listeners (the inter-broker
    and controller listeners: the nodes' own connections) are exempt from the broker-wide and
    per-ip creation rates, as Kafka exempts its inter-broker listener.
    """

    def __init__(self, limits: ConnectionLimits | None = None, env=None, *,
                 protected: frozenset[str] = frozenset()):
        self.limits = limits = limits or ConnectionLimits()
        self.env = env  # now() and sleep(): needed once a creation rate is set
        self.protected = frozenset(name.upper() for name in protected)
        self.total = 0
        self.per_ip: collections.Counter[str] = collections.Counter()
        self.refused = 0  # connections closed for being over a limit
        self.throttled = 0  # connections whose accepting was delayed by a creation rate
        self._broker_rate = self._rate(limits.max_connection_creation_rate)
        self._listener_rates = {name.upper(): self._rate(rate)
                                for name, rate in limits.listener_connection_creation_rates.items()}
        self._ip_rates: dict[str, CreationRate] = {}
        self._ip_rates_swept_at = 64  # sweep idle per-ip rates when there are this many
        # An address's connection_creation_rate from the client quotas (the `ip` entities of the
        # metadata log), which win over the static ip.connection.creation.rate settings.
        self.ip_quota: Callable[[str], float | None] = lambda ip: None

    def _rate(self, quota: float | None) -> CreationRate | None:
        if quota is None or quota >= UNBOUNDED:
            return None
        return CreationRate(quota, self.limits.quota_window_num, self.limits.quota_window_size_s)

    def max_per_ip(self, ip: str) -> int:
        return self.limits.max_connections_per_ip_overrides.get(ip, self.limits.max_connections_per_ip)

    def accept_delay(self, listener: str, now: float) -> float:
        """Record a new connection on `listener`'s and the broker's creation rates; the seconds
        to wait before accepting it (Kafka's acceptor throttling: it delays, never refuses)."""
        rates = [self._listener_rates.get(listener.upper())]
        if listener.upper() not in self.protected:
            rates.append(self._broker_rate)
        delay = max((rate.record(now) for rate in rates if rate is not None), default=0.0)
        if delay > 0:
            self.throttled += 1
        return delay

    def _ip_rate(self, ip: str) -> CreationRate | None:
        quota = self.ip_quota(ip)
        if quota is None:
            quota = self.limits.ip_connection_creation_rate_overrides.get(ip, self.limits.ip_connection_creation_rate)
        if quota is None:
            return None
        rate = self._ip_rates.get(ip)
        if rate is None or rate.quota != quota:
            rate = self._ip_rates[ip] = self._rate(quota)
        return rate

    def _sweep_ip_rates(self, now: float) -> None:
        """Forget the rates of addresses with no connection left in the window (bounded memory)."""
        if len(self._ip_rates) < self._ip_rates_swept_at:
            return
        for ip in [ip for ip, rate in self._ip_rates.items() if rate.rate(now) == 0]:
            del self._ip_rates[ip]
        self._ip_rates_swept_at = max(64, 2 * len(self._ip_rates))

    def try_open(self, ip: str, now: float = 0.0, listener: str = "") -> Refusal | None:
        """Count a new connection from `ip`; None if admitted, else why (and when) to close it."""
        if self.total >= self.limits.max_connections:
            refusal = Refusal(f"max.connections={self.limits.max_connections} reached")
        elif self.per_ip[ip] >= self.max_per_ip(ip):
            refusal = Refusal(f"max.connections.per.ip={self.max_per_ip(ip)} reached for {ip}")
        else:
            refusal = self._over_ip_rate(ip, now) if listener.upper() not in self.protected else None
        if refusal is not None:
            self.refused += 1
            return refusal
        self.total += 1
        self.per_ip[ip] += 1
        return None

    def _over_ip_rate(self, ip: str, now: float) -> Refusal | None:
        rate = self._ip_rate(ip)
        if rate is None:
            return None
        self._sweep_ip_rates(now)
        delay = rate.record(now)
        if delay <= 0:
            return None
        rate.unrecord(now)  # a refused connection does not count against the address
        return Refusal(f"connection_creation_rate={rate.quota:g}/s exceeded for {ip}", delay)

    def close(self, ip: str) -> None:
        self.total -= 1
        self.per_ip[ip] -= 1
        if self.per_ip[ip] <= 0:
            del self.per_ip[ip]

    async def serve(self, stream, ip: str, serve: Callable[[], Awaitable[None]], listener: str = "") -> str | None:
        """Run `serve()` counted against the limits (None once it returns), or close `stream`
        and return why it was over a limit. Over a creation rate the connection waits first."""
        if self.env is not None:
            delay = self.accept_delay(listener, self.env.now())
            if delay > 0:
                await self.env.sleep(delay)
        refusal = self.try_open(ip, self.env.now() if self.env is not None else 0.0, listener)
        if refusal is not None:
            if refusal.close_after_s > 0:  # as Kafka: the client does not reconnect at once
                await self.env.sleep(refusal.close_after_s)
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(stream)
            return refusal.why
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
