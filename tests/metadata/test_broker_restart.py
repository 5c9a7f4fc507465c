"""A restarted broker (a new incarnation) and the metadata it acts on.

The metadata a broker loads at start still describes its previous incarnation: the partitions
it led, the ISRs it was in. Until the controller has processed the new registration (and, for an
unclean restart, taken the broker out of those ISRs), acting on that picture lets a broker whose
log lost unflushed data lead, shrink an ISR to itself under the old incarnation's broker epoch,
and make the replicas holding the acknowledged records truncate to it (simulation seed 19).
"""
import uuid

from metadata.broker_lifecycle import AfterOwnRegistration
from metadata.loader import MetadataLoader
from metadata.records import FeatureLevel, Partition, PartitionChange, RegisterBroker, Topic

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
