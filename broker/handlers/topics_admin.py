"""CreateTopics v0-4, DeleteTopics v0-3, CreatePartitions v0-1, forwarded to the active controller.

Requests are translated into the metadata layer's plain request objects and
sent through the ControllerChannel; the answer is given once this broker's
metadata has caught up with the commit (bounded by the request's timeout), so
a client that creates a topic and asks for metadata next finds it.
"""
from __future__ import annotations

import logging

from broker.authorization import cluster_allowed, topic_allowed
from broker.controller_channel import ControllerUnavailableError, CreatableTopic, NewPartitions
from metadata.acls import AclOperation
from wire.error_codes import ErrorCode
from wire.protocol import CreatePartitionsResponse, CreateTopicsResponse, DeleteTopicsResponse

__all__ = ["handle_create_topics", "handle_delete_topics", "handle_create_partitions",
           "create_topics_error", "delete_topics_error", "create_partitions_error"]

log = logging.getLogger(__name__)
DEFAULT_TIMEOUT_MS = 30_000


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
    results = {}
    if wanted:
        try:
            reply = await broker.controller.create_topics(wanted, validate_only=request.validate_only,
                                                          timeout_s=timeout_s)
        except ControllerUnavailableError as exc:
            return create_topics_error(broker, header, request, ErrorCode.REQUEST_TIMED_OUT, str(exc))
        await _caught_up(broker, reply.offset, timeout_s)
        results = {r.name: (int(r.error), r.message) for r in reply.results}
    out = []
    for t in request.topics:
        code, message = early.get(t.name) or results.get(t.name, (ErrorCode.UNKNOWN_SERVER_ERROR, None))
        out.append(R.CreatableTopicResult(name=t.name, error_code=code, error_message=message))
    return R(throttle_time_ms=0, topics=out)


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
    if names:
        try:
            reply = await broker.controller.delete_topics(names, timeout_s=timeout_s)
        except ControllerUnavailableError as exc:
            return delete_topics_error(broker, header, request, ErrorCode.REQUEST_TIMED_OUT, str(exc))
        await _caught_up(broker, reply.offset, timeout_s)
        codes.update((r.name, int(r.error)) for r in reply.results)
    return R(throttle_time_ms=0, responses=[
        R.DeletableTopicResult(name=n, error_code=codes.get(n, ErrorCode.UNKNOWN_SERVER_ERROR))
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
    results = {}
    if wanted:
        try:
            reply = await broker.controller.create_partitions(wanted, validate_only=request.validate_only,
                                                              timeout_s=timeout_s)
        except ControllerUnavailableError as exc:
            return create_partitions_error(broker, header, request, ErrorCode.REQUEST_TIMED_OUT, str(exc))
        await _caught_up(broker, reply.offset, timeout_s)
        results = reply.results
    out = []
    for t in request.topics:
        if t.name in duplicates:
            code, message = ErrorCode.INVALID_REQUEST, "Duplicate topic in request."
        elif t.name in refused:
            code, message = ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."
        else:
            code, message = results.get(t.name, (ErrorCode.UNKNOWN_SERVER_ERROR, None))
        out.append(R.CreatePartitionsTopicResult(name=t.name, error_code=int(code), error_message=message))
    return R(throttle_time_ms=0, results=out)


def create_partitions_error(broker, header, request, code: int, message: str | None = None):
    R = CreatePartitionsResponse
    return R(throttle_time_ms=0, results=[R.CreatePartitionsTopicResult(name=t.name, error_code=code,
                                                                        error_message=message)
                                          for t in request.topics])
