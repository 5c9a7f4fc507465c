"""Leadership and ISR updates over many partitions: shared by fencing, unfencing,
controlled shutdown, unclean restarts and leader elections.

Everything here reads one (speculative) image and returns PartitionChange records in a
deterministic order (topic name, partition id). `batches` splits a long list so that no
Raft batch carries more than MAX_PARTITION_CHANGES_PER_BATCH partition changes.
"""
from __future__ import annotations

from typing import AbstractSet, Callable, Iterable, Mapping, Sequence, TypeVar

from metadata.controller.dynamic_configs import effective_topic_value
from metadata.controller.election import Election, build_change
from metadata.image import MetadataImage, TopicImage
from metadata.partition import PartitionRegistration
from metadata.records import NO_LEADER, PartitionChange

__all__ = [
    "MAX_PARTITION_CHANGES_PER_BATCH", "batches", "TopicPolicy", "topic_policy",
    "remove_broker_from_isrs", "elect_leaderless",
]

MAX_PARTITION_CHANGES_PER_BATCH = 1000

R = TypeVar("R")


def batches(records: Sequence[R], limit: int = MAX_PARTITION_CHANGES_PER_BATCH) -> list[list[R]]:
    """Consecutive chunks of at most `limit` records (an empty input gives no batch)."""
    return [list(records[i:i + limit]) for i in range(0, len(records), limit)]


class TopicPolicy:
    """Per-topic election settings (min.insync.replicas, unclean.leader.election.enable),
    resolved once per topic and cached for the duration of one controller operation."""

    def __init__(self, image: MetadataImage, static: Mapping[str, str] | None = None):
        self._image, self._static = image, static or {}
        self._cache: dict[str, tuple[int, bool]] = {}

    def __call__(self, topic: str) -> tuple[int, bool]:
        got = self._cache.get(topic)
        if got is None:
            got = self._cache[topic] = (
                effective_topic_value(self._image, topic, "min.insync.replicas", self._static),
                effective_topic_value(self._image, topic, "unclean.leader.election.enable",
                                      self._static))
        return got


def topic_policy(image: MetadataImage, topic: str,
                 static: Mapping[str, str] | None = None) -> tuple[int, bool]:
    return TopicPolicy(image, static)(topic)


def _change_for(image: MetadataImage, policy: TopicPolicy, topic: TopicImage, pid: int,
                part: PartitionRegistration, acceptable: Callable[[int], bool], *,
                target_isr: tuple[int, ...] | None = None,
                unclean_shutdown: AbstractSet[int] = frozenset(),
                election: Election | None = None) -> PartitionChange | None:
    min_isr, unclean_ok = policy(topic.name)
    if election is None:
        election = Election.UNCLEAN if unclean_ok else Election.ONLINE
    return build_change(topic.topic_id, pid, part, is_acceptable=acceptable, min_isr=min_isr,
                        elr_enabled=image.elr_enabled(), election=election,
                        target_isr=target_isr, unclean_shutdown=unclean_shutdown)


def remove_broker_from_isrs(image: MetadataImage, broker_id: int, *,
                            unclean_shutdown: bool = False,
                            static: Mapping[str, str] | None = None) -> list[PartitionChange]:
    """Take `broker_id` out of every ISR (and, if it restarted uncleanly, every ELR),
    re-electing leaders where it led. Used for fencing and controlled shutdown."""
    active = set(image.active_brokers())
    active.discard(broker_id)
    acceptable = active.__contains__
    policy = TopicPolicy(image, static)
    gone = frozenset((broker_id,)) if unclean_shutdown else frozenset()
    out = []
    for topic, pid, part in image.iter_partitions():
        involved = (broker_id in part.isr or part.leader == broker_id
                    or (unclean_shutdown and broker_id in part.eligible_leader_replicas))
        if not involved:
            continue
        target = tuple(r for r in part.isr if r != broker_id)
        change = _change_for(image, policy, topic, pid, part, acceptable, target_isr=target,
                             unclean_shutdown=gone)
        if change is not None:
            out.append(change)
    return out


def elect_leaderless(image: MetadataImage, *, also_acceptable: Iterable[int] = (),
                     static: Mapping[str, str] | None = None,
                     limit: int | None = None) -> list[PartitionChange]:
    """Try to elect a leader for every leaderless partition (after an unfence, say)."""
    active = set(image.active_brokers()) | set(also_acceptable)
    policy = TopicPolicy(image, static)
    out = []
    for topic, pid, part in image.iter_partitions():
        if part.leader != NO_LEADER:
            continue
        change = _change_for(image, policy, topic, pid, part, active.__contains__)
        if change is not None and change.leader not in (NO_LEADER, -2):
            out.append(change)
            if limit is not None and len(out) >= limit:
                break
    return out
