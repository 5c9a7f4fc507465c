"""Metadata v1-5: brokers, controller, topics with leaders, ISR and offline replicas.

Unknown topics are created on the fly when the broker's `auto.create.topics.enable`
is on and the request allows it (v4+ carries the flag; older versions always
allow it), through the controller channel in the background; meanwhile the
topic is answered LEADER_NOT_AVAILABLE, as Kafka does, and clients retry.
"""
from __future__ import annotations

from broker.request_caps import Pacer
from metadata.controller.topics import validate_topic_name
from metadata.errors import ApiError
from metadata.records import NO_LEADER
from wire.error_codes import ErrorCode
from wire.protocol import MetadataResponse

__all__ = ["handle", "error_response"]

R = MetadataResponse
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


async def handle(broker, header, request) -> MetadataResponse:
    cache = broker.metadata
    image = cache.image
    if request.topics is None:
        names = sorted(image.topics_by_name)
        wanted_missing = []
    else:
        names = []
        seen = set()
        for t in request.topics:
            if t.name not in seen:
                seen.add(t.name)
                names.append(t.name)
        wanted_missing = [n for n in names if n not in image.topics_by_name]
    allow_auto = request.allow_auto_topic_creation if header.api_version >= 4 else True
    created_errors = {}
    if wanted_missing:
        created_errors = broker.auto_create_topics(wanted_missing, allowed=allow_auto)
    alive = {b.node_id for b in cache.alive_brokers()}
    topics = []
    pacer = Pacer()
    for name in names:
        await pacer.step()
        topic = image.topics_by_name.get(name)
        if topic is None:
            topics.append(R.MetadataResponseTopic(error_code=created_errors.get(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                                                  name=name, is_internal=False, partitions=[]))
            continue
        partitions = []
        for pid in sorted(topic.partitions):
            reg = topic.partitions[pid]
            offline = [r for r in reg.replicas if r not in alive]
            leader = reg.leader if reg.leader in alive else NO_LEADER
            partitions.append(R.MetadataResponsePartition(
                error_code=ErrorCode.NONE if leader != NO_LEADER else ErrorCode.LEADER_NOT_AVAILABLE,
                partition_index=pid, leader_id=leader, leader_epoch=reg.leader_epoch, replica_nodes=list(reg.replicas),
                isr_nodes=list(reg.isr), offline_replicas=offline))
        topics.append(R.MetadataResponseTopic(error_code=ErrorCode.NONE, name=name,
                                              is_internal=name in INTERNAL_TOPICS, partitions=partitions))
    return R(
        throttle_time_ms=0,
        brokers=[R.MetadataResponseBroker(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
                 for b in cache.alive_brokers()],
        cluster_id=broker.cluster_id,
        controller_id=cache.controller_id(),
        topics=topics,
    )


def topic_name_error(name: str) -> int | None:
    try:
        validate_topic_name(name)
    except ApiError:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    return None


def error_response(broker, header, request, code: int) -> MetadataResponse:
    topics = [] if request.topics is None else [
        R.MetadataResponseTopic(error_code=code, name=t.name, partitions=[]) for t in request.topics]
    return R(throttle_time_ms=0, brokers=[], cluster_id=broker.cluster_id, controller_id=-1, topics=topics)
