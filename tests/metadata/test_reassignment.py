"""Partition reassignment on the controller (KIP-455), sans-IO."""
import pytest

from metadata.controller.alter_partition import AlterPartitionItem, alter_partition
from metadata.controller.reassignment import (
    alter_partition_reassignments, list_partition_reassignments,
)
from metadata.controller.replication import remove_broker_from_isrs
from metadata.log_format import decode_snapshot, encode_snapshot
from metadata.snapshot import image_from_records
from tests.metadata.helpers import apply, cluster, with_topic
from wire.error_codes import ErrorCode


@pytest.fixture
def img():
    # t-0 on [1, 2] led by 1; brokers 3 and 4 hold nothing
    return with_topic(cluster(4), "t", 2, 2, assignments={0: (1, 2), 1: (2, 1)})


def part(img, pid=0):
    return img.topic("t").partitions[pid]


def reassign(img, *wanted):
    records, results = alter_partition_reassignments(img, list(wanted))
    return apply(img, records), results


def isr_to(img, isr, pid=0):
    p = part(img, pid)
    t = img.topic("t")
    records, err, [res] = alter_partition(img, p.leader, img.brokers[p.leader].epoch, [
        AlterPartitionItem(t.topic_id, pid, p.leader_epoch, p.partition_epoch, tuple(isr))])
    assert err == ErrorCode.NONE
    return apply(img, records), res


def test_move_to_other_brokers_completes_when_adding_replicas_join_the_isr(img):
    img, results = reassign(img, ("t", 0, [3, 4]))
    assert results[("t", 0)].error == ErrorCode.NONE
    p = part(img)
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ((3, 4, 1, 2), (3, 4), (1, 2))
    assert (p.leader, p.isr) == (1, (1, 2))  # nothing moves before the new replicas catch up
    [ongoing] = list_partition_reassignments(img)
    assert (ongoing.topic, ongoing.partition, ongoing.adding) == ("t", 0, (3, 4))
    img, res = isr_to(img, (1, 2, 3))  # one of two adding replicas: still in progress
    assert part(img).adding_replicas == (3, 4) and res.error == ErrorCode.NONE
    img, res = isr_to(img, (1, 2, 3, 4))
    p = part(img)
    assert (p.replicas, p.isr, p.adding_replicas, p.removing_replicas) == ((3, 4), (3, 4), (), ())
    assert p.leader == 3 and res.error == ErrorCode.NEW_LEADER_ELECTED  # the old leader was removed
    assert list_partition_reassignments(img) == []


def test_raising_the_replication_factor_keeps_the_leader(img):
    img, _ = reassign(img, ("t", 0, [1, 2, 3]))
    p = part(img)
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ((1, 2, 3), (3,), ())
    img, _ = isr_to(img, (1, 2, 3))
    p = part(img)
    assert (p.replicas, p.isr, p.leader, p.adding_replicas) == ((1, 2, 3), (1, 2, 3), 1, ())


def test_shrinking_to_replicas_already_in_sync_completes_at_once(img):
    img, _ = reassign(img, ("t", 0, [2]))
    p = part(img)
    assert (p.replicas, p.isr, p.leader, p.removing_replicas) == ((2,), (2,), 2, ())


def test_cancel_restores_the_original_replicas(img):
    img, _ = reassign(img, ("t", 0, [3, 4]))
    img, _ = isr_to(img, (1, 2, 3))
    img, results = reassign(img, ("t", 0, None))
    assert results[("t", 0)].error == ErrorCode.NONE
    p = part(img)
    assert (p.replicas, p.isr, p.leader, p.adding_replicas, p.removing_replicas) == (
        (1, 2), (1, 2), 1, (), ())
    _, results = reassign(img, ("t", 0, None))
    assert results[("t", 0)].error == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


