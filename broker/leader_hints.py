"""KIP-951: a NOT_LEADER_OR_FOLLOWER answer names the partition's current leader.

Produce v10+ and Fetch v16+ carry, per refused partition, the leader and leader epoch this
broker's metadata shows (`current_leader`) and, once per response, the endpoints of those
leaders on the listener the request came in on (`node_endpoints`), as Kafka's KafkaApis
does: a client such as librdkafka then sends to the new leader at once instead of first
asking for Metadata. Fetch also hints on FENCED_LEADER_EPOCH (the client's leader is older
than ours). A leader this broker's metadata does not know (none elected, or not alive on
that listener) is left out: the client falls back to a Metadata round.
"""
from __future__ import annotations

from wire.error_codes import ErrorCode

__all__ = ["add_leader_hints", "add_fetch_leader_hints"]

FETCH_HINTED = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})


def add_leader_hints(broker, response) -> None:
    """Hints for a Produce response."""
    _hint(broker, response, ((topic.name, part.index, part) for topic in response.responses
                             for part in topic.partition_responses
                             if part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER))


def add_fetch_leader_hints(broker, response) -> None:
    """Hints for a Fetch response (its topics carry their names, whatever the version)."""
    _hint(broker, response, ((topic.topic, part.partition_index, part) for topic in response.responses
                             for part in topic.partitions if part.error_code in FETCH_HINTED))


def _hint(broker, response, refused) -> None:
    """Fill `current_leader` of each (topic, index, partition answer) in `refused`, and the
    response's `node_endpoints` for the leaders named."""
    leaders: set[int] = set()
    for name, index, part in refused:
        reg = broker.metadata.partition(name, index)
        if reg is None or reg.leader < 0:
            continue
        part.current_leader = type(part.current_leader)(leader_id=reg.leader, leader_epoch=reg.leader_epoch)
        leaders.add(reg.leader)
    if leaders:
        endpoint = type(response).NodeEndpoint
        response.node_endpoints = [endpoint(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
                                   for b in broker.metadata.alive_brokers() if b.node_id in leaders]
