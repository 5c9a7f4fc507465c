"""Leader elections as the replicas live them: unclean (KIP-704 recovery), clean-only, ELR (KIP-966)."""
from __future__ import annotations

import random

from metadata.image import ELR_FEATURE
from metadata.partition import RECOVERED
from metadata.records import FeatureLevel
from tests.broker import builders as B
from tests.broker.harness import RawClient, running_cluster
from tests.broker.test_replication import FAST, cut_off, heal, log_bytes, make_topic, part, produce, wait_for
from wire.batch_header import iter_batches
from wire.error_codes import ErrorCode as E


def registration(c, topic="t"):
    return c.controller.image.topics_by_name[topic].partitions[0]


async def _lagging_follower_then_leader_dies(c, unclean: bool):
    """Replicas (1, 2): 2 stops fetching, 1 appends 3 more records alone (ISR shrinks to [1],
    so they are committed), then 1 dies and is fenced."""
    await make_topic(c, replicas=(1, 2), configs={"unclean.leader.election.enable": str(unclean).lower()})
    c1 = await RawClient.connect(c.broker(1).port)
    assert (await produce(c1, B.batch(2))).error_code == E.NONE
    await cut_off(c.broker(2), c)
    assert (await produce(c1, B.batch(3), acks=1)).error_code == E.NONE
    await wait_for(lambda: registration(c).isr == (1,) and part(c, 1).high_watermark == 5)
    await c.stop(1)
    c.controller.fence(1)
    await c.settle()
    heal(c.broker(2))


async def test_unclean_election_elects_the_lagging_replica_which_marks_itself_recovered():
    async with running_cluster(2, static=FAST) as c:
        await _lagging_follower_then_leader_dies(c, unclean=True)
        reg = registration(c)
        assert reg.leader == 2 and reg.isr == (2,)
        # KIP-704: elected uncleanly (RECOVERING); the new leader tells the controller it has recovered.
        await wait_for(lambda: registration(c).leader_recovery_state == RECOVERED)
        c2 = await RawClient.connect(c.broker(2).port)
        r = await produce(c2, B.batch(1), acks=1)
        assert (r.error_code, r.base_offset) == (E.NONE, 2)  # offsets 2-4 were lost: that is unclean election
        await c.restart(1)
        await wait_for(lambda: part(c, 1).log_end_offset == 3 and part(c, 1).high_watermark == 3)
        assert log_bytes(c, 1, 3) == log_bytes(c, 2, 3)


async def test_without_unclean_election_the_partition_waits_for_the_last_isr_member():
    async with running_cluster(2, static=FAST) as c:
        await _lagging_follower_then_leader_dies(c, unclean=False)
        reg = registration(c)
        assert reg.leader == -1 and reg.isr == (1,)  # offline: 2 lacks committed records
        c2 = await RawClient.connect(c.broker(2).port)
        assert (await produce(c2, B.batch(1))).error_code == E.NOT_LEADER_OR_FOLLOWER
        await c.restart(1)
        assert registration(c).leader == 1
        c1 = await RawClient.connect(c.broker(1).port)
        await wait_for(lambda: part(c, 1).high_watermark == 5 and part(c, 2).log_end_offset == 5)
        fetched = B.one_partition(await c1.call(B.fetch([("t", 0, 0)]), 11))
        assert [h.last_offset for _, h in iter_batches(bytes(fetched.records))] == [1, 4]  # nothing committed lost
        assert log_bytes(c, 2, 5) == log_bytes(c, 1, 5)


async def test_an_eligible_leader_replica_takes_over_and_an_unclean_restart_leaves_the_elr():
    async with running_cluster(3, static=FAST) as c:
        c.controller.commit([FeatureLevel(ELR_FEATURE, 1)])
        await make_topic(c, configs={"min.insync.replicas": "2"})
        c1 = await RawClient.connect(c.broker(1).port)
        for _ in range(2):
            assert (await produce(c1, B.batch(2))).error_code == E.NONE
        c.controller.fence(3)
        c.controller.fence(2)  # below min.insync.replicas: 2 leaves the ISR into the ELR
        assert registration(c).isr == (1,) and registration(c).eligible_leader_replicas == (2,)
        await c.stop(1)
        c.controller.fence(1)
        reg = registration(c)
        assert reg.leader == -1 and reg.isr == () and set(reg.eligible_leader_replicas) == {1, 2}
        c.controller.unfence(2)  # broker 2 kept running: its log has every committed record
        await c.settle()
        assert registration(c).leader == 2 and registration(c).isr == (2,)
        await wait_for(lambda: part(c, 2).is_leader and part(c, 2).log_end_offset == 4)
        c2 = await RawClient.connect(c.broker(2).port)
        assert (await produce(c2, B.batch(1))).error_code == E.NOT_ENOUGH_REPLICAS  # ISR [2] < 2
        # Broker 1 comes back from an unclean shutdown: it may have lost unflushed records, so
        # it is no longer an eligible leader; it rejoins the ISR only by replicating.
        await c.restart(1)
        assert 1 not in registration(c).eligible_leader_replicas
        await wait_for(lambda: registration(c).isr == (1, 2))
        assert registration(c).eligible_leader_replicas == ()
        # Strict min ISR (KIP-966): alone in the ISR, 2 could not move its HW; with 1 back it can.
        await wait_for(lambda: part(c, 2).high_watermark == 4)
        fetched = B.one_partition(await c2.call(B.fetch([("t", 0, 0)]), 11))
        assert [h.last_offset for _, h in iter_batches(bytes(fetched.records))] == [1, 3]
        r = await produce(c2, B.batch(1))
        assert (r.error_code, r.base_offset) == (E.NONE, 4)


async def test_the_last_isr_member_losing_unflushed_data_does_not_lose_committed_records():
    # KIP-966: broker 1, alone in the ISR, loses power and with it every record it had not
    # fsynced (the default flush policy leaves that to replication). It re-registers as an
    # unclean restart: it leaves the ISR *and* the ELR, so it cannot lead with its shortened
    # log; the eligible replica 2 (which had every committed record) takes over instead.
    async with running_cluster(3, static=FAST, own_disks=True) as c:
        c.controller.commit([FeatureLevel(ELR_FEATURE, 1)])
        await make_topic(c, configs={"min.insync.replicas": "2"})
        c1 = await RawClient.connect(c.broker(1).port)
        for _ in range(3):
            assert (await produce(c1, B.batch(2))).error_code == E.NONE
        committed = log_bytes(c, 1, 6)
        c.controller.fence(3)
        c.controller.fence(2)
        assert registration(c).isr == (1,) and registration(c).eligible_leader_replicas == (2,)
        await c.crash(1, random.Random(5))
        assert part(c, 1).log_end_offset < 6  # the crash really lost acknowledged records here
        reg = registration(c)
        assert reg.leader == -1 and 1 not in reg.isr and 1 not in reg.eligible_leader_replicas
        c.controller.unfence(2)
        await c.settle()
        assert registration(c).leader == 2
        await wait_for(lambda: part(c, 2).is_leader and part(c, 2).high_watermark == 6)
        assert log_bytes(c, 2, 6) == committed
        await wait_for(lambda: part(c, 1).log_end_offset == 6 and registration(c).isr == (1, 2))
        assert log_bytes(c, 1, 6) == committed
