"""Building images for controller tests by running the controller's own functions."""
import random
import uuid

from metadata.controller.topics import CreatableTopic, create_topics
from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE, ELR_FEATURE, METADATA_VERSION
from metadata.records import FeatureLevel, RegisterBroker


def apply(image, records):
    """Replay records (or a list of batches) onto an image."""
    delta = MetadataDelta(image)
    for rec in records:
        if isinstance(rec, list):
            for r in rec:
                delta.replay(r)
        else:
            delta.replay(rec)
    return delta.apply()


def cluster(n_brokers=3, *, racks=None, elr=False, fenced=()):
    recs = [FeatureLevel(METADATA_VERSION, 1)]
    if elr:
        recs.append(FeatureLevel(ELR_FEATURE, 1))
    for b in range(1, n_brokers + 1):
        rack = None if racks is None else racks[(b - 1) % len(racks)]
        recs.append(RegisterBroker(b, uuid.UUID(int=1000 + b), 100 + b, rack=rack,
                                   fenced=b in fenced))
    return apply(EMPTY_IMAGE, recs)


def with_topic(image, name, partitions, rf, *, configs=None, seed=0, assignments=None):
    topic = (CreatableTopic(name, assignments=assignments, configs=configs or {})
             if assignments else CreatableTopic(name, partitions, rf, configs=configs or {}))
    records, results = create_topics(image, [topic], rng=random.Random(seed))
    assert results[0].error == 0, results[0]
    return apply(image, records)
