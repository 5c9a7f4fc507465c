"""A clean restart whose registration the controller accepted but never answered (seed 3317).

Broker 5, the last eligible leader replica of three partitions, restarts cleanly (same boot,
logs whole) and registers claiming its recorded epoch 5; the controller gives it epoch 53 and
the process dies before the answer arrives, so the record still says 5. Were the next clean
start to claim 5 again, the controller would take the mismatch for an unclean restart and
empty the ELRs, leaving the partitions leaderless after the heal. So a clean start notes the
incarnation that registers, and the next clean start on the same boot registers as it and
gets epoch 53 back.
"""
import uuid
from types import SimpleNamespace

from metadata.broker_lifecycle import BrokerLifecycle
from metadata.controller.brokers import (
    BrokerRegistrationRequest, HeartbeatRequest, broker_heartbeat, register_broker,
)
from metadata.controller.heartbeats import BrokerHeartbeatManager
from metadata.data_dir_lock import lock_data_dirs
from metadata.incarnation_record import (
    INCARNATION_FILE, pending_incarnation, previous_broker_epoch,
)
from metadata.records import PartitionChange
from raftkafka.node.metadata_roles import BrokerRole
from tests.metadata.boot_disk import DIRS, disk_with_incarnation
from tests.metadata.helpers import apply, cluster, with_topic

FIRST, SECOND, THIRD = uuid.UUID(int=71), uuid.UUID(int=72), uuid.UUID(int=73)


def _broker_start(fs, incarnation_id: uuid.UUID, *, cut: bool = False, clean: bool = False):
    """What BrokerRole decides at start, once its logs are recovered: (claim, incarnation)."""
    role = SimpleNamespace(env=SimpleNamespace(fs=fs), config=SimpleNamespace(node_id=5),
                           locks=lock_data_dirs(fs, DIRS),
                           lifecycle=BrokerLifecycle(None, SimpleNamespace(), broker_id=5, metadata_offset=lambda: 0,
                                                     incarnation_id=incarnation_id))
    log = SimpleNamespace(recovery_stats=SimpleNamespace(whole_batches_lost=cut))
    kafka = SimpleNamespace(log_manager=SimpleNamespace(
        data_dirs=list(DIRS), had_clean_shutdown={d: clean for d in DIRS},
        all_logs=lambda: [(("t", 0), log)]))
    BrokerRole._remember_incarnations(role, kafka)
    return role


async def test_a_start_killed_before_its_answer_hands_its_incarnation_to_the_next_start():
    fs = await disk_with_incarnation(5)
    first = _broker_start(fs, FIRST)
    assert (first.lifecycle.previous_broker_epoch, first.lifecycle.incarnation_id) == (5, FIRST)
    await BrokerRole._record_registering(first, list(DIRS))
    fs.process_exit()  # kill -9 while the registration is in flight
    second = _broker_start(fs, SECOND)
    assert (second.lifecycle.previous_broker_epoch, second.lifecycle.incarnation_id) == (5, FIRST)
    # Once answered, the epoch is the claim and no incarnation is pending.
    await second.lifecycle.on_registered(53)
    fs.process_exit()
    third = _broker_start(fs, THIRD)
    assert (third.lifecycle.previous_broker_epoch, third.lifecycle.incarnation_id) == (53, THIRD)


async def test_an_unclean_start_never_takes_over_the_pending_incarnation():
    fs = await disk_with_incarnation(5)
    first = _broker_start(fs, FIRST)
    await BrokerRole._record_registering(first, list(DIRS))
    fs.crash()  # power loss: a new boot
    after_power_loss = _broker_start(fs, SECOND)
    assert (after_power_loss.lifecycle.previous_broker_epoch, after_power_loss.lifecycle.incarnation_id) \
        == (-1, SECOND)
    fs = await disk_with_incarnation(5)
    await BrokerRole._record_registering(_broker_start(fs, FIRST), list(DIRS))
    fs.process_exit()
    after_cut = _broker_start(fs, SECOND, cut=True)  # recovery cut acknowledged records
    assert (after_cut.lifecycle.previous_broker_epoch, after_cut.lifecycle.incarnation_id) == (-1, SECOND)
    # And an unclean start leaves no record a later start could take over or claim: it erased
    # the one it found (claim_previous_epoch) and writes no pending one.
    await BrokerRole._record_registering(after_cut, list(DIRS))
    assert pending_incarnation(fs, DIRS) is None
    assert previous_broker_epoch(fs, DIRS, clean_shutdown=True) == -1


