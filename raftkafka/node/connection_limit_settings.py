"""The listeners' connection limits from a node's static settings (Kafka's names).

Kafka's: `max.connections`, `max.connections.per.ip`, `max.connections.per.ip.overrides`
(`host:count,...`, a host name standing for each of its addresses), `max.connection.creation.rate`,
`listener.name.<listener>.max.connection.creation.rate`, `quota.window.num`,
`quota.window.size.seconds`, `connections.max.idle.ms`, `queued.max.request.bytes`.

raftkafka's own: `socket.request.read.timeout.ms`, and — until client quotas on entity type
`ip` are in the metadata log — the per-address `connection_creation_rate` quota as the static
`ip.connection.creation.rate` (every address) and `ip.connection.creation.rate.overrides`
(`address:rate,...`).
"""
from __future__ import annotations

import ipaddress
import re
import socket  # host names in the overrides are resolved once, when the config is read
from typing import Mapping

from wire.connection_limits import ConnectionLimits, UNBOUNDED

__all__ = ["INTEGER_SETTINGS", "TEXT_SETTINGS", "is_listener_rate_setting", "connection_limits_of"]

INTEGER_SETTINGS = frozenset({
    "queued.max.request.bytes", "connections.max.idle.ms", "max.connections", "max.connections.per.ip",
    "socket.request.read.timeout.ms", "max.connection.creation.rate", "quota.window.num",
    "quota.window.size.seconds",
})
TEXT_SETTINGS = frozenset({
    "max.connections.per.ip.overrides", "ip.connection.creation.rate", "ip.connection.creation.rate.overrides",
})
_SMALLEST_RATE = 0.001  # connections per second; a rate of 0 would never let one in
_LISTENER_RATE = re.compile(r"^listener\.name\.([^.]+)\.max\.connection\.creation\.rate$")


def is_listener_rate_setting(name: str) -> bool:
    return _LISTENER_RATE.match(name) is not None


def _addresses(host: str) -> list[str]:
    try:
        return [str(ipaddress.ip_address(host))]
    except ValueError:
        pass
    try:
        return sorted({info[4][0] for info in socket.getaddrinfo(host, None)})
    except OSError as e:
        raise ValueError(f"host {host!r} does not resolve ({e})") from None


def _overrides(text: str, number, minimum: float) -> dict[str, float]:
    out = {}
    for item in [i.strip() for i in text.split(",") if i.strip()]:
        host, sep, value = item.rpartition(":")
        if not sep or not host:
            raise ValueError(f"{item!r} is not host:value")
        parsed = number(value)
        if parsed < minimum:
            raise ValueError(f"{item!r}: the value must be >= {minimum}")
        for address in _addresses(host.strip("[]")):
            out[address] = parsed
    return out


def connection_limits_of(static: Mapping[str, str]) -> ConnectionLimits:
    """The limits the settings name (Kafka's defaults for the rest); ValueError naming a bad one."""
    default = ConnectionLimits()

    def setting(name: str, convert, value, minimum=1):
        if name not in static:
            return value
        try:
            parsed = convert(static[name])
        except ValueError:
            raise ValueError(f"{name}: invalid value {static[name]!r} (expected a number)") from None
        if parsed < minimum:
            raise ValueError(f"{name}: invalid value {static[name]} (must be >= {minimum})")
        return parsed

    def overrides(name: str, convert, minimum) -> dict:
        try:
            return _overrides(static.get(name, ""), convert, minimum)
        except ValueError as e:
            raise ValueError(f"{name}: {e}") from None

    per_ip_overrides = overrides("max.connections.per.ip.overrides", int, 0)
    listener_rates = {}
    for name in static:
        m = _LISTENER_RATE.match(name)
        if m:
            listener_rates[m.group(1).upper()] = setting(name, int, UNBOUNDED)
    ip_rate = setting("ip.connection.creation.rate", float, None, minimum=_SMALLEST_RATE)
    return ConnectionLimits(
        max_connections=setting("max.connections", int, default.max_connections),
        # As Kafka: 0 is allowed when the overrides name the addresses that may connect.
        max_connections_per_ip=setting("max.connections.per.ip", int, default.max_connections_per_ip,
                                       minimum=0 if per_ip_overrides else 1),
        max_connections_per_ip_overrides=per_ip_overrides,
        idle_timeout_s=setting("connections.max.idle.ms", int, default.idle_timeout_s * 1000) / 1000,
        request_read_timeout_s=setting("socket.request.read.timeout.ms", int,
                                       default.request_read_timeout_s * 1000) / 1000,
        queued_max_request_bytes=setting("queued.max.request.bytes", int, default.queued_max_request_bytes,
                                         minimum=-1),
        max_connection_creation_rate=setting("max.connection.creation.rate", int, UNBOUNDED),
        listener_connection_creation_rates=listener_rates,
        ip_connection_creation_rate=ip_rate,
        ip_connection_creation_rate_overrides=overrides("ip.connection.creation.rate.overrides", float, _SMALLEST_RATE),
        quota_window_num=setting("quota.window.num", int, default.quota_window_num, minimum=2),
        quota_window_size_s=float(setting("quota.window.size.seconds", int, default.quota_window_size_s)),
    )
