import dataclasses
import uuid

from metadata.controller.brokers import (
    BrokerRegistrationRequest, HeartbeatRequest, broker_heartbeat, fence_stale_broker,
    register_broker, unregister_broker,
)
from metadata.controller.heartbeats import BrokerHeartbeatManager
from metadata.controller.replication import MAX_PARTITION_CHANGES_PER_BATCH
from metadata.records import NO_LEADER, BrokerRegistrationChange, PartitionChange
from tests.metadata.helpers import apply, cluster, with_topic
from wire.error_codes import ErrorCode


def manager(img, now=0.0):
    hb = BrokerHeartbeatManager()
    hb.activate(img, now)
    return hb


def test_registration_epochs_and_duplicates():
    img = cluster(0)
    hb = BrokerHeartbeatManager()
    req = BrokerRegistrationRequest(1, uuid.UUID(int=5), rack="r1")
    batches, res = register_broker(img, req, next_offset=40, heartbeats=hb, now=0.0)
    assert res.error == ErrorCode.NONE and res.broker_epoch == 40
    img = apply(img, batches)
    assert img.brokers[1].fenced and img.brokers[1].epoch == 40
    # a retry of the same incarnation: same epoch, no records
    assert register_broker(img, req, next_offset=50, heartbeats=hb, now=1.0) == \
        ([], type(res)(ErrorCode.NONE, 40))
    other = BrokerRegistrationRequest(1, uuid.UUID(int=6))
    hb.set_fenced(1, False)  # a live (unfenced) session blocks another incarnation...
    _, res = register_broker(img, other, next_offset=50, heartbeats=hb, now=2.0)
    assert res.error == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    hb.set_fenced(1, True)  # ...a fenced one (e.g. after controlled shutdown) does not, as in Kafka
    _, res = register_broker(img, other, next_offset=55, heartbeats=hb, now=2.0)
    assert res.error == ErrorCode.NONE and res.broker_epoch == 55
    batches, res = register_broker(img, other, next_offset=60, heartbeats=hb, now=20.0)
    assert res.broker_epoch == 60 and apply(img, batches).brokers[1].epoch == 60


def test_a_registration_no_metadata_answer_could_carry_is_refused():
    # Found by hand after the protocol fuzzer: a broker id of 2^62 registered, heartbeated and
    # unfenced made every Metadata answer fail to encode (node ids are int32).
    from metadata.records import Endpoint

    img = cluster(0)
    good = Endpoint("PLAINTEXT", "broker-1.example.com", 9092, 0)
    refused = [
        BrokerRegistrationRequest(1 << 62, uuid.UUID(int=5), (good,)),
        BrokerRegistrationRequest(1 << 31, uuid.UUID(int=5), (good,)),
        BrokerRegistrationRequest(-7, uuid.UUID(int=5), (good,)),
        BrokerRegistrationRequest(1, uuid.UUID(int=5), (good._replace(host="\x00"),)),
        BrokerRegistrationRequest(1, uuid.UUID(int=5), (good._replace(port=70000),)),
        BrokerRegistrationRequest(1, uuid.UUID(int=5), (good._replace(security_protocol=9),)),
        BrokerRegistrationRequest(1, uuid.UUID(int=5), (good._replace(name=""),)),
        BrokerRegistrationRequest(1, uuid.UUID(int=5), (good,) * 101),
        BrokerRegistrationRequest(1, uuid.UUID(int=5), (good,), rack="r" * 32768),
        BrokerRegistrationRequest(1, uuid.UUID(int=5), (good,), log_dirs=(uuid.UUID(int=1),) * 1001),
    ]
    for req in refused:
        batches, res = register_broker(img, req, next_offset=40, heartbeats=BrokerHeartbeatManager(), now=0.0)
        assert (batches, res.error) == ([], ErrorCode.INVALID_REQUEST), req
    largest = BrokerRegistrationRequest((1 << 31) - 1, uuid.UUID(int=5), (good, good._replace(port=0)), rack="r" * 32767)
    _, res = register_broker(img, largest, next_offset=40, heartbeats=BrokerHeartbeatManager(), now=0.0)
    assert res.error == ErrorCode.NONE


def heartbeat(img, hb, bid, now, offset=10**6, next_offset=10**6, **kw):
    req = HeartbeatRequest(bid, img.brokers[bid].epoch, offset, **kw)
    batches, res = broker_heartbeat(img, req, heartbeats=hb, now=now, next_offset=next_offset)
    return apply(img, batches), batches, res


