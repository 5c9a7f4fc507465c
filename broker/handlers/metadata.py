"""Metadata v1-12: brokers, controller, topics with leaders, ISR and offline replicas.

v8+ answer the caller's authorized operations when asked (the topic's from v8, the
cluster's in v8-10), as bit fields from the authorizer; v10+ carry each topic's id (zero
for a topic that does not exist or that the caller may not describe); v12 looks topics up
by id — an id naming no topic the caller may describe answers UNKNOWN_TOPIC_ID with a null
name, and ids are never auto-created. Before v12 an id or a null name is INVALID_REQUEST.

Unknown topics are created on the fly when the broker's `auto.create.topics.enable`
is on and the request allows it (v4+ carries the flag; older versions always
allow it), through the controller channel in the background; meanwhile the
topic is answered LEADER_NOT_AVAILABLE, as Kafka does, and clients retry.

With an authorizer, only topics the caller may describe are listed; a named one it may not
describe answers TOPIC_AUTHORIZATION_FAILED (and is never auto-created); auto-creation needs
CREATE on the cluster or the topic.
"""
from __future__ import annotations

from broker.authorization import authorized_operations, cluster_allowed, topic_allowed
from metadata.acls import CLUSTER_NAME, AclOperation, ResourceType
from metadata.authorizer import AUTHORIZED_OPERATIONS_OMITTED
from metadata.controller.dynamic_configs import effective_broker_value
from broker.request_caps import Pacer
from metadata.controller.topics import validate_topic_name
from metadata.errors import ApiError
from metadata.records import NO_LEADER
from wire.error_codes import ErrorCode
from wire.protocol import MetadataResponse
from wire.protocol.schema import ZERO_UUID

__all__ = ["handle", "error_response"]

R = MetadataResponse
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


async def handle(broker, header, request) -> MetadataResponse:
    version = header.api_version
    cache = broker.metadata
    image = cache.image
    by_id = version >= 12 and request.topics is not None and any(t.topic_id != ZERO_UUID for t in request.topics)
    if version >= 10 and request.topics is not None and not by_id and any(
            t.name is None or t.topic_id != ZERO_UUID for t in request.topics):
        return error_response(broker, header, request, ErrorCode.INVALID_REQUEST)  # ids need v12, as Kafka
    describable = {}  # topic -> DESCRIBE allowed; the others are never named back unless asked for
    unknown_ids = []  # (v12) ids that name no topic the caller may describe
    if request.topics is None:
        names = [n for n in sorted(image.topics_by_name)
                 if describable.setdefault(n, topic_allowed(broker, AclOperation.DESCRIBE, n))]
        wanted_missing = []
    elif by_id:
        # Topic ids are not secret, names are: an id the caller may not describe is unknown to it.
        names = []
        for topic_id in dict.fromkeys(t.topic_id for t in request.topics if t.topic_id != ZERO_UUID):
            topic = image.topics_by_id.get(topic_id)
            if topic is not None and topic_allowed(broker, AclOperation.DESCRIBE, topic.name):
                names.append(topic.name)
                describable[topic.name] = True
            else:
                unknown_ids.append(topic_id)
        wanted_missing = []  # never auto-created
    else:
        names = list(dict.fromkeys(t.name for t in request.topics))
        describable = {n: topic_allowed(broker, AclOperation.DESCRIBE, n) for n in names}
        wanted_missing = [n for n in names if n not in image.topics_by_name and describable[n]]
    allow_auto = request.allow_auto_topic_creation if version >= 4 else True
    created_errors = _auto_create(broker, wanted_missing, allow_auto)
    with_topic_ops = version >= 8 and request.include_topic_authorized_operations
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
        ops = (authorized_operations(broker, ResourceType.TOPIC, name) if with_topic_ops
               else AUTHORIZED_OPERATIONS_OMITTED)
        if topic is None:
            topics.append(R.MetadataResponseTopic(error_code=created_errors.get(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                                                  name=name, is_internal=False, partitions=[],
                                                  topic_authorized_operations=ops))
            continue
        topics.append(R.MetadataResponseTopic(error_code=ErrorCode.NONE, name=name, topic_id=topic.topic_id,
                                              is_internal=name in INTERNAL_TOPICS,
                                              partitions=_partitions(topic, alive), topic_authorized_operations=ops))
    topics.extend(R.MetadataResponseTopic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=topic_id,
                                          partitions=[]) for topic_id in unknown_ids)
    return R(
        throttle_time_ms=0,
        brokers=[R.MetadataResponseBroker(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
                 for b in cache.listed_brokers()],
        cluster_id=broker.cluster_id,
        controller_id=cache.controller_id(),
        topics=topics,
        cluster_authorized_operations=_cluster_operations(broker, version, request),
    )


def _partitions(topic, alive: set[int]) -> list:
    partitions = []
    for pid in sorted(topic.partitions):
        reg = topic.partitions[pid]
        offline = [r for r in reg.replicas if r not in alive]
        leader = reg.leader if reg.leader in alive else NO_LEADER
        partitions.append(R.MetadataResponsePartition(
            error_code=ErrorCode.NONE if leader != NO_LEADER else ErrorCode.LEADER_NOT_AVAILABLE,
            partition_index=pid, leader_id=leader, leader_epoch=reg.leader_epoch, replica_nodes=list(reg.replicas),
            isr_nodes=list(reg.isr), offline_replicas=offline))
    return partitions


def _cluster_operations(broker, version: int, request) -> int:
    """v8-10 (KIP-430): the caller's operations on the cluster, 0 unless it may describe it."""
    if not (8 <= version <= 10 and request.include_cluster_authorized_operations):
        return AUTHORIZED_OPERATIONS_OMITTED
    if not cluster_allowed(broker, AclOperation.DESCRIBE):
        return 0
    return authorized_operations(broker, ResourceType.CLUSTER, CLUSTER_NAME)


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
    # A null name (an id lookup) can be answered only from v12; before, "" stands in.
    null_name = "" if header.api_version < 12 else None
    topics = [] if request.topics is None else [
        R.MetadataResponseTopic(error_code=code, name=null_name if t.name is None else t.name,
                                topic_id=t.topic_id, partitions=[]) for t in request.topics]
    return R(throttle_time_ms=0, brokers=[], cluster_id=broker.cluster_id, controller_id=-1, topics=topics)