async def test_a_clean_stop_of_an_unregistered_unclean_start_is_no_clean_restart():
    # Seed 517: after a power loss the unclean start never reached a controller and was stopped
    # cleanly (clean-shutdown markers); the next start must not claim the epoch from before.
    fs = await disk_with_incarnation(5)
    fs.crash()
    assert _broker_start(fs, SECOND).lifecycle.previous_broker_epoch == -1
    fs.process_exit()
    assert _broker_start(fs, THIRD, clean=True).lifecycle.previous_broker_epoch == -1


async def test_a_damaged_pending_incarnation_claims_nothing():
    fs = await disk_with_incarnation(5)
    f = fs.open(f"/d2/{INCARNATION_FILE}")
    f.truncate(0)
    f.append(b'{"version": 0, "broker_epoch": 5, "boot_id": "boot-0", "registering": "not-a-uuid"}')
    f.close()
    assert previous_broker_epoch(fs, DIRS, clean_shutdown=False) == -1
    assert pending_incarnation(fs, DIRS) is None


def test_the_controller_answers_the_pending_incarnation_with_its_epoch_and_keeps_the_elr():
    """The controller's side of the seed: broker 1 (clean) is the ELR of t-0; its registration as
    FIRST was accepted unanswered. A fresh incarnation claiming the old epoch is unclean and
    leaves t-0 with no eligible leader; registering as FIRST gets the same epoch back, and the
    broker is elected once unfenced."""
    img = with_topic(cluster(3, elr=True), "t", 1, 3, configs={"min.insync.replicas": "2"},
                     assignments={0: [1, 2, 3]})
    img = apply(img, [PartitionChange(0, img.topic("t").topic_id, isr=(1, 2), leader=2)])
    old_epoch = img.brokers[1].epoch
    hb = BrokerHeartbeatManager()
    batches, first = register_broker(img, BrokerRegistrationRequest(1, FIRST, previous_broker_epoch=old_epoch),
                                     next_offset=1000, heartbeats=hb, now=50.0)
    img = apply(img, batches)
    batches, _ = register_broker(img, BrokerRegistrationRequest(2, uuid.UUID(int=502), previous_broker_epoch=-1),
                                 next_offset=1100, heartbeats=hb, now=50.0)
    img = apply(img, batches)
    assert img.topic("t").partitions[0].eligible_leader_replicas == (1,)
    later = 50.0 + 60  # the first incarnation's session has lapsed
    stale, _ = register_broker(img, BrokerRegistrationRequest(1, SECOND, previous_broker_epoch=old_epoch),
                               next_offset=1200, heartbeats=hb, now=later)
    p = apply(img, stale).topic("t").partitions[0]
    assert (p.isr, p.eligible_leader_replicas, p.leader) == ((), (), -1)  # what the seed hit
    batches, again = register_broker(img, BrokerRegistrationRequest(1, FIRST, previous_broker_epoch=old_epoch),
                                     next_offset=1200, heartbeats=hb, now=later)
    assert batches == [] and again.broker_epoch == first.broker_epoch
    batches, res = broker_heartbeat(img, HeartbeatRequest(1, first.broker_epoch, 10**6),
                                    heartbeats=hb, now=later + 1, next_offset=1300)
    p = apply(img, batches).topic("t").partitions[0]
    assert not res.is_fenced and (p.leader, p.isr) == (1, (1,))
