"""simulations.network: simulated TCP-like streams, latency, partitions, clogs, resets."""
from __future__ import annotations

import random

import pytest
import trio
import trio.testing

from simulations.determinism import run_deterministic
from simulations.network import LinkProfile, SimNetwork
from simulations.trace import Trace


def make_net(*hosts: str, seed: int = 1, **kw) -> SimNetwork:
    net = SimNetwork(random.Random(seed), Trace(), **kw)
    for h in hosts or ("n1", "n2", "n3"):
        net.add_host(h)
    return net


async def open_pair(nursery, net: SimNetwork, client: str = "n2", server: str = "n1"):
    """Returns (client_stream, server_stream)."""
    got: list = []
    ready = trio.Event()

    async def handler(stream):
        got.append(stream)
        ready.set()
        await trio.sleep_forever()

    port = await nursery.start(net.view(server).serve, server, 0, handler)
    c = await net.view(client).connect(server, port)
    await ready.wait()
    return c, got[0]


async def test_conforms_to_trio_half_closeable_stream():
    # trio's own generic checks (they use wait_all_tasks_blocked, so: real clock).
    net = make_net()
    async with trio.open_nursery() as nursery:
        await trio.testing.check_half_closeable_stream(lambda: open_pair(nursery, net), None)
        nursery.cancel_scope.cancel()


def sim(fn, seed: int = 1):
    return run_deterministic(fn, seed=seed)


def test_bytes_arrive_in_order_and_intact_after_latency():
    async def body():
        net = make_net(default_profile=LinkProfile(min_latency=0.01, mean_extra=0.005, tail_probability=0.0))
        rng = random.Random(3)
        payload = bytes(rng.getrandbits(8) for _ in range(50_000))
        async with trio.open_nursery() as nursery:
            c, s = await open_pair(nursery, net)
            t0 = trio.current_time()

            async def send():
                for i in range(0, len(payload), 777):
                    await c.send_all(payload[i : i + 777])
                await c.send_eof()

            nursery.start_soon(send)
            received = bytearray()
            first_at = None
            while chunk := await s.receive_some(1000):
                first_at = first_at if first_at is not None else trio.current_time()
                received += chunk
            assert bytes(received) == payload
            assert first_at - t0 >= 0.01  # nothing crosses faster than the link minimum
            nursery.cancel_scope.cancel()

    sim(body)


def test_partition_holds_bytes_until_heal():
    async def body():
        net = make_net()
        async with trio.open_nursery() as nursery:
            c, s = await open_pair(nursery, net)
            net.partition([["n1"], ["n2", "n3"]])
            await c.send_all(b"held")
            with trio.move_on_after(30) as scope:
                await s.receive_some()
            assert scope.cancelled_caught, "bytes crossed a partition"
            net.heal()
            assert await s.receive_some() == b"held"
            nursery.cancel_scope.cancel()

    sim(body)


def test_one_way_partition_blocks_one_direction_only():
    async def body():
        net = make_net()
        async with trio.open_nursery() as nursery:
            c, s = await open_pair(nursery, net)  # c on n2, s on n1
            net.set_blocked("n2", "n1", True)
            await c.send_all(b"to-n1")
            await s.send_all(b"to-n2")
            assert await c.receive_some() == b"to-n2"
            with trio.move_on_after(5) as scope:
                await s.receive_some()
            assert scope.cancelled_caught
            net.set_blocked("n2", "n1", False)
            assert await s.receive_some() == b"to-n1"
            nursery.cancel_scope.cancel()

    sim(body)


def test_clog_delays_until_given_time():
    async def body():
        net = make_net()
        async with trio.open_nursery() as nursery:
            c, s = await open_pair(nursery, net)
            net.clog("n2", "n1", until=trio.current_time() + 2.0)
            t0 = trio.current_time()
            await c.send_all(b"x")
            assert await s.receive_some() == b"x"
            assert trio.current_time() - t0 >= 2.0 - 1e-9
            nursery.cancel_scope.cancel()

    sim(body)


def test_connect_across_partition_times_out_and_without_listener_is_refused():
    async def body():
        net = make_net(connect_timeout=5.0)
        async with trio.open_nursery() as nursery:
            port = await nursery.start(net.view("n1").serve, "n1", 0, lambda s: trio.sleep_forever())
            net.partition([["n1"], ["n2"]])
            t0 = trio.current_time()
            with pytest.raises(TimeoutError):
                await net.view("n2").connect("n1", port)
            assert trio.current_time() - t0 == pytest.approx(5.0)
            with pytest.raises(ConnectionRefusedError):
                await net.view("n3").connect("n1", port + 1)
            with pytest.raises(OSError):
                await net.view("n3").connect("nowhere", port)
            nursery.cancel_scope.cancel()

    sim(body)


