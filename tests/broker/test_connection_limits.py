"""The Kafka listener's resource bounds (wire.connection_limits, broker.request_reader):
connections over max.connections / max.connections.per.ip are closed, idle and trickling
connections are closed, and a request is read only once its bytes fit queued.max.request.bytes."""
import struct

import pytest
import trio

from raftkafka.node.config import ConfigError, load_config
from tests.broker import builders as B
from tests.broker.harness import RawClient, running_cluster
from wire.connection_limits import ConnectionLimits, ConnectionQuotas, RequestMemoryPool
from wire.protocol import encode_request


def test_quotas_count_per_listener_and_per_ip():
    quotas = ConnectionQuotas(ConnectionLimits(max_connections=3, max_connections_per_ip=2))
    assert quotas.try_open("a") is None and quotas.try_open("a") is None
    assert "max.connections.per.ip=2" in quotas.try_open("a").why
    assert quotas.try_open("b") is None
    assert "max.connections=3" in quotas.try_open("c").why
    quotas.close("a")
    assert quotas.try_open("c") is None
    assert quotas.refused == 2 and quotas.total == 3


async def test_the_pool_holds_a_request_back_until_bytes_are_released():
    pool = RequestMemoryPool(100)
    assert await pool.reserve(60) == 60
    got = []

    async def second():
        got.append(await pool.reserve(50))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(second)
        await trio.testing.wait_all_tasks_blocked()
        assert got == [] and pool.used == 60
        pool.release(60)
    assert got == [50] and pool.used == 50
    pool.release(50)
    assert await pool.reserve(500) == 500  # larger than the pool: admitted alone


async def test_connections_over_the_limits_are_closed_and_the_rest_served():
    limits = ConnectionLimits(max_connections=2)
    async with running_cluster(broker_overrides={"connection_limits": limits}) as c:
        port = c.brokers[0].port
        first, second = await RawClient.connect(port), await RawClient.connect(port)
        await first.call(B.metadata("t"), 5)
        await second.call(B.metadata("t"), 5)
        third = await RawClient.connect(port)
        assert await third.is_closed()
        assert c.brokers[0].server.quotas.refused == 1
        await first.aclose()
        await trio.sleep(0.1)
        fourth = await RawClient.connect(port)
        assert (await fourth.call(B.metadata("t"), 5)).brokers


async def test_idle_and_trickling_connections_are_closed():
    limits = ConnectionLimits(idle_timeout_s=0.3, request_read_timeout_s=0.3)
    async with running_cluster(broker_overrides={"connection_limits": limits}) as c:
        port = c.brokers[0].port
        idle = await RawClient.connect(port)
        assert await idle.is_closed(timeout=5)
        trickle = await RawClient.connect(port)
        frame = encode_request(B.metadata("t"), 5, 1, "x")
        await trickle.send_raw(frame[:6])  # the size prefix and a little: the rest never comes
        assert await trickle.is_closed(timeout=5)
        busy = await RawClient.connect(port)
        assert (await busy.call(B.metadata("t"), 5)).brokers


async def test_a_request_stalled_after_its_size_prefix_is_closed_by_the_read_timeout():
    """Four bytes are a request arriving, not an idle connection: socket.request.read.timeout.ms
    closes it, long before connections.max.idle.ms would."""
    limits = ConnectionLimits(idle_timeout_s=60.0, request_read_timeout_s=0.3)
    async with running_cluster(broker_overrides={"connection_limits": limits}) as c:
        stalled = await RawClient.connect(c.brokers[0].port)
        await stalled.send_raw(struct.pack(">i", 100))  # the size prefix alone
        assert await stalled.is_closed(timeout=5)


async def test_a_request_is_read_only_when_its_bytes_fit_the_pool():
    frame = encode_request(B.metadata("t"), 5, 1, "x")
    limits = ConnectionLimits(queued_max_request_bytes=len(frame) + 10)
    async with running_cluster(broker_overrides={"connection_limits": limits}) as c:
        server = c.brokers[0].server
        holder = await RawClient.connect(c.brokers[0].port)
        await holder.send_raw(struct.pack(">i", len(frame) - 4) + b"\x00")  # reserves, then stalls
        await trio.sleep(0.2)
        assert server.memory_pool.used == len(frame)
        waiter = await RawClient.connect(c.brokers[0].port)
        await waiter.send(B.metadata("t"), 5)
        with pytest.raises(trio.TooSlowError):  # not answered: its request is not read yet
            await waiter.read_frame(timeout=0.5)
        assert server.memory_pool.used == len(frame)
        await holder.aclose()  # frees the reservation
        assert await waiter.read_frame(timeout=5) is not None


def test_config_names_and_checks():
    base = {"node.id": 1, "process.roles": "broker,controller", "log.dirs": "/d",
            "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"}
    limits = load_config({**base, "max.connections": "10", "max.connections.per.ip": "3",
                          "connections.max.idle.ms": "1000", "queued.max.request.bytes": str(200 * 1024 * 1024),
                          "socket.request.read.timeout.ms": "500"}).connection_limits()
    assert limits == ConnectionLimits(10, 3, 1.0, 0.5, 200 * 1024 * 1024)
    assert load_config(base).connection_limits() == ConnectionLimits()
    with pytest.raises(ConfigError, match="queued.max.request.bytes"):
        load_config({**base, "queued.max.request.bytes": "1000"})
    with pytest.raises(ConfigError, match="max.connections"):
        load_config({**base, "max.connections": "0"})