def test_unfence_only_once_caught_up_then_elect_leaderless():
    img = with_topic(cluster(2), "t", 1, 2)
    hb = manager(img)
    batches, fenced = fence_stale_broker(img, hb, 10.0)  # both stale: one per call
    img = apply(img, batches)
    batches, fenced2 = fence_stale_broker(img, hb, 10.0)
    img = apply(img, batches)
    assert {fenced, fenced2} == {1, 2} and img.topic("t").partitions[0].leader == NO_LEADER
    epoch = img.brokers[1].epoch
    _, batches, res = heartbeat(img, hb, 1, 11.0, offset=epoch - 1)
    assert res.is_fenced and not res.is_caught_up and batches == []
    img, batches, res = heartbeat(img, hb, 1, 12.0, offset=epoch)
    assert res.is_caught_up and not res.is_fenced and not img.brokers[1].fenced
    assert isinstance(batches[0][0], BrokerRegistrationChange)
    # broker 2 was fenced last, so it is the partition's last ISR member: 1 may not lead
    assert (fenced, fenced2) == (1, 2)
    assert img.topic("t").partitions[0].leader == NO_LEADER
    img, _, res = heartbeat(img, hb, 2, 12.0, offset=img.brokers[2].epoch)
    assert img.topic("t").partitions[0].leader == 2


def test_stale_epoch_and_unknown_broker():
    img = cluster(1)
    hb = manager(img)
    _, res = broker_heartbeat(img, HeartbeatRequest(1, 5, 0), heartbeats=hb, now=0,
                              next_offset=0)
    assert res.error == ErrorCode.STALE_BROKER_EPOCH
    _, res = broker_heartbeat(img, HeartbeatRequest(9, 5, 0), heartbeats=hb, now=0,
                              next_offset=0)
    assert res.error == ErrorCode.BROKER_ID_NOT_REGISTERED


def test_fencing_moves_leaders_in_bounded_batches_with_single_epoch_bumps():
    img = with_topic(cluster(3), "big", 2400, 3)
    hb = manager(img)
    for b in (1, 2):
        heartbeat(img, hb, b, 8.0)
    batches, fenced = fence_stale_broker(img, hb, 9.5)
    assert fenced == 3
    assert all(len(b) <= MAX_PARTITION_CHANGES_PER_BATCH for b in batches)
    changes = [r for b in batches for r in b if isinstance(r, PartitionChange)]
    assert len(changes) == 2400  # broker 3 is in every ISR
    assert batches[-1] == [BrokerRegistrationChange(3, img.brokers[3].epoch, fenced=True)]
    new = apply(img, batches)
    for pid, old in img.topic("big").partitions.items():
        p = new.topic("big").partitions[pid]
        assert 3 not in p.isr and p.leader in (1, 2)
        assert p.partition_epoch == old.partition_epoch + 1
        assert p.leader_epoch == old.leader_epoch + (1 if old.leader == 3 else 0)
    assert fence_stale_broker(new, hb, 9.6) == ([], None)


def test_controlled_shutdown_moves_leaders_first_then_grants():
    img = with_topic(cluster(3), "t", 6, 2)
    hb = manager(img)
    img2, batches, res = heartbeat(img, hb, 1, 1.0, offset=500, next_offset=600,
                                   want_shutdown=True)
    assert not res.should_shutdown and img2.brokers[1].in_controlled_shutdown
    assert img2.partitions_led_by(1) == 0
    # others have not yet seen the moves: keep waiting
    heartbeat(img2, hb, 2, 1.1, offset=500)
    heartbeat(img2, hb, 3, 1.1, offset=500)
    _, _, res = heartbeat(img2, hb, 1, 1.2, offset=10**6, want_shutdown=True)
    assert not res.should_shutdown
    for b in (2, 3):
        heartbeat(img2, hb, b, 1.3, offset=10**6)
    img3, _, res = heartbeat(img2, hb, 1, 1.4, offset=10**6, want_shutdown=True)
    assert res.should_shutdown and res.is_fenced and img3.brokers[1].fenced


def test_a_new_controller_waits_for_the_moves_of_a_controlled_shutdown_it_inherits():
    img = with_topic(cluster(3), "t", 6, 2)
    old = manager(img)
    img2, _, res = heartbeat(img, old, 1, 1.0, offset=500, next_offset=600, want_shutdown=True)
    assert not res.should_shutdown and img2.brokers[1].in_controlled_shutdown
    img2 = dataclasses.replace(img2, offset=650)  # the moves committed below the image's end
    new = manager(img2, now=2.0)  # a failover: the moves' offset is not known, the image bounds it
    for b in (2, 3):
        heartbeat(img2, new, b, 2.1, offset=640)
    _, _, res = heartbeat(img2, new, 1, 2.2, offset=10**6, want_shutdown=True)
    assert not res.should_shutdown  # brokers 2 and 3 may not have the moves yet
    for b in (2, 3):
        heartbeat(img2, new, b, 2.3, offset=650)
    _, _, res = heartbeat(img2, new, 1, 2.4, offset=10**6, want_shutdown=True)
    assert res.should_shutdown


