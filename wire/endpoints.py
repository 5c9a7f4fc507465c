"""What a node may be reached on: a host name or address and a port.

Peers name endpoints (a controller's in a voter change, a broker's in its registration),
and every node and client then connects to them; one that cannot be an address is refused
where it arrives.
"""
from __future__ import annotations

import re

__all__ = ["host_ok", "endpoint_ok"]

# A host name (letters, digits, dots, hyphens, underscores) or an IPv4 or IPv6 address
# (colons, a %zone), at most 255 characters.
_HOST = re.compile(r"[A-Za-z0-9._:%-]{1,255}")


def host_ok(host: str) -> bool:
    return isinstance(host, str) and _HOST.fullmatch(host) is not None


def endpoint_ok(host: str, port: int) -> bool:
    return host_ok(host) and type(port) is int and 0 < port < 65536
