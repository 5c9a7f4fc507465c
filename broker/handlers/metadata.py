"""Metadata v1-5: brokers, controller, topics with leaders, ISR and offline replicas.

Unknown topics are created on the fly when the broker's `auto.create.topics.enable`
is on and the request allows it (v4+ carries the flag; older versions always
allow it), through the controller channel in the background; meanwhile the
topic is answered LEADER_NOT_AVAILABLE, as Kafka does, and clients retry.

With an authorizer, only topics the caller may describe are listed; a named one it may not
describe answers TOPIC_AUTHORIZATION_FAILED (and is never auto-created); auto-creation needs
CREATE on the cluster or the topic.
"""
from __future__ import annotations

from broker.authorization import cluster_allowed, topic_allowed
from metadata.acls import AclOperation
from metadata.controller.dynamic_configs import effective_broker_value
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
    describable = {}  # topic -> DESCRIBE allowed; the others are never named back unless asked for
    if request.topics is None:
        names = [n for n in sorted(image.topics_by_name)
                 if describable.setdefault(n, topic_allowed(broker, AclOperation.DESCRIBE, n))]
        wanted_missing = []
    else:
        names = list(dict.fromkeys(t.name for t in request.topics))
        describable = {n: topic_allowed(broker, AclOperation.DESCRIBE, n) for n in names}
        wanted_missing = [n for n in names if n not in image.topics_by_name and describable[n]]
    allow_auto = request.allow_auto_topic_creation if header.api_version >= 4 else True
    created_errors = _auto_create(broker, wanted_missing, allow_auto)
    alive = {b.node_id for b in cache.alive_brokers()}
    topics = []
    pacer = Pacer()
    for name in names:
        await pacer.step()
        topic = image.topics_by_name.get(name)
        if not describable[name]:
            topics.append(R.MetadataResponseTopic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name,
                                                  is_internal=False, partitions=[]))
            continue
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


def _auto_create(broker, missing: list[str], allow_auto: bool) -> dict[str, int]:
    """Auto-create what the caller may create (CREATE on the cluster or the topic); the rest of
    the missing topics answer TOPIC_AUTHORIZATION_FAILED when creation would have been tried."""
    if not missing:
        return {}
    if not cluster_allowed(broker, AclOperation.CREATE):
        refused = [n for n in missing if not topic_allowed(broker, AclOperation.CREATE, n)]
        if refused and allow_auto and effective_broker_value(broker.metadata.image, "auto.create.topics.enable",
                                                             broker.static):
            missing = [n for n in missing if n not in refused]
            return {**broker.auto_create_topics(missing, allowed=True),
                    **{n: ErrorCode.TOPIC_AUTHORIZATION_FAILED for n in refused}}
    return broker.auto_create_topics(missing, allowed=allow_auto)


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
