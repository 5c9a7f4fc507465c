"""Connection limits on a real node, with real sockets from several loopback addresses:
max.connections.per.ip with overrides, the per-address connection_creation_rate (closed after
the throttle time) and max.connection.creation.rate (KIP-612: accepting is delayed, nothing
refused). Only lower bounds on time are asserted: load makes things slower, never faster."""
from __future__ import annotations

import socket
import struct
import subprocess
import sys
import time

import pytest

from tests.e2e.procs import free_base_port, write_single_node

pytestmark = pytest.mark.e2e

API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 7, 1) + b"t"
FRAME = struct.pack(">i", len(API_VERSIONS_V0)) + API_VERSIONS_V0


def _connect(port: int, source: str) -> socket.socket:
    s = socket.socket()
    s.bind((source, 0))
    s.settimeout(15)
    s.connect(("127.0.0.1", port))
    return s


def _answered(s: socket.socket) -> bool:
    """True when an ApiVersions request is answered; False when the node closed the connection."""
    try:
        s.sendall(FRAME)
        head = s.recv(8)
    except (ConnectionResetError, BrokenPipeError):
        return False
    return len(head) == 8 and struct.unpack(">i", head[4:])[0] == 7


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    from tests.e2e.procs import Processes

    procs = Processes()
    try:
        base = free_base_port(2)
        clients = base + 2
        config = write_single_node(
            str(tmp_path_factory.mktemp("limits") / "data"), base,
            ("listeners", f"PLAINTEXT://127.0.0.1:{base},CLIENTS://127.0.0.1:{clients},"
                          f"CONTROLLER://127.0.0.1:{base + 1}"),
            ("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CLIENTS:PLAINTEXT,CONTROLLER:PLAINTEXT"),
            ("max.connections.per.ip", 3),
            ("max.connections.per.ip.overrides", "127.0.0.2:40,127.0.0.3:40"),
            ("max.connection.creation.rate", 5), ("quota.window.num", 2),
            ("ip.connection.creation.rate.overrides", "127.0.0.3:1"))
        proc = procs.node(config)
        proc.wait_line(rf"serving Kafka clients on .*CLIENTS://127.0.0.1:{clients}", 60)
        yield {"inter_broker": base, "clients": clients}
    finally:
        procs.kill_all()


def test_per_ip_limit_with_overrides(node):
    port = node["inter_broker"]
    mine = [_connect(port, "127.0.0.1") for _ in range(3)]
    assert all(_answered(s) for s in mine)
    assert not _answered(_connect(port, "127.0.0.1"))  # the 4th from this address is closed
    overridden = [_connect(port, "127.0.0.2") for _ in range(6)]  # its override: 40
    assert all(_answered(s) for s in overridden)
    mine.pop().close()
    time.sleep(0.3)
    assert _answered(_connect(port, "127.0.0.1"))  # a slot was freed
    for s in mine + overridden:
        s.close()


def test_an_address_over_its_creation_rate_is_closed_after_the_throttle_time(node):
    time.sleep(2.2)  # the broker-wide rate's windows (2 × 1 s) are empty again
    first = _connect(node["clients"], "127.0.0.3")
    assert _answered(first)
    started = time.monotonic()
    second = _connect(node["clients"], "127.0.0.3")  # 2 in the first second against 1/s
    assert not _answered(second)
    assert time.monotonic() - started >= 0.8  # held for the throttle time (1 s), then closed
    first.close()
    time.sleep(1.5)
    assert _answered(_connect(node["clients"], "127.0.0.3"))  # within the rate again


def test_over_the_broker_rate_connections_wait_and_none_is_refused(node):
    time.sleep(2.2)
    started = time.monotonic()
    sockets = [_connect(node["clients"], "127.0.0.2") for _ in range(15)]
    assert all(_answered(s) for s in sockets)  # every one served ...
    # ... but at 5/s: 5 at once, then one each 0.2 s: the 15th after about 2 s.
    assert time.monotonic() - started >= 1.6
    for s in sockets:
        s.close()
    inter_broker = [_connect(node["inter_broker"], "127.0.0.2") for _ in range(15)]
    assert all(_answered(s) for s in inter_broker)  # the nodes' own listener is exempt (no bound asserted)
    for s in inter_broker:
        s.close()


def test_an_ip_client_quota_set_with_the_configs_tool_limits_that_address(node):
    """connection_creation_rate on an `ip` entity (AlterClientQuotas, kept in the metadata log)
    applies without a restart and wins over the static settings; deleting it lifts it."""
    def configs(*args: str) -> None:
        done = subprocess.run([sys.executable, "-m", "raftkafka", "configs", "--bootstrap-server",
                               f"127.0.0.1:{node['inter_broker']}", *args], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr

    configs("--alter", "--entity-type", "ips", "--entity-name", "127.0.0.4", "--add-config",
            "connection_creation_rate=1")
    time.sleep(2.2)  # the broker-wide rate's windows are empty again
    first = _connect(node["clients"], "127.0.0.4")
    assert _answered(first)
    assert not _answered(_connect(node["clients"], "127.0.0.4"))  # 2 in a second against 1/s
    assert _answered(_connect(node["clients"], "127.0.0.5"))  # another address: no quota
    first.close()
    configs("--alter", "--entity-type", "ips", "--entity-name", "127.0.0.4", "--delete-config",
            "connection_creation_rate")
    time.sleep(2.2)
    again = [_connect(node["clients"], "127.0.0.4") for _ in range(3)]
    assert all(_answered(s) for s in again)
    for s in again:
        s.close()
