"""ElectLeaders v0-2, AlterPartitionReassignments v0 and ListPartitionReassignments v0,
forwarded to the active controller (metadata.controller.elect_leaders, .reassignment).

Authorization as Kafka's KafkaApis: ALTER on the cluster for ElectLeaders (refused: the
top-level error and every named partition CLUSTER_AUTHORIZATION_FAILED) and for
AlterPartitionReassignments (refused: the top-level error), DESCRIBE on the cluster for
ListPartitionReassignments. Writes are answered once this broker's metadata has caught up
with the commit, so a client that lists or describes next sees the change.
"""
from __future__ import annotations

from broker.authorization import cluster_allowed
from broker.controller_channel import ControllerUnavailableError
# the same timeout default and catch-up wait as the topic admin requests
from broker.handlers.topics_admin import _caught_up, _timeout_s
from metadata.acls import AclOperation
from wire.error_codes import ErrorCode
from wire.protocol import (
    AlterPartitionReassignmentsResponse, ElectLeadersResponse, ListPartitionReassignmentsResponse,
)

__all__ = ["handle_elect_leaders", "elect_leaders_error", "handle_alter_reassignments",
           "alter_reassignments_error", "handle_list_reassignments", "list_reassignments_error"]

def _by_topic(items: dict[tuple[str, int], tuple[int, str | None]]):
    topics: dict[str, list[tuple[int, int, str | None]]] = {}
    for (topic, pid), (code, message) in items.items():
        topics.setdefault(topic, []).append((pid, int(code), message))
    return topics


# -- ElectLeaders -------------------------------------------------------------------------
def _requested(request) -> list[tuple[str, int]] | None:
    if request.topic_partitions is None:
        return None
    return list(dict.fromkeys((t.topic, p) for t in request.topic_partitions for p in t.partitions))


def _elect_response(results: dict[tuple[str, int], tuple[int, str | None]], top: int = 0):
    R = ElectLeadersResponse
    return R(throttle_time_ms=0, error_code=top, replica_election_results=[
        R.ReplicaElectionResult(topic=topic, partition_result=[
            R.PartitionResult(partition_id=pid, error_code=code, error_message=message)
            for pid, code, message in parts])
        for topic, parts in _by_topic(results).items()])


_ELECTION_MESSAGES = {
    ErrorCode.ELECTION_NOT_NEEDED: "Leader election not needed for topic partition.",
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE: "Failed to elect leader for partition under the "
                                              "preferred replica election strategy.",
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE: "Failed to elect leader for partition: no live replica.",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
}


async def handle_elect_leaders(broker, header, request) -> ElectLeadersResponse:
    wanted = _requested(request)
    if not cluster_allowed(broker, AclOperation.ALTER):
        return elect_leaders_error(broker, header, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    election_type = request.election_type if header.api_version >= 1 else 0
    if election_type not in (0, 1):
        return elect_leaders_error(broker, header, request, ErrorCode.INVALID_REQUEST)
    timeout_s = _timeout_s(request.timeout_ms)
    try:
        reply = await broker.controller.elect_leaders(election_type, wanted, timeout_s=timeout_s)
    except ControllerUnavailableError:
        return elect_leaders_error(broker, header, request, ErrorCode.REQUEST_TIMED_OUT)
    await _caught_up(broker, reply.offset, timeout_s)
    return _elect_response({tp: (code, _ELECTION_MESSAGES.get(code)) for tp, code in reply.results.items()})


def elect_leaders_error(broker, header, request, code: int, message: str | None = None):
    wanted = _requested(request) or []
    return _elect_response({tp: (code, message) for tp in wanted}, top=int(code))


# -- AlterPartitionReassignments ------------------------------------------------------------
async def handle_alter_reassignments(broker, header, request) -> AlterPartitionReassignmentsResponse:
    if not cluster_allowed(broker, AclOperation.ALTER):
        return alter_reassignments_error(broker, header, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    wanted, seen = [], set()
    duplicates = set()
    for t in request.topics:
        for p in t.partitions:
            key = (t.name, p.partition_index)
            (duplicates if key in seen else seen).add(key)
            wanted.append((t.name, p.partition_index, p.replicas))
    early = {key: (ErrorCode.INVALID_REQUEST, "Duplicate partition in the request.") for key in duplicates}
    wanted = [w for w in wanted if (w[0], w[1]) not in duplicates]
    timeout_s = _timeout_s(request.timeout_ms)
    results = {}
    if wanted:
        try:
            reply = await broker.controller.alter_partition_reassignments(wanted, timeout_s=timeout_s)
        except ControllerUnavailableError as exc:
            return alter_reassignments_error(broker, header, request, ErrorCode.REQUEST_TIMED_OUT, str(exc))
        await _caught_up(broker, reply.offset, timeout_s)
        results = {key: (int(r.error), r.message) for key, r in reply.results.items()}
    out = {}
    for t in request.topics:
        for p in t.partitions:
            key = (t.name, p.partition_index)
            out[key] = early.get(key) or results.get(key, (ErrorCode.UNKNOWN_SERVER_ERROR, None))
    return _alter_response(out)


def _alter_response(results, top: int = 0, message: str | None = None):
    R = AlterPartitionReassignmentsResponse
    return R(throttle_time_ms=0, error_code=top, error_message=message, responses=[
        R.ReassignableTopicResponse(name=topic, partitions=[
            R.ReassignablePartitionResponse(partition_index=pid, error_code=code, error_message=msg)
            for pid, code, msg in parts])
        for topic, parts in _by_topic(results).items()])


def alter_reassignments_error(broker, header, request, code: int, message: str | None = None):
    # Kafka answers a refused request with the top-level error and no per-partition results
    # when it is an authorization failure, else every partition carries the error.
    if code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
        return _alter_response({}, int(code), message)
    return _alter_response({(t.name, p.partition_index): (int(code), message)
                            for t in request.topics for p in t.partitions}, int(code), message)


# -- ListPartitionReassignments -------------------------------------------------------------
async def handle_list_reassignments(broker, header, request) -> ListPartitionReassignmentsResponse:
    if not cluster_allowed(broker, AclOperation.DESCRIBE):
        return list_reassignments_error(broker, header, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    wanted = None if request.topics is None else [(t.name, list(t.partition_indexes)) for t in request.topics]
    try:
        reply = await broker.controller.list_partition_reassignments(
            wanted, timeout_s=_timeout_s(request.timeout_ms))
    except ControllerUnavailableError as exc:
        return list_reassignments_error(broker, header, request, ErrorCode.REQUEST_TIMED_OUT, str(exc))
    R = ListPartitionReassignmentsResponse
    topics: dict[str, list] = {}
    for o in reply.results:
        topics.setdefault(o.topic, []).append(R.OngoingPartitionReassignment(
            partition_index=o.partition, replicas=list(o.replicas), adding_replicas=list(o.adding),
            removing_replicas=list(o.removing)))
    return R(throttle_time_ms=0, error_code=0, error_message=None, topics=[
        R.OngoingTopicReassignment(name=name, partitions=parts) for name, parts in topics.items()])


def list_reassignments_error(broker, header, request, code: int, message: str | None = None):
    return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=int(code), error_message=message,
                                              topics=[])
