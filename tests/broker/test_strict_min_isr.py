"""KIP-966's strict min ISR: with eligible leader replicas on, the HW does not advance while
the ISR is below min(min.insync.replicas, RF).

The ELR's promise is that a replica which left the ISR once it was below min.insync.replicas
holds everything below the HW, so it may be elected. A leader alone in its ISR that still
advanced the HW (over an acks=1 write, or an acks=all write answered
NOT_ENOUGH_REPLICAS_AFTER_APPEND) would make records visible to consumers that the elected
eligible replica lacks: they would vanish after a read.
"""
from __future__ import annotations

import trio

from metadata.image import ELR_FEATURE
from metadata.records import FeatureLevel
from tests.broker import builders as B
from tests.broker.harness import RawClient, running_cluster
from tests.broker.test_replication import FAST, cut_off, heal, make_topic, part, produce, wait_for
from wire.error_codes import ErrorCode as E


def registration(c, topic="t"):
    return c.controller.image.topics_by_name[topic].partitions[0]


async def _leader_left_alone(c, *, elr: bool):
    if elr:
        c.controller.commit([FeatureLevel(ELR_FEATURE, 1)])
    await make_topic(c, replicas=(1, 2), configs={"min.insync.replicas": "2"})
    c1 = await RawClient.connect(c.broker(1).port)
    assert (await produce(c1, B.batch(2))).error_code == E.NONE
    await cut_off(c.broker(2), c)
    assert (await produce(c1, B.batch(3), acks=1)).error_code == E.NONE
    await wait_for(lambda: registration(c).isr == (1,))
    return c1


async def test_with_elr_the_hw_waits_for_min_insync_replicas():
    async with running_cluster(2, static=FAST) as c:
        await _leader_left_alone(c, elr=True)
        assert registration(c).eligible_leader_replicas == (2,)
        await trio.sleep(0.5)  # follower fetches would have moved it by now
        assert part(c, 1).log_end_offset == 5 and part(c, 1).high_watermark == 2
        heal(c.broker(2))  # 2 catches up, rejoins the ISR: the HW moves again
        await wait_for(lambda: registration(c).isr == (1, 2) and part(c, 1).high_watermark == 5)


async def test_without_elr_a_leader_alone_still_advances_the_hw():
    async with running_cluster(2, static=FAST) as c:
        await _leader_left_alone(c, elr=False)
        await wait_for(lambda: part(c, 1).high_watermark == 5)