def test_unclean_restart_drops_broker_from_elr():
    img = with_topic(cluster(3, elr=True), "t", 1, 3, configs={"min.insync.replicas": "3"})
    hb = manager(img)
    for b in (1, 2, 3):
        batches, _ = fence_stale_broker(img, hb, 20.0)
        img = apply(img, batches)
    p = img.topic("t").partitions[0]
    assert p.isr == () and set(p.eligible_leader_replicas) == {1, 2, 3}
    req = BrokerRegistrationRequest(2, uuid.UUID(int=77), previous_broker_epoch=-1)
    batches, res = register_broker(img, req, next_offset=900, heartbeats=hb, now=30.0)
    img = apply(img, batches)
    assert 2 not in img.topic("t").partitions[0].eligible_leader_replicas
    clean = BrokerRegistrationRequest(3, uuid.UUID(int=78),
                                      previous_broker_epoch=img.brokers[3].epoch)
    batches, _ = register_broker(img, clean, next_offset=950, heartbeats=hb, now=30.0)
    assert 3 in apply(img, batches).topic("t").partitions[0].eligible_leader_replicas


def test_unregister_refuses_a_broker_that_still_holds_replicas_and_names_them():
    img = with_topic(cluster(2), "t", 2, 2)
    hb = manager(img)
    batches, err, message = unregister_broker(img, 2, hb)
    assert (batches, err) == ([], ErrorCode.INVALID_REQUEST)
    assert "t-0, t-1" in message and "Reassign" in message


def test_unregister_of_a_broker_without_replicas():
    img = with_topic(cluster(3), "t", 2, 2, assignments={0: (1, 2), 1: (2, 1)})
    hb = manager(img)
    batches, err, _ = unregister_broker(img, 3, hb)
    new = apply(img, batches)
    assert err == ErrorCode.NONE and 3 not in new.brokers and {1, 2} <= set(new.brokers)
    assert unregister_broker(new, 3, hb)[:2] == ([], ErrorCode.BROKER_ID_NOT_REGISTERED)


def test_a_fenced_broker_is_unfenced_only_once_its_metadata_has_its_fencing():
    # Seed 2118 (faults all, 10 s): a broker cut off from the controller is fenced and its
    # __consumer_offsets leadership moves. Were it unfenced, once its heartbeats get through, on
    # having seen its registration alone, it would renew its session lease while its metadata
    # still shows that leadership, and answer OffsetFetch from memory with an offset older than
    # one the new coordinator has served.
    img = with_topic(cluster(2), "t", 1, 2)
    hb = manager(img)
    for b in (1, 2):
        heartbeat(img, hb, b, 1.0)
    hb.touch(2, 9.0)
    batches, fenced = fence_stale_broker(img, hb, 10.5)
    assert fenced == 1
    img = apply(img, batches)
    fencing_offset = 500  # where the controller wrote the BrokerRegistrationChange(fenced)
    hb.record_fencing(1, fencing_offset)
    epoch = img.brokers[1].epoch
    assert epoch < fencing_offset
    _, batches, res = heartbeat(img, hb, 1, 11.0, offset=fencing_offset - 1)
    assert res.is_fenced and not res.is_caught_up and batches == []
    img, batches, res = heartbeat(img, hb, 1, 11.5, offset=fencing_offset)
    assert not res.is_fenced and res.is_caught_up and not img.brokers[1].fenced


def test_a_new_active_controller_bounds_an_unknown_fencing_by_its_image():
    img = with_topic(cluster(2), "t", 1, 2)
    hb = manager(img)
    batches, fenced = fence_stale_broker(img, hb, 10.0)
    img = apply(img, batches)
    from dataclasses import replace
    img = replace(img, offset=900)  # what the new active controller has applied
    fresh = manager(img, now=20.0)  # failover: where the fencing landed is not in the image
    assert fresh.fenced_at(fenced) == 900
    _, _, res = heartbeat(img, fresh, fenced, 21.0, offset=899)
    assert res.is_fenced
    _, _, res = heartbeat(img, fresh, fenced, 21.5, offset=900)
    assert not res.is_fenced


def test_a_restart_that_proves_its_previous_incarnation_dead_replaces_a_live_registration():
    img = cluster(0)
    hb = BrokerHeartbeatManager()
    old = BrokerRegistrationRequest(1, uuid.UUID(int=5))
    batches, _ = register_broker(img, old, next_offset=40, heartbeats=hb, now=0.0)
    img = apply(img, batches)
    hb.set_fenced(1, False)  # live session
    # naming another incarnation (or none) proves nothing: refused while the session lives
    for named in (None, uuid.UUID(int=4)):
        req = BrokerRegistrationRequest(1, uuid.UUID(int=6), previous_incarnation_id=named)
        _, res = register_broker(img, req, next_offset=50, heartbeats=hb, now=1.0)
        assert res.error == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    # naming the registered one (its data dir locks are ours): replaced at once, unclean
    req = BrokerRegistrationRequest(1, uuid.UUID(int=6), previous_incarnation_id=uuid.UUID(int=5))
    batches, res = register_broker(img, req, next_offset=50, heartbeats=hb, now=1.0)
    img = apply(img, batches)
    assert res.error == ErrorCode.NONE and img.brokers[1].epoch == res.broker_epoch == 50
    assert img.brokers[1].incarnation_id == uuid.UUID(int=6) and img.brokers[1].fenced