def test_connect_succeeds_if_partition_heals_during_syn_retries():
    async def body():
        net = make_net(connect_timeout=10.0)
        async with trio.open_nursery() as nursery:
            port = await nursery.start(net.view("n1").serve, "n1", 0, lambda s: trio.sleep_forever())
            net.partition([["n1"], ["n2"]])

            async def heal_later():
                await trio.sleep(2.5)
                net.heal()

            nursery.start_soon(heal_later)
            stream = await net.view("n2").connect("n1", port)
            assert trio.current_time() >= 2.5
            await stream.aclose()
            nursery.cancel_scope.cancel()

    sim(body)


def test_reset_breaks_both_ends():
    async def body():
        net = make_net()
        async with trio.open_nursery() as nursery:
            c, s = await open_pair(nursery, net)
            await c.send_all(b"in flight")
            assert net.reset_between("n1", "n2") == 1
            with pytest.raises(trio.BrokenResourceError):
                await s.receive_some()
            with pytest.raises(trio.BrokenResourceError):
                await c.send_all(b"more")
            with pytest.raises(trio.BrokenResourceError):
                await c.receive_some()
            nursery.cancel_scope.cancel()

    sim(body)


def test_host_down_resets_connections_and_refuses_new_ones():
    async def body():
        net = make_net()
        async with trio.open_nursery() as nursery:
            c, s = await open_pair(nursery, net)
            net.host_down("n1")
            with pytest.raises(trio.BrokenResourceError):
                await c.receive_some()
            with pytest.raises(ConnectionRefusedError):
                await net.view("n2").connect("n1", 40000)
            nursery.cancel_scope.cancel()

    sim(body)


def test_dead_view_refuses_io():
    async def body():
        net = make_net()
        alive = [True]
        view = net.view("n2", lambda: alive[0])
        alive[0] = False
        with pytest.raises(OSError):
            await view.connect("n1", 1)

    sim(body)


def test_send_window_gives_back_pressure():
    async def body():
        net = make_net(window=10_000)
        async with trio.open_nursery() as nursery:
            c, s = await open_pair(nursery, net)
            await c.send_all(b"x" * 10_000)
            with trio.move_on_after(5) as scope:
                await c.send_all(b"y")
            assert scope.cancelled_caught, "sender was not held back by a full window"
            assert len(await s.receive_some(20_000)) == 10_000
            await c.send_all(b"y")
            nursery.cancel_scope.cancel()

    sim(body)


def test_serve_rejects_foreign_address_and_port_in_use():
    async def body():
        net = make_net()
        async with trio.open_nursery() as nursery:
            with pytest.raises(OSError):
                await nursery.start(net.view("n1").serve, "n2", 9000, lambda s: trio.sleep_forever())
            await nursery.start(net.view("n1").serve, "n1", 9000, lambda s: trio.sleep_forever())
            with pytest.raises(OSError):
                await nursery.start(net.view("n1").serve, "0.0.0.0", 9000, lambda s: trio.sleep_forever())
            nursery.cancel_scope.cancel()

    sim(body)


def test_a_send_yields_only_when_another_task_could_run_first():
    # SimStream.send_all skips its trailing schedule point only when the next pass of
    # trio's loop would run the sender alone; with another task ready, it must yield.
    async def body() -> tuple[list[str], list[str]]:
        net = make_net()
        async with trio.open_nursery() as nursery:
            c, _ = await open_pair(nursery, net)
            await trio.sleep(1)  # every connection-setup task is parked now
            order: list[str] = []

            async def other() -> None:
                order.append("other")

            await c.send_all(b"x")  # alone: no yield, so nothing ran in between
            order.append("after lone send")
            nursery.start_soon(other)  # ready: the send must now let it run first
            await c.send_all(b"y")
            order.append("after send")
            alone = list(order)
            nursery.cancel_scope.cancel()
        return alone

    assert run_deterministic(body, seed=0) == ["after lone send", "other", "after send"]


def test_skipping_lone_schedule_points_keeps_the_schedule():
    # The skipped schedule points would have resumed the same task with nothing in
    # between: a run must trace exactly as one that takes every one of them.
    from simulations.determinism import SimClock
    from simulations.runner import SimOptions, run_simulation

    options = SimOptions(seed=3, duration=2, workload="cluster", faults="none")
    skipping = run_simulation(options)
    original = SimClock.only_this_task_can_run
    SimClock.only_this_task_can_run = lambda self: False
    try:
        yielding = run_simulation(options)
    finally:
        SimClock.only_this_task_can_run = original
    assert skipping["hash"] == yielding["hash"] and skipping["events"] == yielding["events"] > 1000
