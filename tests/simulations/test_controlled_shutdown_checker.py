"""The stop's ControlledShutdownLeftLeaders check on hand-made metadata logs: a broker the
controller let stop at once (it led nothing in the controller's image) is judged by the
committed image that fencing was decided on, not by its own metadata, which may lag it."""
from __future__ import annotations

import uuid
from types import SimpleNamespace

from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE
from metadata.log_format import encode_batch
from metadata.records import (
    BrokerRegistrationChange, Partition, PartitionChange, RegisterBroker, RemoveTopic, Topic,
)
from simulations.checkers.metadata import MetadataChecker
from simulations.checkers.raft import RaftChecker
from simulations.cluster import SimCluster
from simulations.trace import Trace

BROKER, EPOCH, TOPIC = 5, 98, uuid.UUID(int=7)
LEADING = [RegisterBroker(BROKER, uuid.UUID(int=1), EPOCH, fenced=False),
           Topic("churn-7", TOPIC), Partition(0, TOPIC, (BROKER, 4), (BROKER, 4), leader=BROKER)]
MOVE = [PartitionChange(0, TOPIC, leader=4, isr=(4,))]  # what fencing it moves first
FENCE = [BrokerRegistrationChange(BROKER, EPOCH, fenced=True)]


class Log:
    """A committed metadata log, one batch at a time, and the checkers that replay it."""

    def __init__(self):
        self.raft = RaftChecker(Trace(), [1])
        self.metadata = MetadataChecker(self.raft)
        self.cluster = object.__new__(SimCluster)  # only the checker and the log are used
        self.cluster.checker, self.cluster.metadata_log = self.raft, self.metadata
        self.end = 0

    def commit(self, records) -> None:
        for payload in encode_batch(records):
            self.raft.on_apply(1, self.end, 1, payload, False)
            self.end += 1
        self.metadata.committed_image  # replays what is new

    def stop(self, own_image) -> None:
        """The broker completes its stop with `own_image` as its metadata."""
        role = SimpleNamespace(kafka=SimpleNamespace(metadata=SimpleNamespace(image=own_image)),
                               lifecycle=SimpleNamespace(asked_shutdown_with_lease=True, broker_epoch=EPOCH))
        self.cluster._check_controlled_shutdown(SimpleNamespace(name="n5", node_id=BROKER,
                                                                broker_role=lambda: role))

    def violations(self) -> set[str]:
        return {v.invariant for v in self.raft.violations}


def image_of(records):
    delta = MetadataDelta(EMPTY_IMAGE)
    for r in records:
        delta.replay(r)
    return delta.apply()


def test_a_broker_whose_leadership_ended_before_it_asked_may_stop_with_stale_metadata():
    # Its metadata still shows it leading a topic deleted since; the controller saw it lead
    # nothing when it asked, and let it stop at once (Kafka's SHUTDOWN_NOW from UNFENCED).
    log = Log()
    log.commit(LEADING)
    log.commit([RemoveTopic(TOPIC)])
    log.commit(FENCE)
    log.stop(image_of(LEADING))
    assert log.violations() == set()
    # Also when the leadership ended by another broker taking it over before the ask.
    log = Log()
    log.commit(LEADING)
    log.commit([PartitionChange(0, TOPIC, leader=4)])
    log.commit(FENCE)
    log.stop(image_of(LEADING))
    assert log.violations() == set()


def test_a_broker_let_stop_while_the_controller_saw_it_lead_is_reported():
    # Whether its fencing elected another leader or none was left to elect.
    for move in (MOVE, [PartitionChange(0, TOPIC, leader=-1)]):
        log = Log()
        log.commit(LEADING)
        log.commit(move)
        log.commit(FENCE)
        log.stop(image_of(LEADING))
        assert log.violations() == {"ControlledShutdownLeftLeaders"}


def test_the_stop_is_judged_once_its_fencing_is_replayed():
    # The broker may hear should_shutdown before any node applied the fencing batch.
    log = Log()
    log.commit(LEADING)
    log.stop(image_of(LEADING))
    assert log.violations() == set()
    log.commit(MOVE)
    assert log.violations() == set()
    log.commit(FENCE)
    assert log.violations() == {"ControlledShutdownLeftLeaders"}


def test_a_broker_fenced_at_the_end_of_its_controlled_shutdown_is_judged_where_it_shut_down():
    # UNFENCED -> CONTROLLED_SHUTDOWN moves its leaderships (here to none: no other replica in
    # the ISR), then SHUTDOWN_NOW fences it, clearing in_controlled_shutdown. Its metadata has
    # the fencing; the moves before it were the controlled shutdown's, not the fencing's.
    in_shutdown = [BrokerRegistrationChange(BROKER, EPOCH, in_controlled_shutdown=True)]
    fenced = [BrokerRegistrationChange(BROKER, EPOCH, fenced=True, in_controlled_shutdown=False)]
    log = Log()
    log.commit(LEADING)
    log.commit(in_shutdown)
    log.commit([PartitionChange(0, TOPIC, leader=-1)])
    log.commit(fenced)
    log.stop(image_of(LEADING + in_shutdown + [PartitionChange(0, TOPIC, leader=-1)] + fenced))
    assert log.violations() == set()
    # The same shutdown fenced while still leading is reported.
    log = Log()
    log.commit(LEADING)
    log.commit(in_shutdown)
    log.commit(fenced)
    log.stop(image_of(LEADING + in_shutdown))
    assert log.violations() == {"ControlledShutdownLeftLeaders"}
