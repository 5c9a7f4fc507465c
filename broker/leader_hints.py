"""KIP-951: a NOT_LEADER_OR_FOLLOWER answer names the partition's current leader.

Produce v10+ carries, per refused partition, the leader and leader epoch this broker's
metadata shows (`current_leader`) and, once per response, the endpoints of those leaders on
the listener the request came in on (`node_endpoints`), as Kafka's KafkaApis does: a client
such as librdkafka then sends to the new leader at once instead of first asking for
Metadata. A leader this broker's metadata does not know (none elected, or not alive on that
listener) is left out: the client falls back to a Metadata round.
"""
from __future__ import annotations

from wire.error_codes import ErrorCode

__all__ = ["add_leader_hints"]


def add_leader_hints(broker, response, *, endpoint_type) -> None:
    """Fill `current_leader` of every NOT_LEADER_OR_FOLLOWER partition of a Produce
    response, and the response's `node_endpoints` (built with `endpoint_type`)."""
    leaders: set[int] = set()
    for topic in response.responses:
        for part in topic.partition_responses:
            if part.error_code != ErrorCode.NOT_LEADER_OR_FOLLOWER:
                continue
            reg = broker.metadata.partition(topic.name, part.index)
            if reg is None or reg.leader < 0:
                continue
            part.current_leader = type(part.current_leader)(leader_id=reg.leader, leader_epoch=reg.leader_epoch)
            leaders.add(reg.leader)
    if leaders:
        response.node_endpoints = [endpoint_type(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
                                   for b in broker.metadata.alive_brokers() if b.node_id in leaders]
