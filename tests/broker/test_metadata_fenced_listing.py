"""broker.metadata_cache: Metadata answers list a broker for FENCED_LISTED_S after this broker
saw it fenced (librdkafka then moves that broker's partitions to their new leaders before it
drops the broker); it is never alive meanwhile, and a broker never seen unfenced is not listed."""
from __future__ import annotations

import uuid
from types import SimpleNamespace

from broker.metadata_cache import FENCED_LISTED_S, MetadataCache
from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE, METADATA_VERSION
from metadata.records import BrokerRegistrationChange, Endpoint, FeatureLevel, RegisterBroker


class Cluster:
    def __init__(self):
        self.now = 0.0
        self.cache = MetadataCache(SimpleNamespace(now=lambda: self.now), node_id=1)
        self.image = EMPTY_IMAGE
        self.offset = 0

    def commit(self, *records) -> None:
        delta = MetadataDelta(self.image)
        for rec in records:
            delta.replay(rec)
        self.offset += len(records)
        delta.set_provenance(self.offset - 1, 1)
        self.image = delta.apply()
        self.cache.publish(delta, self.image)

    def register(self, node_id: int, *, fenced: bool) -> None:
        self.commit(RegisterBroker(node_id, uuid.UUID(int=node_id), 100 + node_id,
                                   endpoints=(Endpoint("PLAINTEXT", "127.0.0.1", 9000 + node_id),), fenced=fenced))

    def fenced(self, node_id: int, fenced: bool = True) -> None:
        self.commit(BrokerRegistrationChange(node_id, 100 + node_id, fenced=fenced))

    def listed(self) -> list[int]:
        return [b.node_id for b in self.cache.listed_brokers()]

    def alive(self) -> list[int]:
        return [b.node_id for b in self.cache.alive_brokers()]


def three_brokers() -> Cluster:
    cluster = Cluster()
    cluster.commit(FeatureLevel(METADATA_VERSION, 1))
    for node_id in (1, 2, 3):
        cluster.register(node_id, fenced=False)
    return cluster


def test_a_just_fenced_broker_stays_listed_for_a_while_but_is_not_alive():
    cluster = three_brokers()
    cluster.now = 10.0
    cluster.fenced(2)
    assert cluster.alive() == [1, 3]
    cluster.now = 10.0 + FENCED_LISTED_S
    assert cluster.listed() == [1, 2, 3]
    cluster.now += 0.01
    assert cluster.listed() == [1, 3]


def test_an_unfenced_broker_is_listed_again_and_a_later_fencing_starts_afresh():
    cluster = three_brokers()
    cluster.fenced(2)
    cluster.now = 1.0
    cluster.fenced(2, False)
    cluster.now = 2 * FENCED_LISTED_S
    cluster.fenced(2)
    cluster.now += FENCED_LISTED_S - 0.01
    assert cluster.listed() == [1, 2, 3]
    assert cluster.alive() == [1, 3]


def test_a_broker_never_seen_unfenced_is_not_listed():
    cluster = three_brokers()
    cluster.register(4, fenced=True)  # registered, waiting to catch up
    assert cluster.listed() == [1, 2, 3]
