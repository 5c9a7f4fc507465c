"""Connection limits as Kafka's, sans-IO (wire.connection_rate, wire.connection_limits):
KIP-612 creation rates (broker-wide, per listener: accepting is delayed; per address: the
connection is closed after the throttle time and does not count), max.connections.per.ip
overrides, and the settings that name them (raftkafka.node.connection_limit_settings)."""
import pytest
import trio

from raftkafka.node.config import ConfigError, load_config
from wire.connection_limits import ConnectionLimits, ConnectionQuotas
from wire.connection_rate import CreationRate

BASE = {"node.id": 1, "process.roles": "broker,controller", "log.dirs": "/d",
        "listeners": "PLAINTEXT://127.0.0.1:9092,CLIENTS://127.0.0.1:9094,CONTROLLER://127.0.0.1:9093",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CLIENTS:PLAINTEXT,CONTROLLER:PLAINTEXT"}


def test_a_rate_absorbs_the_burst_of_its_windows_then_throttles_by_one_over_the_quota():
    rate = CreationRate(5, samples=2, window_s=1.0)  # at least 1 s measured: 5 pass at once
    assert [rate.record(0.0) for _ in range(5)] == [0.0] * 5
    assert rate.record(0.0) == pytest.approx(0.2)  # 6 connections in 1 s: wait until 6/1.2 s = 5/s
    assert rate.record(0.0) == pytest.approx(0.4)
    assert rate.record(2.0) == 0.0  # the windows of t=0 have aged out


def test_kafka_default_windows_allow_ten_seconds_of_quota_at_once():
    rate = CreationRate(2)  # quota.window.num=11, quota.window.size.seconds=1
    assert all(rate.record(0.0) == 0.0 for _ in range(20))
    assert rate.record(0.0) == pytest.approx(0.5)
    assert rate.record(30.0) == 0.0


def test_the_broker_rate_delays_accepting_on_every_listener_but_the_protected_one():
    quotas = ConnectionQuotas(ConnectionLimits(max_connection_creation_rate=4, quota_window_num=2),
                              protected=frozenset({"PLAINTEXT"}))
    delays = [quotas.accept_delay("CLIENTS", 0.0) for _ in range(12)]
    assert delays[:4] == [0.0] * 4
    # Each later one waits 1/4 s longer: accepted at the quota's pace, none refused.
    assert delays[4:] == pytest.approx([0.25 * k for k in range(1, 9)])
    assert quotas.accept_delay("PLAINTEXT", 0.0) == 0.0  # the nodes' own listener is exempt
    assert quotas.throttled == 8 and quotas.refused == 0


def test_a_listener_rate_applies_to_its_listener_only_protected_or_not():
    quotas = ConnectionQuotas(ConnectionLimits(listener_connection_creation_rates={"controller": 2},
                                               quota_window_num=2), protected=frozenset({"CONTROLLER"}))
    assert [quotas.accept_delay("CONTROLLER", 0.0) for _ in range(3)] == [0.0, 0.0, pytest.approx(0.5)]
    assert all(quotas.accept_delay("CLIENTS", 0.0) == 0.0 for _ in range(10))


def test_an_address_over_its_rate_is_closed_after_the_throttle_time_and_not_counted():
    quotas = ConnectionQuotas(ConnectionLimits(ip_connection_creation_rate=2,
                                               ip_connection_creation_rate_overrides={"10.0.0.9": 10},
                                               quota_window_num=2))
    assert quotas.try_open("10.0.0.1", 0.0, "CLIENTS") is None
    assert quotas.try_open("10.0.0.1", 0.0, "CLIENTS") is None
    refusal = quotas.try_open("10.0.0.1", 0.1, "CLIENTS")
    assert "connection_creation_rate=2/s exceeded for 10.0.0.1" in refusal.why
    assert refusal.close_after_s == pytest.approx(0.5)  # 3 in 1 s: Kafka's throttle time
    assert quotas.try_open("10.0.0.1", 0.2, "CLIENTS") is not None  # still over: refused again
    # Refused ones were taken back, so once the rate is within again the address gets in.
    assert quotas.try_open("10.0.0.1", 1.5, "CLIENTS") is None  # 3 in 1.5 s
    assert quotas.per_ip["10.0.0.1"] == 3 and quotas.refused == 2
    assert all(quotas.try_open("10.0.0.2", 0.0, "CLIENTS") is None for _ in range(2))  # its own rate
    assert all(quotas.try_open("10.0.0.9", 0.0, "CLIENTS") is None for _ in range(10))  # its override


def test_the_per_address_rate_spares_protected_listeners_and_forgets_idle_addresses():
    quotas = ConnectionQuotas(ConnectionLimits(ip_connection_creation_rate=1, quota_window_num=2),
                              protected=frozenset({"CONTROLLER"}))
    assert all(quotas.try_open("127.0.0.1", 0.0, "CONTROLLER") is None for _ in range(5))
    for i in range(1000):  # one connection each from many addresses, over time
        assert quotas.try_open(f"10.1.{i // 250}.{i % 250}", i * 0.1, "CLIENTS") is None
    assert len(quotas._ip_rates) < 200  # the addresses quiet for two windows were dropped


def test_per_ip_overrides_raise_or_lower_one_address_limit():
    quotas = ConnectionQuotas(ConnectionLimits(max_connections_per_ip=1,
                                               max_connections_per_ip_overrides={"10.0.0.5": 3, "10.0.0.6": 0}))
    assert [quotas.try_open("10.0.0.5") for _ in range(3)] == [None] * 3
    assert "max.connections.per.ip=3 reached for 10.0.0.5" in quotas.try_open("10.0.0.5").why
    assert "max.connections.per.ip=0" in quotas.try_open("10.0.0.6").why
    assert quotas.try_open("10.0.0.7") is None and quotas.try_open("10.0.0.7") is not None


class _ClockEnv:
    """The Env's clock on trio's (the mock clock in these tests)."""

    def now(self) -> float:
        return trio.current_time()

    async def sleep(self, seconds: float) -> None:
        await trio.sleep(seconds)


class _Stream:
    closed = False

    async def aclose(self):
        self.closed = True


async def test_serve_waits_out_the_listener_rate_then_serves(autojump_clock):
    quotas = ConnectionQuotas(ConnectionLimits(max_connection_creation_rate=2, quota_window_num=2), _ClockEnv())
    start, served = trio.current_time(), []

    async def one(i):
        async def serve():
            served.append((i, trio.current_time() - start))
        assert await quotas.serve(_Stream(), "10.0.0.1", serve, "CLIENTS") is None

    async with trio.open_nursery() as nursery:
        for i in range(6):
            nursery.start_soon(one, i)
    times = sorted(t for _, t in served)
    assert times == pytest.approx([0, 0, 0.5, 1.0, 1.5, 2.0])
    assert quotas.total == 0


async def test_serve_closes_an_address_over_its_rate_after_the_throttle_time(autojump_clock):
    quotas = ConnectionQuotas(ConnectionLimits(ip_connection_creation_rate=1, quota_window_num=2), _ClockEnv())
    start, stream = trio.current_time(), _Stream()

    async def serve():
        pass
    assert await quotas.serve(_Stream(), "10.0.0.1", serve, "CLIENTS") is None
    why = await quotas.serve(stream, "10.0.0.1", serve, "CLIENTS")
    assert "connection_creation_rate=1/s" in why and stream.closed
    assert trio.current_time() - start == pytest.approx(1.0)  # 2 in 1 s against 1/s: held 1 s


def test_the_settings_as_kafka_names_them():
    limits = load_config({**BASE, "max.connections.per.ip": "5",
                          "max.connections.per.ip.overrides": "localhost:50,10.0.0.1:0",
                          "max.connection.creation.rate": "20",
                          "listener.name.clients.max.connection.creation.rate": "7",
                          "quota.window.num": "3", "quota.window.size.seconds": "2",
                          "ip.connection.creation.rate": "0.5",
                          "ip.connection.creation.rate.overrides": "10.0.0.2:4"}).connection_limits()
    assert limits.max_connections_per_ip == 5
    assert limits.max_connections_per_ip_overrides["127.0.0.1"] == 50  # a host name: each address
    assert limits.max_connections_per_ip_overrides["10.0.0.1"] == 0
    assert limits.max_connection_creation_rate == 20
    assert limits.listener_connection_creation_rates == {"CLIENTS": 7}
    assert (limits.quota_window_num, limits.quota_window_size_s) == (3, 2.0)
    assert limits.ip_connection_creation_rate == 0.5
    assert limits.ip_connection_creation_rate_overrides == {"10.0.0.2": 4.0}
    # As Kafka: max.connections.per.ip=0 only together with overrides naming who may connect.
    assert load_config({**BASE, "max.connections.per.ip": "0",
                        "max.connections.per.ip.overrides": "10.0.0.1:2"}).connection_limits().max_connections_per_ip == 0


@pytest.mark.parametrize("name,value,why", [
    ("max.connections.per.ip", "0", "must be >= 1"),
    ("max.connections.per.ip.overrides", "10.0.0.1", "not host:value"),
    ("max.connections.per.ip.overrides", "10.0.0.1:-1", "must be >= 0"),
    ("max.connections.per.ip.overrides", "no-such-host.invalid:3", "does not resolve"),
    ("max.connection.creation.rate", "0", "must be >= 1"),
    ("listener.name.clients.max.connection.creation.rate", "x", "expected an integer"),
    ("ip.connection.creation.rate", "0", "must be >= 0.001"),
    ("ip.connection.creation.rate.overrides", "10.0.0.1:0", "must be >= 0.001"),
    ("quota.window.num", "1", "must be >= 2"),
])
def test_bad_settings_are_one_clear_line(name, value, why):
    with pytest.raises(ConfigError, match=f"{name}.*{why}"):
        load_config({**BASE, name: value})
