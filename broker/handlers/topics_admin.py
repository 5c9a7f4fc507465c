"""CreateTopics v0-6, DeleteTopics v0-5, CreatePartitions v0-3, forwarded to the active controller.

Requests are translated into the metadata layer's plain request objects and
sent through the ControllerChannel; the answer is given once this broker's
metadata has caught up with the commit (bounded by the request's timeout), so
a client that creates a topic and asks for metadata next finds it.

The controller counts the partitions against the client's controller_mutation_rate
(metadata.controller.mutation_quota): the request carries the client's user and client-id,
and whether its version is strict (CreateTopics v6+, DeleteTopics v5+, CreatePartitions v3+:
a topic over the quota is answered THROTTLING_QUOTA_EXCEEDED). The controller's throttle
goes into throttle_time_ms, and the server mutes the connection for it, as Kafka's broker does
with a forwarded response.
"""
from __future__ import annotations

import logging

from broker.authorization import cluster_allowed, topic_allowed
from broker.controller_channel import ControllerUnavailableError, CreatableTopic, MutationRequester, NewPartitions
from broker.quotas.enforcement import quota_user
from metadata.acls import AclOperation
from metadata.config_definitions import TOPIC_CONFIGS, resolve_topic_config
from wire.error_codes import ErrorCode
from wire.protocol import CreatePartitionsResponse, CreateTopicsResponse, DeleteTopicsResponse

__all__ = ["handle_create_topics", "handle_delete_topics", "handle_create_partitions",
           "create_topics_error", "delete_topics_error", "create_partitions_error"]

log = logging.getLogger(__name__)
DEFAULT_TIMEOUT_MS = 30_000
# the first version of each answering THROTTLING_QUOTA_EXCEEDED (Kafka's strictSinceVersion)
STRICT_SINCE = {"create_topics": 6, "delete_topics": 5, "create_partitions": 3}


def requester(header, api: str) -> MutationRequester:
    """Whose controller_mutation_rate the request counts against, and whether it is strict."""
    return MutationRequester(quota_user(), header.client_id or "", header.api_version >= STRICT_SINCE[api])


def _timeout_s(timeout_ms: int) -> float:
    return (timeout_ms if timeout_ms > 0 else DEFAULT_TIMEOUT_MS) / 1000


async def _caught_up(broker, offset: int, timeout_s: float) -> None:
    if offset >= 0:
        await broker.metadata.wait_for_offset(offset, broker.env.now() + timeout_s)


