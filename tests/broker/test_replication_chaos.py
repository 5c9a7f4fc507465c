"""Randomized faults against in-process replicas, checked against Kafka's replication guarantees.

An acks=all writer keeps producing to whoever leads while, step by step (the schedule drawn
from a seed), followers stall and heal, leaders stop (sometimes right after being cut off
from both followers), get fenced and come back as new incarnations, and any replica may lose
power (and with it everything it had not fsynced). At the end, with everything healed: every acknowledged batch is at its offset
on every replica, each offset holds one record, and all logs are identical below the HW.
"""
from __future__ import annotations

import random

import pytest
import trio

from tests.broker import builders as B
from tests.broker.harness import RawClient, running_cluster
from tests.broker.test_replication import FAST, cut_off, heal, isr, log_bytes, make_topic, part, wait_for
from wire.batch_header import iter_batches
from wire.error_codes import ErrorCode as E
from wire.records import SimpleRecord, build_batch, decode_batch

STATIC = {**FAST, "replica.lag.time.max.ms": "500"}


def leader_of(c) -> int:
    return c.controller.image.topics_by_name["t"].partitions[0].leader


async def writer(c, acked: dict[int, bytes], stop: trio.Event) -> None:
    """acks=all, one record per batch with a unique value; remembers offset -> value when acked."""
    n = 0
    client, client_of = None, None
    while not stop.is_set():
        leader = leader_of(c)
        try:
            if leader < 0 or c.broker(leader).port is None or leader not in [b.node_id for b in c.controller.brokers]:
                await trio.sleep(0.02)
                continue
            if client_of != leader:
                if client is not None:
                    await client.aclose()
                client, client_of = await RawClient.connect(c.broker(leader).port), leader
            value = b"v%06d" % n
            n += 1
            batch = build_batch([SimpleRecord(b"k", value)])
            r = B.one_partition(await client.call(B.produce("t", 0, batch, acks=-1, timeout_ms=1000), 8, timeout=5))
            if r.error_code == E.NONE:
                acked[r.base_offset] = value
            else:
                await trio.sleep(0.01)
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError, AssertionError):
            client, client_of = None, None
            await trio.sleep(0.02)


def values_by_offset(data: bytes) -> dict[int, bytes]:
    out = {}
    for pos, _ in iter_batches(data):
        _, records = decode_batch(data, pos)
        for r in records:
            out[r.offset] = r.value
    return out


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
async def test_acknowledged_records_survive_random_stalls_and_leader_restarts(seed):
    rng = random.Random(seed)
    async with running_cluster(3, static=STATIC, own_disks=True) as c:
        await make_topic(c, configs={"min.insync.replicas": "2"})
        acked: dict[int, bytes] = {}
        stop = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer, c, acked, stop)
            for _ in range(6):
                await trio.sleep(rng.uniform(0.1, 0.4))
                leader = leader_of(c)
                if leader < 0:
                    continue
                followers = [i for i in (1, 2, 3) if i != leader]
                action = rng.choice(["stall", "kill", "isolate-and-kill", "power-loss"])
                if action == "power-loss":
                    # Any replica loses what it had not fsynced and re-registers (uncleanly).
                    await c.crash(rng.choice([leader, *followers]), rng)
                    continue
                if action == "stall":
                    victim = rng.choice(followers)
                    await cut_off(c.broker(victim), c)
                    await trio.sleep(rng.uniform(0.1, 0.9))  # sometimes past the lag time
                    heal(c.broker(victim))
                    continue
                if action == "isolate-and-kill":
                    # The leader dies holding appends its followers never got: not acknowledged.
                    for i in followers:
                        await cut_off(c.broker(i), c)
                    await trio.sleep(rng.uniform(0.05, 0.2))
                await c.stop(leader)
                c.controller.fence(leader)
                await c.settle()
                for i in followers:
                    heal(c.broker(i))
                await trio.sleep(rng.uniform(0.05, 0.3))
                await c.restart(leader)
            stop.set()
        await wait_for(lambda: isr(c) == (1, 2, 3), timeout=20)
        leader = leader_of(c)
        await wait_for(lambda: all(part(c, i).log_end_offset == part(c, leader).log_end_offset for i in (1, 2, 3))
                       and part(c, leader).high_watermark == part(c, leader).log_end_offset, timeout=20)
        hw = part(c, leader).high_watermark
        logs = {i: log_bytes(c, i, hw) for i in (1, 2, 3)}
        assert logs[1] == logs[2] == logs[3]
        final = values_by_offset(logs[leader])
        assert sorted(final) == list(range(hw))  # one record per offset, no gaps
        assert len(acked) > 20
        lost = {o: v for o, v in acked.items() if final.get(o) != v}
        assert not lost, f"acknowledged records lost or overwritten: {sorted(lost)[:5]}"
