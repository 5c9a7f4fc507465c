"""Automatic preferred-leader balancing on the active controller (auto.leader.rebalance.enable)."""
from __future__ import annotations

import uuid

import trio

from metadata.controller.elect_leaders import rebalance_preferred_leaders
from metadata.controller.leader_balance import LeaderBalanceSchedule
from metadata.controller.service import ControllerService
from metadata.controller.state_machine import ControllerStateMachine
from metadata.image import METADATA_VERSION
from metadata.records import Partition, RegisterBroker, Topic
from storage.env import RealEnv
from tests.metadata.helpers import apply, cluster
from tests.metadata.test_controller_service_unit import ScriptedDriver, wait_until

TOPIC_ID = uuid.UUID(int=7)


def test_the_schedule_follows_the_settings():
    s = LeaderBalanceSchedule({"leader.imbalance.check.interval.seconds": "5"})
    s.activated(100.0)
    assert not s.due(104.9) and s.due(105.0)
    s.ran(105.0, more_to_do=True)
    assert s.due(105.0)  # more partitions to move: again at the next tick
    s.ran(105.0, more_to_do=False)
    assert s.next_at == 110.0
    off = LeaderBalanceSchedule({"auto.leader.rebalance.enable": "false"})
    off.activated(0.0)
    assert not off.due(1e9)


def imbalanced(isr=(1, 2), fenced=()):
    return apply(cluster(3, fenced=fenced), [
        Topic("t", TOPIC_ID),
        Partition(0, TOPIC_ID, replicas=(1, 2), isr=isr, leader=2),   # preferred 1 does not lead
        Partition(1, TOPIC_ID, replicas=(2, 1), isr=(1, 2), leader=2)])


def test_only_partitions_whose_live_preferred_replica_is_in_sync_move():
    records, more = rebalance_preferred_leaders(imbalanced())
    assert [(r.partition_id, r.leader) for r in records] == [(0, 1)] and not more
    assert rebalance_preferred_leaders(imbalanced(isr=(2,)))[0] == []  # preferred out of the ISR
    assert rebalance_preferred_leaders(imbalanced(fenced=(1,)))[0] == []  # preferred fenced
    records, more = rebalance_preferred_leaders(apply(imbalanced(), [Partition(2, TOPIC_ID, (1, 2), (1, 2), leader=2)]),
                                                limit=1)
    assert len(records) == 1 and more


async def test_the_active_controller_moves_leadership_back_after_the_check_interval(nursery):
    sm = ControllerStateMachine()
    driver = ScriptedDriver(sm)
    service = ControllerService(RealEnv(seed=1), node_id=1, driver=driver, state_machine=sm, tick=0.01,
                                static={"leader.imbalance.check.interval.seconds": "1"})
    await nursery.start(service.run)

    async def commit_forever():
        while True:
            driver.commit_all()
            await trio.sleep(0.005)

    driver.elect(1)
    nursery.start_soon(commit_forever)
    await wait_until(lambda: service.active and METADATA_VERSION in sm.image.features)
    started = trio.current_time()

    def setup(image, off, now):
        return [[RegisterBroker(b, uuid.UUID(int=b), off, fenced=False) for b in (1, 2)]
                + [Topic("t", TOPIC_ID), Partition(0, TOPIC_ID, replicas=(1, 2), isr=(1, 2), leader=2)]], None

    await service.submit("setup", setup)
    assert sm.image.topics_by_id[TOPIC_ID].partitions[0].leader == 2
    await wait_until(lambda: sm.image.topics_by_id[TOPIC_ID].partitions[0].leader == 1, timeout=5)
    assert trio.current_time() - started >= 0.9  # not before the interval
