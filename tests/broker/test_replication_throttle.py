"""Replication throttles: the rate measure, which replicas they apply to, and a throttled
reassignment that waits for its quota (in-process brokers, real replication)."""
from __future__ import annotations

import pytest
import trio

from broker.replication_throttle import FOLLOWER, LEADER, RateQuota, ReplicationThrottles
from tests.broker import builders as B
from tests.broker.harness import RawClient, running_cluster
from tests.broker.test_replication import FAST, make_topic, part, produce, wait_for
from tests.metadata.helpers import apply, cluster, with_topic
from metadata.records import Config
from wire.error_codes import ErrorCode as E


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_rate_is_bytes_over_at_least_ten_seconds_of_samples():
    clock = Clock()
    q = RateQuota(clock)
    q.limit = 1000
    q.record(5000)
    assert q.rate() == 500 and not q.exceeded()  # a young window counts as 10 s
    q.record(6000)
    assert q.exceeded()
    clock.now += 30  # every sample has aged out
    assert q.rate() == 0 and not q.exceeded()


def test_only_the_named_replicas_on_this_broker_are_throttled_and_only_when_out_of_sync():
    img = with_topic(cluster(3), "t", 3, 2)
    img = apply(img, [Config(2, "t", "leader.replication.throttled.replicas", "0:1,1:2"),
                      Config(2, "t", "follower.replication.throttled.replicas", "*"),
                      Config(4, "1", "leader.replication.throttled.rate", "10"),
                      Config(4, "", "follower.replication.throttled.rate", "20")])
    clock = Clock()
    t = ReplicationThrottles(clock, 1, lambda: img)
    assert t.throttled(LEADER, "t", 0) and not t.throttled(LEADER, "t", 1)
    assert all(t.throttled(FOLLOWER, "t", p) for p in range(3)) and not t.throttled(FOLLOWER, "u", 0)
    assert (t.quotas[LEADER].limit, t.quotas[FOLLOWER].limit) == (10, 20)  # per-broker, cluster default
    assert not t.should_throttle(LEADER, "t", 0, in_sync=False)  # quota not used yet
    t.record(LEADER, "t", 1, 10_000)  # not throttled here: not counted
    assert not t.quotas[LEADER].exceeded()
    t.record(LEADER, "t", 0, 1000)
    assert t.should_throttle(LEADER, "t", 0, in_sync=False)
    assert not t.should_throttle(LEADER, "t", 0, in_sync=True)  # in-sync replicas never wait
    other = ReplicationThrottles(clock, 3, lambda: img)
    assert not other.throttled(LEADER, "t", 0) and other.quotas[LEADER].limit == float("inf")


@pytest.mark.parametrize("side,replicas,broker", [("follower", "0:3", "3"), ("leader", "0:1", "1")])
async def test_a_throttled_new_replica_waits_for_its_quota_and_catches_up_once_it_is_lifted(side, replicas, broker):
    static = {**FAST, "replica.fetch.max.bytes": "16384"}
    async with running_cluster(3, static=static) as c:
        await make_topic(c, replicas=(1, 2))
        client = await RawClient.connect(c.broker(1).port)
        for _ in range(20):
            assert (await produce(client, B.batch(10, value_size=1000))).error_code == E.NONE
        end = part(c, 1).log_end_offset
        c.controller.commit([Config(2, "t", f"{side}.replication.throttled.replicas", replicas),
                             Config(4, broker, f"{side}.replication.throttled.rate", "100")])
        reply = await c.controller.alter_partition_reassignments([("t", 0, (1, 2, 3))])
        assert reply.results[("t", 0)].error == E.NONE
        await wait_for(lambda: c.broker(3).replicas.get("t", 0) is not None)
        await trio.sleep(1.5)
        copied = part(c, 3).log_end_offset
        assert 0 < copied < end  # one fetch went through, then the quota holds the rest back
        assert c.controller.image.topics_by_name["t"].partitions[0].adding_replicas == (3,)
        c.controller.commit([Config(4, broker, f"{side}.replication.throttled.rate", None)])
        await wait_for(lambda: c.controller.image.topics_by_name["t"].partitions[0].adding_replicas == ())
        assert part(c, 3).log_end_offset == end
