"""A restarted broker (a new incarnation) and the metadata it acts on.

The metadata a broker loads at start still describes its previous incarnation: the partitions
it led, the ISRs it was in. Until the controller has processed the new registration (and, for an
unclean restart, taken the broker out of those ISRs), acting on that picture lets a broker whose
log lost unflushed data lead, shrink an ISR to itself under the old incarnation's broker epoch,
and make the replicas holding the acknowledged records truncate to it (simulation seed 19).

And which restarts are clean (KIP-966's previous_broker_epoch): only a clean restart keeps a
broker eligible to lead over replicas that kept the acknowledged records (seeds 18 and 79).
"""
import uuid

import pytest

from metadata.broker_lifecycle import AfterOwnRegistration, BrokerLifecycle
from metadata.controller import rpc
from metadata.controller.brokers import (
    BrokerRegistrationRequest, HeartbeatRequest, broker_heartbeat, register_broker,
)
from metadata.controller.heartbeats import BrokerHeartbeatManager
from metadata.incarnation_record import (
    INCARNATION_FILE, claim_previous_epoch, forget_incarnation, previous_broker_epoch, record_incarnation,
)
from metadata.loader import MetadataLoader
from metadata.records import FeatureLevel, Partition, PartitionChange, RegisterBroker, Topic
from storage.env import RealEnv
from storage.memfs import MemFileSystem
from tests.metadata.boot_disk import DIRS, disk_with_incarnation
from tests.metadata.helpers import apply, cluster, with_topic
from wire.error_codes import ErrorCode

T1 = uuid.UUID(int=1)
OLD, NEW = uuid.UUID(int=60), uuid.UUID(int=61)


class Recorder:
    name = "recorder"

    def __init__(self):
        self.updates = []

    def publish(self, delta, image):
        self.updates.append((delta, image))


def _loaded_after_restart() -> MetadataLoader:
    """What broker 6 finds in its metadata log when it starts again: itself leading t-0."""
    loader = MetadataLoader()
    loader.handle_commit(4, 1, [FeatureLevel("metadata.version", 1),
                                RegisterBroker(4, uuid.UUID(int=40), 1, fenced=False),
                                RegisterBroker(6, OLD, 2, fenced=False),
                                Topic("t", T1),
                                Partition(0, T1, (6, 4), (6, 4), leader=6)])
    loader.set_high_watermark(5)
    return loader


def test_the_data_plane_gets_no_metadata_until_it_holds_the_new_registration():
    loader = _loaded_after_restart()
    kafka = Recorder()
    gate = AfterOwnRegistration(loader, kafka, broker_id=6, incarnation_id=NEW)
    loader.install(gate)
    assert kafka.updates == []  # the image names broker 6, but the previous incarnation
    loader.handle_commit(5, 1, [PartitionChange(0, T1, isr=(4,), leader=4)])
    assert kafka.updates == []
    # The controller accepts the new incarnation (moving t-0 away first, as for an unclean restart).
    loader.handle_commit(7, 2, [PartitionChange(0, T1, isr=(4,), leader=4),
                                RegisterBroker(6, NEW, 7, fenced=True)])
    assert len(kafka.updates) == 1
    delta, image = kafka.updates[0]
    assert delta.created_topic_ids() == [T1]  # the whole state, from the empty image
    assert image.brokers[6].incarnation_id == NEW and image.brokers[6].epoch == 7
    assert image.partition(T1, 0).leader == 4
    loader.handle_commit(8, 2, [PartitionChange(0, T1, isr=(4, 6))])
    assert len(kafka.updates) == 2 and kafka.updates[1][1].partition(T1, 0).isr == (4, 6)
    assert gate not in loader._publishers


def test_a_gate_installed_after_the_registration_opens_at_once():
    loader = _loaded_after_restart()
    loader.handle_commit(6, 2, [RegisterBroker(6, NEW, 6, fenced=True)])
    kafka = Recorder()
    loader.install(AfterOwnRegistration(loader, kafka, broker_id=6, incarnation_id=NEW))
    assert len(kafka.updates) == 1 and kafka.updates[0][1].brokers[6].epoch == 6


# -- previous_broker_epoch: which restarts are clean (KIP-966) -----------------------------------
async def test_a_process_crash_on_the_same_boot_is_a_clean_restart():
    fs = await disk_with_incarnation(17)
    fs.process_exit()  # kill -9: the page cache, and so every write, survives
    assert previous_broker_epoch(fs, DIRS, clean_shutdown=False) == 17


async def test_a_power_loss_is_unclean_unless_the_logs_were_shut_down_cleanly():
    fs = await disk_with_incarnation(17)
    fs.crash()
    assert fs.exists(f"/d1/{INCARNATION_FILE}")  # the record itself was fsynced
    assert previous_broker_epoch(fs, DIRS, clean_shutdown=False) == -1
    assert previous_broker_epoch(fs, DIRS, clean_shutdown=True) == 17


async def test_the_newest_registration_is_the_one_claimed():
    fs = await disk_with_incarnation(17)
    await record_incarnation(fs, DIRS, 40)
    assert previous_broker_epoch(fs, DIRS, clean_shutdown=False) == 40


@pytest.mark.parametrize("damage", ["missing", "garbage", "other epoch", "wrong type"])
async def test_a_missing_or_unreadable_record_claims_nothing(damage):
    fs = await disk_with_incarnation(17)
    path = f"/d2/{INCARNATION_FILE}"
    if damage == "missing":
        fs.remove(path)
    else:
        body = {"garbage": b"\xff{not json", "other epoch": b'{"version": 0, "broker_epoch": 5, "boot_id": "boot-0"}',
                "wrong type": b'{"version": 0, "broker_epoch": "17", "boot_id": "boot-0"}'}[damage]
        f = fs.open(path)
        f.truncate(0)
        f.append(body)
        f.close()
    assert previous_broker_epoch(fs, DIRS, clean_shutdown=False) == -1
    assert previous_broker_epoch(fs, DIRS, clean_shutdown=True) == -1


