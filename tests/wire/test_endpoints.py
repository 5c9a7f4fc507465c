"""Which (host, port) pairs a peer may name as where it is reached."""
from __future__ import annotations

import pytest

from wire.endpoints import endpoint_ok


@pytest.mark.parametrize("host, port, ok", [
    ("127.0.0.1", 9093, True), ("controller-1.example.com", 1, True), ("::1", 65535, True),
    ("fe80::1%eth0", 9093, True), ("c_1", 9093, True),
    ("", 9093, False), ("\x00", 1, False), ("a b", 9093, False), ("h/..", 9093, False), ("hôte", 9093, False),
    ("h" * 256, 9093, False), ("h", 0, False), ("h", 65536, False), ("h", True, False), ("h", 9093.0, False),
])
def test_an_endpoint_is_a_host_name_or_address_and_a_port(host, port, ok):
    assert endpoint_ok(host, port) is ok
