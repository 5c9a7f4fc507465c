"""Metadata image benchmark: `python -m raftkafka.bench.metadata_image [--partitions N]`.

Measures (1) loading an image of N partitions by decoding + replaying its records (what a
broker does with a snapshot or a fresh log), (2) writing it back out as snapshot records,
(3) one small change on top of the big image (structural sharing), and (4) computing the
leadership moves when a broker that leads N/brokers partitions is fenced.
"""
from __future__ import annotations

import argparse
import random
import time
import uuid

from metadata.controller.brokers import fence_broker
from metadata.controller.heartbeats import BrokerHeartbeatManager
from metadata.controller.placement import place_replicas
from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE
from metadata.records import (
    FeatureLevel, Partition, PartitionChange, RegisterBroker, Topic, decode_record,
    encode_record,
)
from metadata.snapshot import image_to_records


def build_records(partitions: int, brokers: int, per_topic: int, rf: int) -> list:
    rng = random.Random(7)
    recs: list = [FeatureLevel("metadata.version", 1)]
    racks = {b: f"rack{b % 2}" for b in range(brokers)}  # even racks: balanced followers
    for b in range(brokers):
        recs.append(RegisterBroker(b, uuid.UUID(int=rng.getrandbits(128)), 10 + b,
                                   rack=racks[b], fenced=False))
    for t in range(partitions // per_topic):
        tid = uuid.UUID(int=rng.getrandbits(128))
        recs.append(Topic(f"topic-{t:06d}", tid))
        for pid, replicas in enumerate(place_replicas(racks, per_topic, rf,
                                                      start_index=t % brokers)):
            recs.append(Partition(pid, tid, replicas, replicas, leader=replicas[0]))
    return recs


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--brokers", type=int, default=10)
    ap.add_argument("--per-topic", type=int, default=100)
    ap.add_argument("--rf", type=int, default=3)
    args = ap.parse_args(argv)

    records = build_records(args.partitions, args.brokers, args.per_topic, args.rf)
    encoded, t_enc = timed(lambda: [encode_record(r) for r in records])
    size = sum(map(len, encoded))

    def load():
        delta = MetadataDelta(EMPTY_IMAGE)
        for data in encoded:
            delta.replay(decode_record(data))
        delta.set_provenance(len(encoded) - 1, 1)
        return delta.apply()

    image, t_load = timed(load)
    _, t_snap = timed(lambda: [encode_record(r) for r in image_to_records(image)])

    topic = image.topics_by_name["topic-000000"]

    def small_change():
        delta = MetadataDelta(image)
        delta.replay(PartitionChange(0, topic.topic_id, isr=topic.partitions[0].replicas[:2]))
        return delta.apply()

    _, t_small = timed(small_change)

    victim = 0
    led = image.partitions_led_by(victim)
    hb = BrokerHeartbeatManager()
    hb.activate(image, 0.0)
    batches, t_fence = timed(lambda: fence_broker(image, victim, hb))
    changes = sum(len(b) for b in batches) - 1

    def apply_fence():
        delta = MetadataDelta(image)
        for batch in batches:
            for rec in batch:
                delta.replay(rec)
        return delta.apply()

    after, t_apply = timed(apply_fence)
    assert after.partitions_led_by(victim) == 0

    n = len(records)
    print(f"metadata image: {args.partitions} partitions in {args.partitions // args.per_topic}"
          f" topics, {args.brokers} brokers, rf {args.rf}")
    print(f"  encode {n} records          {t_enc * 1e3:8.0f} ms  ({size / 1e6:.1f} MB)")
    print(f"  load (decode+replay+apply)  {t_load * 1e3:8.0f} ms  "
          f"({n / t_load:,.0f} records/s)")
    print(f"  snapshot write (to bytes)   {t_snap * 1e3:8.0f} ms")
    print(f"  one PartitionChange apply   {t_small * 1e3:8.2f} ms")
    print(f"  fence broker leading {led}: compute {changes} partition changes in "
          f"{len(batches) - 1} batches {t_fence * 1e3:.0f} ms, apply {t_apply * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