async def test_a_file_system_that_cannot_tell_its_boot_is_unclean_after_any_crash():
    fs = MemFileSystem()  # no boot_id: Kafka's rule, only a clean shutdown is clean
    fs.makedirs("/d")
    await record_incarnation(fs, ["/d"], 9)
    fs.process_exit()
    assert previous_broker_epoch(fs, ["/d"], clean_shutdown=False) == -1
    assert previous_broker_epoch(fs, ["/d"], clean_shutdown=True) == 9


def test_last_replicas_standing_the_one_that_lost_data_is_not_elected():
    """Simulation seeds 18 and 79: t-0's ISR is [1, 2] (min.insync.replicas=2) and both die
    before the controller fences either; 1 was killed (page cache kept), 2 lost power. Whatever
    order they register in, 2 (unclean) ends up neither leader nor eligible: electing it would
    truncate 1. 1 (clean) is the eligible leader replica, elected once it is unfenced."""
    for first in (1, 2):
        img = with_topic(cluster(3, elr=True), "t", 1, 3, configs={"min.insync.replicas": "2"},
                         assignments={0: [1, 2, 3]})
        img = apply(img, [PartitionChange(0, img.topic("t").topic_id, isr=(1, 2), leader=2)])
        hb = BrokerHeartbeatManager()
        requests = {1: BrokerRegistrationRequest(1, uuid.UUID(int=501), previous_broker_epoch=img.brokers[1].epoch),
                    2: BrokerRegistrationRequest(2, uuid.UUID(int=502), previous_broker_epoch=-1)}
        for b in (first, 3 - first):
            batches, res = register_broker(img, requests[b], next_offset=1000 + 100 * b, heartbeats=hb, now=50.0)
            assert res.error == 0
            img = apply(img, batches)
        # (before its new incarnation registers, 2 may still lead: the controller thinks it alive)
        p = img.topic("t").partitions[0]
        assert p.isr == () and p.eligible_leader_replicas == (1,) and p.leader == -1
        batches, res = broker_heartbeat(img, HeartbeatRequest(1, img.brokers[1].epoch, 10**6),
                                        heartbeats=hb, now=51.0, next_offset=5000)
        img = apply(img, batches)
        p = img.topic("t").partitions[0]
        assert not res.is_fenced and (p.leader, p.isr) == (1, (1,))


class _Controller:
    """A ControllerConnection that accepts every registration with epoch 70."""

    cluster_id = "c"

    def __init__(self):
        self.requests = []

    async def call(self, request, *, timeout):
        self.requests.append(request)
        return rpc.BrokerRegistrationResponse(ErrorCode.NONE, 1, 70)


async def test_the_lifecycle_claims_the_previous_epoch_and_records_the_new_one():
    recorded = []

    async def record(epoch):
        recorded.append(epoch)
        raise OSError(28, "No space left on device")  # cannot persist: only logged

    conn = _Controller()
    lifecycle = BrokerLifecycle(RealEnv(seed=1), conn, broker_id=6, metadata_offset=lambda: 0,
                                previous_broker_epoch=17, on_registered=record)
    await lifecycle._register()
    assert conn.requests[0].previous_broker_epoch == 17
    assert recorded == [70] and lifecycle.broker_epoch == 70 and lifecycle.registered.is_set()


async def test_a_forgotten_record_claims_nothing_at_the_next_start_on_the_same_boot():
    # Seed 79 (--faults all, 30 s): bit rot cuts a log and that restart, rightly unclean, is
    # killed before it can register; the next restart, on the same boot, finds the already-cut
    # log intact. It must not claim the old epoch (and be elected from the ELR): the cut
    # forgets the incarnation record on the spot.
    fs = await disk_with_incarnation(17)
    forget_incarnation(fs, DIRS)
    fs.process_exit()
    assert previous_broker_epoch(fs, DIRS, clean_shutdown=False) == -1
    assert previous_broker_epoch(fs, DIRS, clean_shutdown=True) == -1


async def test_an_unclean_start_leaves_no_claim_to_a_clean_shutdown_before_it_registered():
    # Seed 517 (--faults all, 10 s): a power loss cost broker 4 the records it had not flushed;
    # its next start (unclean) never reached a controller and was stopped cleanly; the start
    # after that found the clean-shutdown markers and the record of the epoch before the power
    # loss, claimed it, stayed in the ISRs and ELRs and was elected with an empty log.
    fs = await disk_with_incarnation(17)
    fs.crash()
    assert claim_previous_epoch(fs, DIRS, clean_shutdown=False) == -1
    for d in DIRS:
        await fs.sync_dir(d)  # the clean shutdown: markers written, each dir fsynced
    fs.process_exit()
    assert claim_previous_epoch(fs, DIRS, clean_shutdown=True) == -1
    fs.crash()  # the erasure is as durable as the markers that would make the claim
    assert claim_previous_epoch(fs, DIRS, clean_shutdown=True) == -1


async def test_a_clean_claim_keeps_the_record_and_lost_batches_withdraw_it():
    fs = await disk_with_incarnation(17)
    fs.process_exit()
    assert claim_previous_epoch(fs, DIRS, clean_shutdown=False) == 17
    assert claim_previous_epoch(fs, DIRS, clean_shutdown=False) == 17  # claiming keeps it
    assert claim_previous_epoch(fs, DIRS, clean_shutdown=True, lost_batches=True) == -1
    assert previous_broker_epoch(fs, DIRS, clean_shutdown=True) == -1
