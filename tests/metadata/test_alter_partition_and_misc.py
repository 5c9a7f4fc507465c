import pytest

from metadata.controller.alter_partition import AlterPartitionItem, alter_partition
from metadata.controller.brokers import HeartbeatRequest, broker_heartbeat
from metadata.controller.elect_leaders import (
    ElectionType, elect_leaders, rebalance_preferred_leaders,
)
from metadata.controller.heartbeats import BrokerHeartbeatManager
from metadata.controller.producer_ids import allocate_producer_ids
from metadata.partition import RECOVERING
from metadata.records import PartitionChange
from tests.metadata.helpers import apply, cluster, with_topic
from wire.error_codes import ErrorCode


@pytest.fixture
def img():
    return with_topic(cluster(3), "t", 1, 3)


def alter(img, broker=None, **overrides):
    t = img.topic("t")
    p = t.partitions[0]
    broker = p.leader if broker is None else broker
    fields = dict(topic_id=t.topic_id, partition_id=0, leader_epoch=p.leader_epoch,
                  partition_epoch=p.partition_epoch, new_isr=[b for b in p.isr])
    fields.update(overrides)
    return alter_partition(img, broker, img.brokers[broker].epoch, [AlterPartitionItem(**fields)])


def test_isr_shrink_and_expand(img):
    leader = img.topic("t").partitions[0].leader
    others = [b for b in (1, 2, 3) if b != leader]
    records, err, [res] = alter(img, new_isr=[leader, others[0]])
    assert err == ErrorCode.NONE and res.error == ErrorCode.NONE
    new = apply(img, records)
    p = new.topic("t").partitions[0]
    assert p.isr == (leader, others[0]) and p.partition_epoch == 1 and p.leader_epoch == 0
    assert (res.isr, res.partition_epoch) == (p.isr, 1)
    # stale partition epoch (the request was computed before the shrink)
    _, _, [res] = alter(new, new_isr=[leader, *others], partition_epoch=0)
    assert res.error == ErrorCode.INVALID_UPDATE_VERSION
    records, _, [res] = alter(new, new_isr=[leader, *others])
    assert res.error == ErrorCode.NONE and len(apply(new, records).topic("t").partitions[0].isr) == 3


@pytest.mark.parametrize("overrides,code", [
    ({"leader_epoch": 5}, ErrorCode.FENCED_LEADER_EPOCH),
    ({"leader_epoch": -1}, ErrorCode.FENCED_LEADER_EPOCH),
    ({"partition_epoch": 3}, ErrorCode.INVALID_UPDATE_VERSION),
    ({"partition_id": 9}, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ({"new_isr": [1, 1]}, ErrorCode.INVALID_REQUEST),
    ({"new_isr": [7]}, ErrorCode.INVALID_REQUEST),
    ({"leader_recovery_state": RECOVERING}, ErrorCode.INVALID_REQUEST),
])
def test_alter_partition_rejections(img, overrides, code):
    records, err, [res] = alter(img, **overrides)
    assert (records, err, res.error) == ([], ErrorCode.NONE, code)


def test_stale_broker_epoch_and_non_leader(img):
    t = img.topic("t")
    item = AlterPartitionItem(t.topic_id, 0, 0, 0, [1])
    assert alter_partition(img, 1, 999, [item])[1] == ErrorCode.STALE_BROKER_EPOCH
    follower = next(b for b in (1, 2, 3) if b != t.partitions[0].leader)
    _, _, [res] = alter(img, broker=follower)
    assert res.error == ErrorCode.INVALID_REQUEST


def test_fenced_or_mismatched_epoch_replica_is_ineligible(img):
    p = img.topic("t").partitions[0]
    leader = p.leader
    records, _, _ = alter(img, new_isr=[leader])
    img = apply(img, records)
    other = next(b for b in (1, 2, 3) if b != leader)
    hb = BrokerHeartbeatManager()
    hb.activate(img, 0.0)
    batches, _ = broker_heartbeat(img, HeartbeatRequest(other, img.brokers[other].epoch, 0,
                                                        want_fence=True),
                                  heartbeats=hb, now=0.0, next_offset=0)
    fenced = apply(img, batches)
    _, _, [res] = alter(fenced, new_isr=[leader, other])
    assert res.error == ErrorCode.INELIGIBLE_REPLICA
    _, _, [res] = alter(img, new_isr=[leader, other], new_isr_broker_epochs=[-1, 12345])
    assert res.error == ErrorCode.INELIGIBLE_REPLICA


def test_producer_id_blocks():
    img = cluster(1)
    records, block = allocate_producer_ids(img, 1, img.brokers[1].epoch)
    assert (block.first_id, block.size) == (0, 1000)
    img = apply(img, records)
    _, block = allocate_producer_ids(img, 1, img.brokers[1].epoch)
    assert block.first_id == 1000
    assert allocate_producer_ids(img, 1, 0)[1].error == ErrorCode.STALE_BROKER_EPOCH
    assert allocate_producer_ids(img, 5, 0)[1].error == ErrorCode.BROKER_ID_NOT_REGISTERED


def test_preferred_and_unclean_elections():
    img = with_topic(cluster(3), "t", 3, 2)
    t = img.topic("t")
    # move every leader off its preferred replica
    moves = [PartitionChange(pid, t.topic_id, leader=p.replicas[1])
             for pid, p in t.partitions.items()]
    img = apply(img, moves)
    records, results = elect_leaders(img, ElectionType.PREFERRED, [("t", 0), ("x", 0)])
    assert results == {("t", 0): ErrorCode.NONE, ("x", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    img2 = apply(img, records)
    _, results = elect_leaders(img2, ElectionType.PREFERRED, [("t", 0)])
    assert results == {("t", 0): ErrorCode.ELECTION_NOT_NEEDED}
    records, more = rebalance_preferred_leaders(img2, limit=1)
    assert len(records) == 1 and more
    records, more = rebalance_preferred_leaders(img2)
    assert len(records) == 2 and not more
    _, results = elect_leaders(img2, ElectionType.UNCLEAN, [("t", 0)])
    assert results == {("t", 0): ErrorCode.ELECTION_NOT_NEEDED}