def test_several_in_flight_and_a_new_target_overrides_the_old(img):
    img, _ = reassign(img, ("t", 0, [3, 4]), ("t", 1, [2, 1, 3]))
    assert {(o.partition, o.adding) for o in list_partition_reassignments(img)} == {(0, (3, 4)), (1, (3,))}
    img, _ = reassign(img, ("t", 0, [1, 3]))  # replaces the target [3, 4]: 4 (not in sync) is dropped
    p = part(img)
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ((1, 3, 2), (3,), (2,))
    img, _ = isr_to(img, (1, 2, 3))
    p = part(img)
    assert (p.replicas, p.isr, p.leader) == ((1, 3), (1, 3), 1)
    assert [o.partition for o in list_partition_reassignments(img)] == [1]


def test_a_fenced_removed_replica_does_not_block_completion(img):
    img, _ = reassign(img, ("t", 0, [1, 3]))
    img = apply(img, remove_broker_from_isrs(img, 2))  # broker 2 (being removed) fenced
    assert part(img).isr == (1,)
    img, _ = isr_to(img, (1, 3))
    assert (part(img).replicas, part(img).isr) == ((1, 3), (1, 3))


@pytest.mark.parametrize("target,code", [
    ([], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ([1, 1], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ([1, 9], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ([-1, 2], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
])
def test_invalid_targets_are_refused(img, target, code):
    records, results = alter_partition_reassignments(img, [("t", 0, target)])
    assert records == [] and results[("t", 0)].error == code and results[("t", 0)].message


def test_unknown_partitions(img):
    records, results = alter_partition_reassignments(img, [("t", 7, [1]), ("nope", 0, None)])
    assert records == []
    assert {r.error for r in results.values()} == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


@pytest.mark.parametrize("unclean", [False, True])
def test_cancel_that_needs_an_unclean_leader_is_refused_unless_allowed(unclean):
    img = with_topic(cluster(4), "t", 1, 2, assignments={0: (1, 2)},
                     configs={"unclean.leader.election.enable": str(unclean).lower()})
    img, _ = reassign(img, ("t", 0, [3, 4]))
    img, _ = isr_to(img, (1, 2, 3))
    img = apply(img, remove_broker_from_isrs(img, 2))
    img = apply(img, remove_broker_from_isrs(img, 1))  # only an adding replica is in sync now
    assert (part(img).leader, part(img).isr, part(img).adding_replicas) == (3, (3,), (3, 4))
    img, results = reassign(img, ("t", 0, None))
    if not unclean:
        assert results[("t", 0)].error == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
        return
    p = part(img)
    assert results[("t", 0)].error == ErrorCode.NONE
    assert (p.replicas, p.adding_replicas, p.leader_recovery_state) == ((1, 2), (), 1)


def test_a_snapshot_keeps_reassignments_in_progress(img):
    img, _ = reassign(img, ("t", 0, [3, 4]))
    restored = image_from_records(decode_snapshot(encode_snapshot(img)).records)
    p = part(restored)
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ((3, 4, 1, 2), (3, 4), (1, 2))


def test_dropping_in_sync_replicas_waits_until_min_isr_of_the_target_is_in_sync():
    # The target keeps 2 (out of sync) and drops 3 (in sync): completing now would leave
    # the ISR [1] below min.insync.replicas, with 2 lacking acknowledged records.
    img = with_topic(cluster(3, elr=True), "t", 1, 3, assignments={0: (1, 2, 3)},
                     configs={"min.insync.replicas": "2"})
    img, _ = isr_to(img, (1, 3))
    img, _ = reassign(img, ("t", 0, [2, 1]))
    p = part(img)
    assert (p.replicas, p.isr, p.removing_replicas) == ((2, 1, 3), (1, 3), (3,))
    img, _ = isr_to(img, (1, 2, 3))
    p = part(img)
    assert (p.replicas, p.isr, p.removing_replicas, p.eligible_leader_replicas) == ((2, 1), (1, 2), (), ())


def test_a_removed_replica_never_becomes_an_eligible_leader():
    img = with_topic(cluster(3, elr=True), "t", 1, 3, assignments={0: (1, 2, 3)},
                     configs={"min.insync.replicas": "3"})
    img, _ = reassign(img, ("t", 0, [1, 2]))  # completes at once: min(3, 2) = 2 stay in sync
    p = part(img)
    assert (p.replicas, p.isr) == ((1, 2), (1, 2)) and 3 not in p.eligible_leader_replicas