# -- CreateTopics ---------------------------------------------------------------------
async def handle_create_topics(broker, header, request) -> CreateTopicsResponse:
    R = CreateTopicsResponse
    wanted = []
    early: dict[str, tuple[int, str | None]] = {}
    may_create_any = cluster_allowed(broker, AclOperation.CREATE)
    for t in request.topics:
        if not may_create_any and not topic_allowed(broker, AclOperation.CREATE, t.name):
            early[t.name] = (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
            continue
        if t.assignments and (t.num_partitions != -1 or t.replication_factor != -1):
            early[t.name] = (ErrorCode.INVALID_REQUEST, "Both numPartitions or replicationFactor and "
                             "replicasAssignments were set. Both cannot be used at the same time.")
            continue
        assignments = {a.partition_index: tuple(a.broker_ids) for a in t.assignments} or None
        configs = {c.name: c.value for c in t.configs}
        wanted.append(CreatableTopic(t.name, t.num_partitions, t.replication_factor, assignments, configs))
    timeout_s = _timeout_s(request.timeout_ms)
    results, throttle_ms = {}, 0
    if wanted:
        try:
            reply = await broker.controller.create_topics(wanted, validate_only=request.validate_only,
                                                          timeout_s=timeout_s,
                                                          requester=requester(header, "create_topics"))
        except ControllerUnavailableError as exc:
            return create_topics_error(broker, header, request, ErrorCode.REQUEST_TIMED_OUT, str(exc))
        await _caught_up(broker, reply.offset, timeout_s)
        results, throttle_ms = {r.name: r for r in reply.results}, reply.throttle_ms
    overrides = {t.name: {c.name: c.value for c in t.configs if c.value is not None} for t in request.topics}
    out = []
    for t in request.topics:
        result = results.get(t.name)
        code, message = early.get(t.name) or ((int(result.error), result.message) if result is not None
                                              else (ErrorCode.UNKNOWN_SERVER_ERROR, None))
        out.append(answer := R.CreatableTopicResult(name=t.name, error_code=code, error_message=message))
        if code == ErrorCode.NONE and header.api_version >= 5:  # what was created (KIP-525)
            answer.num_partitions, answer.replication_factor = result.num_partitions, result.replication_factor
            if topic_allowed(broker, AclOperation.DESCRIBE_CONFIGS, t.name):
                answer.configs = _created_configs(broker, overrides[t.name])
            else:
                answer.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return R(throttle_time_ms=throttle_ms, topics=out)


def _created_configs(broker, overrides: dict[str, str]) -> list:
    """A new topic's effective configs, as Kafka's controller answers them."""
    C = CreateTopicsResponse.CreatableTopicConfigs
    image, static = broker.metadata.image, broker.config.static_with_identity()
    per_broker, cluster = image.broker_config(broker.config.node_id), image.broker_config(None)
    out = []
    for name, definition in sorted(TOPIC_CONFIGS.items()):
        chain = resolve_topic_config(name, overrides, per_broker, cluster, static)
        if chain:
            out.append(C(name=name, value=None if definition.sensitive else chain[0].value, read_only=False,
                         config_source=int(chain[0].source), is_sensitive=definition.sensitive))
    return out


def create_topics_error(broker, header, request, code: int, message: str | None = None) -> CreateTopicsResponse:
    R = CreateTopicsResponse
    return R(throttle_time_ms=0, topics=[R.CreatableTopicResult(name=t.name, error_code=code, error_message=message)
                                         for t in request.topics])


# -- DeleteTopics ---------------------------------------------------------------------
async def handle_delete_topics(broker, header, request) -> DeleteTopicsResponse:
    R = DeleteTopicsResponse
    timeout_s = _timeout_s(request.timeout_ms)
    names = list(dict.fromkeys(request.topic_names))
    codes = {n: ErrorCode.TOPIC_AUTHORIZATION_FAILED for n in names
             if not topic_allowed(broker, AclOperation.DELETE, n)}
    names = [n for n in names if n not in codes]
    messages, throttle_ms = {}, 0
    if names:
        try:
            reply = await broker.controller.delete_topics(names, timeout_s=timeout_s,
                                                          requester=requester(header, "delete_topics"))
        except ControllerUnavailableError as exc:
            return delete_topics_error(broker, header, request, ErrorCode.REQUEST_TIMED_OUT, str(exc))
        await _caught_up(broker, reply.offset, timeout_s)
        codes.update((r.name, int(r.error)) for r in reply.results)
        messages = {r.name: r.message for r in reply.results}
        throttle_ms = reply.throttle_ms
    return R(throttle_time_ms=throttle_ms, responses=[
        R.DeletableTopicResult(name=n, error_code=codes.get(n, ErrorCode.UNKNOWN_SERVER_ERROR),
                               error_message=messages.get(n))
        for n in request.topic_names])


def delete_topics_error(broker, header, request, code: int, message: str | None = None) -> DeleteTopicsResponse:
    R = DeleteTopicsResponse
    return R(throttle_time_ms=0, responses=[R.DeletableTopicResult(name=n, error_code=code)
                                            for n in request.topic_names])


# -- CreatePartitions -----------------------------------------------------------------
async def handle_create_partitions(broker, header, request) -> CreatePartitionsResponse:
    R = CreatePartitionsResponse
    timeout_s = _timeout_s(request.timeout_ms)
    names = [t.name for t in request.topics]
    duplicates = {n for n in names if names.count(n) > 1}
    refused = {n for n in names if not topic_allowed(broker, AclOperation.ALTER, n)}
    wanted = [NewPartitions(t.name, t.count, None if t.assignments is None
                            else [tuple(a.broker_ids) for a in t.assignments])
              for t in request.topics if t.name not in duplicates and t.name not in refused]
    results, throttle_ms = {}, 0
    if wanted:
        try:
            reply = await broker.controller.create_partitions(wanted, validate_only=request.validate_only,
                                                              timeout_s=timeout_s,
                                                              requester=requester(header, "create_partitions"))
        except ControllerUnavailableError as exc:
            return create_partitions_error(broker, header, request, ErrorCode.REQUEST_TIMED_OUT, str(exc))
        await _caught_up(broker, reply.offset, timeout_s)
        results, throttle_ms = reply.results, reply.throttle_ms
    out = []
    for t in request.topics:
        if t.name in duplicates:
            code, message = ErrorCode.INVALID_REQUEST, "Duplicate topic in request."
        elif t.name in refused:
            code, message = ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."
        else:
            code, message = results.get(t.name, (ErrorCode.UNKNOWN_SERVER_ERROR, None))
        out.append(R.CreatePartitionsTopicResult(name=t.name, error_code=int(code), error_message=message))
    return R(throttle_time_ms=throttle_ms, results=out)


def create_partitions_error(broker, header, request, code: int, message: str | None = None):
    R = CreatePartitionsResponse
    return R(throttle_time_ms=0, results=[R.CreatePartitionsTopicResult(name=t.name, error_code=code,
                                                                        error_message=message)
                                          for t in request.topics])
