"""Partition assignors for the classic group protocol, as in Kafka's Java client.

An assignor maps `{member_id: subscribed topics}` and `{topic: partition count}`
to `{member_id: {topic: [partitions]}}`. The group leader runs it and sends the
result to everyone in SyncGroup; the name is what members advertise in
JoinGroup, so mixed clients (ours, Java, librdkafka) agree on "range" and
"roundrobin".
"""
from __future__ import annotations

__all__ = ["range_assign", "roundrobin_assign", "ASSIGNORS"]

Assignment = dict[str, dict[str, list[int]]]


def _empty(members: dict[str, list[str]]) -> Assignment:
    return {m: {} for m in sorted(members)}


def range_assign(members: dict[str, list[str]], partitions: dict[str, int]) -> Assignment:
    """Per topic: consecutive partition ranges to the subscribed members in member-id order;
    the first `count % n` members get one extra (RangeAssignor)."""
    out = _empty(members)
    for topic in sorted(partitions):
        subscribers = sorted(m for m, topics in members.items() if topic in topics)
        if not subscribers:
            continue
        per, extra = divmod(partitions[topic], len(subscribers))
        start = 0
        for i, member in enumerate(subscribers):
            count = per + (1 if i < extra else 0)
            if count:
                out[member][topic] = list(range(start, start + count))
            start += count
    return out


def roundrobin_assign(members: dict[str, list[str]], partitions: dict[str, int]) -> Assignment:
    """All partitions in (topic, partition) order dealt to members in id order, skipping
    members not subscribed to the partition's topic (RoundRobinAssignor)."""
    out = _empty(members)
    ordered = sorted(members)
    if not ordered:
        return out
    turn = 0
    for topic in sorted(partitions):
        if not any(topic in members[m] for m in ordered):
            continue
        for partition in range(partitions[topic]):
            while topic not in members[ordered[turn % len(ordered)]]:
                turn += 1
            out[ordered[turn % len(ordered)]].setdefault(topic, []).append(partition)
            turn += 1
    return out


ASSIGNORS = {"range": range_assign, "roundrobin": roundrobin_assign}
