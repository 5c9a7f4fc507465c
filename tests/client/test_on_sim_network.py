"""The client runs unchanged on the simulation's network (latency, a partition that heals).

Uses simulations/ (SimNetwork, SimEnv) when present; the mini cluster stands in for brokers.
"""
import random

import pytest
import trio

sim_network = pytest.importorskip("simulations.network")
sim_env = pytest.importorskip("simulations.env")
sim_trace = pytest.importorskip("simulations.trace")

from raftkafka.client import Consumer, Producer  # noqa: E402
from storage.memfs import MemFileSystem  # noqa: E402
from tests.client.mini_broker import MiniCluster  # noqa: E402


def make_env(net, name, seed=5):
    return sim_env.SimEnv(name, seed=seed, incarnation=0, net=net, disk=MemFileSystem(),
                          clock=sim_env.SkewedClock())


async def run_once(seed):
    net = sim_network.SimNetwork(random.Random(seed), sim_trace.Trace())
    for host in ("broker", "client"):
        net.add_host(host)
    broker_env, client_env = make_env(net, "broker", seed), make_env(net, "client", seed)
    mini = MiniCluster(broker_env, (1,), hosts={1: ("broker", 9092)})
    mini.create_topic("t", 3)
    results = []
    async with trio.open_nursery() as nursery:
        await mini.serve_all(nursery)
        async with Producer(client_env, "broker:9092", request_timeout_ms=2000, linger_ms=1) as producer:
            for i in range(10):
                results.append(await producer.send_and_wait("t", b"%d" % i, key=b"%d" % i))
            net.partition([["broker"], ["client"]])
            futures = [await producer.send("t", b"late-%d" % i, key=b"%d" % i) for i in range(5)]
            await trio.sleep(5)
            net.heal()
            results += [await f for f in futures]
        async with Consumer(client_env, "broker:9092", auto_offset_reset="earliest") as consumer:
            consumer.assign([("t", p) for p in range(3)])
            records = []
            with trio.fail_after(60):
                while len(records) < 15:
                    records += await consumer.poll(1.0)
        nursery.cancel_scope.cancel()
    return [(r.partition, r.offset) for r in results], sorted((r.partition, r.offset, r.value) for r in records)


async def test_producer_and_consumer_survive_a_partition_on_the_sim_network(autojump_clock):
    placements, records = await run_once(seed=3)
    assert len(records) == 15 and len({(p, o) for p, o, _ in records}) == 15
    assert sorted(placements) == sorted((p, o) for p, o, _ in records)
